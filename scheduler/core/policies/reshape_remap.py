"""ReSHAPE's Remap Scheduler (Sudarsan & Ribbens 2007 §3.1), and the static baseline.

At a resize point of job J (``snap`` already holds J's latest iteration time):

1. A shrink already requested for J (``pending_shrink``) is carried out.
2. **Shrink to admit queued jobs** (shrink rule 2): if jobs wait and the
   queue head does not fit in the free slots (counting slots that other jobs'
   pending shrinks will release), J shrinks to the *largest* size it has run
   on that frees enough; if none frees enough, to its smallest shrink point
   (its starting size), "and waits for the next application to check in".
3. **Sweet spot** (shrink rule 1): if J's last resize was an expansion
   ``p -> q`` and the iteration time at ``q`` is not better than at ``p``
   (with the noise guard: not better by more than ``min_gain``, relative),
   J returns to ``p``.
4. **Expand** if there are idle slots and no job waits: to the next legal
   size ``q`` that fits in the idle slots, if ``q`` is unmeasured and J's
   last expansion improved its iteration time (or J never expanded), or if
   ``q`` was measured and was faster than J's current size. For
   ``topology="2d"`` the next size adds a row or column to the smaller side
   of the nearly-square grid, skipping sides that do not divide ``divides``
   (Table 2's sequences, e.g. 2x2 -> 2x4 -> 4x4 -> 4x5 -> 5x5 -> 5x8 for
   8000).
5. Otherwise continue.

**No oscillation.** "Better" compares the *fastest* iteration measured at
each size (:meth:`scheduler.core.policy.Profile.best`), not the latest: other
work on the nodes only ever slows an iteration down, and the latest time let
a job measured slower at ``p`` after returning there (noise) expand to ``q``
again and again (seen in the compose cluster: 2->4->8->4->8->4->8->4). The
rule: *once J returned from q to p because q did not help, it expands from
p to q again only if the evidence changes*, i.e. a faster iteration at
``q``; new measurements at ``p`` can only make ``p`` look better. No rule
here puts J back at ``q`` otherwise, so the sweet spot holds for the rest of
the job, as in the paper (§4.1.1: "it is shrunk back to its most recent
configuration"). Choice and limit: a job whose phases differ is not
re-probed (a phase change cannot be told from interference by iteration
times alone). A job shrunk to admit a queued job grows back when the next
size is one it ran faster at.

**The paper's rule and the noise guard.** The paper counts any decrease of
the iteration time as an improvement (§3.1 rule 3; §4.1.1 "as long as there
is improvement in iteration time"): in Fig. 3(a) LU on 12000 goes
2->4->6->9->12->16->12, and 6->9 gains only 3.3% (82.31 s -> 79.61 s).
``min_gain`` is a noise guard the paper does not have: a gain counts only if
it is larger than ``min_gain`` (relative), so that timing noise of a few
percent on shared nodes is not taken for a gain. ``min_gain=0`` is the
paper's rule, registered as the remap policy and preset ``"reshape-paper"``
(:data:`PAPER`); the class default :data:`NOISE_GUARD` (5%) is what the
presets ``"reshape"``, ``"reshape-fcfs"``, ``"reshape-squeeze"`` and
``"reshape-plus"`` use; on Fig. 3(a) it stops at the sweet spot 6
(2->4->6->9->6). The fastest-iteration evidence above is the second
guard; on noise-free data (Fig. 3(a), the simulator) it changes nothing.

Choices where the paper is open: a job expands one step per resize point; rule 2 is tried before the sweet-spot
rule so that queued jobs are admitted as early as possible. The paper does
not shrink jobs between resize points, so :meth:`shrink_requests` returns
nothing.

With ``min_gain=0`` and the other defaults :class:`ReshapeRemap` is exactly
the above. Parameters add rules the paper does not have (registered preset ``"reshape-plus"`` =
``borrow=True, announced=True, prior=True``, same class; it is meant to run with the EASY
preset ``"easy-plus"``, which squeezes resizable heads into free slots and
computes reservations in the same give-back view):

* ``borrow``. Under EASY the queue is rarely empty (98% of the time on
  lublin_256, 85% on Mira), so rule 4 almost never fires, yet ~5% of the
  machine sits idle while jobs wait: the slots EASY holds for the queue
  head's reservation. With ``borrow``, a job at a resize point while the
  head does not fit computes the head's *shadow time*
  (:func:`scheduler.core.policies.easy.shadow_time` on
  :func:`scheduler.core.policies.easy.give_back_view`: every job's borrowed slots
  counted as returned); if its next resize point plus two redistributions
  (its slowest so far) comes before it, J expands one step into the idle
  slots (the sweet-spot rule still applies); a job above its starting size
  whose next resize point plus one redistribution would come after the
  shadow time shrinks back to its starting size now, else keeps its slots.
  Without walltimes the shadow time is unknown and the paper's rules decide.
  Borrowed slots only return to the starting size, a size the job ran at, so
  real jobs need no ``RESHAPE_ALLOW_NEW_SIZES``. Another job's shrink under
  way does not excuse a borrower from giving back: the head's reservation
  counts on this one, and that shrink may end after it. Choice: the first
  expansion, before any redistribution was measured, assumes it costs
  nothing (the give-back may then be one redistribution late). EASY must
  use the same view (``easy-plus``), else it backfills against a later
  shadow time than the one borrowers give back by, at the expense of the
  head.
* ``reserve``: rule 4 leaves this many slots (int) or this fraction of the
  pool (float) idle, room for arrivals nobody announced; it does not limit
  ``borrow`` (those slots come back by the head's shadow time). Off in the
  preset: a fixed reserve is a guess at arrivals, right for Sudarsan & Ribbens' (2007) W2
  (its later arrivals fill the machine exactly; 0.2 of 36 slots keeps room
  for them, 0.15 does not) and wrong for W1, whose arrivals have all come
  when its longest job reaches its first resize point on a live daemon
  (a job's start-up delays it): W1 then grew only as jobs ended. On the
  traces it changes nothing beyond noise (12 seeds; docs/simulator.md).
* ``announced`` (in ``reshape-plus``): rule 4 leaves idle the slots of the
  jobs submitted to arrive later (an arrival delay: :attr:`Snapshot.announced`)
  that arrive before the growing job's deadline (all of them when it has
  none), or ``reserve`` if that is more: room for work known to come, none
  for a guess. W2's arrivals, announced (the workload benchmark's announced
  row), find their slots free; a W2 whose arrivals come unannounced (its
  default: jobs submitted as they arrive) waits for resize points as under
  the paper's rule, and without announcements the preset is ``reserve=0``.
* ``new_sizes``: shrink points are every legal size from ``min_procs`` up,
  not only sizes run at (:func:`shrink_sizes`). In the simulator a malleable
  trace job has no such constraint; the resize runtime enforces the paper's
  rule unless the job runs with ``RESHAPE_ALLOW_NEW_SIZES=1``, so the daemon
  must only use it for jobs started that way. Off in the preset: on both
  traces it lowers utilisation (shrunk jobs run long, freed slots idle until
  the head fits).
* ``request_shrinks``: :meth:`shrink_requests` asks the largest running jobs
  to shrink (to points chosen as in rule 2) as soon as the queue head does
  not fit; a request still pending when nobody waits any more is dropped at
  the resize point. Off in the preset: in the simulator a job shrinks at its
  next resize point either way, so it only changes *which* job shrinks.
* ``prior`` (in ``reshape-plus``): a prediction for the sizes a job has not
  run at, from a prior curve (:mod:`scheduler.core.speedup`: Downey's model
  with ``A`` = the requested size, ``sigma`` = 1, anchored at the fastest
  iteration measured at the current size; a measured size uses its
  measurement). An expansion (rule 4, and ``borrow``'s) is made only where
  the predicted gain beats ``min_gain`` and the iterations the job will run
  at the new size (a borrower's: those before the head's shadow time) save
  more than its redistributions cost (two for a borrower: there and back,
  :func:`scheduler.core.walltime.expected_redist`); the size is, among the
  next legal size, the first legal sizes at 1.25, 1.5, 2, 3 and 4 times the
  current one and all the room, the one predicted to save the most. The
  walltime check charges not the prior's hope but
  :func:`scheduler.core.speedup.safe_iter_time`, the least gain a Downey
  curve with ``A`` at least half the requested size allows (before: no gain
  at all, so a job whose walltime is its run time never expanded). A program
  whose parallelism is below half its size can still overrun, and is counted
  as a kill. The sweet-spot rule still undoes an expansion the measurement
  does not confirm.
"""

