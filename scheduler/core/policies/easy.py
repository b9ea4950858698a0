"""EASY backfill (Lifka 1995; Sudarsan & Ribbens 2007 §3.1 "simple backfill").

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
* ``squeeze`` (Sudarsan & Ribbens 2007 §1: "squeezing them into processors that are
  available, and then adding more processors later"): when the head still
  does not fit after EASY's starts and is resizable, it starts at the largest
  legal size that fits in the free slots, if that is at least its
  ``min_procs`` (preset ``easy-squeeze``), with the time limit the walltime
  rule allows there (:func:`scheduler.core.walltime.moldable_start`: a
  manager's ``scontrol update TimeLimit``, ``walltime * n / p``), within which
  it ends even at its squeezed size.

Cost (a head node with 10,000 queued jobs must still answer in milliseconds). A
pass costs the jobs it looks at, not the queue's length:
the FCFS starts, the head, the running jobs' releases, and the backfill
candidates, which the core's size index
(:class:`scheduler.core.jobtable.SizeIndex`, through
:meth:`scheduler.core.policy.Snapshot.fitting`) yields in queue order among
the jobs that fit the free slots only; with no free slot a pass tries none.
``window`` (default :data:`WINDOW` = 1,000, ``None``: no bound) bounds the
candidates tried per pass, as Slurm's ``bf_max_job_test`` does: a queue of
small jobs that fit but would delay the head costs at most that many tests.
Measured on the shared traces (50% malleable, seed 0), a pass never tried more
than 209 candidates on lublin_256 and 588 on Mira (EASY and every EASY
preset), so the window changes no decision there
(``python -m benchmarks.decisions``); its cost on the live daemon is in
``python -m benchmarks.scale``.
"""

from __future__ import annotations

import math
from functools import partial

from scheduler.core.policy import (
    AppPolicy,
    JobSpec,
    Reserve,
    RunningJob,
    Snapshot,
    Start,
    legal_sizes,
    register_app_policy,
)
from scheduler.core.walltime import deadline_after, expected_redist, moldable_start, rate, start_deadline

__all__ = ["EasyBackfill", "end_estimate", "releases", "shadow_time"]


def _give_back_at(r: RunningJob, target: int, now: float) -> float:
    """When ``r`` will be down to ``target``: its next resize point (the last one plus an
    iteration at its size) plus one redistribution
    (:func:`scheduler.core.walltime.expected_redist`); inf if no iteration was measured."""
    t_iter = r.profile.iter_time.get(r.nprocs)
    if t_iter is None:
        return math.inf
    last = r.point_time if r.point_time is not None else r.start_time
    return max(now, last + t_iter) + expected_redist(r, target)


def _gives_back(r: RunningJob) -> bool:
    """Whether :func:`_giving_back` is not None for ``r`` (at any time), without computing when."""
    n, prof = r.nprocs, r.profile
    if r.pending_shrink is None and n <= (prof.history[0] if prof.history else r.spec.nprocs):
        return False  # at or below its starting size, no shrink under way
    return r.spec.resizable and prof.iter_time.get(n) is not None and (
        (r.pending_shrink is not None and r.pending_shrink < n)
        or n > (prof.history[0] if prof.history else r.spec.nprocs))


def _steady(r: RunningJob, now: float) -> bool:
    """For a job giving slots back (:func:`_gives_back`) whose deadline is not past: whether
    :func:`_giving_back` says the same at ``now`` as at any earlier time since its last resize point:
    its next resize point is not past (``max(now, last + t_iter)`` does not move) and its deadline at
    the smaller size is its deadline (:func:`scheduler.core.walltime.deadline_after`: the smaller size
    spends its budget no slower), or it has none."""
    last = r.point_time if r.point_time is not None else r.start_time
    if last + r.profile.iter_time[r.nprocs] < now:
        return False
    if r.deadline is None:
        return True
    n = r.nprocs
    base = r.profile.history[0] if r.profile.history else r.spec.nprocs
    target = min(n, base, r.pending_shrink if r.pending_shrink is not None else n)
    return rate(r.spec.nprocs, target) >= rate(r.spec.nprocs, n)


def _giving_back(r: RunningJob, now: float) -> tuple[float, int, float, int] | None:
    """``(back, slots, end, target)`` if :func:`releases` with ``give_back`` counts ``r`` as giving
    ``slots`` back at ``back`` and keeping ``target`` until ``end``; None if it releases all its slots
    at its end."""
    if not r.spec.resizable:
        return None
    n = r.nprocs
    base = r.profile.history[0] if r.profile.history else r.spec.nprocs
    target = min(n, base, r.pending_shrink if r.pending_shrink is not None else n)
    back = _give_back_at(r, target, now) if target < n else math.inf
    if math.isinf(back):
        return None
    end = (deadline_after(r.deadline, r.spec.nprocs, n, target, now) if r.deadline is not None
           else end_estimate(r, now))
    return back, n - target, end, target


