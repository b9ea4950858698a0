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
(:meth:`SlurmSite.restart`; docs/slurm.md, "Failures").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from scheduler.core.actions import StateError
from scheduler.core.job import FINAL, Job
from scheduler.core.pool import Pool
from scheduler.rm.slurm.broker import Ended
from scheduler.rm.slurm.edge import EndJob
from scheduler.rm.slurm.manager import SlurmManager
from scheduler.rm.slurm.verify import Verified, own_expanders
from scheduler.rm.slurm.view import (
    SlurmError,
    final_states,
    look,
    partition_args,
    partition_pool,
    resizes_once,
    run,
)

if TYPE_CHECKING:
    from scheduler.core.state import ClusterState

__all__ = ["SlurmSite"]

UNKNOWN_END = ("GONE", "RUNNING", "COMPLETING")  # a job whose end Slurm cannot say (forgotten) or not yet


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
                                     "resizes_once": once})
        self.broker.nodes = tuple(n.host for n in self._pool.nodes)
        self.pending_actions: list = []  # actions of the start-up reconciliation, performed with the first step
        self.verified = Verified()  # the Slurm jobs it checked: the only ones it acts on (verify)
        self.source = (f"Slurm partition {partition or '(default)'} ({len(self._pool.nodes)} nodes): site controller "
                       f"of every 'reshape submit --slurm' job")

    def pool(self, saved_slots: int | None) -> Pool:
        return self._pool

    @property  # type: ignore[override]
    def accounts(self) -> Any:
        return self.verified.accounts

    @accounts.setter
    def accounts(self, accounts: Any) -> None:
        self.verified.accounts = accounts

    @property
    def launcher(self) -> str | None:
        return None  # the controller launches nothing: each job's batch script does, with the slurm launcher

    def group_of(self, j: Job) -> str | None:
        return j.allocation

    def lease_of(self, main: str) -> str | None:
        return main

    # ------------------------------------------------------------------ start-up and restart
    def attach(self, state: ClusterState, now: float) -> None:
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
        for j in state.running():
            if j.allocation is None:
                continue
            why = self.verified.recheck(j, seen)
            if why is None:
                self.broker.add_group(j.allocation, j.hosts[0], 0.0)  # a look now may say it ended
            else:
                self.note(f"job {j.job_id} ended: {why}")
                self.pending_actions += state.exited(j.job_id, None, now, why)
        for a in self.apply(state, now, jobs, idle, now):
            self.pending_actions.append(a)
        for h in [n.host for n in state.pool.nodes if n.host not in state.pool.down]:
            if h in self.broker.held:
                continue
            if state.pool.used[h]:
                self.broker.gone[h] = "no Slurm job of ours holds it since the controller restarted"
            else:
                state.node_released(h, now, "not held by a Slurm job of ours (controller restarted)")
        self.note(f"adopted {len(self.broker.groups)} running job(s) from the journal and Slurm")

    def final_state(self, main: str) -> str:
        """Slurm's state of ended job ``main`` (``COMPLETED``, ``FAILED``, ...), asked at once (rare: a job
        registering on a node whose job's end no look has shown yet); ``GONE`` if Slurm cannot say."""
        return next((j.state for j in final_states([main]) if j.id == main), "GONE")

    def first_look(self) -> tuple[list, int]:
        """Slurm's queue and idle nodes, asked at once (start-up is the one time the loop waits for Slurm)."""
        return look(self.part)

    def step(self, state: ClusterState, now: float) -> list:
        acts, self.pending_actions = self.pending_actions, []
        return acts + super().step(state, now)

    # ------------------------------------------------------------------ jobs
    def check_submit(self, desc: dict[str, Any]) -> None:
        raise StateError("not_supported", "this is a Slurm site controller: Slurm starts the jobs. Submit with "
                                          "'reshape submit --slurm FILE' (its batch script registers here)")

    def adopt(self, state: ClusterState, desc: dict[str, Any], allocation: str, hosts: list[str], now: float,
              owner: str | None, restart: tuple[int | None, list[str]] | None = None) -> int:
        """Register the job Slurm started as ``allocation`` on ``hosts``; the same allocation again: its id
        (``restart``: its next attempt, :meth:`restart`). A refusal is noted (``reshape status``) and raised."""
        for j in state.live.values():
            if j.allocation == allocation and j.state not in FINAL:
                job_id = self.verified.reattach(j, owner)  # a retry after a lost reply: its owner's only
                return job_id if restart is None else self.restart(state, j, hosts, restart, now, owner)
        if restart is not None:
            raise StateError("unknown_job", f"Slurm job {allocation} has no registered job to restart")
        try:
            return self._adopt(state, desc, allocation, hosts, now, owner)
        except StateError as e:
            self.note(f"registration of Slurm job {allocation} ({desc.get('name')}) on "
                      f"{','.join(dict.fromkeys(hosts))} refused: {e.message}")
            raise

    def _adopt(self, state: ClusterState, desc: dict[str, Any], allocation: str, hosts: list[str], now: float,
               owner: str | None) -> int:
        if not allocation.isdigit():
            raise StateError("bad_hosts", f"allocation {allocation!r} is not a Slurm job id")
        unknown = sorted({h for h in hosts if not state.pool.has(h)})
        if unknown:
            raise StateError("bad_hosts", f"{', '.join(unknown)} not in partition {self.partition or '(default)'}")
        self.verified.register(allocation, hosts, owner)  # Slurm's word: the job runs, is owner's, holds hosts
        for h in dict.fromkeys(hosts):
            self.pending_actions += self._given_to(state, h, allocation, now)
        busy = [h for h in dict.fromkeys(hosts) if state.pool.used[h]]
        if busy:  # slurm-run retries: the job on it leaves at its next resize point
            raise StateError("node_busy", f"{', '.join(busy)} still used by a job leaving it (its Slurm job no "
                                          f"longer holds it); retry")
        granted = [h for h in dict.fromkeys(hosts) if h in state.pool.down]
        for h in dict.fromkeys(hosts):
            state.node_granted(h, now, f"allocation of Slurm job {allocation}", lease=allocation)
        try:
            job_id = state.adopt(desc, hosts, allocation, now, owner)
        except StateError:
            for h in granted:
                state.node_released(h, now, f"registration of Slurm job {allocation} refused")
            raise
        self.broker.add_group(allocation, hosts[0], now)
        for h in dict.fromkeys(hosts):
            self.broker.held[h] = allocation
        self.note(f"job {job_id} ({desc['name']}) registered from Slurm job {allocation} on "
                  f"{','.join(dict.fromkeys(hosts))}")
        return job_id

    def restart(self, state: ClusterState, j: Job, hosts: list[str], restart: tuple[int | None, list[str]],
                now: float, owner: str | None) -> int:
        """Job ``j``'s attempt ended (exit status, its nodes found dead): its next attempt runs in its allocation
        on ``hosts`` (Slurm vouches that the allocation holds them) when the end is a loss and they suffice
        (:meth:`scheduler.core.restarts.Restarts.restart_here`); the lost nodes go back to Slurm (released
        once no rank uses them, or gone when Slurm removes them from the job). A refusal is noted and raised."""
        code, lost = restart
        # the job's nodes Slurm took back or that went down while its ranks ran there are lost too, whatever
        # its batch script found (a node that hung is out of the job before mpiexec ends)
        lost = [*lost, *(h for h in j.hosts if h not in hosts and (h in self.broker.gone or h in state.pool.down))]
        try:
            self.verified.register(j.allocation or "", hosts, owner)
            size = state.restart_here(j, hosts, code, [h for h in dict.fromkeys(lost) if state.pool.has(h)], now)
        except StateError as e:
            self.note(f"job {j.job_id} ({j.desc['name']}) not restarted in Slurm job {j.allocation}: {e.message}")
            raise
        for h in dict.fromkeys(lost):
            if self.broker.group_of(h) == j.allocation:  # only nodes of its own Slurm jobs
                self.broker.draining[h] = f"lost by job {j.job_id}"
        self.note(f"job {j.job_id} ({j.desc['name']}) restarted in Slurm job {j.allocation} at {size} on "
                  f"{','.join(dict.fromkeys(hosts[:size]))}" + (f" (lost: {', '.join(lost)})" if lost else ""))
        return j.job_id

    def _given_to(self, s: ClusterState, host: str, allocation: str, now: float) -> list:
        """Slurm started ``allocation`` on ``host``: with whole nodes no other Slurm job holds it now,
        whatever our last look at Slurm says (a look is up to two seconds old, and a job's end is
        believed only from two looks). A group whose own job held it has ended: settled now (its
        report decides done or failed), not when the looks agree, so the node is free for this job. An
        expander that held it no longer does: a job still on it shrinks off it (or fails where it cannot),
        as when a look shows Slurm ended an expander, and the registration is refused as ``node_busy``
        until it has (``reshape slurm-run`` retries)."""
        prev = self.broker.held.get(host)
        if prev is None or prev == allocation:
            return []
        main = self.broker.owner.get(prev, prev)
        acts: list = []
        if prev == main:
            for op in self.broker.end_group(main, self.final_state(main)):
                acts += self._apply(op, s, now)
            return acts
        why = f"Slurm job {prev} no longer holds it: Slurm started job {allocation} there"
        self.broker.held.pop(host)
        self.broker.draining.pop(host, None)
        self.broker.idle_since.pop(host, None)
        if s.node_released(host, now, why):
            self.broker.forgotten(host)
        else:  # its jobs shrink off it at their next resize point, or fail where they cannot (broker, 1)
            self.broker.gone[host] = why
        return acts

    def kill(self, state: ClusterState, job_ids: list[int]) -> set[int]:
        done = set()
        for jid in job_ids:
            j = state.jobs.get(jid)
            if j is not None and j.allocation is not None:
                if j.allocation in self.verified.jobs:  # never a Slurm job it did not check
                    self.edge.outbox.put(EndJob(j.allocation))
                done.add(jid)
        return done

    def apply(self, state: ClusterState, now: float, jobs: list, idle: int, seen: float) -> list:
        """As every Slurm manager, with only the expanders this controller submitted (verify)."""
        return super().apply(state, now, own_expanders(jobs, self.verified.me), idle, seen)

    def ended(self, s: ClusterState, op: Ended, now: float) -> list:
        """Group ``op.main``'s Slurm job ended: its job's own report says how, else Slurm's final state
        (``COMPLETED``: the batch script, which exits with the job's ``mpiexec``, exited 0)."""
        acts: list = []
        for j in [j for j in s.running() if j.allocation == op.main]:
            code = (0 if j.reported == "done" else 1 if j.reported == "error" else 0 if op.state == "COMPLETED"
                    else None if op.state in UNKNOWN_END else 1)
            why = None if j.reported else (f"Slurm job {op.main} ended {op.state} and the job did not report"
                                           if code != 0 else None)
            acts += s.exited(j.job_id, code, now, why)
            self.note(f"job {j.job_id} ended with Slurm job {op.main} ({op.state})")
        for h in [h for h, lease in s.pool.leases.items() if lease == op.main]:
            if not s.node_released(h, now, f"Slurm job {op.main} ended"):
                s.pool.lease(h, None)
        return acts

    def stop(self, jobs_running: bool, killing: bool) -> None:
        self.edge.stop(cancel_expanders_of=tuple(self.broker.groups) if killing else ())
