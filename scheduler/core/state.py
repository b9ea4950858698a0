"""The daemon's core, sans I/O: jobs, queue, pool and profiles; events in, actions out.

Every method takes the event and ``now`` (seconds, caller's clock), updates
the state and returns the :class:`Launch` / :class:`Kill` actions the shell
(``scheduler.daemon.loop``) must perform. Nothing here touches a socket, a
process, a file or a clock, so the same object runs in tests without any.

Job states: ``waiting`` (submitted with an arrival delay) -> ``queued`` ->
``running`` -> ``done`` | ``failed`` | ``cancelled`` | ``lost`` (the process
vanished without saying it finished).

Ending a job run on a node. A cancel ends a job the daemon runs itself at once
(the shell kills its processes before it replies). A job whose ``mpiexec`` a
node monitor runs (``runner``) cannot be killed from here: the kill is an
order in that monitor's next heartbeat reply. Such a job becomes
``cancelling`` and keeps its slots, as a shrink keeps the dropped ranks' slots
until the job confirms it, so no other job is placed on ranks that may still
run; it becomes ``cancelled`` (slots freed) when the monitor confirms the run
ended (:meth:`ClusterState.kill_confirmed`): its ``job_ended`` for that
attempt, or a heartbeat that lists the job neither among its runs nor among
the jobs its process scan sees. If that node goes down first, the job is
``cancelled`` with an ``error`` saying the kill was never confirmed. Every
other end the daemon decides for such a job goes the same way (walltime, a
node of it down, a stuck resize, a restart after a loss): the job is
``ending``, holding its slots, and becomes ``failed`` (or, for a restart,
``queued`` again) once the monitor confirms (``Job.then`` says which). A
runner whose own node went down cannot confirm: the monitors of the job's
other nodes then kill what is left of it there, each node's slots freed as it
confirms (``scheduler.core.kills``).

Resize handshake (Sudarsan & Ribbens 2007 §3.1, §3.2.1): at a resize point the Remap
Scheduler's decision becomes a *pending* resize; an expansion reserves its
new slots at once, a shrink releases the dropped ranks' slots when the job
confirms with ``resized``. If the confirmation is lost (daemon restarted),
the next resize point reconciles: the size the job reports is the truth.
A resize is bounded: the job's runtime aborts it after the job file's
``resize_timeout`` (reporting why), and a pending resize still unconfirmed
:data:`RESIZE_GRACE` later (5 s + 10%) fails and kills the job
(:meth:`ClusterState.check_resizes`), so no job holds slots with a pending
action forever. A job that fails mid-resize says so in its ``error``.

Nodes (Sudarsan & Ribbens 2007 §3.1, System Monitor): a pool node is ``unmonitored`` until
a node monitor registers it (or ``down`` from the start when monitors are
required), then ``up`` while its heartbeats come, and ``down`` when they
stop for ``node_timeout`` seconds (:meth:`ClusterState.check_nodes`). A node
that goes down leaves the pool; every running job with a rank on it is
*failed* and killed (an MPI job does not survive losing ranks: the MPICH
here has no fault-tolerant communicators, so shrinking around a dead node
is not offered), a pending expansion onto it is abandoned (the job keeps its
size), and the other jobs continue. A monitor that registers again (a new
*incarnation*) brings the node back. Only the monitor on a job's first node
reports the job's end (``job_ended``).
"""

from __future__ import annotations

import collections
from typing import Any

from scheduler.core.actions import Decision, Kill, Launch, PolicyError, StateError
from scheduler.core.events import TypedEvents
from scheduler.core.job import JobState
from scheduler.core.jobtable import FINAL, KILLING, RECENT, Job, JobTable
from scheduler.core.kills import Kills
from scheduler.core.nodestate import NodeRecord, NodeStates
from scheduler.core.policy import (
    AppPolicy,
    Continue,
    Expand,
    JobSpec,
    RemapPolicy,
    Reserve,
    Shrink,
    Snapshot,
    Start,
    legal_sizes,
)
from scheduler.core.pool import Pool, PoolError
from scheduler.core.resizes import RESIZE_GRACE, Resizes
from scheduler.core.restarts import Restarts
from scheduler.core.views import StateViews
from scheduler.core.walltime import (
    LIMITS,
    clock_time,
    kill_time,
    limit_allowed,
    moldable_limit,
    start_deadline,
    start_limit,
)

