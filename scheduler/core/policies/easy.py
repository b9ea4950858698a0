"""EASY backfill (Lifka 1995; seed 001 §3.1 "simple backfill").

FCFS, and when the queue head does not fit: reserve for it the earliest time
at which enough slots will be free (the *shadow time*, from running jobs'
``start_time + walltime``), then start later jobs that fit now and either end
before the shadow time or use only slots the head will not need there.

Choices where the description is open (tested in ``tests/test_policy_reshape.py``):

* A running job without a walltime estimate is assumed to run forever; if the
  head can then never start, the shadow time is infinite and any job that
  fits now and has a walltime may backfill (it cannot delay an unbounded
  reservation).
* A backfill candidate without a walltime is treated as running forever: it
  may only use the *extra* slots.
* A running job is assumed to hold its current size until it ends
  (:func:`end_estimate`: ``start + walltime``; a resizable job running below
  its requested size gets the walltime scaled up for what is left of it).
  Without that scaling, a job started or shrunk below its size looks like it
  ends long before it does, EASY's reservations are wrong and squeezing
  loses (mean turnaround 0.87 of EASY's on lublin_256 instead of 1.32).
* Slots reserved by an expansion under way count as held until the last
  resizable job ends (:func:`shadow_time`). Before this, a head needing the
  whole machine saw an infinite shadow time during every expansion and EASY
  backfilled without bound: under borrowing, jobs of more than a quarter of
  Mira waited up to 10 times longer than under plain EASY.

Parameters, off by default (preset ``"easy-plus"`` sets both; it is the
partner of the remap preset ``"reshape-plus"``):

* ``give_back``: the reservation is computed as if every resizable job above
  its starting size, and every resize under way, had already given its
  extra slots back (:func:`give_back_view`), the same view the remap policy's
  ``borrow`` rule uses, which returns them by the head's shadow time.
  Without it EASY's shadow time is later than the remap policy's, and it
  backfills more than the head's reservation allows.
* ``squeeze`` (seed 001 §1: "squeezing them into processors that are
  available, and then adding more processors later"): when the head still
  does not fit after EASY's starts and is resizable, it starts at the largest
  legal size that fits in the free slots, if that is at least its
  ``min_procs`` (preset ``easy-squeeze``).
"""

from __future__ import annotations

import math
from dataclasses import replace
from functools import partial

from scheduler.core.policy import AppPolicy, RunningJob, Snapshot, Start, legal_sizes, register_app_policy

__all__ = ["EasyBackfill", "end_estimate", "give_back_view", "shadow_time"]


def give_back_view(snap: Snapshot) -> Snapshot:
    """``snap`` with every resizable job at most at its starting size and resizes under way done.

    The slots above a job's starting size (the first size in its history), and
    those reserved by expansions under way, count as free.
    """
    free = snap.total_slots - sum(r.nprocs for r in snap.running)  # with expansions under way
    running = []
    for r in snap.running:
        n = r.nprocs if r.pending_shrink is None else r.pending_shrink
        base = r.profile.history[0] if r.profile.history else r.spec.nprocs
        if r.spec.resizable and n > base:
            n = base
        free += r.nprocs - n
        running.append(replace(r, nprocs=n) if n != r.nprocs else r)
    return replace(snap, free_slots=free, running=tuple(running))


def end_estimate(r: RunningJob, now: float) -> float:
    """When ``r`` ends at the latest: ``start + walltime``, inf without a walltime.

    The walltime is for the requested size ``n``; a resizable job running
    below it at ``p`` is assumed to need ``n / p`` times as long for what is
    left (linear speedup is the worst case), what is left being the fraction
    of its iterations not done (all of them if the count is unknown).
    """
    w = r.spec.walltime
    if w is None:
        return math.inf
    n, p = r.spec.nprocs, r.nprocs
    if not r.spec.resizable or p >= n:
        return r.start_time + w
    if r.spec.iterations:
        left = max(r.spec.iterations - r.iterations_done, 0) / r.spec.iterations
        return max(now, r.start_time) + left * w * n / p
    return r.start_time + w * n / p


def shadow_time(snap: Snapshot, need: int) -> tuple[float, int]:
    """``(time, extra)``: when ``need`` slots will be free, and how many more are free then.

    Slots neither free nor in a running job's size are reserved by an
    expansion under way (jobs show their old size until it ends); a snapshot
    does not say whose, so they count as freed when the last resizable job
    with a walltime ends. (Ignoring them made the shadow time infinite for a
    head that needs the whole machine, and EASY then backfilled without bound.)
    """
    free = snap.free_slots
    if free >= need:
        return snap.now, free - need
    ends = [(end_estimate(r, snap.now), r.nprocs) for r in snap.running]
    held = snap.total_slots - free - sum(r.nprocs for r in snap.running)
    if held > 0:  # reserved by expansions under way: free when the last resizable job ends
        ends.append((max((end_estimate(r, snap.now) for r in snap.running if r.spec.resizable),
                         default=math.inf), held))
    ends.sort()
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

    def __init__(self, give_back: bool = False, squeeze: bool = False):
        self.give_back = give_back
        self.squeeze = squeeze

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
        if self.give_back:
            view = give_back_view(view)
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
        if self.squeeze and head.resizable and free >= head.min_procs:
            fits = [p for p in legal_sizes(head, snap.total_slots) if p <= min(free, head.nprocs)]
            if fits:
                out.append(Start(head.job_id, fits[-1]))
        return out


register_app_policy("easy-plus")(partial(EasyBackfill, give_back=True, squeeze=True))
register_app_policy("easy-squeeze")(partial(EasyBackfill, squeeze=True))
