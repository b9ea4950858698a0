"""Relabelling: the destination rank map that keeps the most data in place (optimal, exact, identity on ties)."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reshape.redistribution.layout import (
    BlockCyclic,
    Layout,
    LayoutError,
    block,
    block_cyclic_1d,
    block_cyclic_2d,
    gen_block,
    nearly_square_grid,
)
from reshape.redistribution.relabel import kept_elements, overlap, relabel, relabel_many
from reshape.redistribution.schedule import make_plan
from tests.test_layout import layouts
from tests.test_schedule import check_plan


def best_kept(src, dst, src_ranks, cands, fixed=None):
    """Brute force: the most elements kept over every injective map of positions to candidates."""
    o = overlap(src, dst)
    where = {r: i for i, r in enumerate(src_ranks)}
    # k[j, c]: elements kept if position j goes to candidate c
    k = np.array([[o[where[r], j] if r in where else 0 for r in cands] for j in range(dst.nprocs)])
    perms = np.array(list(itertools.permutations(range(len(cands)), dst.nprocs)))
    for j, r in (fixed or {}).items():
        perms = perms[perms[:, j] == cands.index(r)]
    return int(k[np.arange(dst.nprocs), perms].sum(axis=1).max())


@st.composite
def placed_pair(draw, max_extra=2):
    """Two layouts of one array, the source on random comm ranks, and the destination's candidate ranks."""
    m, n = draw(st.integers(1, 30)), draw(st.integers(1, 20))
    src, dst = draw(layouts((m, n))), draw(layouts((m, n)))
    size = max(src.nprocs, dst.nprocs) + draw(st.integers(0, max_extra))
    src_ranks = tuple(draw(st.permutations(range(size)))[: src.nprocs])
    cands = None
    if draw(st.booleans()):
        cands = draw(st.permutations(range(size)))[: dst.nprocs + draw(st.integers(0, size - dst.nprocs))]
    return src, dst, src_ranks, cands


@settings(max_examples=150, deadline=None)
@given(data=st.data(), m=st.integers(1, 30), n=st.integers(1, 20))
def test_overlap_counts_common_elements(data, m, n):
    src, dst = data.draw(layouts((m, n))), data.draw(layouts((m, n)))
    o = overlap(src, dst)
    assert o.shape == (src.nprocs, dst.nprocs)
    assert o.sum(axis=1).tolist() == [int(np.prod(src.local_shape(i))) for i in range(src.nprocs)]
    assert o.sum(axis=0).tolist() == [int(np.prod(dst.local_shape(j))) for j in range(dst.nprocs)]
    for i in range(src.nprocs):
        for j in range(dst.nprocs):
            common = [len(np.intersect1d(a, b)) for a, b in
                      zip(src.global_indices(i), dst.global_indices(j), strict=True)]
            assert o[i, j] == common[0] * common[1]


@settings(max_examples=150, deadline=None)
@given(case=placed_pair())
def test_relabelled_plan_is_optimal_complete_and_never_worse(case):
    src, dst, src_ranks, cands = case
    q = dst.nprocs
    out = relabel(src, dst, src_ranks, cands)
    pool = list(range(q)) if cands is None else list(cands)
    identity = tuple(pool[:q])
    assert len(out) == q and len(set(out)) == q and set(out) <= set(pool)
    plan = make_plan(src, dst, src_ranks, out)
    base = make_plan(src, dst, src_ranks, identity)
    total = int(np.prod(src.shape))
    assert plan.kept + plan.moved == total == base.kept + base.moved
    assert plan.kept == kept_elements(src, dst, src_ranks, out)
    assert plan.moved <= base.moved
    if q <= 6 and len(pool) <= 8:
        best = best_kept(src, dst, src_ranks, pool)
        assert plan.kept == best
        if base.kept == best:
            assert out == identity
    g = np.arange(total, dtype=np.int64).reshape(src.shape)
    check_plan(plan, g)


@settings(max_examples=100, deadline=None)
@given(case=placed_pair(), data=st.data())
def test_fixed_positions_are_honoured(case, data):
    src, dst, src_ranks, cands = case
    pool = list(range(dst.nprocs)) if cands is None else list(cands)
    positions = data.draw(st.lists(st.integers(0, dst.nprocs - 1), unique=True, max_size=dst.nprocs))
    ranks = data.draw(st.permutations(pool))[: len(positions)]
    fixed = dict(zip(positions, ranks, strict=True))
    out = relabel(src, dst, src_ranks, cands, fixed)
    assert all(out[j] == r for j, r in fixed.items())
    assert len(set(out)) == len(out) and set(out) <= set(pool)
    if dst.nprocs <= 6 and len(pool) <= 8:
        assert kept_elements(src, dst, src_ranks, out) == best_kept(src, dst, src_ranks, pool, fixed)


