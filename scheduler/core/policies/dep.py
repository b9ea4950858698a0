"""Islam, Prodromidis & Squillante's space-sharing policies: DEP (minimal repartitioning), SP(K), folding, smoothing.

Islam, Prodromidis & Squillante, "Dynamic partitioning in different
distributed-memory environments" (Islam, Prodromidis & Squillante):

* :func:`dep_partition` — dynamic equi-partitioning (§2.1) in units of ``M``
  among at most ``N = P/M`` jobs, in the variant that *minimises the number of
  jobs repartitioned*. The paper gives only Table 1; the rule here (reproducing
  it exactly) keeps every job whose size already appears in the balanced
  target multiset, and hands the remaining target sizes to the other jobs
  largest-to-largest, so that on an arrival the newcomer gets the smallest
  left-over size and existing jobs only shrink, and on a departure jobs only
  grow. Ties between equal-sized jobs go to the lower job id (a choice).
* :func:`fold_partition` — folding (§2.6, after McCann & Zahorjan 1994): an
  arrival with no free partition halves the largest partition and takes the
  other half; a departure's nodes go to the smallest partition (doubling it
  when sizes match).
* ``DEPApp``/``DEPRemap`` (names ``"dep"``) express DEP through the policy
  contract: repartitions take effect at resize points (iteration boundaries),
  jobs that must shrink to admit the queue head get shrink requests, and the
  head starts once its target share is free. ``min_interval`` > 0 gives DEP
  with *smoothing* (§2.6): a job is resized only if at least that long has
  passed since the previous repartition; this is the one piece of state the
  policy keeps (the time of its last repartition), since a snapshot does not
  carry resize times.
* ``SPApp`` (name ``"sp"``, parameter ``k``) — static partitioning SP(K)
  (§2.2): K equal partitions of ``total // k`` slots, FCFS, run to completion;
  a rigid job keeps its size and takes the partitions it covers.
"""

from __future__ import annotations

from scheduler.core.policy import (
    AppPolicy,
    Continue,
    Expand,
    JobSpec,
    RemapDecision,
    RemapPolicy,
    Shrink,
    Snapshot,
    Start,
    legal_sizes,
    register_app_policy,
    register_remap_policy,
)
from scheduler.core.walltime import job_fits, moldable_start

__all__ = [
    "DEPApp",
    "DEPRemap",
    "SPApp",
    "balanced",
    "dep_partition",
    "fold_partition",
    "shrinks_to",
]


def balanced(units: int, i: int) -> list[int]:
    """``i`` sizes summing to ``units``, as equal as possible, largest first."""
    if i < 1 or i > units:
        raise ValueError(f"cannot split {units} units among {i} jobs")
    q, r = divmod(units, i)
    return [q + 1] * r + [q] * (i - r)


def dep_partition(current: dict[int, int], P: int, M: int = 1) -> dict[int, int]:
    """Minimal-change equi-partition of ``P`` nodes (units of ``M``) among ``current``'s jobs.

    ``current`` maps job id to its present size in nodes (0 for a newcomer).
    At most ``N = P // M`` jobs get a partition; callers queue the rest.
    """
    N = P // M
    if len(current) > N:
        raise ValueError(f"{len(current)} jobs exceed the {N} partitions of DEP")
    if not current:
        return {}
    target = balanced(N, len(current))
    left = list(target)
    keep: dict[int, int] = {}
    for jid in sorted(current, key=lambda j: (-current[j], j)):
        u = current[jid] // M
        if current[jid] % M == 0 and u in left:
            left.remove(u)
            keep[jid] = u
    rest = sorted((j for j in current if j not in keep), key=lambda j: (-current[j], j))
    left.sort(reverse=True)
    out = {j: u * M for j, u in keep.items()}
    for jid, u in zip(rest, left, strict=True):
        out[jid] = u * M
    return out