from __future__ import annotations

import functools
import math
from dataclasses import replace
from functools import partial

from reshape.redistribution.layout import nearly_square_grid
from scheduler.core.policies.easy import shadow_time
from scheduler.core.policy import (
    Continue,
    Expand,
    JobSpec,
    RemapDecision,
    RemapPolicy,
    RunningJob,
    Shrink,
    Snapshot,
    legal_sizes,
    register_remap_policy,
)
from scheduler.core.speedup import PRIOR_SIGMA, downey_speedup, predicted_iter_time, safe_iter_time
from scheduler.core.walltime import REDIST_PRIOR, deadline_after, expected_redist, job_fits

#: The default noise guard: a gain counts only if larger than this (relative); not in the paper.
NOISE_GUARD = 0.05

__all__ = ["NOISE_GUARD", "PAPER", "PLUS", "ReshapeRemap", "StaticRemap", "growth", "last_expansion", "next_size",
           "shrink_sizes"]


@functools.lru_cache(maxsize=4096)
def _prior_floor(p: int, size: int) -> float:
    """A lower bound on ``t_q / t_p`` for every ``q`` under the prior curve (Downey with ``A = size``,
    whose speedup is at most ``A``): ``S(p) / A``, less a rounding margin; 1 when ``A <= 1``."""
    A = float(max(size, 1))
    return downey_speedup(p, A, PRIOR_SIGMA) / A * (1 - 1e-12) if A > 1 else 1.0