def permuted(lay: Layout, order: str, shifts: list[int]) -> Layout:
    """The same pieces on other positions: another rank order, block-cyclic axes started elsewhere."""
    dists = [BlockCyclic(d.n, d.nb, d.p, (d.src + s) % d.p) if isinstance(d, BlockCyclic) else d
             for d, s in zip(lay.dists, shifts, strict=True)]
    return Layout(tuple(dists), order)


@settings(max_examples=150, deadline=None)
@given(data=st.data(), m=st.integers(1, 30), n=st.integers(1, 20))
def test_a_permutation_of_positions_moves_nothing(data, m, n):
    src = data.draw(layouts((m, n)))
    dst = permuted(src, data.draw(st.sampled_from("RC")), data.draw(st.lists(st.integers(0, 5), min_size=2,
                                                                             max_size=2)))
    src_ranks = tuple(data.draw(st.permutations(range(src.nprocs))))
    plan = make_plan(src, dst, src_ranks, relabel(src, dst, src_ranks))
    assert plan.moved == 0 and plan.steps == []
    check_plan(plan, np.arange(m * n).reshape(m, n))


@pytest.mark.parametrize("src, dst", [
    (block_cyclic_2d((40, 30), (2, 3), (4, 5)), block_cyclic_2d((40, 30), (2, 3), (4, 5), order="C")),
    (block_cyclic_2d((40, 30), (3, 2), (4, 5)), block_cyclic_2d((40, 30), (3, 2), (4, 5), (2, 1))),
    # zero-count GEN_BLOCK pieces can go anywhere: [3, 0, 3] and [3, 3, 0] hold the same pieces
    (gen_block((6, 4), [3, 0, 3]), gen_block((6, 4), [3, 3, 0])),
    # 1-D row blocks are a p x 1 grid whatever the column block size
    (block_cyclic_1d((12, 5), 3, 2), block_cyclic_2d((12, 5), (3, 1), (2, 4), (1, 0))),
])
def test_concrete_permutations_move_nothing(src, dst):
    assert make_plan(src, dst).moved > 0
    assert make_plan(src, dst, None, relabel(src, dst)).moved == 0


def test_permuted_gen_block_counts_are_not_a_permutation_of_positions():
    # [2, 1, 3] -> [3, 1, 2]: pieces stay in row order, so the best keeps rows 0-1 and 4-5 (or 3-5 / 0-2 ...)
    src, dst = gen_block((6, 4), [2, 1, 3]), gen_block((6, 4), [3, 1, 2])
    out = relabel(src, dst)
    assert make_plan(src, dst, None, out).moved == 2 * 4 == make_plan(src, dst).moved
    assert out == (0, 1, 2)  # identity is already optimal here


@pytest.mark.parametrize("src, dst", [
    (block_cyclic_1d((64, 8), 2, 4), block_cyclic_1d((64, 8), 4, 4)),  # dst 0/2 both inside src 0: a tie
    (block((64, 8), 4), block((64, 8), 2)),  # src 0 keeps 16 rows on position 0 or 1: a tie
    (block((64, 8), 3), block((64, 8), 3)),
    (block_cyclic_2d((4000, 4000), (2, 3), (64, 64)), block_cyclic_2d((4000, 4000), (3, 3), (64, 64))),
])
def test_identity_is_kept_when_it_is_optimal(src, dst):
    assert relabel(src, dst) == tuple(range(dst.nprocs))


def test_relabel_many_weighs_arrays_by_bytes():
    # array a wants position 1 on rank 0; array b wants position 0 there
    a = (gen_block((4, 1), [4, 0]), gen_block((4, 1), [0, 4]))
    b = (gen_block((4, 1), [4, 0]), gen_block((4, 1), [4, 0]))
    assert relabel_many([(*a, None, 8), (*b, None, 1)]) == (1, 0)
    assert relabel_many([(*a, None, 1), (*b, None, 8)]) == (0, 1)
    assert relabel_many([(*a, None, 4), (*b, None, 4)]) == (0, 1)  # a tie: identity
    assert relabel(*a) == relabel_many([(*a, None, 8)]) == (1, 0)


