"""The trace simulator: a virtual clock around the daemon's own scheduler core.

The simulator holds no scheduling state of its own. Its jobs live in a
:class:`scheduler.core.state.ClusterState`, the object the daemon serves, built
``strict`` (a policy decision that cannot be applied raises
:class:`scheduler.core.actions.PolicyError` instead of being skipped), and the
simulator plays the parts the daemon's outside world plays: the users who
submit, the jobs that run, report their iterations, redistribute and exit.

* a job's arrival is ``submit`` at its trace submit time, then a scheduling
  pass (the daemon's ``tick``);
* a started job (the core's :class:`~scheduler.core.actions.Launch`) runs for its
  model's time: rigid jobs, and every job when no remap policy is given (the
  daemon's ``static``: it always continues), exit after ``run_time``;
  resizable jobs report at each iteration boundary (``resize_point``, seed
  001 §3.1) and, when advised to expand or shrink, redistribute for
  ``RedistCost.cost`` seconds before confirming (``resized``), during which
  they hold ``max(p, q)`` slots exactly as the daemon's jobs do; after the
  last iteration they report ``finished`` and exit; ``start_latency``: a
  started job holds its slots that long before its first iteration (a live
  job's process start-up, large against a time-scaled workload's iterations);
* each instant is one batch: every event at time t is applied (ends first,
  then ends of redistributions, arrivals, resize points and kills, each kind
  in job-id order), then the Application Scheduler runs once (the daemon's
  tick runs after every batch of requests). The order in which simultaneous
  events were created (a trace's line order; whether a job's last iteration
  is a resize point) therefore decides nothing;
* walltimes are enforced as a resource manager does: a job still running
  at its deadline is killed there (the core's ``expire``, which the daemon
  calls with its ``--overtime`` grace); its record says so and how much of
  its work it did. ``limits`` (:mod:`scheduler.core.walltime`, "Wall-clock
  limits"): by default a job's limit is the walltime it asked for, counted
  from its start, unless the policy that started it set a longer one (as a
  manager's ``scontrol update TimeLimit`` does, charged by the walltime rule);
  resizes move it by the rule; ``"stretched"`` gives every start below the
  requested size the rule's longer limit.

Every run checks EASY's guarantee: the core counts each job that starts
later than the first reservation its Application Scheduler made for it
(``late_starts`` in the metrics, with the first 100 cases in
:attr:`SimResult.late_starts`).

Events live in a heap keyed by ``(time, seq)``; the events of one instant are
taken together and put in the canonical order above. ``notice``: jobs are
submitted that long before they arrive (``arrival_delay``, as the workload
benchmark's announced row submits): the core holds them as waiting jobs until then. A policy
that leaves jobs queued on an idle machine with nothing left to happen is a
:class:`PolicyError` rather than an endless loop. Metrics are
:mod:`scheduler.core.metrics`' over the core's events and one record per ended job.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from scheduler.core.actions import Decision, Kill, Launch, PolicyError
from scheduler.core.jobfile import JobDesc
from scheduler.core.metrics import JobRecord, Usage, metrics
from scheduler.core.policy import AppPolicy, JobSpec, RemapPolicy, remap_policy
from scheduler.core.pool import Node, Pool
from scheduler.core.state import ClusterState
from scheduler.core.walltime import kill_time
from scheduler.lab.jobmodel import RedistCost, RedistModel, SimInput

__all__ = ["Decision", "PolicyError", "SimResult", "Simulator", "desc_of", "simulate"]

_ARRIVE, _ITER, _REDIST, _FINISH, _KILL = 0, 1, 2, 3, 4
_LAST = 1 << 62  # a kill at time t comes after every other event at t (a job ending at its deadline is not killed)
#: an event's place in its instant (:meth:`Simulator.run`; a resize point that ends its job counts as an end)
_PHASE = {_FINISH: 0, _REDIST: 1, _ARRIVE: 2, _ITER: 3, _KILL: 4}


def desc_of(spec: JobSpec) -> JobDesc:
    """The validated job description (``scheduler.core.jobfile``) a simulated job is submitted with."""
    return JobDesc(name=spec.name, command=spec.command, nprocs=spec.nprocs, min_procs=spec.min_procs,
                   max_procs=spec.max_procs, sizes=spec.sizes, divides=spec.divides, topology=spec.topology,
                   resizable=spec.resizable, walltime=spec.walltime, iterations=spec.iterations)


@dataclass
class SimResult:
    total_slots: int
    records: list[JobRecord]
    usage: Usage
    decisions: list[Decision] = field(default_factory=list)
    policy_errors: int = 0
    late_starts: list[dict] = field(default_factory=list)  # the first 100 starts after their reservation
    late_start_count: int = 0

    limit_extensions: int = 0  # jobs a policy started with a time limit beyond their walltime

    def metrics(self) -> dict[str, float]:
        m = metrics(self.records, self.usage, self.total_slots)
        m["limit_extensions"] = self.limit_extensions
        m["late_starts"] = self.late_start_count
        m["max_late_seconds"] = max((v["late"] for v in self.late_starts), default=0.0)
        return m


@dataclass
class Simulator:
    jobs: list[SimInput]
    total_slots: int
    app: AppPolicy
    remap: RemapPolicy | None = None
    redist: RedistCost = field(default_factory=RedistModel)
    record: bool = False
    progress: Callable[[int, int], None] | None = None
    check: bool = False  # check the core's invariants (``ClusterState.validate``) after every event
    keep_ended: bool = True  # False: an ended job leaves the core once recorded (memory flat in the trace's length)
    limits: str = "wall-clock"  # or "stretched" (scheduler.core.walltime, "Wall-clock limits")
    start_latency: float = 0.0  # seconds from a start to the job's first iteration (process start-up), slots held
    notice: float = 0.0  # jobs are submitted this long before they arrive (an arrival delay), from the first arrival

    def __post_init__(self) -> None:
        if self.total_slots < 1:
            raise ValueError(f"total_slots must be >= 1, got {self.total_slots}")
        if not self.start_latency >= 0:
            raise ValueError(f"start_latency must be >= 0 seconds, got {self.start_latency!r}")
        if not self.notice >= 0:
            raise ValueError(f"notice must be >= 0 seconds, got {self.notice!r}")
        self.state = ClusterState(Pool([Node("sim", self.total_slots)]), self.app,
                                  self.remap or remap_policy("static"), strict=True, record=self.record,
                                  limits=self.limits)
        self._inp = {j.spec.job_id: j for j in self.jobs}
        if len(self._inp) != len(self.jobs):
            raise ValueError("job ids must be unique")
        for j in self.jobs:  # fail before simulating anything
            self.state.check_admissible(desc_of(j.spec))
        self._heap: list[tuple[float, int, int, int]] = []
        # arrivals enter the heap one at a time, each with the sequence number it would have had if all were
        # pushed first (its rank by submit time), and every other event numbers after them: the same order
        self._arrivals = sorted(self.jobs, key=lambda j: j.spec.submit_time)
        self._next_arrival = 0
        self._seq = len(self._arrivals)
        self._iters: dict[int, int] = {}
        self._target: dict[int, tuple[int, int]] = {}  # job -> (old, new) of the redistribution under way
        # job -> (anchor, size, seconds, k): its k-th iteration at this size since ``anchor`` (its start or the end
        # of its last resize) is under way; iterations end at anchor + (k + 1) * seconds, not at a running sum,
        # so a job that never resizes ends at exactly start + run time, as it does without resize points
        self._iter_at: dict[int, tuple[float, int, float, int]] = {}
        self._kill_at: dict[int, float] = {}  # job -> deadline its kill event is queued for
        self._late: list[dict] = []
        self.usage = Usage()
        self.records: list[JobRecord] = []

    def _push_arrival(self) -> None:
        i = self._next_arrival
        if i < len(self._arrivals):
            inp = self._arrivals[i]
            t = inp.spec.submit_time
            if self.notice:  # announced ahead of its arrival, not before the first one
                t = max(self._arrivals[0].spec.submit_time, t - self.notice)
            heapq.heappush(self._heap, (t, i + 1, _ARRIVE, inp.spec.job_id))
            self._next_arrival = i + 1

    def _push(self, t: float, kind: int, jid: int) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (t, self._seq + (_LAST if kind == _KILL else 0), kind, jid))

    def _iterate(self, jid: int, now: float, p: int) -> None:
        t = self._inp[jid].model.iter_time(p)
        self._iter_at[jid] = (now, p, t, 0)
        self._push(now + t, _ITER, jid)

    def _done(self, jid: int, now: float) -> float:
        """Fraction of its work a job has done by ``now``."""
        inp, j = self._inp[jid], self.state.jobs[jid]
        m = inp.model
        if jid not in self._iters:  # runs straight through at its start size
            return min(1.0, max(0.0, now - j.start_time - self.start_latency) / m.run_time(j.nprocs or inp.spec.nprocs))
        part = 0.0
        if jid in self._iter_at:
            anchor, _, it, k = self._iter_at[jid]
            part = min(1.0, max(0.0, now - anchor - k * it) / it)
        return min(1.0, (self._iters[jid] + part) / m.iterations)

    def _perform(self, actions: list[Launch | Kill], now: float) -> None:
        for a in actions:
            jid = a.job_id
            if isinstance(a, Kill):  # past its walltime (the only reason a simulated job is killed)
                self._record(jid, now, killed=True)
                continue
            n = self.state.jobs[jid].nprocs
            m = self._inp[jid].model
            t0 = now + self.start_latency
            if self.remap is None or not self._inp[jid].spec.resizable:
                self._push(t0 + m.run_time(n), _FINISH, jid)
            else:
                self._iters[jid] = 0
                self._iterate(jid, t0, n)

    def _record(self, jid: int, now: float, killed: bool = False) -> None:
        j, inp = self.state.jobs[jid], self._inp[jid]
        done = self._done(jid, now) if killed else 1.0
        self.records.append(JobRecord(jid, j.arrival_time, j.start_time, now, inp.run_time,
                                      inp.spec.nprocs, j.resizes, j.redist_seconds, killed,
                                      inp.model.work * inp.model.iterations * done, inp.spec.walltime))
        self._iters.pop(jid, None)
        self._iter_at.pop(jid, None)
        if not self.keep_ended:
            self.state.forget(jid)
            self._kill_at.pop(jid, None)
            del self._inp[jid]
        if self.progress is not None and len(self.records) % 500 == 0:
            self.progress(len(self.records), len(self.jobs))

    def _exit(self, jid: int, now: float) -> list[Launch | Kill]:
        st = self.state
        st.finished(jid, "done", None, now)
        acts = st.exited(jid, 0, now)
        self._record(jid, now)
        return acts

    def _resize_point(self, jid: int, now: float) -> list[Launch | Kill]:
        st = self.state
        self._iters[jid] += 1
        if self._iters[jid] >= self._inp[jid].model.iterations:
            return self._exit(jid, now)
        anchor, p, t, k = self._iter_at[jid]  # the iteration that just ended
        _, q, _, _ = st.handle_resize_point(jid, p, self._iters[jid], t, now)  # the core's resize_point
        if q != p:
            self._target[jid] = (p, q)
            self._iter_at.pop(jid, None)
            self._push(now + self.redist.cost(self._inp[jid].spec.nprocs, p, q), _REDIST, jid)
        else:  # the next iteration at the same size
            self._iter_at[jid] = (anchor, p, t, k + 1)
            self._push(anchor + (k + 2) * t, _ITER, jid)
        return []

    def _redistributed(self, jid: int, now: float) -> list[Launch | Kill]:
        p, q = self._target.pop(jid)
        acts = self.state.resized(jid, p, q, self.redist.cost(self._inp[jid].spec.nprocs, p, q), None, now)
        self._iterate(jid, now, q)
        return acts

    def _watch_deadlines(self) -> None:
        """Queue a kill event at the deadline of every job whose deadline changed."""
        for jid in self.state.dirty:
            j = self.state.jobs[jid]
            if j.state == "running" and j.deadline is not None and self._kill_at.get(jid) != j.deadline:
                self._kill_at[jid] = j.deadline
                self._push(kill_time(j.deadline), _KILL, jid)

    def _phase(self, kind: int, jid: int) -> int:
        """Where an event goes in its instant (:meth:`run`): ends, ends of redistributions, arrivals,
        resize points, kills."""
        if kind == _ITER:
            n = self._iters.get(jid)
            return 0 if n is not None and n + 1 >= self._inp[jid].model.iterations else 3
        return _PHASE[kind]

    def _handle(self, kind: int, jid: int, now: float) -> list[Launch | Kill]:
        """One event, with the core's scheduling pass deferred to the end of its instant."""
        st = self.state
        if kind == _ARRIVE:
            if jid in st.jobs:  # announced earlier (``notice``): it joins the queue now
                return []
            st.submit(self._desc(jid, now), now, job_id=jid)
            j = st.jobs[jid]
            if j.arrival_time > now:  # announced: it joins the queue at its trace time
                self._push(j.arrival_time, _ARRIVE, jid)
            return []
        j = st.jobs.get(jid)
        if j is None or j.state != "running":
            return []  # the event of a job killed at its deadline
        if kind == _KILL:
            return [] if now != kill_time(j.deadline) else st.expire(now)  # else its deadline moved
        if kind == _FINISH:
            return self._exit(jid, now)
        if kind == _ITER:
            return self._resize_point(jid, now)
        return self._redistributed(jid, now)

    def _desc(self, jid: int, now: float) -> JobDesc:
        spec = self._inp[jid].spec
        desc = desc_of(spec)
        if spec.submit_time > now:  # submitted ``notice`` seconds ahead of its arrival
            desc = replace(desc, arrival_delay=spec.submit_time - now)
        return desc

    def run(self) -> SimResult:
        st = self.state
        self._push_arrival()
        heap = self._heap
        phase = self._phase
        while heap:
            now = heap[0][0]
            batch = []
            while heap and heap[0][0] == now:  # the whole instant, arrivals pushed as they are reached
                ev = heapq.heappop(heap)
                if ev[2] == _ARRIVE and ev[1] <= len(self._arrivals):
                    self._push_arrival()
                batch.append(ev)
            if len(batch) > 1:  # a canonical order: ends first, then by job id, whatever the order of creation
                batch.sort(key=lambda e: (phase(e[2], e[3]), e[3], e[1]))
            st.defer_passes = True
            acts: list[Launch | Kill] = []
            try:
                for _, _, kind, jid in batch:
                    acts += self._handle(kind, jid, now)
            finally:
                st.defer_passes = False
            acts += st.tick(now)  # one scheduling pass for the instant
            self._perform(acts, now)
            for e in st.events:
                self.usage.feed(e["t"], e["busy"])
            st.events.clear()
            self._watch_deadlines()
            st.dirty.clear()
            if self.check:
                st.validate()
            if not heap and st.table.queued:
                first = st.queue()[0]
                raise PolicyError(
                    f"policy {self.app.name!r} left {len(st.table.queued)} job(s) queued on an idle machine "
                    f"(first: job {first.job_id}, {first.desc.nprocs} slots of {self.total_slots})")
        if self.progress is not None:
            self.progress(len(self.records), len(self.jobs))
        return SimResult(self.total_slots, self.records, self.usage, st.decisions or [],
                         st.policy_error_count, list(st.late_starts), st.late_start_count, st.limit_extensions)


def simulate(
    jobs: list[SimInput],
    total_slots: int,
    app: AppPolicy,
    remap: RemapPolicy | None = None,
    **kw,
) -> SimResult:
    """Run ``jobs`` through the given policies; see :class:`Simulator`."""
    return Simulator(jobs, total_slots, app, remap, **kw).run()