def next_size(spec: JobSpec, current: int, limit: int) -> int | None:
    """The next size after ``current`` for an expansion, at most ``limit``; None if none."""
    if spec.topology == "2d":
        # the policy's walk: grow the smaller side of the grid to the next side
        # that divides ``divides``; legal_sizes has the last word on each size
        hi = min(spec.max_procs or limit, limit)
        r, c = nearly_square_grid(current)
        n = spec.divides
        while True:
            if r > c:
                r, c = c, r
            r += 1
            while n and n % r and r <= limit:
                r += 1
            p = r * c
            if p > hi:
                return None
            if p > current and legal_sizes(spec, limit, (p,)):
                return p
    if not spec.sizes and not spec.divides:  # every size in range is legal (legal_sizes' common case)
        p = max(current + 1, spec.min_procs, 1)
        return p if p <= min(spec.max_procs or limit, limit) else None
    for p in legal_sizes(spec, limit):
        if p > current:
            return p
    return None


def growth(spec: JobSpec, limit: int) -> list[int]:
    """The sizes a job passes through when it expands at every resize point, from its starting
    size up to ``limit`` (:func:`next_size` step by step): Sudarsan & Ribbens 2007 Table 2's rows."""
    out = [spec.nprocs]
    while (p := next_size(spec, out[-1], limit)) is not None:
        out.append(p)
    return out


def last_expansion(history: tuple[int, ...]) -> tuple[int, int] | None:
    """The last ``(p, q)`` with ``p < q`` in the size history, or None."""
    if len(history) < 2:
        return None
    for a, b in zip(reversed(history[:-1]), reversed(history[1:]), strict=True):
        if b > a:
            return a, b
    return None


def shrink_sizes(spec: JobSpec, current: int, pool: int) -> list[int]:
    """Every legal size below ``current`` (ascending): :func:`scheduler.core.policy.legal_sizes`,
    so for ``topology="2d"`` only nearly-square grids whose sides divide ``divides``."""
    return [p for p in legal_sizes(spec, pool) if p < current]