def releases(snap: Snapshot, give_back: bool = False) -> list[tuple[float, int]]:
    """``(time, slots)`` each running job releases, by the latest time it will (unsorted).

    A job releases its slots at :func:`end_estimate`. With ``give_back``, a
    resizable job above its starting size (the first size in its history), or
    with a shrink requested or under way, releases the slots above that size
    at its next resize point plus one redistribution (:func:`_give_back_at`)
    and the rest at the deadline it will have at the smaller size
    (:func:`scheduler.core.walltime.deadline_after`): the view in which the
    remap policy's borrowers promise to give back. Slots neither free nor in
    a job's size are reserved by an expansion under way (jobs show their old
    size until it ends); a snapshot does not say whose, so they count as freed
    when the last resizable job gives back (``give_back``) or ends. (Ignoring
    them made the shadow time infinite for a head that needs the whole
    machine, and EASY then backfilled without bound.)
    """
    now = snap.now
    out = []
    last_resizable = -math.inf
    busy = 0
    for r in snap.running:
        n = r.nprocs
        busy += n
        if give_back and r.spec.resizable:
            g = _giving_back(r, now)
            if g is not None:
                back, slots, end, target = g
                out += [(back, slots), (end, target)]
                last_resizable = max(last_resizable, back)
                continue
        d = r.deadline
        end = (d if d >= now else now) if d is not None else end_estimate(r, now)  # end_estimate, inlined
        out.append((end, n))
        if r.spec.resizable and end > last_resizable:
            last_resizable = end
    held = snap.total_slots - snap.free_slots - busy
    if held > 0:
        out.append((last_resizable if last_resizable > -math.inf else math.inf, held))
    return out


def end_estimate(r: RunningJob, now: float) -> float:
    """When ``r`` ends at the latest: its deadline (:mod:`scheduler.core.walltime`), inf without a walltime.

    A view without a tracked deadline (a job just started in the policy's own
    view, or built by hand) uses the rule at a constant size: ``start +
    walltime * n / p`` below the requested size ``n``, ``start + walltime`` at
    or above it.
    """
    if r.deadline is not None:
        return max(r.deadline, now)
    w = r.spec.walltime
    if w is None:
        return math.inf
    return start_deadline(w, r.spec.nprocs, r.nprocs, r.start_time)


def shadow_time(snap: Snapshot, need: int, give_back: bool = False) -> tuple[float, int]:
    """``(time, extra)``: when ``need`` slots will be free (:func:`releases`), and how many more are free then."""
    free = snap.free_slots
    if free >= need:
        return snap.now, free - need
    for t, p in sorted(releases(snap, give_back)):
        if math.isinf(t):
            break
        free += p
        if free >= need:
            return max(t, snap.now), free - need
    return math.inf, 0


WINDOW = 1000  # backfill tries at most this many queued jobs per pass (Slurm's bf_max_job_test)


