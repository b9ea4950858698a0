"""Redistribution plans: table-based index sets and a contention-free circulant schedule.

Pure code (no MPI). Given a source and a destination :class:`~reshape.redistribution.layout.Layout`
and the communicator ranks holding each, :func:`make_plan` computes

* for every (sender, receiver) pair, the local index runs to send and to
  receive (the paper's *initial* and *final distribution tables*, Sudarsan & Ribbens 2007
  §3.2.2, after Park, Prasanna & Raghavendra 1999): per array axis, the
  intersection of the two 1-D distributions, so a 2-D checkerboard plan is the
  product of two 1-D plans;
* the *destination processor table*: a list of steps, each a set of transfers
  in which every rank sends at most one message and receives at most one.

Schedule construction. Park et al. show that for block-cyclic P -> Q the
send table can be arranged as a generalised circulant matrix, so that in step
``k`` source ``s`` sends to the ``k``-th destination in cyclic order starting
at itself (and, when receivers are the bottleneck, receiver ``d`` takes its
``k``-th source in cyclic order). We use that circulant assignment as each
transfer's preferred step. It is already conflict-free and optimal for full
superblocks of 1-D block-cyclic pairs; when it is not (truncated superblocks,
GEN_BLOCK, 2-D grids whose row and column patterns interleave, arbitrary rank
maps) the remaining transfers are placed by alternating-path recolouring of
the bipartite sender/receiver graph (König's edge-colouring theorem). Either
way the schedule has exactly ``max_degree`` steps: the most distinct
destinations any rank sends to or sources any rank receives from, local
copies excluded, which is the lower bound.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from reshape.redistribution.layout import BlockCyclic, Dist, Layout, LayoutError

__all__ = ["Plan", "RunGroup", "Runs", "Transfer", "axis_pieces", "contiguous", "make_plan", "run_groups"]


@dataclass(frozen=True)
class Runs:
    """Runs of consecutive local indices along one axis: ``[starts[i], starts[i] + lens[i])``."""

    starts: np.ndarray
    lens: np.ndarray

    @property
    def total(self) -> int:
        return int(self.lens.sum())

    def index(self) -> np.ndarray:
        """All indices of the runs, in order."""
        if len(self.starts) == 1:
            s = int(self.starts[0])
            return np.arange(s, s + int(self.lens[0]), dtype=np.int64)
        return np.concatenate([np.arange(s, s + n) for s, n in zip(self.starts, self.lens, strict=True)])


RunGroup = tuple[int, int, int, int, int, int]  # (start_a, stride_a, start_b, stride_b, length, count)


def run_groups(a: Runs, b: Runs) -> list[RunGroup]:
    """Split two aligned run lists (same lengths) into regular groups.

    A group is ``count`` runs of ``length`` indices whose starts advance by a
    constant stride on each side. Block-cyclic transfers are one or two groups
    per axis, so copies become strided numpy views and messages MPI vector types.
    """
    sa, sb, ln = a.starts.tolist(), b.starts.tolist(), a.lens.tolist()
    out: list[RunGroup] = []
    i, n = 0, len(ln)
    while i < n:
        length, j = ln[i], i + 1
        da = db = length
        if j < n and ln[j] == length:
            da, db = sa[j] - sa[i], sb[j] - sb[i]
            while j < n and ln[j] == length and sa[j] - sa[j - 1] == da and sb[j] - sb[j - 1] == db:
                j += 1
        out.append((sa[i], da, sb[i], db, length, j - i))
        i = j
    return out


@dataclass(frozen=True)
class Transfer:
    """Data moving from comm rank ``src`` to comm rank ``dst``.

    ``send[k]`` / ``recv[k]`` are the runs along axis ``k`` in the sender's and
    receiver's local blocks; enumerating the product of the runs in C order
    yields the same global elements in the same order on both sides.
    """

    src: int
    dst: int
    send: tuple[Runs, ...]
    recv: tuple[Runs, ...]

    @property
    def count(self) -> int:
        n = 1
        for r in self.send:
            n *= r.total
        return n

    @property
    def local(self) -> bool:
        return self.src == self.dst


def axis_pieces(a: Dist, b: Dist) -> dict[tuple[int, int], tuple[Runs, Runs]]:
    """Intersect two 1-D distributions of the same axis.

    Returns ``{(coord_a, coord_b): (runs in a's local indices, runs in b's)}``
    with runs in increasing global order, adjacent runs merged when they are
    contiguous on both sides.
    """
    if a.n != b.n:
        raise LayoutError(f"axis lengths differ: {a.n} vs {b.n}")
    n = a.n
    if n == 0:
        return {}
    ga, oa, la = a.segments()
    gb, ob, lb = b.segments()
    bounds = np.union1d(ga, gb)
    ia = np.searchsorted(ga, bounds, side="right") - 1
    ib = np.searchsorted(gb, bounds, side="right") - 1
    ends = np.append(bounds[1:], n)
    lens = ends - bounds
    ca, cb = oa[ia], ob[ib]
    sa = la[ia] + (bounds - ga[ia])
    sb = lb[ib] + (bounds - gb[ib])
    order = np.lexsort((bounds, cb, ca))
    ca, cb, sa, sb, lens = ca[order], cb[order], sa[order], sb[order], lens[order]
    # A new run starts where the pair changes or either side is not contiguous.
    brk = np.ones(len(ca), dtype=bool)
    brk[1:] = (
        (ca[1:] != ca[:-1])
        | (cb[1:] != cb[:-1])
        | (sa[1:] != sa[:-1] + lens[:-1])
        | (sb[1:] != sb[:-1] + lens[:-1])
    )
    starts_idx = np.flatnonzero(brk)
    run_lens = np.add.reduceat(lens, starts_idx)
    rca, rcb, rsa, rsb = ca[starts_idx], cb[starts_idx], sa[starts_idx], sb[starts_idx]
    pair_brk = np.ones(len(rca), dtype=bool)
    pair_brk[1:] = (rca[1:] != rca[:-1]) | (rcb[1:] != rcb[:-1])
    edges = np.append(np.flatnonzero(pair_brk), len(rca))
    out: dict[tuple[int, int], tuple[Runs, Runs]] = {}
    for i0, i1 in itertools.pairwise(edges):
        out[(int(rca[i0]), int(rcb[i0]))] = (
            Runs(rsa[i0:i1], run_lens[i0:i1]),
            Runs(rsb[i0:i1], run_lens[i0:i1]),
        )
    return out


def contiguous(runs: tuple[Runs, ...], lshape: tuple[int, ...]) -> tuple[int, int] | None:
    """``(offset, count)`` in elements when the run product is one contiguous range."""
    ndim = len(runs)
    for r in runs:
        if len(r.starts) != 1:
            return None
    j = ndim - 1
    while j > 0 and int(runs[j].starts[0]) == 0 and int(runs[j].lens[0]) == lshape[j]:
        j -= 1
    if any(int(runs[k].lens[0]) != 1 for k in range(j)):
        return None
    strides = [math.prod(lshape[k + 1 :]) for k in range(ndim)]
    offset = sum(int(runs[k].starts[0]) * strides[k] for k in range(ndim))
    count = math.prod(int(r.lens[0]) for r in runs)
    return offset, count


@dataclass
class Plan:
    """A redistribution plan between two layouts (see module docstring)."""

    src: Layout
    dst: Layout
    src_ranks: tuple[int, ...]
    dst_ranks: tuple[int, ...]
    transfers: list[Transfer]
    steps: list[list[Transfer]] = field(default_factory=list)
    circulant_placed: int = 0  # transfers placed at their circulant step without repair

    @property
    def local(self) -> list[Transfer]:
        return [t for t in self.transfers if t.local]

    @property
    def remote(self) -> list[Transfer]:
        return [t for t in self.transfers if not t.local]

    @property
    def moved(self) -> int:
        """Elements crossing between ranks (remote transfers)."""
        return sum(t.count for t in self.transfers if not t.local)

    @property
    def kept(self) -> int:
        """Elements staying on their rank (local copies)."""
        return sum(t.count for t in self.transfers if t.local)

    @property
    def max_degree(self) -> int:
        """König's lower bound on the number of steps."""
        out: dict[int, int] = {}
        inn: dict[int, int] = {}
        for t in self.remote:
            out[t.src] = out.get(t.src, 0) + 1
            inn[t.dst] = inn.get(t.dst, 0) + 1
        return max([0, *out.values(), *inn.values()])

    def sends_of(self, rank: int) -> list[tuple[int, Transfer]]:
        """``(step, transfer)`` for every message ``rank`` sends."""
        return [(k, t) for k, st in enumerate(self.steps) for t in st if t.src == rank]

    def recvs_of(self, rank: int) -> list[tuple[int, Transfer]]:
        return [(k, t) for k, st in enumerate(self.steps) for t in st if t.dst == rank]

    def local_of(self, rank: int) -> Transfer | None:
        for t in self.transfers:
            if t.local and t.src == rank:
                return t
        return None

    def table(self) -> str:
        """The destination processor table: one row per step, one column per sending rank."""
        senders = sorted({t.src for t in self.transfers})
        width = max(3, len(str(max([0, *self.dst_ranks]))) + 1)
        head = "step |" + "".join(f"{s:>{width}}" for s in senders)
        lines = [head, "-" * len(head)]
        loc = {t.src: t.dst for t in self.local}
        lines.append("  L  |" + "".join(f"{loc.get(s, '-'):>{width}}" for s in senders))
        for k, st in enumerate(self.steps):
            row = {t.src: t.dst for t in st}
            lines.append(f"{k:>4} |" + "".join(f"{row.get(s, '-'):>{width}}" for s in senders))
        return "\n".join(lines)