def fold_partition(current: dict[int, int], P: int, arriving: int | None = None,
                   M: int = 1) -> dict[int, int]:
    """Folding: sizes after ``arriving`` joins (or after a departure, ``arriving=None``)."""
    out = dict(current)
    used = sum(out.values())
    if arriving is not None:
        free = P - used
        if free >= M:
            out[arriving] = free
            return out
        big = max(sorted(out), key=lambda j: out[j])
        if out[big] < 2 * M:
            raise ValueError("no partition can be folded")
        half = (out[big] // M // 2) * M
        out[big] -= half
        out[arriving] = half
        return out
    free = P - used
    if free > 0 and out:
        small = min(sorted(out), key=lambda j: out[j])
        out[small] += free
    return out


def _legal_near(spec: JobSpec, total: int, n: int) -> int | None:
    """The job's largest legal size at most ``n``, else its smallest (None if it has none).

    DEP's shares are slot counts; a job runs at the legal size
    (:func:`scheduler.core.policy.legal_sizes`) nearest below its share. For a job
    without ``sizes``/``divides`` that is its share clamped to
    ``[min_procs, max_procs]``.
    """
    lo, hi = max(spec.min_procs, 1), min(spec.max_procs or total, total)
    if not spec.sizes and not spec.divides:  # every size in [lo, hi] is legal: clamp
        return min(max(n, lo), hi) if lo <= hi else None
    for p in range(min(n, total), max(spec.min_procs, 1) - 1, -1):
        if legal_sizes(spec, total, (p,)):
            return p
    rest = legal_sizes(spec, total)
    return rest[0] if rest else None


def _targets(snap: Snapshot, M: int, admit: bool) -> dict[int, int]:
    """DEP sizes for the running jobs (and the queue head, if ``admit`` and a slot is open)."""
    cur = {r.spec.job_id: r.nprocs for r in snap.running}
    N = snap.total_slots // M
    if admit and snap.queue and len(cur) < N:
        cur[snap.queue[0].job_id] = 0
    return dep_partition(cur, snap.total_slots, M)


@register_app_policy("dep")
class DEPApp(AppPolicy):
    """Start the queue head at its DEP share once that share is free (Islam, Prodromidis & Squillante §2.1)."""

    name = "dep"

    def __init__(self, M: int = 1):
        self.M = M

    def schedule(self, snap: Snapshot) -> list[Start]:
        if not snap.queue or len(snap.running) >= snap.total_slots // self.M:
            return []
        head = snap.queue[0]
        want = _targets(snap, self.M, admit=True)[head.job_id] if snap.running else snap.free_slots
        n = _legal_near(head, snap.total_slots, want)
        return [moldable_start(head, n)] if n is not None and n <= snap.free_slots else []


@register_remap_policy("dep")
class DEPRemap(RemapPolicy):
    """Move each job to its DEP share at its resize point; optional smoothing interval."""

    name = "dep"

    def __init__(self, M: int = 1, min_interval: float = 0.0):
        self.M = M
        self.min_interval = min_interval
        self._last = float("-inf")

    def at_resize_point(self, snap: Snapshot, job_id: int) -> RemapDecision:
        r = snap.job(job_id)
        want = _legal_near(r.spec, snap.total_slots, _targets(snap, self.M, admit=True).get(job_id, r.nprocs))
        if want is None or want == r.nprocs:
            return Continue(job_id)
        if snap.now - self._last < self.min_interval:
            return Continue(job_id, "smoothing: too soon after the last repartition")
        if want < r.nprocs:
            if not job_fits(r, want, snap.now):
                return Continue(job_id, "walltime: the job would not end by its deadline at its share")
            self._last = snap.now
            return Shrink(job_id, want, "dep share")
        grow = _legal_near(r.spec, snap.total_slots, min(want, r.nprocs + snap.free_slots))
        if grow is not None and grow > r.nprocs and job_fits(r, grow, snap.now):
            self._last = snap.now
            return Expand(job_id, grow, "dep share")
        return Continue(job_id)

    def shrink_requests(self, snap: Snapshot) -> list[Shrink]:
        if not snap.queue or len(snap.running) >= snap.total_slots // self.M:
            return []
        return shrinks_to(snap, _targets(snap, self.M, admit=True), "admit queued job")


def shrinks_to(snap: Snapshot, targets: dict[int, int], reason: str) -> list[Shrink]:
    """Shrink requests for the resizable running jobs whose legal size nearest ``targets`` is smaller."""
    out = []
    for r in snap.running:
        w = _legal_near(r.spec, snap.total_slots, targets[r.spec.job_id])
        if w is not None and w < r.nprocs and r.spec.resizable:
            out.append(Shrink(r.spec.job_id, w, reason))
    return out


@register_app_policy("sp")
class SPApp(AppPolicy):
    """SP(K): K static partitions of ``S = total // k`` slots, FCFS (Islam, Prodromidis & Squillante §2.2).

    A job runs at its legal size nearest ``S`` from below (:func:`_legal_near`):
    a malleable job at ``S`` (with the limit the walltime rule allows if that is
    below its size), a rigid one at its own size, in as many partitions as it
    covers (``ceil(size / S)``, at most ``k``); slots of a partition the job
    does not use stay idle, as in any static partitioning. FCFS: the first
    queued job that does not find its partitions free waits, and the jobs
    behind it with it.
    """

    name = "sp"

    def __init__(self, k: int = 1):
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValueError(f"SP(K) needs an integer k >= 1, got {k!r}")
        self.k = k

    def _parts(self, p: int, S: int) -> int:
        return min(self.k, -(-p // S))

    def schedule(self, snap: Snapshot) -> list[Start]:
        S = snap.total_slots // self.k
        if S < 1:
            raise ValueError(f"SP({self.k}) on {snap.total_slots} slots leaves no partition")
        parts = self.k - sum(self._parts(r.nprocs, S) for r in snap.running)
        free = snap.free_slots
        out = []
        for spec in snap.queue:
            p = _legal_near(spec, snap.total_slots, S)
            if p is None or self._parts(p, S) > parts or p > free:
                break
            out.append(moldable_start(spec, p))
            parts -= self._parts(p, S)
            free -= p
        return out
