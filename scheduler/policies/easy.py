"""EASY backfill (Lifka 1995; seed 001 §3.1 "simple backfill").

FCFS, and when the queue head does not fit: reserve for it the earliest time
at which enough slots will be free (the *shadow time*, from running jobs'
``start_time + walltime``), then start later jobs that fit now and either end
before the shadow time or use only slots the head will not need there.

Choices where the description is open (tested in ``tests/test_policy_easy.py``):

* A running job without a walltime estimate is assumed to run forever; if the
  head can then never start, the shadow time is infinite and any job that
  fits now and has a walltime may backfill (it cannot delay an unbounded
  reservation).
* A backfill candidate without a walltime is treated as running forever: it
  may only use the *extra* slots.
* A running job is assumed to hold its current size until it ends.
"""

from __future__ import annotations

import math

from ..policy import AppPolicy, RunningJob, Snapshot, Start, register_app_policy

__all__ = ["EasyBackfill", "shadow_time"]


def shadow_time(snap: Snapshot, need: int) -> tuple[float, int]:
    """``(time, extra)``: when ``need`` slots will be free, and how many more are free then."""
    free = snap.free_slots
    if free >= need:
        return snap.now, free - need
    ends = sorted(
        (r.start_time + r.spec.walltime if r.spec.walltime is not None else math.inf, r.nprocs)
        for r in snap.running
    )
    for t, p in ends:
        if math.isinf(t):
            break
        free += p
        if free >= need:
            return max(t, snap.now), free - need
    return math.inf, 0


@register_app_policy("easy")
class EasyBackfill(AppPolicy):
    name = "easy"

    def schedule(self, snap: Snapshot) -> list[Start]:
        free = snap.free_slots
        out: list[Start] = []
        queue = list(snap.queue)
        while queue and queue[0].nprocs <= free:
            out.append(Start(queue[0].job_id, queue[0].nprocs))
            free -= queue.pop(0).nprocs
        if not queue:
            return out
        head = queue[0]
        # reservation for the head, on the state after the FCFS starts above
        started = {s.job_id for s in out}
        running = list(snap.running)
        for spec in snap.queue:
            if spec.job_id in started:
                running.append(RunningJob(spec, spec.nprocs, snap.now))
        view = Snapshot(snap.now, snap.total_slots, free, tuple(queue), tuple(running))
        shadow, extra = shadow_time(view, head.nprocs)
        for spec in queue[1:]:
            if spec.nprocs > free:
                continue
            ends_in_time = spec.walltime is not None and snap.now + spec.walltime <= shadow
            if ends_in_time or spec.nprocs <= extra:
                out.append(Start(spec.job_id, spec.nprocs))
                free -= spec.nprocs
                if not ends_in_time:
                    extra -= spec.nprocs
        return out