@register_app_policy("easy")
class EasyBackfill(AppPolicy):
    name = "easy"

    def __init__(self, give_back: bool = False, squeeze: bool = False, window: int | None = WINDOW):
        if window is not None and (isinstance(window, bool) or not isinstance(window, int) or window < 1):
            raise ValueError(f"window must be a positive number of jobs or None (no bound), got {window!r}")
        self.give_back = give_back
        self.squeeze = squeeze
        self.window = window

    def schedule(self, snap: Snapshot) -> list[Start | Reserve]:
        free = snap.free_slots
        out: list[Start | Reserve] = []
        queue = snap.queue
        n_queue = len(queue)
        k = 0  # FCFS: the first k queued jobs start
        head = queue[0] if n_queue else None
        while head is not None and head.nprocs <= free:
            out.append(Start(head.job_id, head.nprocs))
            free -= head.nprocs
            k += 1
            head = queue[k] if k < n_queue else None
        if head is None:
            return out
        if k == 0 and self._nothing_to_backfill(snap, free):
            # the head keeps the reservation it holds and no queued job fits the free slots: nothing
            # can backfill, whatever the shadow time, so it is not recomputed (most passes of a busy
            # machine; the core keeps a job's first reservation, so this Reserve changes nothing)
            out.append(Reserve(head.job_id, snap.reserved))
            return out + self._squeeze(snap, head, free)
        # reservation for the head, on the state after the FCFS starts above
        view = snap
        if k:  # releases read the running jobs and the free slots, not the queue
            running = snap.running + tuple(
                RunningJob(spec, spec.nprocs, snap.now,
                           deadline=start_deadline(spec.walltime, spec.nprocs, spec.nprocs, snap.now))
                for spec in queue[:k])
            view = Snapshot(snap.now, snap.total_slots, free, (head,), running)
        shadow, extra = shadow_time(view, head.nprocs, self.give_back)
        if snap.reserved is not None and k == 0 and snap.reserved < shadow:
            shadow, extra = snap.reserved, 0  # late already: backfill nothing past the reservation
        if not math.isinf(shadow):
            out.append(Reserve(head.job_id, shadow))
        # backfill: the jobs behind the head that fit the free slots, in queue order (through the
        # core's size index, not the whole queue); jobs ahead of the head have started
        skip = {s.job_id for s in queue[:k + 1]} if k else {head.job_id}
        tried, window = 0, self.window
        # only jobs that could start: a walltime ending by the shadow time (a superset of the exact test
        # below, by a rounding margin) or a size within the extra slots; the test below decides
        within = shadow - snap.now + 1e-12 * (abs(shadow) + abs(snap.now)) + 1e-12
        for spec in snap.fitting(free, within, extra) if free > 0 else ():
            if free <= 0:  # sizes are >= 1: nothing more fits
                break
            if spec.nprocs > free or spec.job_id in skip:
                continue
            if window is not None and tried >= window:
                break
            tried += 1
            ends_in_time = spec.walltime is not None and snap.now + spec.walltime <= shadow
            if ends_in_time or spec.nprocs <= extra:
                out.append(Start(spec.job_id, spec.nprocs))
                free -= spec.nprocs
                if not ends_in_time:
                    extra -= spec.nprocs
        return out + self._squeeze(snap, head, free)

    def idle_since(self, before: Snapshot, snap: Snapshot) -> bool:
        """A pass starts nothing if the last one started nothing and since then only the clock moved
        and running jobs reported iterations: the same queue (the core's view object), free slots
        and head reservation, and every running job with the same size, start, deadline and
        pending shrink. The release times do not move then (none is in the past, and with
        ``give_back`` no job is giving slots back, whose release depends on its progress and on
        the clock), so the shadow time and the extra slots are the same and the jobs that end by
        the shadow time fewer; the head, FCFS and the squeeze see what they saw. With
        ``give_back``, a job giving slots back must give them back when it did (its release times,
        computed as :func:`releases` does, the same at both times)."""
        if (snap.queue is not before.queue or snap.free_slots != before.free_slots or snap.now < before.now
                or snap.reserved != before.reserved or snap.total_slots != before.total_slots):
            return False
        ra, rb = before.running, snap.running
        if len(ra) != len(rb):
            return False
        now, then, give_back = snap.now, before.now, self.give_back
        for a, b in zip(ra, rb, strict=True):
            if b.deadline is not None and b.deadline < now:
                return False
            if a is b:  # the same view: only the clock can move its release times
                if give_back and now != then and _gives_back(b) and not _steady(b, now):
                    return False
            elif (a.spec is not b.spec or a.nprocs != b.nprocs or a.start_time != b.start_time
                  or a.deadline != b.deadline or a.pending_shrink != b.pending_shrink
                  or (give_back and (_gives_back(a) or _gives_back(b))
                  and _giving_back(a, then) != _giving_back(b, now))):
                return False
        return True

    @staticmethod
    def _nothing_to_backfill(snap: Snapshot, free: int) -> bool:
        """The head (which does not fit) holds a reservation and no queued job fits ``free`` slots."""
        return snap.reserved is not None and (free <= 0 or not snap.fits_any(free))

    def _squeeze(self, snap: Snapshot, head: JobSpec, free: int) -> list[Start]:
        """``squeeze``: a resizable head that still does not fit starts at the largest legal size in ``free``."""
        if self.squeeze and head.resizable and free >= head.min_procs:
            if not head.sizes and not head.divides:  # every size in range is legal: the largest that fits
                p = min(free, head.nprocs, head.max_procs or snap.total_slots, snap.total_slots)
                return [moldable_start(head, p)] if p >= max(head.min_procs, 1) else []
            fits = legal_sizes(head, snap.total_slots, range(max(head.min_procs, 1), min(free, head.nprocs) + 1))
            if fits:
                return [moldable_start(head, fits[-1])]
        return []


register_app_policy("easy-plus")(partial(EasyBackfill, give_back=True, squeeze=True))
register_app_policy("easy-squeeze")(partial(EasyBackfill, squeeze=True))
