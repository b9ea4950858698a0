"""Folding as a scheduling policy (Islam, Prodromidis & Squillante §2.6, after McCann & Zahorjan 1994).

Islam, Prodromidis & Squillante names folding as the variant of dynamic partitioning that "reduces the
number of reconfigurations ... at the expense of a less equitable allocation"
and "interrupt[s] fewer jobs"; it gives no precise rule. The rule here is
:func:`scheduler.core.policies.dep.fold_partition` (the one implementation of
it): an arrival takes the free nodes if there are any, else the largest
partition is halved and the newcomer takes the other half (only that one job
is interrupted); a departure's nodes go to the smallest partition. At most
``N = P / M`` jobs run, as under DEP.

Through the policy contract (the same sans-I/O core the daemon and the
simulator wrap), the fold targets are recomputed from each snapshot, since
they depend only on the running sizes:

* ``FoldApp`` (``"fold"``) starts the queue head at its target once it is free;
* ``FoldRemap`` (``"fold"``) asks the job being halved to shrink
  (``shrink_requests``) and, at a job's resize point, moves it to its target
  (the smallest job grows into nodes a departure left).
"""

from __future__ import annotations

from scheduler.core.policies.dep import _legal_near, fold_partition, shrinks_to
from scheduler.core.policy import (
    AppPolicy,
    Continue,
    Expand,
    RemapDecision,
    RemapPolicy,
    Shrink,
    Snapshot,
    Start,
    register_app_policy,
    register_remap_policy,
)
from scheduler.core.walltime import job_fits, moldable_start

__all__ = ["FoldApp", "FoldRemap", "fold_targets"]


def fold_targets(snap: Snapshot, M: int = 1) -> dict[int, int]:
    """Folding's sizes for the running jobs, and for the queue head if it may be admitted.

    The head is admitted while fewer than ``N = total // M`` jobs run; if no
    partition can be folded (every job at ``M``), it waits and the sizes stay.
    """
    cur = {r.spec.job_id: r.nprocs for r in snap.running}
    if snap.queue and len(cur) < snap.total_slots // M:
        try:
            return fold_partition(cur, snap.total_slots, arriving=snap.queue[0].job_id, M=M)
        except ValueError:
            return cur
    return fold_partition(cur, snap.total_slots, M=M)


@register_app_policy("fold")
class FoldApp(AppPolicy):
    """Start the queue head on the free nodes, or on the half of the largest partition once freed."""

    name = "fold"

    def __init__(self, M: int = 1):
        if M < 1:
            raise ValueError(f"folding needs a partition unit M >= 1, got {M}")
        self.M = M

    def schedule(self, snap: Snapshot) -> list[Start]:
        if not snap.queue or len(snap.running) >= snap.total_slots // self.M:
            return []
        head = snap.queue[0]
        want = fold_targets(snap, self.M).get(head.job_id, 0) if snap.running else snap.free_slots
        if want < 1:
            return []
        n = _legal_near(head, snap.total_slots, want)
        return [moldable_start(head, n)] if n is not None and n <= snap.free_slots else []


@register_remap_policy("fold")
class FoldRemap(RemapPolicy):
    """Halve the largest job for an arrival; give a departure's nodes to the smallest job."""

    name = "fold"

    def __init__(self, M: int = 1):
        if M < 1:
            raise ValueError(f"folding needs a partition unit M >= 1, got {M}")
        self.M = M

    def at_resize_point(self, snap: Snapshot, job_id: int) -> RemapDecision:
        r = snap.job(job_id)
        want = _legal_near(r.spec, snap.total_slots, fold_targets(snap, self.M).get(job_id, r.nprocs))
        if want is None or want == r.nprocs:
            return Continue(job_id)
        if want < r.nprocs:
            if not job_fits(r, want, snap.now):
                return Continue(job_id, "walltime: the job would not end by its deadline folded")
            return Shrink(job_id, want, "fold: half for an arrival")
        grow = _legal_near(r.spec, snap.total_slots, min(want, r.nprocs + snap.free_slots))
        if grow is not None and grow > r.nprocs and job_fits(r, grow, snap.now):
            return Expand(job_id, grow, "fold: nodes of a departure")
        return Continue(job_id)

    def shrink_requests(self, snap: Snapshot) -> list[Shrink]:
        if not snap.queue or snap.free_slots >= self.M or len(snap.running) >= snap.total_slots // self.M:
            return []
        return shrinks_to(snap, fold_targets(snap, self.M), "fold: admit queued job")
