"""ReSHAPE's Remap Scheduler (seed 001 §3.1), and the static baseline.

At a resize point of job J (``snap`` already holds J's latest iteration time):

1. A shrink already requested for J (``pending_shrink``) is carried out.
2. **Shrink to admit queued jobs** (shrink rule 2): if jobs wait and the
   queue head does not fit in the free slots (counting slots that other jobs'
   pending shrinks will release), J shrinks to the *largest* size it has run
   on that frees enough; if none frees enough, to its smallest shrink point
   (its starting size), "and waits for the next application to check in".
3. **Sweet spot** (shrink rule 1): if J's last resize was an expansion
   ``p -> q`` and the iteration time at ``q`` is not better than at ``p`` by
   more than ``min_gain`` (relative), J returns to ``p``.
4. **Expand** if there are idle slots, no job waits, and J's last expansion
   improved its iteration time (or J never expanded): to the next legal size
   that fits in the idle slots. For ``topology="2d"`` the next size adds a
   row or column to the smaller side of the nearly-square grid, skipping
   sides that do not divide ``divides`` (Table 2's sequences, e.g.
   2x2 -> 2x4 -> 4x4 -> 4x5 -> 5x5 -> 5x8 for 8000).
5. Otherwise continue.

Choices where the paper is open: "improvement" means a relative gain larger
than ``min_gain`` (default 5%), so timing noise does not count as a gain; a
job expands one step per resize point; rule 2 is tried before the sweet-spot
rule so that queued jobs are admitted as early as possible. The paper does
not shrink jobs between resize points, so :meth:`shrink_requests` returns
nothing.
"""

from __future__ import annotations

from ..policy import (
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

__all__ = ["ReshapeRemap", "StaticRemap", "last_expansion", "next_size"]


def _grid(p: int) -> tuple[int, int]:
    r = int(p**0.5)
    while p % r:
        r -= 1
    return r, p // r


def next_size(spec: JobSpec, current: int, limit: int) -> int | None:
    """The next size after ``current`` for an expansion, at most ``limit``; None if none."""
    if spec.topology == "2d":
        # ``divides`` applies to each side of the grid here, not to the total
        lo, hi = spec.min_procs, min(spec.max_procs or limit, limit)
        r, c = _grid(current)
        n = spec.divides
        while True:
            if r > c:
                r, c = c, r
            r += 1
            while n and n % r and r <= limit:
                r += 1
            p = r * c
            if p > limit:
                return None
            if p > hi:
                return None
            if p > current and p >= lo and (not spec.sizes or p in spec.sizes):
                return p
    for p in legal_sizes(spec, limit):
        if p > current:
            return p
    return None


def last_expansion(history: tuple[int, ...]) -> tuple[int, int] | None:
    """The last ``(p, q)`` with ``p < q`` in the size history, or None."""
    for a, b in zip(reversed(history[:-1]), reversed(history[1:]), strict=True):
        if b > a:
            return a, b
    return None


@register_remap_policy("reshape")
class ReshapeRemap(RemapPolicy):
    name = "reshape"

    def __init__(self, min_gain: float = 0.05):
        if not 0 <= min_gain < 1:
            raise ValueError("min_gain must be in [0, 1)")
        self.min_gain = min_gain

    def _improved(self, r: RunningJob, p: int, q: int) -> bool:
        t = r.profile.iter_time
        if p not in t or q not in t:
            return True  # not measured yet: no evidence against
        return t[q] < t[p] * (1 - self.min_gain)

    def at_resize_point(self, snap: Snapshot, job_id: int) -> RemapDecision:
        r = snap.job(job_id)
        spec = r.spec
        if not spec.resizable:
            return Continue(job_id, "static job")
        cur = r.nprocs
        if r.pending_shrink is not None and r.pending_shrink < cur:
            return Shrink(job_id, r.pending_shrink, "requested shrink")
        points = [p for p, _ in r.profile.shrink_points(cur)]
        if snap.queue and points:
            head = snap.queue[0]
            coming = sum(o.nprocs - o.pending_shrink for o in snap.running
                         if o.spec.job_id != job_id and o.pending_shrink is not None)
            need = head.nprocs - snap.free_slots - coming
            if need > 0:
                enough = [p for p in points if cur - p >= need]
                target = max(enough) if enough else min(points)
                return Shrink(job_id, target, f"admit queued job {head.job_id}")
        exp = last_expansion(r.profile.history)
        if exp and exp[1] == cur and not self._improved(r, *exp):
            return Shrink(job_id, exp[0], f"sweet spot: {exp[0]} -> {cur} did not help")
        if snap.free_slots > 0 and not snap.queue and (exp is None or self._improved(r, *exp)):
            limit = min(cur + snap.free_slots, spec.max_procs or snap.total_slots)
            q = next_size(spec, cur, limit)
            if q is not None:
                return Expand(job_id, q, "idle processors")
        return Continue(job_id, "")


@register_remap_policy("static")
class StaticRemap(RemapPolicy):
    """Never resize (the static-scheduling baseline of seed 001 §4.2)."""

    name = "static"

    def at_resize_point(self, snap: Snapshot, job_id: int) -> RemapDecision:
        return Continue(job_id, "static scheduling")
