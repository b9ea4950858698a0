"""Per-job records and the metrics of a simulation run.

* utilization: busy slot-seconds / (slots x makespan), makespan from the first
  submission to the last completion; slots held during a redistribution count
  as busy;
* turnaround = finish - submit; wait = start - submit;
* bounded slowdown = max(1, turnaround / max(run, 10 s)), with ``run`` the
  job's trace run time at its requested size (Feitelson et al.'s threshold
  of 10 s keeps very short jobs from dominating);
* resizes and seconds spent redistributing, summed over jobs;
* idle while waiting: idle slot-seconds while at least one job is queued, as
  a fraction of slots x makespan (the holes EASY leaves for reservations).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

__all__ = ["JobRecord", "SimResult"]

BSLD_TAU = 10.0


@dataclass(frozen=True)
class JobRecord:
    job_id: int
    submit: float
    start: float
    finish: float
    run_time: float  # trace run time at the requested size
    nprocs: int  # requested size
    resizes: int = 0
    redist_time: float = 0.0

    @property
    def turnaround(self) -> float:
        return self.finish - self.submit

    @property
    def wait(self) -> float:
        return self.start - self.submit

    @property
    def bounded_slowdown(self) -> float:
        return max(1.0, self.turnaround / max(self.run_time, BSLD_TAU))


@dataclass
class SimResult:
    total_slots: int
    records: list[JobRecord]
    busy_area: float
    decisions: list = field(default_factory=list)
    idle_waiting_area: float = 0.0

    def metrics(self) -> dict[str, float]:
        r = self.records
        if not r:
            return {"jobs": 0}
        t0 = min(x.submit for x in r)
        t1 = max(x.finish for x in r)
        span = max(t1 - t0, 1e-12)
        ta = [x.turnaround for x in r]
        return {
            "jobs": len(r),
            "makespan": span,
            "utilization": self.busy_area / (self.total_slots * span),
            "mean_turnaround": statistics.fmean(ta),
            "median_turnaround": statistics.median(ta),
            "mean_wait": statistics.fmean(x.wait for x in r),
            "median_wait": statistics.median(x.wait for x in r),
            "mean_bounded_slowdown": statistics.fmean(x.bounded_slowdown for x in r),
            "resizes": sum(x.resizes for x in r),
            "redist_seconds": sum(x.redist_time for x in r),
            "idle_while_waiting": self.idle_waiting_area / (self.total_slots * span),
        }
