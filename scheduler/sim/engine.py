"""Discrete-event simulator that drives the daemon's own policy objects on a virtual clock.

The engine is the simulator's counterpart of the daemon's state machine: it
holds the queue, the free pool and the running jobs, turns them into the
frozen :class:`scheduler.policy.Snapshot` the policies read, and applies the
decisions they return (seed 001 §3.1: the Application Scheduler starts queued
jobs; the Remap Scheduler decides at each resize point, an iteration boundary,
whether a resizable job expands, shrinks or continues, and may ask running
jobs to shrink to admit queued ones).

Events live in a heap keyed by ``(time, seq)``: ``seq`` keeps simultaneous
events in the order they were created, so a run is deterministic. Rigid jobs
(and every job when no remap policy is given) get a single finish event;
resizable jobs get one event per iteration. A resize holds ``max(p, q)``
slots while the data moves (expansions allocate at the decision, shrinks
release when redistribution ends), costing ``RedistModel.cost`` seconds.
As in the daemon, policies see the job at its old size until the
redistribution ends (a shrink under way shows as ``pending_shrink``); then
the new size joins the job's history and the cost its profile.

Policy output is validated: a start of a job that is not queued, sizes that do
not fit the free pool or the job's legal range, or a resize of a job that is
not at a resize point raise :class:`SimulationError` naming the policy and
the decision. A policy that leaves jobs queued on an idle machine with nothing
left to happen is reported the same way rather than looping forever.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass, field

from scheduler.policy import (
    AppPolicy,
    Continue,
    Expand,
    Profile,
    RemapPolicy,
    RunningJob,
    Shrink,
    Snapshot,
    Start,
)
from scheduler.sim.jobmodel import RedistCost, RedistModel, SimInput
from scheduler.sim.metrics import JobRecord, SimResult

__all__ = ["Decision", "SimulationError", "Simulator", "simulate"]

_ARRIVE, _ITER, _REDIST, _FINISH = 0, 1, 2, 3


class SimulationError(RuntimeError):
    """A policy returned an impossible decision, or left the system stuck."""


@dataclass(frozen=True)
class Decision:
    """One applied scheduling decision, for comparing runs (daemon vs simulator)."""

    time: float
    kind: str  # "start" | "expand" | "shrink"
    job_id: int
    nprocs: int


class _Job:
    __slots__ = (
        "busy",
        "hist",
        "inp",
        "iter_t",
        "iters",
        "nprocs",
        "pending",
        "redist",
        "redist_time",
        "resizes",
        "rj",
        "start",
        "target",
    )

    def __init__(self, inp: SimInput):
        self.inp = inp
        self.nprocs = 0
        self.start = 0.0
        self.iters = 0
        self.iter_t: dict[int, float] = {}
        self.redist: dict[tuple[int, int], float] = {}
        self.hist: list[int] = []
        self.pending: int | None = None
        self.resizes = 0
        self.redist_time = 0.0
        self.busy = 0  # slots held (max(p, q) during a redistribution)
        self.target = 0  # size after the redistribution under way
        self.rj: RunningJob | None = None


@dataclass
class Simulator:
    jobs: list[SimInput]
    total_slots: int
    app: AppPolicy
    remap: RemapPolicy | None = None
    redist: RedistCost = field(default_factory=RedistModel)
    record: bool = False
    progress: Callable[[int, int], None] | None = None

    def __post_init__(self) -> None:
        if self.total_slots < 1:
            raise ValueError(f"total_slots must be >= 1, got {self.total_slots}")
        ids = [j.spec.job_id for j in self.jobs]
        if len(set(ids)) != len(ids):
            raise ValueError("job ids must be unique")
        for j in self.jobs:
            if j.spec.min_procs > self.total_slots:
                raise ValueError(
                    f"job {j.spec.job_id} needs {j.spec.min_procs} slots; "
                    f"the machine has {self.total_slots}"
                )
        self.now = 0.0
        self.free = self.total_slots
        self._heap: list[tuple[float, int, int, int]] = []
        self._seq = 0
        self._queue: list = []
        self._queue_t: tuple | None = ()
        self._run: dict[int, _Job] = {}
        self._run_t: tuple | None = ()
        self._jobs = {j.spec.job_id: _Job(j) for j in self.jobs}
        self._busy_area = 0.0
        self._idle_waiting = 0.0  # idle slot-seconds while jobs wait
        self._last = 0.0
        self.decisions: list[Decision] = []
        self.records: list[JobRecord] = []

    # -- plumbing ---------------------------------------------------------

    def _push(self, t: float, kind: int, jid: int) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (t, self._seq, kind, jid))

    def _advance(self, t: float) -> None:
        self._busy_area += (self.total_slots - self.free) * (t - self._last)
        if self._queue:
            self._idle_waiting += self.free * (t - self._last)
        self._last = t
        self.now = t

    def _running_job(self, j: _Job) -> RunningJob:
        if j.rj is None:
            j.rj = RunningJob(
                spec=j.inp.spec,
                nprocs=j.nprocs,
                start_time=j.start,
                profile=Profile(dict(j.iter_t), dict(j.redist), tuple(j.hist)),
                iterations_done=j.iters,
                pending_shrink=j.pending,
            )
        return j.rj

    def _dirty(self, j: _Job) -> None:
        j.rj = None
        self._run_t = None

    def snapshot(self) -> Snapshot:
        if self._queue_t is None:
            self._queue_t = tuple(self._queue)
        if self._run_t is None:
            self._run_t = tuple(self._running_job(j) for j in self._run.values())
        return Snapshot(self.now, self.total_slots, self.free, self._queue_t, self._run_t)

    def _log(self, kind: str, jid: int, n: int) -> None:
        if self.record:
            self.decisions.append(Decision(self.now, kind, jid, n))

    # -- scheduling passes ------------------------------------------------

    def _schedule(self) -> None:
        if not self._queue:
            return
        snap = self.snapshot()
        starts = self.app.schedule(snap)
        if starts:
            queued = {s.job_id: s for s in self._queue}
            need = 0
            for st in starts:
                if not isinstance(st, Start) or st.job_id not in queued:
                    raise SimulationError(
                        f"application policy {self.app.name!r} at t={self.now:g}: "
                        f"{st!r} does not start a queued job"
                    )
                spec = queued.pop(st.job_id)
                hi = spec.max_procs or self.total_slots
                if not spec.min_procs <= st.nprocs <= hi:
                    raise SimulationError(
                        f"application policy {self.app.name!r} at t={self.now:g}: start of job "
                        f"{st.job_id} at {st.nprocs} slots outside [{spec.min_procs}, {hi}]"
                    )
                need += st.nprocs
            if need > self.free:
                raise SimulationError(
                    f"application policy {self.app.name!r} at t={self.now:g}: starts need "
                    f"{need} slots, {self.free} free"
                )
            started = {st.job_id for st in starts}
            self._queue = [s for s in self._queue if s.job_id not in started]
            self._queue_t = None
            for st in starts:
                self._start(st.job_id, st.nprocs)
        if self._queue and self.remap is not None:
            for sh in self.remap.shrink_requests(self.snapshot()):
                j = self._run.get(sh.job_id)
                if j is None or not j.inp.spec.resizable or not (
                    j.inp.spec.min_procs <= sh.nprocs < j.nprocs
                ):
                    raise SimulationError(
                        f"remap policy {self.remap.name!r} at t={self.now:g}: invalid shrink "
                        f"request {sh!r}"
                    )
                if j.pending != sh.nprocs:
                    j.pending = sh.nprocs
                    self._dirty(j)

    def _start(self, jid: int, n: int) -> None:
        j = self._jobs[jid]
        j.nprocs = j.busy = n
        j.start = self.now
        j.hist.append(n)
        self.free -= n
        self._run[jid] = j
        self._run_t = None
        self._log("start", jid, n)
        m = j.inp.model
        if self.remap is None or not j.inp.spec.resizable:
            self._push(self.now + m.run_time(n), _FINISH, jid)
        else:
            self._push(self.now + m.iter_time(n), _ITER, jid)

    def _finish(self, j: _Job) -> None:
        jid = j.inp.spec.job_id
        del self._run[jid]
        self._run_t = None
        self.free += j.busy
        s = j.inp.spec
        self.records.append(
            JobRecord(jid, s.submit_time, j.start, self.now, j.inp.run_time, s.nprocs,
                      j.resizes, j.redist_time)
        )
        if self.progress is not None and len(self.records) % 500 == 0:
            self.progress(len(self.records), len(self.jobs))

    def _resize_point(self, j: _Job) -> None:
        jid = j.inp.spec.job_id
        m = j.inp.model
        j.iters += 1
        j.iter_t[j.nprocs] = m.iter_time(j.nprocs)
        self._dirty(j)
        if j.iters >= m.iterations:
            self._finish(j)
            return
        snap = self.snapshot()
        d = self.remap.at_resize_point(snap, jid)
        if j.pending is not None:
            j.pending = None
            self._dirty(j)
        p = j.nprocs
        if isinstance(d, Continue) or (isinstance(d, Expand | Shrink) and d.nprocs == p):
            self._push(self.now + m.iter_time(p), _ITER, jid)
            return
        q = d.nprocs
        spec = j.inp.spec
        hi = spec.max_procs or self.total_slots
        bad = (
            d.job_id != jid
            or not spec.min_procs <= q <= hi
            or (isinstance(d, Expand) and (q < p or q - p > self.free))
            or (isinstance(d, Shrink) and q > p)
            or not isinstance(d, Expand | Shrink)
        )
        if bad:
            raise SimulationError(
                f"remap policy {self.remap.name!r} at t={self.now:g}: invalid decision {d!r} "
                f"for job {jid} at {p} slots ({self.free} free, legal [{spec.min_procs}, {hi}])"
            )
        cost = self.redist.cost(spec.nprocs, p, q)
        if q > p:
            self.free -= q - p
            j.busy = q
        self._log("expand" if q > p else "shrink", jid, q)
        j.resizes += 1
        j.redist_time += cost
        j.target = q
        if q < p:
            j.pending = q  # as the daemon shows a shrink under way
            self._dirty(j)
        self._push(self.now + cost, _REDIST, jid)

    def _redist_done(self, j: _Job) -> None:
        p, q = j.nprocs, j.target
        j.redist[(p, q)] = self.redist.cost(j.inp.spec.nprocs, p, q)
        j.hist.append(q)
        j.nprocs = q
        j.pending = None
        if j.busy > q:
            self.free += j.busy - q
        j.busy = q
        self._dirty(j)
        self._push(self.now + j.inp.model.iter_time(q), _ITER, j.inp.spec.job_id)

    # -- main loop --------------------------------------------------------

    def run(self) -> SimResult:
        for inp in sorted(self.jobs, key=lambda j: j.spec.submit_time):
            self._push(inp.spec.submit_time, _ARRIVE, inp.spec.job_id)
        heap = self._heap
        while heap:
            t, _, kind, jid = heapq.heappop(heap)
            self._advance(t)
            j = self._jobs[jid]
            if kind == _ARRIVE:
                self._queue.append(j.inp.spec)
                self._queue_t = None
            elif kind == _FINISH:
                self._finish(j)
            elif kind == _ITER:
                self._resize_point(j)
            else:
                self._redist_done(j)
            self._schedule()
            if not heap and self._queue:
                raise SimulationError(
                    f"policy {self.app.name!r} left {len(self._queue)} job(s) queued on an "
                    f"idle machine (first: job {self._queue[0].job_id}, "
                    f"{self._queue[0].nprocs} slots of {self.total_slots})"
                )
        if self.progress is not None:
            self.progress(len(self.records), len(self.jobs))
        return SimResult(self.total_slots, self.records, self._busy_area, self.decisions,
                         self._idle_waiting)


def simulate(
    jobs: list[SimInput],
    total_slots: int,
    app: AppPolicy,
    remap: RemapPolicy | None = None,
    **kw,
) -> SimResult:
    """Run ``jobs`` through the given policies; see :class:`Simulator`."""
    return Simulator(jobs, total_slots, app, remap, **kw).run()