__all__ = ["RESIZE_GRACE", "ClusterState", "Job", "Kill", "Launch", "NodeRecord", "StateError"]



class ClusterState(JobTable, NodeStates, Resizes, Restarts, Kills, StateViews, TypedEvents):
    """Queue, running jobs, pool and profiles, driven by events (see module docstring).

    ``strict``: a policy decision that cannot be applied (a start of a job that
    is not queued, sizes outside the job's range or beyond the free slots, an
    expansion of another job, a shrink request for a static job, ...) raises
    :class:`PolicyError` (the simulator); otherwise it is skipped and counted
    in ``policy_errors`` (the daemon: a policy bug must not corrupt the pool or
    stop the service). Both check the same rules (:meth:`_check_start`,
    :meth:`_check_remap`, :meth:`_check_shrink_request`). ``record``: keep
    every applied decision in ``decisions``.
    """

    def __init__(self, pool: Pool, app: AppPolicy, remap: RemapPolicy, node_timeout: float = 5.0,
                 require_monitors: bool = False, strict: bool = False, record: bool = False,
                 limits: str = "wall-clock"):
        if limits not in LIMITS:
            raise ValueError(f"limits must be one of {', '.join(LIMITS)}, got {limits!r}")
        self.limits = limits
        self.pool = pool
        self.app = app
        self.remap = remap
        self.strict = strict
        self.jobs: dict[int, Job] = {}
        self.next_id = 1
        self.events: list[dict[str, Any]] = []  # allocation history, appended to the journal
        self.dirty: set[int] = set()
        self.live: dict[int, Job] = {}  # jobs not in a final state (finished ones are not scanned)
        self.node_timeout = node_timeout
        self.nodes: dict[str, NodeRecord] = {n.host: NodeRecord(n.host) for n in pool.nodes}
        self.node_events: list[dict[str, Any]] = []  # node history, appended to the journal
        self.dirty_nodes: set[str] = set()
        self.suspect: dict[str, float] = {}  # host -> when an attempt on it was lost: no placement until it heartbeats
        self._last_node_check: float | None = None
        self.recent: collections.deque[int] = collections.deque(maxlen=RECENT)  # last ended jobs, newest last
        self.decisions: list[Decision] | None = [] if record else None
        self.policy_errors: collections.deque[str] = collections.deque(maxlen=100)  # newest last
        self.policy_error_count = 0
        # EASY's guarantee: starts later than the job's first reservation (newest last) and their count
        self.late_starts: collections.deque[dict[str, Any]] = collections.deque(maxlen=100)
        self.late_start_count = 0
        self.walltime_kills = 0
        self.limit_extensions = 0  # jobs started with a time limit longer than their walltime
        self._idle: Snapshot | None = None  # the last snapshot a scheduling pass started nothing on
        # while True, the scheduling pass an event would run is left out: the caller handles every event of
        # one instant and then runs one pass (``tick``), the simulator's batch (scheduler.lab.simulator)
        self.defer_passes = False
        self._init_indexes()
        if require_monitors:
            for rec in self.nodes.values():
                rec.state, rec.reason = "down", "no node monitor yet"
                pool.set_down(rec.host)

    # ---------------------------------------------------------------- policy output checks
    def _policy_error(self, who: str, now: float, what: str) -> None:
        msg = f"{who} at t={now:g}: {what}"
        if self.strict:
            raise PolicyError(msg)
        self.policy_error_count += 1
        self.policy_errors.append(msg)

    def _hi(self, spec: JobSpec) -> int:
        return spec.max_procs or self.pool.total

    def _legal(self, spec: JobSpec, p: int) -> bool:
        return bool(legal_sizes(spec, self._hi(spec), (p,)))

    def _check_start(self, st: Any, free: int, now: float) -> Job | None:
        """The queued job ``st`` starts, if the start is legal and fits ``free`` slots."""
        j = self.jobs.get(st.job_id) if isinstance(st, Start) else None
        who = f"application policy {self.app.name!r}"
        if j is None or j.state != JobState.QUEUED:
            self._policy_error(who, now, f"{st!r} does not start a queued job")
        elif not self._legal(j.spec, st.nprocs):
            self._policy_error(who, now, f"start of job {st.job_id} at {st.nprocs} slots, not one of its legal "
                               f"sizes in [{j.spec.min_procs}, {self._hi(j.spec)}]")
        elif st.nprocs > free:
            self._policy_error(who, now, f"start of job {st.job_id} needs {st.nprocs} slots, {free} free")
        elif st.limit is not None and not limit_allowed(j.spec, st):
            self._policy_error(who, now, f"start of job {st.job_id} at {st.nprocs} slots with a time limit of "
                               f"{st.limit!r} s; allowed: more than 0 and at most "
                               f"{moldable_limit(j.spec.walltime, j.spec.nprocs, st.nprocs)} s (walltime "
                               f"{j.spec.walltime} s at {j.spec.nprocs} slots)")
        else:
            return j
        return None

    def _check_remap(self, d: Any, j: Job, now: float) -> int:
        """The size job ``j`` goes to by the Remap Scheduler's decision ``d`` (its own: continue)."""
        p, spec = j.nprocs, j.spec
        if isinstance(d, Continue) and d.job_id == j.job_id:
            return p
        if isinstance(d, Expand | Shrink) and d.job_id == j.job_id:
            q = d.nprocs
            if q == p:
                return p
            if self._legal(spec, q) and (
                    (isinstance(d, Expand) and p < q and q - p <= self.pool.free_for(j.allocation))
                    or (isinstance(d, Shrink) and q < p)):
                return q
        self._policy_error(f"remap policy {self.remap.name!r}", now,
                           f"invalid decision {d!r} for job {j.job_id} at {p} slots "
                           f"({self.pool.free_for(j.allocation)} free, "
                           f"legal [{spec.min_procs}, {self._hi(spec)}])")
        return p

    def _check_shrink_request(self, sh: Any, now: float) -> bool:
        j = self.jobs.get(sh.job_id) if isinstance(sh, Shrink) else None
        if j is None or j.state != JobState.RUNNING or not j.spec.resizable \
                or not j.spec.min_procs <= sh.nprocs < j.nprocs:
            self._policy_error(f"remap policy {self.remap.name!r}", now, f"invalid shrink request {sh!r}")
            return False
        return True

    # ---------------------------------------------------------------- submission / queue
    def submit(self, desc: dict[str, Any], now: float, owner: str | None = None,
               job_id: int | None = None) -> int:
        """Add a validated job; it joins the queue at ``now + arrival_delay``. ``job_id``: keep
        the caller's number (the simulator keeps a trace's); default the next free one."""
        self.check_admissible(desc)
        if job_id is None:
            job_id = self.next_id
        elif job_id in self.jobs:
            raise StateError("bad_job", f"job id {job_id} is taken")
        job = Job(job_id, desc, now, state=JobState.NEW, owner=owner)
        self.next_id = max(self.next_id, job_id + 1)
        self.jobs[job.job_id] = job
        self._set(job, JobState.WAITING if desc.get("arrival_delay", 0) > 0 else JobState.QUEUED)
        self._event(now, job, "submit")
        return job.job_id

    def pass_needed(self, job_id: int) -> bool:
        """Whether the job just submitted needs a scheduling pass now: it heads the queue (it may
        start, or gets its reservation), or its smallest size fits the free slots. Else the pass
        can wait for the next tick: a policy starts jobs only in free slots, and the jobs ahead
        of this one were seen with the same free slots by the last pass (the daemon's submit)."""
        j = self.jobs.get(job_id)
        if j is None or j.state != JobState.QUEUED:  # waiting: a tick admits it when it arrives
            return False
        return self._queued[0][1] == job_id or max(1, j.spec.min_procs) <= self.pool.free

    def check_admissible(self, desc: dict[str, Any]) -> None:
        """Raise :class:`StateError` ``bad_job`` for a job that can never run here."""
        if desc["nprocs"] > self.pool.capacity:
            raise StateError("bad_job", f"job {desc['name']!r}: nprocs {desc['nprocs']} exceeds the pool "
                             f"({self.pool.capacity} slots)")

    def tick(self, now: float) -> list[Launch | Kill]:
        """Time passed: admit arrived jobs and run the Application Scheduler."""
        if self._waiting:
            # a job whose allocation was requeued waits for it to register again (Restarts.requeued), never here
            for j in [j for j in self._waiting.values() if j.arrival_time <= now and j.allocation is None]:
                self._set(j, JobState.QUEUED)
                self._event(now, j, "arrive")
        return self.schedule(now)

    def schedule(self, now: float) -> list[Launch | Kill]:
        """Application Scheduler, then (while jobs still wait) the Remap Scheduler's shrink requests."""
        out: list[Launch | Kill] = []
        if not self._queued or self.defer_passes:
            return out
        free = self.pool.free
        snap = self.snapshot(now)
        idle = self._idle
        if idle is not None and self.app.idle_since(idle, snap):
            decisions: list = []  # the policy says this pass would start nothing: it is not run
        else:
            decisions = self.app.schedule(snap)
            self._idle = snap  # until a start is asked for, below
        for start in decisions:
            if isinstance(start, Reserve):
                self._reserve(start, now)
                continue
            self._idle = None
            j = self._check_start(start, free, now)
            if j is None:
                continue
            free -= start.nprocs
            j.hosts = self.pool.allocate(start.nprocs)
            j.nprocs = start.nprocs
            self._set(j, JobState.RUNNING)
            j.start_time = j.point_time = now
            limit = start_limit(j.spec, start, self.limits)
            j.deadline = None if limit is None else now + limit
            self._check_reservation(j, now)
            j.profile.ran_at(start.nprocs)
            extended = limit is not None and limit > j.spec.walltime
            self.limit_extensions += extended
            self._event(now, j, "start", f"time limit {limit:g} s (walltime {j.spec.walltime:g} s at "
                                         f"{j.spec.nprocs} slots)" if extended else "")
            self._decided(now, "start", j.job_id, start.nprocs)
            out.append(Launch(j.job_id))
        if self._queued and self.remap.asks_shrinks:
            self._request_shrinks(now)
        return out

    def _reserve(self, r: Reserve, now: float) -> None:
        """Keep the first reservation the Application Scheduler makes for a queued job."""
        j = self.jobs.get(r.job_id)
        if j is None or j.state != JobState.QUEUED:
            self._policy_error(f"application policy {self.app.name!r}", now, f"{r!r} is not for a queued job")
        elif j.reservation is None and r.time < float("inf"):
            j.reservation = r.time
            self._mark(j)

    def _check_reservation(self, j: Job, now: float) -> None:
        """EASY's guarantee: a job starts no later than its first reservation; a later start is counted."""
        r = j.reservation
        if r is not None and now - r > 1e-6 * max(1.0, abs(r)):
            self.late_start_count += 1
            self.late_starts.append({"job_id": j.job_id, "reserved": r, "started": now, "late": now - r})

    def overdue(self, now: float, grace: float = 0.0) -> bool:
        """Is a running job past its deadline plus ``grace`` (:meth:`expire` would kill it)?"""
        return any(j.deadline is not None and now >= kill_time(j.deadline, grace) for j in self.running())

    def expire(self, now: float, grace: float = 0.0) -> list[Launch | Kill]:
        """Kill every running job past its deadline plus ``grace`` (:mod:`scheduler.core.walltime`)."""
        out: list[Launch | Kill] = []
        for j in self.running():
            if j.deadline is not None and now >= kill_time(j.deadline, grace):
                why = (f"walltime exceeded: limit {j.spec.walltime:g} s at {j.spec.nprocs} slots, "
                       f"deadline {clock_time(j.deadline)} (now {j.nprocs} slots)")
                self.walltime_kills += 1
                out += self._kill_failed(j, now, why, "walltime exceeded")
        return out + (self.schedule(now) if out else [])

    def _request_shrinks(self, now: float) -> None:
        """Remap Scheduler: jobs to shrink at their next resize point to admit queued jobs.

        Each request becomes the job's ``pending_shrink`` until its next resize
        point, where the policy decides with it in view and the request is
        dropped. A request for a job with a resize under way is ignored (it
        sees its new size at its next resize point); an invalid one (not
        running, static, outside ``[min_procs, nprocs)``) is a policy error.
        """
        for sh in self.remap.shrink_requests(self.snapshot(now)):
            if self._check_shrink_request(sh, now):
                self.request_shrink(sh.job_id, sh.nprocs, sh.reason, now)

    def adopt(self, desc: dict[str, Any], hosts: list[str], allocation: str, now: float,
              owner: str | None = None) -> int:
        """A job a resource manager started in ``allocation`` on ``hosts`` (one per slot, already up and
        leased to it): it runs from now on, and is never launched or queued here."""
        self.check_admissible(desc)
        for h in set(hosts):
            if not self.pool.has(h) or h in self.pool.down or self.pool.leases.get(h) != allocation:
                raise StateError("bad_hosts", f"{h!r} is not a node of allocation {allocation} in this pool")
        try:
            self.pool.claim(hosts)
        except PoolError as e:
            raise StateError("bad_hosts", str(e)) from None
        job = Job(self.next_id, desc, now, state=JobState.NEW, owner=owner, allocation=allocation)
        self.next_id += 1
        self.jobs[job.job_id] = job
        job.hosts, job.nprocs = list(hosts), len(hosts)
        self._set(job, JobState.RUNNING)
        job.start_time = job.point_time = now
        job.deadline = start_deadline(job.spec.walltime, job.spec.nprocs, job.nprocs, now)
        job.profile.ran_at(job.nprocs)
        self._event(now, job, "submit", f"adopted from allocation {allocation}")
        self._event(now, job, "start")
        self._decided(now, "start", job.job_id, job.nprocs)
        return job.job_id

    def cancel(self, job_id: int, now: float, reschedule: bool = True) -> list[Launch | Kill]:
        """End a queued or running job; ``reschedule=False`` (daemon stopping) starts nothing new."""
        j = self._job(job_id)
        if j.state in FINAL:
            raise StateError("not_active", f"job {job_id} already {j.state}")
        if j.state == JobState.CANCELLING:
            return [Kill(job_id)]  # still not confirmed (its monitor gets the kill order while it lists the run)
        if j.state == JobState.ENDING:  # its kill is ordered already: once confirmed it is cancelled, not what
            j.then = None               # the daemon had decided (a restart, a failure)
            self._set(j, JobState.CANCELLING)
            self._event(now, j, "cancelling", self._ordered(j))
            return [Kill(job_id)]
        out: list[Launch | Kill] = []
        if j.state == JobState.RUNNING:
            if self._confirms_kill(j):  # its node's monitor kills it: cancelled once it confirms (module docstring)
                return self._kill_on_node(j, now, None, "")
            out.append(Kill(job_id))
            self._release_all(j)
        self._end(j, JobState.CANCELLED, now)
        self._event(now, j, "cancel")
        return out + self.schedule(now) if reschedule else out

    # ---------------------------------------------------------------- System Monitor
    def launched(self, job_id: int, sid: int) -> None:
        j = self._job(job_id)
        j.sid = sid
        self._mark(j)

    def run_on(self, job_id: int, node: str, log_size: int = 0) -> None:
        """The job's ``mpiexec`` is to run on ``node``, started by its monitor (not by the daemon); its log
        holds ``log_size`` bytes before this attempt's output (:meth:`output_base`)."""
        j = self._job(job_id)
        j.runner = node
        j.out_base = log_size
        self._mark(j)

    def output_base(self, job_id: int, base: int) -> None:
        """The job's log holds this attempt's output from byte ``base`` on (its size when the attempt was
        ordered to start): what the log holds of the attempt is its size less ``base``."""
        j = self._job(job_id)
        if base != j.out_base:
            j.out_base = base
            self._mark(j)

    def run_started(self, job_id: int, node: str, attempt: int, pid: int) -> bool:
        """The monitor of ``node`` runs this attempt's ``mpiexec`` as ``pid``: the launch is confirmed.
        False when that is not this job's current run (ended, restarted, or run elsewhere): kill it."""
        j = self.jobs.get(job_id)
        if j is None or j.state != JobState.RUNNING or j.restarts != attempt or j.runner != node:
            return False
        if j.sid is None:
            j.sid = pid
            self._mark(j)
        return True

    def output_received(self, job_id: int, upto: int) -> None:
        """The daemon holds the first ``upto`` bytes of the current attempt's output (as the status shows it;
        the log file's size is the truth: :meth:`output_base`)."""
        j = self._job(job_id)
        if upto != j.out_at:
            j.out_at = upto
            self._mark(j)

    def exited(self, job_id: int, code: int | None, now: float, error: str | None = None) -> list[Launch | Kill]:
        """The job's processes are gone (exit code, or None if it vanished); its slots return.

        A job that fails with a resize under way says so in its error.
        """
        j = self._job(job_id)
        if j.state != JobState.RUNNING:
            return []
        during = f" during {self._resize_name(j)}" if j.pending else ""
        ok = self._ended_well(j, None if code is None else code == 0)
        if not ok and self.restartable(j, code):
            how = j.error or (f"exit code {code}" if code is not None else "process vanished")
            if code == 0:
                how += " without a done report"
            return self.restart(j, now, f"{how}{during}")
        self._release_all(j)
        j.exit_code = code
        if ok:
            self._end(j, JobState.DONE, now)
        else:
            self._end(j, JobState.LOST if code is None else JobState.FAILED, now)
            how = f"exit code {code}" if code is not None else "process vanished"
            if code == 0 and during:  # Hydra sometimes exits 0 after a rank of the job was killed
                how = "mpiexec exited 0 but the job never confirmed its resize"
            elif code == 0:
                how = "mpiexec exited 0 but the job never reported done"
            if error or not j.error:
                j.error = f"{error or how}{during}"
            else:  # the job's own report (e.g. the runtime's abort reason) comes first
                j.error = f"{j.error} ({how})"
        self._event(now, j, "end", j.state if j.state == JobState.DONE else f"{j.state}: {j.error}")
        return self.schedule(now)

    @staticmethod
    def _ended_well(j: Job, clean: bool | None) -> bool:
        """Done or not. ``clean``: the exit looked clean (exit 0, the monitor's ``end``), did not,
        or is unknown (None: only the job's own ``done`` counts then). A clean exit with a resize
        under way and no ``done`` from the job is a failure: Hydra has exited 0 after one of the
        job's ranks was killed mid-resize; so is one of a job with checkpoints that reached a resize
        point (its runtime reports ``done`` at any normal exit,
        :meth:`reshape.runtime.ending.Ending.done_at_exit`). After a loss recovered in place (``lost``)
        the job's own ``done`` counts whatever the exit: Open MPI's launcher exits 1 or 137 once a rank
        died or a new one left without ``MPI_Finalize`` (docs/mpi.md)."""
        if j.reported == "done" and j.lost_in_place:
            return True
        if j.reported == "error" or clean is False:
            return False
        if clean is None:
            return j.reported == "done"
        if j.reported is None and j.desc.get("checkpoint") and j.iterations:
            return False  # the runtime says done at every normal exit: this one was a rank killed (Hydra exits 0)
        return j.reported == "done" or not j.pending

    def _kill_failed(self, j: Job, now: float, error: str, detail: str) -> list[Launch | Kill]:
        """End a running job as failed (slots freed, ``error`` kept, ``end`` event); its processes must die.
        A job a node monitor runs is ``ending`` until that monitor confirms the kill (module docstring)."""
        if self._confirms_kill(j):
            return self._kill_on_node(j, now, {"why": detail, "error": error, "detail": detail}, detail)
        self._release_all(j)
        self._end(j, JobState.FAILED, now)
        j.error = error
        self._event(now, j, "end", f"failed: {detail}")
        return [Kill(j.job_id)]

    def _release_all(self, j: Job) -> None:
        self.pool.release(j.hosts)
        if j.pending and j.pending.expands:
            self.pool.release(j.pending.hosts)
        j.pending = None
        j.shrink_request = None
        j.hosts = []
        j.nprocs = 0

    def finished(self, job_id: int, status: str, error: str | None, now: float) -> None:
        j = self._job(job_id)
        if j.state != JobState.RUNNING:
            raise StateError("not_running", f"job {job_id} is {j.state}, not running")
        if j.reported != "error":  # a job that said it failed stays failed (its batch script may say done)
            j.reported = status
        if error and not j.error:  # the first report is the cause; ranks aborting after it say less
            j.error = error
        self._mark(j)

    def job_ended(self, job_id: int, host: str, status: str, detail: str | None, now: float,
                  attempt: int = 0, code: int | None = None) -> list[Launch | Kill]:
        """The monitor of the job's first node saw its processes there end (``status`` end or error);
        ``attempt``: of which attempt (an earlier one's end settles nothing: ``scheduler.core.restarts``);
        ``code``: the exit status of the job's ``mpiexec``, from the monitor that ran it (``runner``).
        For a ``cancelling`` or ``ending`` job, its runner's report confirms the kill."""
        j = self._job(job_id)
        if j.state in KILLING and attempt == j.restarts and host == j.runner:
            how = f"mpiexec on {host} exited with status {code}" if code is not None else (detail or status)
            return self.kill_confirmed(job_id, host, now, how)
        j = self._running(job_id)
        if attempt != j.restarts:
            return []
        first = j.hosts[0] if j.hosts else None
        if code is not None and host != j.runner:
            raise StateError("not_first_node", f"job {job_id}'s mpiexec runs on {j.runner or 'the head'}, not "
                             f"{host!r}: only its monitor reports its exit status")
        if host != first and host != j.runner:
            raise StateError("not_first_node", f"job {job_id}'s first node is {first!r}, not {host!r} "
                             "(only the first node's monitor reports a job)")
        if j.node_report is None or (code is not None and "code" not in j.node_report):
            j.node_report = {"status": status, "t": now, "node": host, "detail": detail,
                             **({"code": code} if code is not None else {})}
            self._mark(j)
        return []

    def ended_on_node(self, job_id: int, now: float, why: str | None = None) -> list[Launch | Kill]:
        """Settle a job by its monitor's report (its ``mpiexec`` cannot be watched or did not exit).

        ``end`` is done unless the job said it failed; ``error`` is failed, and
        so is a job whose ``mpiexec`` did not exit (``why`` says so). The job's
        remaining processes, if any, are killed.
        """
        j = self._job(job_id)
        if j.state != JobState.RUNNING or j.node_report is None:
            return []
        r = j.node_report
        ok = self._ended_well(j, r["status"] == "end" and why is None)
        self._release_all(j)
        if ok:
            self._end(j, JobState.DONE, now)
        else:
            self._end(j, JobState.FAILED, now)
            j.error = why or j.error or f"monitor of {r['node']}: {r.get('detail') or r['status']}"
        self._event(now, j, "end", f"{j.state} (reported by the monitor of {r['node']})")
        return [Kill(job_id), *self.schedule(now)]