@register_remap_policy("reshape")
class ReshapeRemap(RemapPolicy):
    """ReSHAPE's Remap Scheduler: the paper's rules with ``min_gain=0`` (:data:`PAPER`) and
    the other defaults; ``min_gain`` (the noise guard), ``borrow``, ``reserve``, ``new_sizes``
    and ``request_shrinks`` as in the module docstring."""

    name = "reshape"

    def __init__(self, min_gain: float = NOISE_GUARD, new_sizes: bool = False, reserve: float = 0,
                 request_shrinks: bool = False, borrow: bool = False, prior: bool = False, announced: bool = False):
        if isinstance(min_gain, bool) or not isinstance(min_gain, int | float) or not 0 <= min_gain < 1:
            raise ValueError(f"min_gain must be a number in [0, 1), got {min_gain!r}")
        if isinstance(reserve, bool) or not isinstance(reserve, int | float) or reserve < 0 \
                or (isinstance(reserve, float) and reserve >= 1):
            raise ValueError(f"reserve must be a slot count >= 0 or a fraction in [0, 1), got {reserve!r}")
        self.min_gain = min_gain
        self.new_sizes = new_sizes
        self.reserve = reserve
        self.request_shrinks = request_shrinks
        self.borrow = borrow
        self.prior = prior
        self.announced = announced

    def _improved(self, r: RunningJob, p: int, q: int) -> bool:
        """Was ``q`` faster than ``p`` (fastest iterations)? The paper: any gain; with the noise
        guard, a gain larger than ``min_gain``. True if unmeasured."""
        tp, tq = r.profile.best(p), r.profile.best(q)
        if tp is None or tq is None:
            return True  # not measured yet: no evidence against
        return tq < tp * (1 - self.min_gain)

    def _predicted(self, r: RunningJob, q: int) -> float | None:
        """With ``prior``: the iteration time at ``q`` the fastest one measured there says, else the
        prior curve (:func:`scheduler.core.speedup.predicted_iter_time`) predicts from the current
        size; None without ``prior`` or before any iteration at the current size."""
        if not self.prior:
            return None
        t_p = r.profile.best(r.nprocs)
        if t_p is None:
            return None
        return r.profile.best(q) or predicted_iter_time(t_p, r.nprocs, q, r.spec.nprocs)

    def _pays(self, r: RunningJob, q: int, now: float, trips: int = 1, until: float = math.inf,
              check: bool = True) -> float | None:
        """With ``prior``, for an expansion to ``q``: the seconds it is predicted to save net of
        ``trips`` redistributions, counting the iterations at ``q`` before ``until`` (a borrower's
        give-back) and at most the job's remaining ones; None when it saves nothing, when the
        predicted gain is within the noise guard, or when the job would not fit its walltime. The
        walltime check counts not "no gain" but the least gain a plausible curve allows
        (:func:`scheduler.core.speedup.safe_iter_time`); the walltime rule still holds. Without
        ``prior``: 0.0 if the walltime check (no gain assumed) passes, else None."""
        t_q = self._predicted(r, q)
        if t_q is None:
            return 0.0 if job_fits(r, q, now) else None
        t_p = r.profile.best(r.nprocs)
        if not t_q < t_p * (1 - self.min_gain):
            return None
        cost = trips * expected_redist(r, q, floor=0.0 if math.isinf(until) else REDIST_PRIOR)
        # the iterations left: the known count (job file, or the program's report), else as many as it has
        # done (Downey 1997: a job's remaining lifetime is about its age), at least one
        n = r.spec.iterations - r.iterations_done if r.spec.iterations else max(1, r.iterations_done)
        if not math.isinf(until):
            n = min(n, max(0.0, (until - now - cost) // t_q))
        gain = n * (t_p - t_q) - cost
        if gain <= 0:
            return None
        return gain if not check or self._fits_safely(r, q, now) else None

    def _fits_safely(self, r: RunningJob, q: int, now: float) -> bool:
        """The walltime check of an expansion to ``q`` charged with the measured time there, else
        the least gain a plausible curve allows (:func:`scheduler.core.speedup.safe_iter_time`)."""
        t_q = r.profile.best(q)
        if t_q is None:
            t_p = r.profile.best(r.nprocs)
            if t_p is None:
                return job_fits(r, q, now)
            t_q = safe_iter_time(t_p, r.nprocs, q, r.spec.nprocs)
        return job_fits(r, q, now, predicted=t_q)

    def _grow_to(self, r: RunningJob, hi: int, now: float, exp: tuple[int, int] | None, trips: int = 1,
                 until: float = math.inf) -> int | None:
        """The size to expand ``r`` to, at most ``hi``: without ``prior`` the next legal size
        (rule 4's one step) if the evidence allows and the job fits its walltime; with ``prior``
        the size among a few candidates (the next legal size and the first legal sizes at 1.25,
        1.5, 2, 3 and 4 times the current one, and ``hi``) the prior predicts saves the most
        (:meth:`_pays`), the smallest on a tie."""
        cur = r.nprocs
        q = next_size(r.spec, cur, hi)
        if q is None:
            return None
        if not self.prior:
            return q if self._may_expand(r, q, exp) and self._pays(r, q, now) is not None else None
        if self._pays_nowhere(r, q, now, trips, until):
            return None
        cands = {q}
        for k in (1.25, 1.5, 2.0, 3.0, 4.0):
            c = next_size(r.spec, max(cur, math.ceil(k * cur) - 1), hi)
            if c is not None:
                cands.add(c)
        last = next_size(r.spec, max(cur, hi - 1), hi)
        if last is not None:
            cands.add(last)
        gains = []
        for c in sorted(cands):
            if self._may_expand(r, c, exp):
                g = self._pays(r, c, now, trips, until, check=False)
                if g is not None:
                    gains.append((-g, c))
        for _, c in sorted(gains):  # the walltime check (the costlier part) from the best down
            if self._fits_safely(r, c, now):
                return c
        return None

    def _pays_nowhere(self, r: RunningJob, q: int, now: float, trips: int, until: float) -> bool:
        """With ``prior``: True when no expansion of ``r`` can pay (:meth:`_pays` would say None for
        every size above its own), from an upper bound on the gain: the fastest iteration any size
        above could have (measured there, else the prior curve's limit, its ``A``) over as many
        iterations as could run. False where the bound leaves any doubt (the sizes are then weighed
        one by one, as without it); it only spares that work."""
        cur = r.nprocs
        t_p = r.profile.best(cur)
        if t_p is None:
            return False
        lo = t_p * _prior_floor(cur, r.spec.nprocs)
        prof = r.profile
        for p in (*prof.best_time, *prof.iter_time):
            if p > cur:
                lo = min(lo, prof.best(p))
        if lo < t_p * (1 - self.min_gain):
            cost = trips * expected_redist(r, q, floor=0.0 if math.isinf(until) else REDIST_PRIOR)
            n = r.spec.iterations - r.iterations_done if r.spec.iterations else max(1, r.iterations_done)
            if not math.isinf(until):
                n = min(n, max(0.0, (until - now - cost) / lo + 1.0))
            return n * (t_p - lo) - cost < -1e-9 * (1.0 + abs(cost))
        return True

    def _may_expand(self, r: RunningJob, q: int, exp: tuple[int, int] | None) -> bool:
        """Rule 4's evidence for growing to ``q``: measured there and faster, or unmeasured
        after an expansion that helped (see "No oscillation" in the module docstring)."""
        if r.profile.best(q) is not None:
            return self._improved(r, r.nprocs, q)
        return exp is None or self._improved(r, *exp)

    def _points(self, r: RunningJob, pool: int) -> list[int]:
        """Sizes ``r`` may shrink to, ascending."""
        if self.new_sizes:
            return shrink_sizes(r.spec, r.nprocs, pool)
        ran = r.profile.iter_time
        if len(ran) == 1 and r.nprocs in ran:  # it ran at one size, its own
            return []
        return [p for p, _ in r.profile.shrink_points(r.nprocs)]

    def _held(self, snap: Snapshot, r: RunningJob) -> int:
        """The idle slots rule 4 leaves to arrivals when ``r`` would grow: ``reserve``, or with
        ``announced`` the slots of the jobs announced to arrive before ``r``'s deadline if more."""
        held = int(self.reserve * snap.total_slots) if isinstance(self.reserve, float) else int(self.reserve)
        if self.announced and snap.announced:
            end = math.inf if r.deadline is None else r.deadline
            held = max(held, sum(n for t, n in snap.announced if t < end))
        return held

    @staticmethod
    def _need(snap: Snapshot, exclude: int | None = None) -> int:
        """Slots the queue head still lacks, counting pending shrinks of other jobs (a value <= 0: it
        lacks none)."""
        need = snap.queue[0].nprocs - snap.free_slots
        if need <= 0:  # what pending shrinks release only lowers it
            return need
        for o in snap.running:
            if o.pending_shrink is not None and o.spec.job_id != exclude:
                need -= o.nprocs - o.pending_shrink
        return need

    @staticmethod
    def _base(r: RunningJob) -> int:
        """The size a job returns to when it gives back borrowed slots: its starting size."""
        return r.profile.history[0] if r.profile.history else r.spec.nprocs

    @staticmethod
    def _head_shadow(snap: Snapshot) -> float:
        """The queue head's reservation (the first its Application Scheduler made), else when it
        can start if every job gives back what it borrowed."""
        if snap.reserved is not None:
            return snap.reserved
        return shadow_time(snap, snap.queue[0].nprocs, give_back=True)[0]

    def _keeps_reservation(self, snap: Snapshot, r: RunningJob, q: int) -> bool:
        """EASY's guarantee: after ``r`` shrinks to ``q`` (its deadline moved by the walltime rule,
        the dropped slots free after one redistribution) can the queue head still start by its
        reservation? True when nobody waits or the head has no reservation."""
        if not snap.queue or snap.reserved is None:
            return True
        now = snap.now
        back = replace(r.spec, job_id=-1, resizable=False)
        gone = RunningJob(back, r.nprocs - q, now, deadline=now + expected_redist(r, q))
        kept = replace(r, nprocs=q, pending_shrink=None,
                       deadline=deadline_after(r.deadline, r.spec.nprocs, r.nprocs, q, now))
        running = (*tuple(kept if o is r else o for o in snap.running), gone)
        t = shadow_time(replace(snap, running=running), snap.queue[0].nprocs, give_back=self.borrow)[0]
        return t <= snap.reserved + 1e-6 * max(1.0, abs(snap.reserved))

    def _may_shrink(self, snap: Snapshot, r: RunningJob, q: int) -> bool:
        """A shrink the paper's rules chose is carried out only if the job still fits its walltime
        and the queue head keeps its reservation."""
        return job_fits(r, q, snap.now) and self._keeps_reservation(snap, r, q)

    def _borrow(self, snap: Snapshot, r: RunningJob, exp: tuple[int, int] | None
                ) -> RemapDecision | None:
        """Lend the queue head's idle reserved slots to ``r`` until its shadow time.

        None: the rule does not apply (the head fits, no walltimes to compute a
        shadow time from, or ``r`` holds nothing borrowed and cannot expand);
        the paper's rules decide then.
        """
        jid, cur = r.spec.job_id, r.nprocs
        t_iter = r.profile.iter_time.get(cur)
        # other jobs' shrinks under way do not count: the head's reservation counts on this job giving back at
        # its next resize point, and a shrink decided since may end after it (Mira, seed 4: a head 0.8 s late)
        if t_iter is None or snap.queue[0].nprocs <= snap.free_slots:
            return None
        shadow = self._head_shadow(snap)
        if math.isinf(shadow):
            return None
        base = self._base(r)
        back = expected_redist(r, base)  # giving back costs a redistribution
        if snap.now + t_iter + back > shadow:  # the next resize point is too late: give back now
            if cur > base:
                return Shrink(jid, base, f"give back borrowed slots to queued job {snap.queue[0].job_id}")
            return None
        if exp and exp[1] == cur and not self._improved(r, *exp) and job_fits(r, exp[0], snap.now, back):
            return Shrink(jid, exp[0], f"sweet spot: {exp[0]} -> {cur} did not help")
        if snap.free_slots > 0 and snap.now + t_iter + 2 * back <= shadow \
                and job_fits(r, cur, snap.now, 2 * back):  # a round trip at today's speed fits
            hi = min(cur + snap.free_slots, r.spec.max_procs or snap.total_slots)
            if self.prior:
                q = self._grow_to(r, hi, snap.now, exp, trips=2, until=shadow)
            else:
                q = next_size(r.spec, cur, hi)
                q = q if q is not None and self._may_expand(r, q, exp) else None
            if q is not None:
                return Expand(jid, q, f"idle slots until t={shadow:g}, queued job "
                                      f"{snap.queue[0].job_id}'s reservation")
        if cur > base:
            return Continue(jid, "borrowed slots not needed before the next resize point")
        return None

    def at_resize_point(self, snap: Snapshot, job_id: int) -> RemapDecision:
        r = snap.job(job_id)
        spec = r.spec
        if not spec.resizable:
            return Continue(job_id, "static job")
        cur = r.nprocs
        if r.pending_shrink is not None and r.pending_shrink < cur and (
                snap.queue or not self.request_shrinks) and self._may_shrink(snap, r, r.pending_shrink):
            return Shrink(job_id, r.pending_shrink, "requested shrink")
        exp = last_expansion(r.profile.history)
        if self.borrow and snap.queue:
            d = self._borrow(snap, r, exp)
            if d is not None:
                return d
        need = self._need(snap, job_id) if snap.queue else 0
        points = self._points(r, snap.total_slots) if need > 0 else ()
        if points:
            head = snap.queue[0]
            if need > 0:
                enough = [p for p in points if cur - p >= need]
                target = max(enough) if enough else min(points)
                if self._may_shrink(snap, r, target):
                    return Shrink(job_id, target, f"admit queued job {head.job_id}")
        if exp and exp[1] == cur and not self._improved(r, *exp) and self._may_shrink(snap, r, exp[0]):
            return Shrink(job_id, exp[0], f"sweet spot: {exp[0]} -> {cur} did not help")
        room = 0
        if not snap.queue:
            room = snap.free_slots - self._held(snap, r)
            if cur < spec.nprocs:  # squeezed: it grows back to the size it asked for whatever the reserve
                room = max(room, min(snap.free_slots, spec.nprocs - cur))
        if room > 0:
            limit = min(cur + room, spec.max_procs or snap.total_slots)
            q = self._grow_to(r, limit, snap.now, exp)
            if q is not None:
                return Expand(job_id, q, "idle processors")
        return Continue(job_id, "")

    @property
    def asks_shrinks(self) -> bool:
        return self.request_shrinks

    def shrink_requests(self, snap: Snapshot) -> list[Shrink]:
        """With ``request_shrinks``: shrinks that together free what the queue head lacks.

        Largest jobs first, each to the largest size that covers what is still
        missing (else to its smallest size); none when the head fits. Without
        ``request_shrinks`` (the paper), none.
        """
        if not self.request_shrinks or not snap.queue:
            return []
        need = self._need(snap)
        out = []
        for r in sorted(snap.running, key=lambda o: (-o.nprocs, o.spec.job_id)):
            if need <= 0:
                break
            if not r.spec.resizable or r.pending_shrink is not None:
                continue
            points = self._points(r, snap.total_slots)
            if not points:
                continue
            enough = [p for p in points if r.nprocs - p >= need]
            target = max(enough) if enough else min(points)
            out.append(Shrink(r.spec.job_id, target, f"admit queued job {snap.queue[0].job_id}"))
            need -= r.nprocs - target
        return out


#: The paper's rule as published (§3.1, Fig. 3(a)): any gain counts, no noise guard.
PAPER = {"min_gain": 0.0}
register_remap_policy("reshape-paper")(partial(ReshapeRemap, **PAPER))

#: The tuned variant under its own registry name, so the daemon (which takes a
#: policy name, not parameters) can run it: the same class, other parameters.
PLUS = {"borrow": True, "announced": True, "prior": True}
register_remap_policy("reshape-plus")(partial(ReshapeRemap, **PLUS))


@register_remap_policy("static")
class StaticRemap(RemapPolicy):
    """Never resize (the static-scheduling baseline of Sudarsan & Ribbens 2007 §4.2)."""

    name = "static"

    def at_resize_point(self, snap: Snapshot, job_id: int) -> RemapDecision:
        return Continue(job_id, "static scheduling")