@settings(max_examples=60, deadline=None)
@given(data=st.data(), m=st.integers(1, 24), n=st.integers(1, 16), q=st.integers(1, 5))
def test_relabel_many_is_optimal_in_total_bytes(data, m, n, q):
    """Two arrays with one destination process count, each source on its own ranks among 0..5."""
    cuts = sorted(data.draw(st.lists(st.integers(0, m), min_size=q - 1, max_size=q - 1)))
    dsts = [block_cyclic_2d((m, n), nearly_square_grid(q), data.draw(st.tuples(st.integers(1, 5), st.integers(1, 5)))),
            gen_block((m, n), np.diff([0, *cuts, m]).tolist())]
    pairs = []
    for dst in dsts:
        src = data.draw(layouts((m, n)).filter(lambda lay: lay.nprocs <= 6))
        ranks = tuple(data.draw(st.permutations(range(6)))[: src.nprocs])
        pairs.append((src, dst, ranks, data.draw(st.sampled_from([1, 4, 8]))))
    out = relabel_many(pairs, dst_candidates=range(6))

    def total(ranks):
        return sum(w * kept_elements(s, d, sr, ranks) for s, d, sr, w in pairs)

    assert max(total(p) for p in itertools.permutations(range(6), q)) == total(out)


N = 4000


@pytest.mark.parametrize("src, dst, identity, relabelled", [
    # moved fraction under the identity rank map and after relabelling (2-D: 64 x 64 blocks)
    (block_cyclic_2d((N, N), (2, 2), (64, 64)), block_cyclic_2d((N, N), (2, 3), (64, 64)), 0.743, 0.648),
    (block_cyclic_2d((N, N), (2, 3), (64, 64)), block_cyclic_2d((N, N), (3, 3), (64, 64)), 0.648, 0.648),
    (block_cyclic_2d((N, N), (3, 3), (64, 64)), block_cyclic_2d((N, N), (2, 3), (64, 64)), 0.648, 0.648),
    (block_cyclic_2d((N, N), (1, 3), (64, 64)), block_cyclic_2d((N, N), (2, 2), (64, 64)), 0.739, 0.739),
    (block_cyclic_2d((N, N), (2, 2), (64, 64)), block_cyclic_2d((N, N), (3, 3), (64, 64)), 0.883, 0.876),
    (block((N, N), 3), block((N, N), 4), 0.500, 0.333),
    (block((N, N), 4), block((N, N), 6), 0.750, 0.334),
    (gen_block((N, N), [500, 1500, 2000]), gen_block((N, N), [2000, 1000, 1000]), 0.625, 0.375),
    (block_cyclic_2d((N, N), (2, 3), (64, 64)), block_cyclic_2d((N, N), (2, 3), (64, 64), order="C"), 0.668, 0.0),
])
def test_concrete_fractions_moved(src, dst, identity, relabelled):
    base, plan = make_plan(src, dst), make_plan(src, dst, None, relabel(src, dst))
    assert base.moved / N**2 == pytest.approx(identity, abs=5e-4)
    assert plan.moved / N**2 == pytest.approx(relabelled, abs=5e-4)


def test_shrink_may_choose_which_ranks_stay():
    src, dst = block((N, 8), 4), block((N, 8), 3)
    # dst blocks of 1334 rows; ranks 0-2 keep 1000 + 666 + 332 rows, ranks 0, 2, 3 keep 1000 + 668 + 1000
    assert kept_elements(src, dst) == (1000 + 666 + 332) * 8 == make_plan(src, dst).kept
    assert relabel(src, dst) == (0, 1, 2)
    out = relabel(src, dst, dst_candidates=range(4), fixed={0: 0})
    assert out == (0, 2, 3)
    assert kept_elements(src, dst, None, out) == (1000 + 668 + 1000) * 8


def test_a_thousand_processes():
    src = block_cyclic_2d((N, N), (32, 32), (64, 64))
    dst = block_cyclic_2d((N, N), (32, 32), (64, 64), order="C")
    out = relabel(src, dst)
    assert kept_elements(src, dst, None, out) == N * N
    assert relabel(src, block_cyclic_2d((N, N), (31, 33), (64, 64)), fixed={0: 0})[0] == 0


def test_bad_requests_are_refused():
    src, dst = block((10, 4), 2), block((10, 4), 3)
    with pytest.raises(LayoutError, match="3 distinct candidate"):
        relabel(src, dst, dst_candidates=[0, 1])
    with pytest.raises(LayoutError, match="not candidates"):
        relabel(src, dst, fixed={0: 7})
    with pytest.raises(LayoutError, match="distinct ranks"):
        relabel(src, dst, fixed={0: 1, 1: 1})
    with pytest.raises(LayoutError, match="all destinations"):
        relabel_many([(src, dst, None, 8), (src, block((10, 4), 2), None, 8)])
    with pytest.raises(LayoutError, match="global shapes differ"):
        overlap(src, block((10, 5), 3))
