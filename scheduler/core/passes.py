"""The Application Scheduler's pass over the queue (Sudarsan & Ribbens 2007 §3.1), the core's half.

:class:`Passes` admits jobs (submitted here, or adopted from a resource manager's allocation), runs
the Application Scheduler's pass at each event (or once per instant: ``defer_passes``, the
simulator's batch), keeps the first reservation EASY makes for each queued job and counts the
starts later than it, and, while jobs still wait, asks the Remap Scheduler which running jobs to
shrink at their next resize point. Every other part of the core is given :meth:`Passes.schedule`
as the pass to run after an event frees slots.
"""

from __future__ import annotations

import collections
from typing import TYPE_CHECKING, Any

from scheduler.core.actions import Kill, Launch, StateError
from scheduler.core.job import Job, JobState
from scheduler.core.jobfile import JobDesc
from scheduler.core.policy import AppPolicy, RemapPolicy, Reserve, Snapshot
from scheduler.core.pool import PoolError
from scheduler.core.walltime import kill_time, start_deadline, start_limit

if TYPE_CHECKING:
    from scheduler.core.checks import PolicyChecks
    from scheduler.core.jobtable import JobTable
    from scheduler.core.pool import Pool
    from scheduler.core.resizes import Resizes

__all__ = ["Passes"]


