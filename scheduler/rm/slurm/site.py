"""One reshape controller for every malleable job of a Slurm partition (``reshape daemon --slurm-site``).

The site starts the controller once (on the Slurm controller host or a login
node). Slurm stays the resource manager and the application scheduler: it
queues and starts every job, rigid or malleable, by its own priorities and
backfill. A malleable job is submitted with ``reshape submit --slurm``; its
batch script (``reshape slurm-run``) **registers** with the controller once
Slurm has started it (the ``register`` request: its Slurm job id and nodes),
runs the job's ``mpiexec`` inside its own allocation, and reports how it
ended. The controller adopts it (``ClusterState.adopt``): the job's nodes
are leased to its Slurm job, so its expansions land only where its own Slurm
jobs are (the ``slurm`` launcher starts ranks as steps of them).

From then on the controller arbitrates across all malleable jobs with the
same core and Remap Scheduler as everywhere (:class:`scheduler.rm.slurm.broker.Broker`):
which job grows into idle nodes (expander jobs, largest measured gain
first), which shrinks when a Slurm job waits (least loss first, never below
``min_procs``, never two for one demand), and never delays a waiting job
beyond what Slurm's backfill allows (expanders run at the lowest priority
with a time limit that ends with their job). ``reshape cancel`` of a job
cancels its Slurm job and expanders; a Slurm job that ends (done, scancel,
time limit) ends its reshape job.

Trust: the controller believes only Slurm. A registration is taken when ``slurmctld`` says the job
runs, is the sender's, and holds the hosts named; the controller cancels, shrinks and gives back
only jobs it so verified and expanders it submitted (:mod:`scheduler.rm.slurm.verify`).

Nothing is lost when the controller goes: its core is journaled, the jobs run
in their own allocations and keep running at their sizes while it is away
(their clients retry), and a restarted controller re-adopts them from the
journal and Slurm's queue (:meth:`SlurmSite.attach`). An expander that
Slurm ends (``scancel`` by hand, a time limit) makes its job shrink off its
nodes at the next resize point; only a job that cannot (below ``min_procs``)
fails. A job with checkpoints that loses a rank or a node is restarted inside
its allocation by its batch script, on the nodes left, as the same job
(:meth:`SlurmSite.restart`); one that loses its batch host, or keeps too few
CPUs for its smallest size, is requeued through Slurm (``scontrol requeue``)
and resumes from its checkpoint when Slurm starts it again, at the size the
new allocation gives (:meth:`SlurmSite.resume`; docs/slurm.md, "Failures").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from scheduler.core.actions import StateError
from scheduler.core.events import LeaseEnded, NodeGranted, NodeReleased
from scheduler.core.job import FINAL, Job, JobState
from scheduler.core.pool import Pool
from scheduler.rm.slurm.admit import LIVE
from scheduler.rm.slurm.broker import Ended
from scheduler.rm.slurm.edge import EndJob, RequeueJob
from scheduler.rm.slurm.manager import SlurmManager
from scheduler.rm.slurm.verify import Verified, own_expanders
from scheduler.rm.slurm.view import (
    SlurmError,
    final_states,
    look,
    partition_args,
    partition_pool,
    resized_jobs,
    resizes_once,
    run,
)

if TYPE_CHECKING:
    from scheduler.core.jobfile import JobDesc
    from scheduler.core.state import ManagerPort

__all__ = ["SlurmSite"]

UNKNOWN_END = ("GONE", "RUNNING", "COMPLETING")  # a job whose end Slurm cannot say (forgotten) or not yet
REQUEUED = ("PENDING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED")  # a registered job back in Slurm's queue
RUNS = tuple(s for s in LIVE if s != "COMPLETING")  # a job that holds its nodes (a completing one gives them back)


class SlurmSite(SlurmManager):
    """The site controller's resource manager (module docstring)."""

    kind = "slurm-site"

    def __init__(self, partition: str | None, params: Mapping[str, float], pool: Pool | None = None):
        """``pool``: the partition's nodes (default: asked of ``sinfo``, and whether Slurm takes more than
        one update of a shrunk job of ``scontrol show config``). ValueError (naming the partition and
        Slurm's error) when Slurm cannot be asked."""
        once = params.get("resizes_once", False)
        try:
            if pool is None:
                pool = partition_pool(run(["sinfo", "-h", "-N", *partition_args(partition), "-o", "%N %c"]), set())
                once = resizes_once(run(["scontrol", "show", "config"]))
        except (SlurmError, ValueError) as e:
            raise ValueError(f"--slurm-site: cannot read partition {partition or '(default)'}: {e}") from None
        self._pool = pool
        super().__init__(partition, {"node_slots": max(n.slots for n in pool.nodes), **params,
                                     "resizes_once": once, "nodes": tuple(n.host for n in pool.nodes)})
        self.pending_actions: list = []  # actions of the start-up reconciliation, performed with the first step
        self.verified = Verified()  # the Slurm jobs it checked: the only ones it acts on (verify)
        self.requeueing: set[str] = set()  # Slurm jobs it asked Slurm to requeue, not yet seen requeued
        self.waiting: dict[str, int] = {}  # requeued Slurm job -> its job, waiting for it to register again
        self._gone: set[str] = set()  # requeued Slurm jobs missing from the last look
        self.source = (f"Slurm partition {partition or '(default)'} ({len(self._pool.nodes)} nodes): site controller "
                       f"of every 'reshape submit --slurm' job")

    def pool(self, saved_slots: int | None) -> Pool:
        return self._pool

    @property  # type: ignore[override]
    def accounts(self) -> Any:
        return self.verified.accounts

    @accounts.setter
    def accounts(self, accounts: Any) -> None:
        self.verified.use(accounts)

    @property
    def launcher(self) -> str | None:
        return None  # the controller launches nothing: each job's batch script does, with the slurm launcher

    def group_of(self, j: Job) -> str | None:
        return j.allocation

    def lease_of(self, main: str) -> str | None:
        return main

    # ------------------------------------------------------------------ start-up and restart
    def attach(self, state: ManagerPort, now: float) -> None:
        """Reconcile the journal with Slurm: every running job's Slurm job joins the broker, the
        nodes Slurm holds for them are granted (leased), and a node the journal had up that no
        Slurm job of ours holds any more is vacated (jobs shrink off it) or given up. A journaled job
        whose Slurm job is not its owner's (registered by an older controller that did not check) is
        ended here, and nothing is done to that Slurm job."""
        try:
            jobs, idle = self.first_look()
        except SlurmError as e:
            raise ValueError(f"--slurm-site: cannot read Slurm's queue: {e}") from None
        seen = {q.id: q for q in jobs}
        self.waiting = {}
        for j in [j for j in state.live.values() if j.state == JobState.WAITING and j.allocation is not None]:
            why = self.verified.recheck(j, seen)  # requeued while the controller was away: still its owner's?
            if why is None:
                self.waiting[j.allocation or ""] = j.job_id
            else:
                state.not_resumed(j, why, now)
        for j in state.running():
            if j.allocation is None:
                continue
            why = self.verified.recheck(j, seen)
            if why is None:
                self.broker.add_group(j.allocation, j.hosts[0], 0.0)  # a look now may say it ended
            else:
                self.note(f"job {j.job_id} ended: {why}")
                self.pending_actions += state.exited(j.job_id, None, now, why)
        self._frozen_again({q.id: q.name for q in jobs if q.id in self.broker.groups})
        for a in self.apply(state, now, jobs, idle, now):
            self.pending_actions.append(a)
        for h in [h for h in state.hosts if not state.is_down(h)]:
            if h in self.broker.held:
                continue
            if state.used(h):
                self.broker.in_use(h, "no Slurm job of ours holds it since the controller restarted")
            else:
                state.report(NodeReleased(h, "not held by a Slurm job of ours (controller restarted)"), now)
        self.note(f"adopted {len(self.broker.groups)} running job(s) from the journal and Slurm")

    def _frozen_again(self, names: dict[str, str]) -> None:
        """Where Slurm takes one update of a shrunk job (no accounting), the adopted jobs (``names``: Slurm id ->
        name) it resized before the restart take none now (``ResizeTime`` set): not shrunk again (the broker's
        ``frozen``, which the controller that shrank them kept in memory only)."""
        if not self.broker.resizes_once or not names:
            return
        try:
            self.broker.freeze(self.resized(names))
        except SlurmError as e:
            self.note(f"cannot ask Slurm which jobs were resized ({e}): a refused shrink will say")

    def resized(self, names: dict[str, str]) -> set[str]:
        """Which of the Slurm jobs ``names`` were resized so far (``scontrol show job``), asked at once."""
        return resized_jobs(names)

    def final_state(self, main: str) -> str:
        """Slurm's state of ended job ``main`` (``COMPLETED``, ``FAILED``, ...), asked at once (rare: a job
        registering on a node whose job's end no look has shown yet); ``GONE`` if Slurm cannot say."""
        return next((j.state for j in final_states([main]) if j.id == main), "GONE")

    def first_look(self) -> tuple[list, int]:
        """Slurm's queue and idle nodes, asked at once (start-up is the one time the loop waits for Slurm)."""
        return look(self.part)

    def step(self, state: ManagerPort, now: float) -> list:
        acts, self.pending_actions = self.pending_actions, []
        return acts + super().step(state, now)

    # ------------------------------------------------------------------ jobs
    def check_submit(self, desc: JobDesc) -> None:
        raise StateError("not_supported", "this is a Slurm site controller: Slurm starts the jobs. Submit with "
                                          "'reshape submit --slurm FILE' (its batch script registers here)")

    def adopt(self, state: ManagerPort, desc: JobDesc, allocation: str, hosts: list[str], now: float,
              owner: str | None, restart: tuple[int | None, list[str]] | None = None) -> int:
        """Register the job Slurm started as ``allocation`` on ``hosts``; the same allocation again: its id
        (``restart``: its next attempt, :meth:`restart`). A refusal is noted (``reshape status``) and raised."""
        for j in state.live.values():
            if j.allocation == allocation and j.state not in FINAL:
                job_id = self.verified.reattach(j, owner)  # a retry after a lost reply: its owner's only
                if restart is None and j.state == JobState.RUNNING and hosts[:1] != j.hosts[:1]:
                    self._missed_requeue(state, j, hosts, now, owner)
                if j.state == JobState.WAITING:  # Slurm requeued it: this is its new batch attempt
                    return self.resume(state, j, hosts, now, owner)
                return job_id if restart is None else self.restart(state, j, hosts, restart, now, owner)
        if restart is not None:
            raise StateError("unknown_job", f"Slurm job {allocation} has no registered job to restart")
        try:
            return self._adopt(state, desc, allocation, hosts, now, owner)
        except StateError as e:
            self.note(f"registration of Slurm job {allocation} ({desc.name}) on "
                      f"{','.join(dict.fromkeys(hosts))} refused: {e.message}")
            raise

    def _adopt(self, state: ManagerPort, desc: JobDesc, allocation: str, hosts: list[str], now: float,
               owner: str | None) -> int:
        if not allocation.isdigit():
            raise StateError("bad_hosts", f"allocation {allocation!r} is not a Slurm job id")
        unknown = sorted({h for h in hosts if not state.has(h)})
        if unknown:
            raise StateError("bad_hosts", f"{', '.join(unknown)} not in partition {self.partition or '(default)'}")
        self.verified.register(allocation, hosts, owner)  # Slurm's word: the job runs, is owner's, holds hosts
        granted = self._take(state, allocation, hosts, now)
        try:
            job_id = state.adopt(desc, hosts, allocation, now, owner)
        except StateError:
            for h in granted:
                state.report(NodeReleased(h, f"registration of Slurm job {allocation} refused"), now)
            raise
        self._hold(allocation, hosts, now)
        self.note(f"job {job_id} ({desc.name}) registered from Slurm job {allocation} on "
                  f"{','.join(dict.fromkeys(hosts))}")
        return job_id

    def _take(self, state: ManagerPort, allocation: str, hosts: list[str], now: float) -> list[str]:
        """The nodes Slurm started ``allocation`` on become its own (leased to it): those it newly granted
        (down until now). ``node_busy`` while a job that no longer holds one still uses it (it leaves at its
        next resize point; ``reshape slurm-run`` retries)."""
        for h in dict.fromkeys(hosts):
            self.pending_actions += self._given_to(state, h, allocation, now)
        busy = [h for h in dict.fromkeys(hosts) if state.used(h)]
        if busy:
            raise StateError("node_busy", f"{', '.join(busy)} still used by a job leaving it (its Slurm job no "
                                          f"longer holds it); retry")
        granted = [h for h in dict.fromkeys(hosts) if state.is_down(h)]
        for h in dict.fromkeys(hosts):
            state.report(NodeGranted(h, f"allocation of Slurm job {allocation}", allocation), now)
        return granted

    def _hold(self, allocation: str, hosts: list[str], now: float) -> None:
        self.broker.add_group(allocation, hosts[0], now, hosts)  # the batch host first (slurm-run's order)

    def _missed_requeue(self, state: ManagerPort, j: Job, hosts: list[str], now: float, owner: str | None) -> None:
        """A registration of running job ``j``'s allocation from another batch host: where Slurm says it requeued
        the job (a new batch attempt the looks missed: the controller was away), it is requeued here first."""
        self.verified.register(j.allocation or "", hosts, owner, requeued=True)
        for op in self.broker.end_group(j.allocation or "", "REQUEUED"):
            self.pending_actions += self._apply(op, state, now)

    def resume(self, state: ManagerPort, j: Job, hosts: list[str], now: float, owner: str | None) -> int:
        """Job ``j``, whose Slurm job was requeued, registers from its new batch attempt on ``hosts`` (Slurm
        vouches that the job runs again, requeued, is the owner's and holds them): it runs on them at the
        largest legal size that fits, from its last checkpoint, as the same job (its restart was counted when
        Slurm requeued it). Too few CPUs for its smallest size: it fails with why. A refusal is noted, raised."""
        alloc = j.allocation or ""
        granted: list[str] = []
        try:
            self.verified.register(alloc, hosts, owner, requeued=True)
            granted = self._take(state, alloc, hosts, now)
            size = state.resume_here(j, hosts, now)
        except StateError as e:
            for h in granted:
                state.report(NodeReleased(h, f"registration of requeued Slurm job {alloc} refused"), now)
            if e.code == "too_few":
                state.not_resumed(j, f"Slurm requeued job {alloc} and started it again, but {e.message}", now)
                self.waiting.pop(alloc, None)
            self.note(f"job {j.job_id} ({j.desc.name}) not resumed in requeued Slurm job {alloc}: {e.message}")
            raise
        self.waiting.pop(alloc, None)
        self._hold(alloc, hosts, now)
        self.note(f"job {j.job_id} ({j.desc.name}) resumes from its checkpoint in requeued Slurm job {alloc} at "
                  f"{size} on {','.join(dict.fromkeys(hosts[:size]))}")
        return j.job_id

    def restart(self, state: ManagerPort, j: Job, hosts: list[str], restart: tuple[int | None, list[str]],
                now: float, owner: str | None) -> int:
        """Job ``j``'s attempt ended (exit status, its nodes found dead): its next attempt runs in its allocation
        on ``hosts`` (Slurm vouches that the allocation holds them) when the end is a loss and they suffice
        (:meth:`scheduler.core.restarts.Restarts.restart_here`); the lost nodes go back to Slurm (released
        once no rank uses them, or gone when Slurm removes them from the job). A refusal is noted and raised."""
        code, lost = restart
        # the job's nodes Slurm took back or that went down while its ranks ran there are lost too, whatever
        # its batch script found (a node that hung is out of the job before mpiexec ends)
        lost = [*lost, *(h for h in j.hosts if h not in hosts and (h in self.broker.gone or state.is_down(h)))]
        try:
            self.verified.register(j.allocation or "", hosts, owner)
            size = state.restart_here(j, hosts, code, [h for h in dict.fromkeys(lost) if state.has(h)], now)
        except StateError as e:
            if e.code == "too_few":  # the job resumes where Slurm starts it again, at the size it gets there
                self.requeue(j, e.message, state, now)
                raise StateError("requeued", f"{e.message}: requeued through Slurm, to resume from its last "
                                             f"checkpoint at the size its next allocation gives") from None
            self.note(f"job {j.job_id} ({j.desc.name}) not restarted in Slurm job {j.allocation}: {e.message}")
            raise
        for h in dict.fromkeys(lost):
            if self.broker.group_of(h) == j.allocation:  # only nodes of its own Slurm jobs
                self.broker.drain(h, f"lost by job {j.job_id}")
        self.note(f"job {j.job_id} ({j.desc.name}) restarted in Slurm job {j.allocation} at {size} on "
                  f"{','.join(dict.fromkeys(hosts[:size]))}" + (f" (lost: {', '.join(lost)})" if lost else ""))
        return j.job_id

    def _given_to(self, s: ManagerPort, host: str, allocation: str, now: float) -> list:
        """Slurm started ``allocation`` on ``host``: with whole nodes no other Slurm job holds it now,
        whatever our last look at Slurm says (a look is up to two seconds old, and a job's end is
        believed only from two looks). A group whose own job held it has ended: settled now (its
        report decides done or failed), not when the looks agree, so the node is free for this job; where
        Slurm says that job still runs, Slurm took the node out of it (it failed and came back), which is
        as for an expander's. An expander that held it no longer does: a job still on it shrinks off it
        (or fails where it cannot), as when a look shows Slurm ended an expander, and the registration is
        refused as ``node_busy`` until it has (``reshape slurm-run`` retries). A node no group holds (a
        restarted controller's looks have not shown its job again) whose job's Slurm job Slurm says has
        ended: that job is settled too."""
        prev = self.broker.held.get(host)
        if prev is None:
            return self._settle_unheld(s, host, allocation, now)
        if prev == allocation:
            return []
        main = self.broker.owner.get(prev, prev)
        acts: list = []
        state = self.final_state(main) if prev == main else ""
        if prev == main and state not in RUNS:
            for op in self.broker.end_group(main, state):
                acts += self._apply(op, s, now)
            return acts
        # an expander's node, or one Slurm took out of a job that still runs (a node that failed and came back)
        why = f"Slurm job {prev} no longer holds it: Slurm started job {allocation} there"
        self.broker.let_go(host)
        if s.report(NodeReleased(host, why), now)[0]:
            self.broker.forgotten(host)
        else:  # its jobs shrink off it at their next resize point, or fail where they cannot (broker, 1)
            self.broker.in_use(host, why)
        return acts

    def _settle_unheld(self, s: ManagerPort, host: str, allocation: str, now: float) -> list:
        """``host``, which Slurm started ``allocation`` on, is held by no group: the jobs of another Slurm job
        still on it are settled where Slurm says that job has ended (its job's end while the controller was
        away, not yet seen by the restarted controller's looks); one that still runs (or that Slurm cannot say
        of) keeps its jobs, which leave the node (``gone``, :meth:`attach`) or end with it as the looks say,
        while the registration is refused as ``node_busy``."""
        acts: list = []
        for main in dict.fromkeys(j.allocation for j in s.running() if host in j.hosts):
            if main is None or main == allocation:
                continue
            state = self.final_state(main)
            if state in RUNS or state == "GONE":  # still running, or Slurm cannot say: the looks will
                continue
            for op in self.broker.end_group(main, state):
                acts += self._apply(op, s, now)
        return acts

    def kill(self, state: ManagerPort, job_ids: list[int]) -> set[int]:
        done = set()
        for jid in job_ids:
            j = state.jobs.get(jid)
            if j is not None and j.allocation is not None:
                if j.allocation in self.verified.jobs:  # never a Slurm job it did not check
                    self.edge.outbox.put(EndJob(j.allocation))
                done.add(jid)
        return done

    def apply(self, state: ManagerPort, now: float, jobs: list, idle: int, seen: float) -> list:
        """As every Slurm manager, with only the expanders this controller submitted (verify); a job whose batch
        host Slurm took out of its Slurm job is requeued (:meth:`requeue`), and a requeued one whose Slurm job
        is gone fails."""
        jobs = own_expanders(jobs, self.verified.me)
        by_id = {q.id: q for q in jobs}
        acts: list = []
        running = {j.allocation: j for j in state.running() if j.allocation is not None}
        for main, g in list(self.broker.groups.items()):
            q = by_id.get(main)
            if q is not None and q.state == "RUNNING" and q.nodes and g.batch_host not in q.nodes:
                j = running.get(main)
                if j is not None and main not in self.requeueing:
                    acts += self.requeue(j, f"its batch host {g.batch_host} left Slurm job {main} (lost)", state, now)
        for main, jid in list(self.waiting.items()):
            q = by_id.get(main)
            if q is None and main not in self._gone:
                self._gone.add(main)  # gone from one look: ended only if the next agrees
                continue
            self._gone.discard(main)
            if q is None or q.state not in (*REQUEUED, *LIVE):
                self.waiting.pop(main)
                state.not_resumed(state.jobs[jid], f"its requeued Slurm job {main} ended "
                                                   f"{q.state if q else 'GONE'} before it ran again", now)
                self.note(f"job {jid} ended: its requeued Slurm job {main} ended before it ran again")
        return acts + super().apply(state, now, jobs, idle, seen)

    def requeue(self, j: Job, why: str, state: ManagerPort, now: float) -> list:
        """Ask Slurm to requeue job ``j``'s Slurm job (``why``: one line) when it can resume from a checkpoint;
        else end it and its Slurm job, with why."""
        main = j.allocation or ""
        bad = state.why_not(j, None, True)
        if bad is None:
            self.requeueing.add(main)
            self.edge.outbox.put(RequeueJob(main))
            self.note(f"job {j.job_id} ({j.desc.name}): {why}: Slurm job {main} requeued, to resume from its "
                      f"last checkpoint")
            return []
        self.requeueing.add(main)  # asked once
        self.edge.outbox.put(EndJob(main))
        self.note(f"job {j.job_id} ({j.desc.name}) ended: {why}, and it cannot resume: {bad}")
        return state.exited(j.job_id, 1, now, f"{why}; not requeued: {bad}")

    def ended(self, s: ManagerPort, op: Ended, now: float) -> list:
        """Group ``op.main``'s Slurm job ended: its job's own report says how, else Slurm's final state
        (``COMPLETED``: the batch script, which exits with the job's ``mpiexec``, exited 0)."""
        acts: list = []
        self.requeueing.discard(op.main)
        for j in [j for j in s.running() if j.allocation == op.main]:
            if op.state in REQUEUED:
                acts += self._requeued(s, j, now)
                continue
            code = (0 if j.reported == "done" else 1 if j.reported == "error" else 0 if op.state == "COMPLETED"
                    else None if op.state in UNKNOWN_END else 1)
            why = None if j.reported else (f"Slurm job {op.main} ended {op.state} and the job did not report"
                                           if code != 0 else None)
            acts += s.exited(j.job_id, code, now, why)
            self.note(f"job {j.job_id} ended with Slurm job {op.main} ({op.state})")
        s.report(LeaseEnded(op.main, f"Slurm job {op.main} ended"), now)
        return acts

    def _requeued(self, s: ManagerPort, j: Job, now: float) -> list:
        """Slurm put job ``j``'s Slurm job back in its queue (its batch host lost, or at our request): it waits
        for its next batch attempt to register (:meth:`resume`), or, where it cannot resume, fails and its
        Slurm job is cancelled (it would run again from the start)."""
        main = j.allocation or ""
        why = f"Slurm requeued job {main}"
        try:
            s.requeued(j, why, now)
        except StateError as e:
            self.edge.outbox.put(EndJob(main))
            self.note(f"job {j.job_id} ({j.desc.name}) ended: {why}, and it cannot resume: {e.message}")
            return s.exited(j.job_id, 1, now, f"{why}; not resumed: {e.message}")
        self.waiting[main] = j.job_id
        self.note(f"job {j.job_id} ({j.desc.name}) waits for requeued Slurm job {main} to run again "
                  f"(restart {j.restarts})")
        return []

    def stop(self, jobs_running: bool, killing: bool) -> None:
        self.edge.stop(cancel_expanders_of=tuple(self.broker.groups) if killing else ())