def _axis_steps(a: Dist, b: Dist) -> dict[tuple[int, int], tuple[int, int]] | None:
    """Circulant step of every coordinate pair of one axis: ``{(ca, cb): (step, nsteps)}``.

    Park, Prasanna & Raghavendra (1999): for block-cyclic P -> Q with equal
    block sizes the data falls into superblocks of ``L = lcm(P, Q)`` blocks,
    and each (source, destination) pair with data meets exactly once per
    superblock. Step ``k`` carries blocks ``[k*m, (k+1)*m)`` of a superblock,
    ``m = min(P, Q)``: ``m`` consecutive blocks have distinct owners on both
    sides, so each step is contention-free and there are ``L / m`` steps.
    ``None`` when the axis has no such structure (GEN_BLOCK, unequal blocks).
    """
    if not (isinstance(a, BlockCyclic) and isinstance(b, BlockCyclic) and a.nb == b.nb):
        return None
    p, q = a.p, b.p
    m = min(p, q)
    sb = math.lcm(p, q)
    nsteps = sb // m
    nblocks = -(-a.n // a.nb)
    out: dict[tuple[int, int], tuple[int, int]] = {}
    for blk in range(min(sb, nblocks)):
        out.setdefault(((a.src + blk) % p, (b.src + blk) % q), (blk // m, nsteps))
    return out


def _transfers(src: Layout, dst: Layout, src_ranks: tuple[int, ...], dst_ranks: tuple[int, ...]):
    """All transfers, plus each one's circulant step (``None`` where there is none).

    A checkerboard (2-D) transfer's step is the product of its row step and its
    column step (mixed radix), the paper's extension of the 1-D schedule.
    """
    pieces = [axis_pieces(a, b) for a, b in zip(src.dists, dst.dists, strict=True)]
    steps = [_axis_steps(a, b) for a, b in zip(src.dists, dst.dists, strict=True)]
    out: list[Transfer] = []
    pref: dict[tuple[int, int], int | None] = {}

    def rec(k, sc, dc, send, recv, step):
        if k == len(pieces):
            t = Transfer(src_ranks[src.rank(sc)], dst_ranks[dst.rank(dc)], send, recv)
            out.append(t)
            pref[(t.src, t.dst)] = step
            return
        for (ca, cb), (ra, rb) in pieces[k].items():
            nxt = None
            if step is not None and steps[k] is not None:
                s_k, n_k = steps[k][(ca, cb)]
                nxt = step * n_k + s_k
            rec(k + 1, (*sc, ca), (*dc, cb), (*send, ra), (*recv, rb), nxt)

    rec(0, (), (), (), (), 0)
    out.sort(key=lambda t: (t.src, t.dst))
    return out, pref


def _colour(remote: list[Transfer], pref: dict[tuple[int, int], int | None]):
    """Edge-colour the sender/receiver bipartite graph with exactly max-degree colours.

    Transfers first take their circulant step (steps left with only local
    copies dropped, the rest renumbered in order); a transfer whose step
    conflicts or lies beyond the bound is placed by alternating-path
    recolouring (König), so the result always has ``max_degree`` steps.
    Returns the steps and how many transfers kept their circulant step.
    """
    if not remote:
        return [], 0
    by_pair = {(t.src, t.dst): t for t in remote}
    deg_s: dict[int, int] = {}
    deg_r: dict[int, int] = {}
    for s, d in by_pair:
        deg_s[s] = deg_s.get(s, 0) + 1
        deg_r[d] = deg_r.get(d, 0) + 1
    delta = max(max(deg_s.values()), max(deg_r.values()))
    at_s: dict[int, dict[int, int]] = {s: {} for s in deg_s}  # sender -> colour -> receiver
    at_r: dict[int, dict[int, int]] = {d: {} for d in deg_r}  # receiver -> colour -> sender
    used = sorted({pref[k] for k in by_pair if pref.get(k) is not None})
    compact = {v: i for i, v in enumerate(used)}
    pending = []
    placed = 0
    for (s, d) in sorted(by_pair, key=lambda k: (compact.get(pref.get(k), delta), k)):
        c = compact.get(pref.get((s, d)))
        if c is not None and c < delta and c not in at_s[s] and c not in at_r[d]:
            at_s[s][c] = d
            at_r[d][c] = s
            placed += 1
        else:
            pending.append((s, d))
    for s, d in pending:
        a = next(c for c in range(delta) if c not in at_s[s])
        b = next(c for c in range(delta) if c not in at_r[d])
        if a not in at_r[d]:
            at_s[s][a] = d
            at_r[d][a] = s
            continue
        # Flip the a/b alternating path that starts at receiver d with its a-edge.
        path: list[tuple[int, int, int]] = []  # (sender, receiver, colour)
        recv, colour = d, a
        while True:
            snd = at_r[recv].get(colour)
            if snd is None:
                break
            path.append((snd, recv, colour))
            other = b if colour == a else a
            nxt = at_s[snd].get(other)
            if nxt is None:
                break
            path.append((snd, nxt, other))
            recv = nxt
        for snd, rcv, c in path:
            del at_s[snd][c]
            del at_r[rcv][c]
        for snd, rcv, c in path:
            c2 = b if c == a else a
            at_s[snd][c2] = rcv
            at_r[rcv][c2] = snd
        assert a not in at_s[s] and a not in at_r[d], "alternating path reached its start"
        at_s[s][a] = d
        at_r[d][a] = s
    steps: list[list[Transfer]] = [[] for _ in range(delta)]
    for s, cols in at_s.items():
        for c, d in cols.items():
            steps[c].append(by_pair[(s, d)])
    for st in steps:
        st.sort(key=lambda t: t.src)
    return [st for st in steps if st], placed


@lru_cache(maxsize=256)
def make_plan(
    src: Layout,
    dst: Layout,
    src_ranks: tuple[int, ...] | None = None,
    dst_ranks: tuple[int, ...] | None = None,
) -> Plan:
    """Plan the redistribution of an array from layout ``src`` to ``dst``.

    ``src_ranks[i]`` is the communicator rank holding process ``i`` of ``src``
    (default ``0..P-1``); likewise ``dst_ranks`` for ``dst``. Both sets live in
    one communicator, so an expansion is ``src_ranks=range(P)``,
    ``dst_ranks=range(Q)`` with ``Q > P``.
    """
    src_ranks = tuple(range(src.nprocs)) if src_ranks is None else tuple(src_ranks)
    dst_ranks = tuple(range(dst.nprocs)) if dst_ranks is None else tuple(dst_ranks)
    if src.shape != dst.shape:
        raise LayoutError(f"global shapes differ: source {src.shape}, destination {dst.shape}")
    for name, lay, ranks in (("source", src, src_ranks), ("destination", dst, dst_ranks)):
        if len(ranks) != lay.nprocs:
            raise LayoutError(f"{name} layout has {lay.nprocs} processes but {len(ranks)} ranks were given")
        if len(set(ranks)) != len(ranks) or min(ranks) < 0:
            raise LayoutError(f"{name} ranks must be distinct and >= 0, got {list(ranks)}")
    transfers, pref = _transfers(src, dst, src_ranks, dst_ranks)
    steps, placed = _colour([t for t in transfers if not t.local], pref)
    return Plan(src, dst, src_ranks, dst_ranks, transfers, steps, placed)
