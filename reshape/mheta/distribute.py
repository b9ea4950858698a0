"""From a job's structure and instrumented iteration to a GEN_BLOCK split (Nakazawa 2005 ch. 1, 7).

:func:`choose_split` is the one call the resize runtime needs: MHETA built
from the structure and profile, GBS over MHETA's per-node unblocked times
``f_i`` then descent on the predicted time with blocking (within a time budget), and the split as counts that
:func:`reshape.redistribution.layout.gen_block` accepts, so
:func:`reshape.redistribution.redistribute.redistribute` can move the job's arrays to it.

Also the distribution spectrum of §6.2 (Fig. 6.1): Blk, Bal, I-C, I-C/Bal and
the linear sweep between them.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Sequence
from dataclasses import dataclass, replace

from reshape.mheta.cluster import Cluster
from reshape.mheta.model import Mheta, Profile
from reshape.mheta.search import SearchResult, ga, gbs, gs, sa
from reshape.mheta.structure import AppStructure, StructureError, max_resident_rows, plan_memory
from reshape.redistribution.layout import even_counts

__all__ = [
    "Choice",
    "balanced_split",
    "choose_split",
    "in_core_balanced_split",
    "in_core_capacity",
    "in_core_split",
    "round_split",
    "sweep",
]

SEARCHES = {"gbs": gbs, "gbs-b": gbs, "gs": gs, "ga": ga, "sa": sa}


@dataclass(frozen=True)
class Choice:
    counts: tuple[int, ...]
    predicted: float  # MHETA per-iteration time of ``counts``
    block_predicted: float  # MHETA per-iteration time of BLOCK, for comparison
    search: SearchResult


def choose_split(
    app: AppStructure,
    profile: Profile,
    cluster: Cluster | None = None,
    *,
    search: str = "gbs-b",
    budget: float = 1.0,
    min_rows: int = 1,
    seed: int = 0,
) -> Choice:
    """The GEN_BLOCK row counts MHETA + search choose for ``app`` on the profiled nodes.

    ``cluster`` (optional) gives the memory now available on each node, if it
    differs from the instrumented run. ``min_rows`` keeps every node in the
    nearest-neighbour chain (the applications here need >= 1 row per rank).
    ``search``: ``gbs`` is the thesis's GBS (optimal for the time without
    blocking); ``gbs-b`` (default) continues from GBS's split by descent on the
    predicted time with blocking (:func:`reshape.mheta.search.descend`), so
    the split is never predicted slower than GBS's; ``gs``, ``ga``, ``sa``.
    """
    if search not in SEARCHES:
        raise ValueError(f"unknown search {search!r}; use one of {sorted(SEARCHES)}")
    if cluster is not None:
        if len(cluster) != len(profile.nodes):
            raise StructureError(
                f"cluster has {len(cluster)} nodes but the profile has {len(profile.nodes)}"
            )
        profile = Profile(tuple(replace(n, memory=c.memory)
                                for n, c in zip(profile.nodes, cluster.nodes, strict=True)),
                          profile.comm)
    model = Mheta(app, profile)
    p, s = len(profile.nodes), app.rows
    rng = random.Random(seed)
    fn = SEARCHES[search]
    if search in ("gbs", "gs", "gbs-b"):
        extra = {"objective": model.predict, "finish": True} if search == "gbs-b" else {}
        res = fn(model.node_cost, p, s, rng=rng, budget=budget, min_rows=min_rows,
                 start=even_counts(s, p) if min(even_counts(s, p)) >= min_rows else None, **extra)
    else:
        res = fn(model.node_cost, p, s, objective=model.predict, rng=rng, budget=budget,
                 min_rows=min_rows)
    return Choice(res.split, model.predict(res.split), model.predict(even_counts(s, p)), res)


# ---- the distribution spectrum (Fig. 6.1) -------------------------------------


def round_split(weights: Sequence[float], s: int, lo: int = 1) -> list[int]:
    """Integer split of ``s`` proportional to ``weights`` (largest remainder), each >= ``lo``."""
    p = len(weights)
    free = s - lo * p
    if free < 0:
        raise StructureError(f"{s} rows cannot give {p} nodes {lo} rows each")
    tot = float(sum(weights))
    raw = [free * w / tot for w in weights] if tot > 0 else [free / p] * p
    out = [int(r) for r in raw]
    order = sorted(range(p), key=lambda i: raw[i] - out[i], reverse=True)
    for i in order[: free - sum(out)]:
        out[i] += 1
    return [o + lo for o in out]


def in_core_capacity(app: AppStructure, memory: int) -> int:
    """Most rows a node with ``memory`` bytes holds with every array in core."""
    lo, hi = 0, min(app.rows, max_resident_rows(app, memory))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if all(v is None for v in plan_memory(app, mid, memory).values()):
            lo = mid
        else:
            hi = mid - 1
    return lo


def balanced_split(s: int, cpus: Sequence[float]) -> list[int]:
    """Bal: rows proportional to relative CPU speed (ignores I/O)."""
    return round_split(cpus, s)


def _fill(s: int, caps: Sequence[int], weights: Sequence[float]) -> list[int]:
    """Water-fill ``s`` rows by ``weights`` without exceeding ``caps``; overflow by weights."""
    p = len(caps)
    x = [0] * p
    left = s
    free = set(range(p))
    while left > 0 and free:
        share = round_split([weights[i] if i in free else 0.0 for i in range(p)], left, 0)
        moved = 0
        for i in list(free):
            take = min(share[i], caps[i] - x[i])
            x[i] += take
            moved += take
            if x[i] >= caps[i]:
                free.discard(i)
        left -= moved
        if moved == 0:
            break
    if left > 0:  # not everything fits in core: overflow proportionally to weights
        extra = round_split(weights, left, 0)
        x = [a + b for a, b in zip(x, extra, strict=True)]
    return x


def in_core_split(s: int, caps: Sequence[int]) -> list[int]:
    """I-C: as many rows in core as possible, proportional to in-core capacity (ignores load)."""
    x = _fill(s, caps, [max(c, 1) for c in caps])
    return _at_least_one(x)


def in_core_balanced_split(s: int, caps: Sequence[int], cpus: Sequence[float]) -> list[int]:
    """I-C/Bal: in core first, then balance load by CPU speed within the capacities."""
    return _at_least_one(_fill(s, caps, cpus))


def _at_least_one(x: list[int]) -> list[int]:
    x = list(x)
    for i in range(len(x)):
        while x[i] < 1:
            j = max(range(len(x)), key=lambda k: x[k])
            x[j] -= 1
            x[i] += 1
    return x


def sweep(anchors: Sequence[Sequence[int]], steps: int = 2) -> list[list[int]]:
    """Linear interpolation through ``anchors`` with ``steps`` segments each; duplicates dropped."""
    out: list[list[int]] = []
    s = sum(anchors[0])
    for a, b in itertools.pairwise(anchors):
        for k in range(steps):
            t = k / steps
            w = [(1 - t) * ai + t * bi for ai, bi in zip(a, b, strict=True)]
            v = round_split(w, s, 0) if sum(w) > 0 else list(a)
            v = _at_least_one(v)
            if v not in out:
                out.append(v)
    last = _at_least_one(list(anchors[-1]))
    if last not in out:
        out.append(last)
    return out
