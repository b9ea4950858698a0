"""Relabelling: which comm rank takes which position of a new layout, so that the fewest bytes move.

Pure code (no MPI). A redistribution from layout ``src`` (process ``i`` held
by comm rank ``src_ranks[i]``) to layout ``dst`` is free to choose the comm rank
``dst_ranks[j]`` holding each destination position ``j``: the layouts fix
*what* each position holds, not *who* holds it. Data that a rank holds under
both layouts is a local copy; everything else crosses the network. Choosing
``dst_ranks`` to maximise the data kept in place is a linear assignment
problem on the (position x rank) matrix of kept bytes (Kabic, Pintarelli,
Kozhevnikov & VandeVondele, "COSTA", ISC 2021), solved exactly by
:func:`scipy.optimize.linear_sum_assignment`.

When relabelling gains nothing, the identity (position ``j`` -> candidate
``j``) is returned, so callers see no change in that case. Keeping the most
bytes in place is not always the fastest plan: it can pile the copying onto
fewer ranks, and where every transfer is contiguous (1-D row blocks) a kept
byte costs the engine one copy, as a moved one does. :func:`cost` prices a
placement by the engine's copies (the busiest rank's, then the total); the
runtime takes the relabelling only where it is cheaper than the identity by
more than :data:`MARGIN` (:func:`cheaper`) (:func:`reshape.redistribution.placement.choose`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from reshape.redistribution.layout import _NP_ORDER, Layout, LayoutError
from reshape.redistribution.schedule import axis_pieces

__all__ = ["MARGIN", "cheaper", "cost", "kept_elements", "loads", "overlap", "relabel", "relabel_many"]


def _coords(lay: Layout) -> tuple[np.ndarray, ...]:
    """Per-axis grid coordinate of every process of ``lay``, indexed by layout rank."""
    return np.unravel_index(np.arange(lay.nprocs), lay.grid, order=_NP_ORDER[lay.order])


def overlap(src: Layout, dst: Layout) -> np.ndarray:
    """Elements process ``i`` of ``src`` and process ``j`` of ``dst`` have in common: a (P, Q) int64 matrix.

    Per axis, the (coord_a, coord_b) totals of :func:`~reshape.redistribution.schedule.axis_pieces`;
    the count of a pair of processes is the product over axes of its coordinates' totals.
    """
    if src.shape != dst.shape:
        raise LayoutError(f"global shapes differ: source {src.shape}, destination {dst.shape}")
    sc, dc = _coords(src), _coords(dst)
    out = np.ones((src.nprocs, dst.nprocs), dtype=np.int64)
    for k, (a, b) in enumerate(zip(src.dists, dst.dists, strict=True)):
        ax = np.zeros((a.p, b.p), dtype=np.int64)
        for (ca, cb), (ra, _rb) in axis_pieces(a, b).items():
            ax[ca, cb] = ra.total
        out *= ax[np.ix_(sc[k], dc[k])]
    return out


def kept_elements(
    src: Layout, dst: Layout, src_ranks: Sequence[int] | None = None, dst_ranks: Sequence[int] | None = None
) -> int:
    """Elements that stay on their comm rank when ``src`` (on ``src_ranks``) becomes ``dst`` (on ``dst_ranks``)."""
    src_ranks = range(src.nprocs) if src_ranks is None else src_ranks
    dst_ranks = range(dst.nprocs) if dst_ranks is None else dst_ranks
    where = {int(r): j for j, r in enumerate(dst_ranks)}
    pairs = [(i, where[int(r)]) for i, r in enumerate(src_ranks) if int(r) in where]
    if not pairs:
        return 0
    o = overlap(src, dst)
    rows, cols = zip(*pairs, strict=True)
    return int(o[list(rows), list(cols)].sum())


def _gain(pairs, cands: list[int], q: int) -> np.ndarray:
    """Bytes kept if position ``j`` goes to candidate ``cands[c]``: a (Q, C) int64 matrix."""
    col = {r: c for c, r in enumerate(cands)}
    g = np.zeros((q, len(cands)), dtype=np.int64)
    for src, dst, src_ranks, itemsize in pairs:
        if dst.nprocs != q:
            raise LayoutError(f"all destinations must have {q} processes, one has {dst.nprocs}")
        src_ranks = range(src.nprocs) if src_ranks is None else src_ranks
        if len(src_ranks) != src.nprocs:
            raise LayoutError(f"source layout has {src.nprocs} processes but {len(src_ranks)} ranks were given")
        rows = [i for i, r in enumerate(src_ranks) if int(r) in col]
        if rows:
            cols = [col[int(src_ranks[i])] for i in rows]
            g[:, cols] += int(itemsize) * overlap(src, dst)[rows, :].T
    return g


def relabel_many(
    pairs: Iterable[tuple[Layout, Layout, Sequence[int] | None, int]],
    dst_candidates: Sequence[int] | None = None,
    fixed: Mapping[int, int] | None = None,
) -> tuple[int, ...]:
    """Comm rank for every destination position, maximising the bytes kept in place over several arrays.

    ``pairs`` holds ``(src, dst, src_ranks, itemsize)`` per array (``src_ranks``
    ``None`` for ``0..P-1``); every ``dst`` has the same process count ``Q``, and
    position ``j`` of all of them goes to the same rank. Ranks are drawn, each at
    most once, from ``dst_candidates`` (default ``0..Q-1``; pass more than ``Q``
    to let a shrink choose which ranks stay). ``fixed={position: rank}`` pins
    positions. Ties go to the identity ``j -> dst_candidates[j]``: it is returned
    whenever it is optimal, and otherwise an optimum with the most positions on it
    (while ``(Q + 1) x`` the kept bytes fit a float64 exactly, i.e. below 2**53).
    """
    linear_sum_assignment = solver()
    pairs = list(pairs)
    if not pairs:
        raise LayoutError("relabelling needs at least one array")
    q = pairs[0][1].nprocs
    cands = [int(r) for r in (range(q) if dst_candidates is None else dst_candidates)]
    fixed = {int(j): int(r) for j, r in (fixed or {}).items()}
    if len(set(cands)) != len(cands) or len(cands) < q:
        raise LayoutError(f"need {q} distinct candidate ranks, got {cands}")
    if any(not 0 <= j < q for j in fixed) or len(set(fixed.values())) != len(fixed):
        raise LayoutError(f"fixed positions must lie in 0..{q - 1} and map to distinct ranks, got {fixed}")
    if not set(fixed.values()) <= set(cands):
        raise LayoutError(f"fixed ranks {sorted(set(fixed.values()) - set(cands))} are not candidates")
    g = _gain(pairs, cands, q)
    col = {r: c for c, r in enumerate(cands)}

    free_rows = [j for j in range(q) if j not in fixed]
    taken = {col[r] for r in fixed.values()}
    free_cols = [c for c in range(len(cands)) if c not in taken]
    sub = g[np.ix_(free_rows, free_cols)]
    # Break ties towards the identity exactly: scale by Q+1 and add 1 per identity cell (at most Q < Q+1
    # in total), as long as float64 represents the result exactly; the identity check below covers the rest.
    weight = sub.astype(np.float64)
    if sub.size and int(sub.max()) * (q + 1) + q < 2**53:
        weight *= q + 1
        weight += np.equal.outer(free_rows, free_cols)
    r_idx, c_idx = linear_sum_assignment(weight, maximize=True)
    choice = dict(fixed)
    for r, c in zip(r_idx, c_idx, strict=True):
        choice[free_rows[r]] = cands[free_cols[c]]
    out = tuple(choice[j] for j in range(q))

    identity = tuple(cands[:q])
    if all(identity[j] == r for j, r in fixed.items()):
        kept = int(g[np.arange(q), [col[r] for r in out]].sum())
        if int(g[np.arange(q), np.arange(q)].sum()) >= kept:
            return identity
    return out


def loads(
    pairs: Iterable[tuple[Layout, Layout, Sequence[int] | None, int]], dst_ranks: Sequence[int],
    direct: bool = False,
) -> dict[int, int]:
    """Bytes each comm rank copies when every array of ``pairs`` moves to ``dst_ranks``, as the engine copies.

    From the plan (:func:`~reshape.redistribution.schedule.make_plan`): a kept
    byte is copied once, by its rank; a moved byte once by its receiver (the
    receiver's copy out of the sender's memory: CMA, or a direct read of a
    memfd block when ``direct``), and once more by its sender when the
    transfer is not contiguous in the sender's block and goes over MPI (the
    sender packs it). So relabelling 1-D row blocks gains no copies (every
    transfer is contiguous: a kept row costs what a received one does), while
    2-D block-cyclic moves are packed and keeping bytes in place saves two
    copies each.
    """
    from reshape.redistribution.schedule import contiguous, make_plan

    out: dict[int, int] = {}
    for src, dst, src_ranks, itemsize in pairs:
        plan = make_plan(src, dst, None if src_ranks is None else tuple(src_ranks), tuple(dst_ranks))
        for t in plan.transfers:
            b = int(itemsize) * t.count
            out[t.dst] = out.get(t.dst, 0) + b
            if not t.local and not direct:
                i = plan.src_ranks.index(t.src)
                if contiguous(t.send, src.local_shape(i)) is None:
                    out[t.src] = out.get(t.src, 0) + b
    return out


def cost(pairs, dst_ranks: Sequence[int], direct: bool = False) -> tuple[int, int]:
    """A placement's cost for choosing between placements: ``(busiest rank's load, total load)`` (:func:`loads`).

    The busiest rank bounds the time when ranks have cores of their own; the
    total when they share them.
    """
    per = loads(list(pairs), dst_ranks, direct)
    return max(per.values(), default=0), sum(per.values())


MARGIN = 0.05  # a placement must save this share of the cost to be taken (see cheaper)


def cheaper(a: tuple[int, int], b: tuple[int, int], margin: float = MARGIN) -> bool:
    """Whether cost ``a`` beats cost ``b`` by more than ``margin``: on the busiest rank, or on the total
    with the busiest rank no worse. A gain of a few per cent is within the run-to-run noise of a move
    and does not pay for renumbering the communicator (2-D 64 x 64 6 -> 4: 2% less, measured 0.91-1.07x)."""
    return a[0] < (1 - margin) * b[0] or (a[0] <= b[0] and a[1] < (1 - margin) * b[1])


def solver():
    """scipy's ``linear_sum_assignment``, imported on first use (not paid by ``import reshape``).

    Its own module is imported where it exists (0.3 s here, against 0.7 s for ``scipy.optimize``).
    """
    try:
        from scipy.optimize._lsap import linear_sum_assignment
    except ImportError:  # the public name is the contract; the private module is only faster to import
        from scipy.optimize import linear_sum_assignment
    return linear_sum_assignment


def relabel(
    src: Layout,
    dst: Layout,
    src_ranks: Sequence[int] | None = None,
    dst_candidates: Sequence[int] | None = None,
    fixed: Mapping[int, int] | None = None,
) -> tuple[int, ...]:
    """``dst_ranks`` for one array: :func:`relabel_many` with a single pair (the item size does not matter)."""
    return relabel_many([(src, dst, src_ranks, 1)], dst_candidates, fixed)
