"""The metrics of a run, one definition for the simulator, the daemon's history, the demo and the benchmarks.

A run is the scheduler core's event stream (``scheduler.core.state``: every event
carries ``t`` and ``busy``, the slots held after it) plus one
:class:`JobRecord` per ended job. From them (Sudarsan & Ribbens 2007 §4.2):

* utilization: busy slot-seconds / (slots x makespan), makespan from the first
  arrival to the last end; slots held during a redistribution count as busy
  (Sudarsan & Ribbens 2007 §4.2's footnote: CPU-seconds *assigned* to a running job);
* turnaround = end - arrival; wait = start - arrival;
* bounded slowdown = max(1, turnaround / max(run, 10 s)), with ``run`` the
  job's reference run time (the trace's at its requested size in the
  simulator; the measured ``end - start`` for a daemon's job); Feitelson et
  al.'s threshold of 10 s keeps very short jobs from dominating;
* resizes and seconds spent redistributing, summed over jobs;
* idle while waiting: idle slot-seconds while at least one job waits, as a
  fraction of slots x makespan (the holes EASY leaves for reservations);
* walltime kills: jobs killed at their deadline; past request: jobs that ran
  longer than the walltime they asked for (each under a limit a policy
  extended: ``scheduler.core.walltime``, "Wall-clock limits");
* big jobs (more than a quarter of the machine): their mean and worst wait and
  mean turnaround, who pays for a gain of the small ones;
* resizes per job;
* useful utilization (when every record has ``work``, as the simulator's
  do): the sequential seconds of work the jobs did (a job at ``p`` slots
  for ``dt`` seconds does ``S(p) dt``, ``S`` its speedup) over slots x
  makespan, i.e. utilization weighted by parallel efficiency. Utilization
  counts slots *held*; a job expanded past the point where processors add
  speed holds more than it uses, and useful utilization does not count that
  (it rises when a job shrinks to a more efficient size).
"""

from __future__ import annotations

import bisect
import statistics
from array import array
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["BSLD_TAU", "JobRecord", "Usage", "metrics"]

BSLD_TAU = 10.0


@dataclass(frozen=True, slots=True)
class JobRecord:
    job_id: int
    submit: float  # arrival in the queue
    start: float
    finish: float
    run_time: float  # reference run time for the bounded slowdown
    nprocs: int  # requested size
    resizes: int = 0
    redist_time: float = 0.0
    killed: bool = False  # at its walltime deadline
    work: float | None = None  # useful slot-seconds: the sequential seconds of work it did
    requested: float | None = None  # the walltime it asked for (None: none, or not known)

    @property
    def turnaround(self) -> float:
        return self.finish - self.submit

    @property
    def wait(self) -> float:
        return self.start - self.submit

    @property
    def bounded_slowdown(self) -> float:
        return max(1.0, self.turnaround / max(self.run_time, BSLD_TAU))


class Usage:
    """Busy slots over time, a step function fed the core's events in time order (``feed``)."""

    def __init__(self) -> None:
        self.t = array("d")
        self.busy = array("d")
        self._cum: array | None = None  # busy slot-seconds up to each step, built on demand

    def feed(self, t: float, busy: float) -> None:
        if self.busy and busy == self.busy[-1]:
            return
        self._cum = None
        if self.t and t == self.t[-1]:
            self.busy[-1] = busy
        else:
            self.t.append(t)
            self.busy.append(busy)

    def feed_events(self, events: Iterable[dict]) -> Usage:
        for e in events:
            self.feed(e["t"], e["busy"])
        return self

    def _at(self, x: float) -> float:
        """Busy slot-seconds from the first step to ``x``."""
        if self._cum is None:
            cum, acc = array("d", [0.0]), 0.0
            for i in range(1, len(self.t)):
                acc += self.busy[i - 1] * (self.t[i] - self.t[i - 1])
                cum.append(acc)
            self._cum = cum
        i = bisect.bisect_right(self.t, x) - 1
        if i < 0:
            return 0.0
        return self._cum[i] + self.busy[i] * (x - self.t[i])

    def area(self, t0: float, t1: float) -> float:
        """Busy slot-seconds over ``[t0, t1]``."""
        return self._at(t1) - self._at(t0) if t1 > t0 else 0.0

    def idle_while_waiting(self, waits: Iterable[tuple[float, float]], slots: int) -> float:
        """Idle slot-seconds over the union of the ``(arrival, start)`` intervals."""
        out, cur = 0.0, None
        for a, b in sorted(w for w in waits if w[1] > w[0]):
            if cur is not None and a <= cur[1]:
                cur[1] = max(cur[1], b)
                continue
            if cur is not None:
                out += slots * (cur[1] - cur[0]) - self.area(*cur)
            cur = [a, b]
        if cur is not None:
            out += slots * (cur[1] - cur[0]) - self.area(*cur)
        return out


def metrics(records: list[JobRecord], usage: Usage, slots: int, t0: float | None = None,
            t1: float | None = None, waits: Iterable[tuple[float, float]] | None = None) -> dict[str, float]:
    """The metrics above. ``t0``/``t1`` default to the records' first arrival and last end;
    ``waits`` (arrival, start) default to the records' (pass them to count jobs still waiting)."""
    r = records
    if not r:
        return {"jobs": 0}
    t0 = min(x.submit for x in r) if t0 is None else t0
    t1 = max(x.finish for x in r) if t1 is None else t1
    span = max(t1 - t0, 1e-12)
    ta = [x.turnaround for x in r]
    idle = usage.idle_while_waiting(((x.submit, x.start) for x in r) if waits is None else waits, slots)
    big = [x for x in r if x.nprocs > slots // 4]
    resizes = sum(x.resizes for x in r)
    return {
        "jobs": len(r),
        "makespan": span,
        "utilization": usage.area(t0, t1) / (slots * span),
        "mean_turnaround": statistics.fmean(ta),
        "median_turnaround": statistics.median(ta),
        "mean_wait": statistics.fmean(x.wait for x in r),
        "median_wait": statistics.median(x.wait for x in r),
        "mean_bounded_slowdown": statistics.fmean(x.bounded_slowdown for x in r),
        "max_wait": max(x.wait for x in r),
        "resizes": resizes,
        "resizes_per_job": resizes / len(r),
        "redist_seconds": sum(x.redist_time for x in r),
        "idle_while_waiting": idle / (slots * span),
        "walltime_kills": sum(1 for x in r if x.killed),
        "past_request": sum(1 for x in r if x.requested is not None and not x.killed
                            and x.finish - x.start > x.requested * (1 + 1e-9) + 1e-6),
        "big_jobs": len(big),
        "big_jobs_mean_wait": statistics.fmean(x.wait for x in big) if big else 0.0,
        "big_jobs_worst_wait": max((x.wait for x in big), default=0.0),
        "big_jobs_mean_turnaround": statistics.fmean(x.turnaround for x in big) if big else 0.0,
        **({"useful_utilization": sum(x.work for x in r) / (slots * span)}
           if all(x.work is not None for x in r) else {}),
    }