class Passes:
    """Admission and the scheduling pass over ``table``'s queue: ``app`` picks the starts in ``pool``'s
    free slots and ``checks`` vets them, ``limits`` says how a start's time limit is set
    (:data:`scheduler.core.walltime.LIMITS`); ``remap``'s shrink requests go to ``resizes``."""

    def __init__(self, table: JobTable, pool: Pool, checks: PolicyChecks, resizes: Resizes, app: AppPolicy,
                 remap: RemapPolicy, limits: str):
        self.table, self.pool, self.checks, self.resizes = table, pool, checks, resizes
        self.app, self.remap, self.limits = app, remap, limits
        # EASY's guarantee: starts later than the job's first reservation (newest last) and their count
        self.late_starts: collections.deque[dict[str, Any]] = collections.deque(maxlen=100)
        self.late_start_count = 0
        self.limit_extensions = 0  # jobs started with a time limit longer than their walltime
        self._idle: Snapshot | None = None  # the last snapshot a scheduling pass started nothing on
        # while True, the scheduling pass an event would run is left out: the caller handles every event of
        # one instant and then runs one pass (``tick``), the simulator's batch (scheduler.lab.simulator)
        self.defer_passes = False

    def submit(self, desc: JobDesc, now: float, owner: str | None = None,
               job_id: int | None = None) -> int:
        """Add a validated job; it joins the queue at ``now + arrival_delay``. ``job_id``: keep
        the caller's number (the simulator keeps a trace's); default the next free one."""
        self.check_admissible(desc)
        if job_id is None:
            job_id = self.table.next_id
        elif job_id in self.table.jobs:
            raise StateError("bad_job", f"job id {job_id} is taken")
        job = Job(job_id, desc, now, state=JobState.NEW, owner=owner)
        self.table.next_id = max(self.table.next_id, job_id + 1)
        self.table.jobs[job.job_id] = job
        self.table.set(job, JobState.WAITING if desc.arrival_delay > 0 else JobState.QUEUED)
        self.table.event(now, job, "submit")
        return job.job_id

    def pass_needed(self, job_id: int) -> bool:
        """Whether the job just submitted needs a scheduling pass now: it heads the queue (it may
        start, or gets its reservation), or its smallest size fits the free slots. Else the pass
        can wait for the next tick: a policy starts jobs only in free slots, and the jobs ahead
        of this one were seen with the same free slots by the last pass (the daemon's submit)."""
        j = self.table.jobs.get(job_id)
        if j is None or j.state != JobState.QUEUED:  # waiting: a tick admits it when it arrives
            return False
        return self.table.queued[0][1] == job_id or max(1, j.spec.min_procs) <= self.pool.free

    def check_admissible(self, desc: JobDesc) -> None:
        """Raise :class:`StateError` ``bad_job`` for a job that can never run here."""
        if desc.nprocs > self.pool.capacity:
            raise StateError("bad_job", f"job {desc.name!r}: nprocs {desc.nprocs} exceeds the pool "
                             f"({self.pool.capacity} slots)")

    def tick(self, now: float) -> list[Launch | Kill]:
        """Time passed: admit arrived jobs and run the Application Scheduler."""
        if self.table.waiting:
            # a job whose allocation was requeued waits for it to register again (Restarts.requeued), never here
            for j in [j for j in self.table.waiting.values() if j.arrival_time <= now and j.allocation is None]:
                self.table.set(j, JobState.QUEUED)
                self.table.event(now, j, "arrive")
        return self.schedule(now)

    def schedule(self, now: float) -> list[Launch | Kill]:
        """Application Scheduler, then (while jobs still wait) the Remap Scheduler's shrink requests."""
        out: list[Launch | Kill] = []
        if not self.table.queued or self.defer_passes:
            return out
        free = self.pool.free
        snap = self.table.snapshot(now)
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
            j = self.checks.start(start, free, now)
            if j is None:
                continue
            free -= start.nprocs
            j.hosts = self.pool.allocate(start.nprocs)
            j.nprocs = start.nprocs
            self.table.set(j, JobState.RUNNING)
            j.start_time = j.point_time = now
            limit = start_limit(j.spec, start, self.limits)
            j.deadline = None if limit is None else now + limit
            self._check_reservation(j, now)
            j.profile.ran_at(start.nprocs)
            extended = limit is not None and limit > j.spec.walltime
            self.limit_extensions += extended
            self.table.event(now, j, "start", f"time limit {limit:g} s (walltime {j.spec.walltime:g} s at "
                                         f"{j.spec.nprocs} slots)" if extended else "")
            self.table.decided(now, "start", j.job_id, start.nprocs)
            out.append(Launch(j.job_id))
        if self.table.queued and self.remap.asks_shrinks:
            self._request_shrinks(now)
        return out

    def _reserve(self, r: Reserve, now: float) -> None:
        """Keep the first reservation the Application Scheduler makes for a queued job."""
        j = self.table.jobs.get(r.job_id)
        if j is None or j.state != JobState.QUEUED:
            self.checks.error(f"application policy {self.app.name!r}", now, f"{r!r} is not for a queued job")
        elif j.reservation is None and r.time < float("inf"):
            j.reservation = r.time
            self.table.mark(j)

    def _check_reservation(self, j: Job, now: float) -> None:
        """EASY's guarantee: a job starts no later than its first reservation; a later start is counted."""
        r = j.reservation
        if r is not None and now - r > 1e-6 * max(1.0, abs(r)):
            self.late_start_count += 1
            self.late_starts.append({"job_id": j.job_id, "reserved": r, "started": now, "late": now - r})

    def overdue(self, now: float, grace: float = 0.0) -> bool:
        """Is a running job past its deadline plus ``grace`` (``scheduler.core.runs.Runs.expire`` would kill it)?"""
        return any(j.deadline is not None and now >= kill_time(j.deadline, grace) for j in self.table.running())

    def _request_shrinks(self, now: float) -> None:
        """Remap Scheduler: jobs to shrink at their next resize point to admit queued jobs.

        Each request becomes the job's ``pending_shrink`` until its next resize
        point, where the policy decides with it in view and the request is
        dropped. A request for a job with a resize under way is ignored (it
        sees its new size at its next resize point); an invalid one (not
        running, static, outside ``[min_procs, nprocs)``) is a policy error.
        """
        for sh in self.remap.shrink_requests(self.table.snapshot(now)):
            if self.checks.shrink_request(sh, now):
                self.resizes.request_shrink(sh.job_id, sh.nprocs, sh.reason, now)

    def adopt(self, desc: JobDesc, hosts: list[str], allocation: str, now: float,
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
        job = Job(self.table.next_id, desc, now, state=JobState.NEW, owner=owner, allocation=allocation)
        self.table.next_id += 1
        self.table.jobs[job.job_id] = job
        job.hosts, job.nprocs = list(hosts), len(hosts)
        self.table.set(job, JobState.RUNNING)
        job.start_time = job.point_time = now
        job.deadline = start_deadline(job.spec.walltime, job.spec.nprocs, job.nprocs, now)
        job.profile.ran_at(job.nprocs)
        self.table.event(now, job, "submit", f"adopted from allocation {allocation}")
        self.table.event(now, job, "start")
        self.table.decided(now, "start", job.job_id, job.nprocs)
        return job.job_id
