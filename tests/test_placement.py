"""Placement at a resize: which ranks stay on a shrink, which rank takes which position (pure, hypothesis)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reshape.redistribution import placement
from reshape.redistribution.layout import block, block_cyclic_2d, nearly_square_grid
from reshape.redistribution.relabel import cheaper, cost, kept_elements, loads, relabel_many
from reshape.redistribution.schedule import contiguous, make_plan


@st.composite
def histories(draw):
    """The seniorities of a job after random expansions: mpiexec's ranks, then each spawn group appended."""
    keys = [(0, r) for r in range(draw(st.integers(1, 4)))]
    for _ in range(draw(st.integers(0, 4))):
        keys = placement.grown(keys, draw(st.integers(1, 3)))
    perm = draw(st.permutations(range(len(keys))))  # relabelling renumbers the comm: any order
    return [keys[i] for i in perm]


@given(histories(), st.data())
def test_a_shrink_keeps_the_most_senior_ranks(keys, data):
    q = data.draw(st.integers(1, len(keys)))
    stay = placement.staying(keys, q)
    assert len(set(stay)) == q
    assert max(keys[r] for r in stay) <= min((keys[r] for r in range(len(keys)) if r not in stay), default=(99, 0))
    # a spawn group is retired whole whenever q is a size the job ran at (the sizes after each growth)
    sizes = {sum(1 for k in keys if k[0] <= g) for g in {k[0] for k in keys}}
    if q in sizes:
        gone = {keys[r][0] for r in range(len(keys)) if r not in stay}
        kept = {keys[r][0] for r in stay}
        assert not gone & kept


def test_growth_appends_a_new_generation():
    keys = placement.grown([(0, 0), (0, 1)], 2)
    assert keys == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert placement.grown([(0, 0), (2, 0), (1, 0)], 1)[-1] == (3, 0)


shapes = st.sampled_from([(40, 40), (64, 48), (17, 33)])


@settings(max_examples=40, deadline=None)
@given(shapes, st.integers(1, 6), st.integers(1, 6), st.booleans())
def test_the_placement_keeps_rank_0_and_never_moves_more_than_the_fixed_mapping(shape, p, q, two_d):
    lay = (lambda n: block_cyclic_2d(shape, nearly_square_grid(n), (4, 4))) if two_d else (lambda n: block(shape, n))
    cands = list(range(max(p, q))) if q >= p else placement.staying([(0, r) for r in range(p)], q)
    ranks = placement.choose([(lay(p), lay(q), 8)], cands)
    fixed = placement.choose([(lay(p), lay(q), 8)], cands, relabel=False)
    assert ranks[0] == cands[0] == 0  # rank 0 keeps position 0
    assert fixed == tuple(cands[:q])
    assert len(set(ranks)) == q and set(ranks) <= set(cands)
    assert kept_elements(lay(p), lay(q), None, ranks) >= kept_elements(lay(p), lay(q), None, fixed)


def test_relabel_flag_is_parsed_strictly():
    assert placement.enabled({}) and not placement.enabled({"RESHAPE_RELABEL": "0"})
    with pytest.raises(ValueError, match="RESHAPE_RELABEL='maybe'"):
        placement.enabled({"RESHAPE_RELABEL": "maybe"})


@settings(max_examples=60, deadline=None)
@given(shapes, st.integers(1, 6), st.integers(1, 6), st.sampled_from(["1d", "2d4", "2d7"]), st.integers(0, 2))
def test_the_placement_relabels_only_where_its_plan_is_cheaper(shape, p, q, kind, extra):
    nb = 4 if kind == "2d4" else 7
    lay = (lambda n: block(shape, n)) if kind == "1d" else (lambda n: block_cyclic_2d(shape, nearly_square_grid(n),
                                                                                      (nb, nb)))
    cands = list(range(max(p, q) + extra))
    pairs = [(lay(p), lay(q), None, 8)]
    ranks = placement.choose([(lay(p), lay(q), 8)], cands)
    identity = tuple(cands[:q])
    best = relabel_many(pairs, cands, fixed={0: 0})
    assert ranks in (identity, best)
    assert cost(pairs, ranks) <= cost(pairs, identity)
    if ranks != identity:
        assert cheaper(cost(pairs, ranks), cost(pairs, identity))
        assert cost(pairs, ranks)[0] <= cost(pairs, identity)[0]  # never a busier rank
    elif best != identity:
        assert not cheaper(cost(pairs, best), cost(pairs, identity))


@settings(max_examples=60, deadline=None)
@given(shapes, st.integers(1, 6), st.integers(1, 6), st.booleans(), st.booleans(), st.data())
def test_the_copy_loads_are_the_engines(shape, p, q, two_d, direct, data):
    lay = (lambda n: block_cyclic_2d(shape, nearly_square_grid(n), (4, 4))) if two_d else (lambda n: block(shape, n))
    size = max(p, q)
    src_ranks = tuple(data.draw(st.permutations(range(size)))[:p])
    dst_ranks = tuple(data.draw(st.permutations(range(size)))[:q])
    plan = make_plan(lay(p), lay(q), src_ranks, dst_ranks)
    want: dict[int, int] = {}
    for t in plan.transfers:  # the receiver (or owner) copies each element; a packed send is a second copy
        want[t.dst] = want.get(t.dst, 0) + 8 * t.count
        blk = np.arange(np.prod(lay(p).local_shape(src_ranks.index(t.src)))).reshape(
            lay(p).local_shape(src_ranks.index(t.src)))
        cont = contiguous(t.send, blk.shape)  # the engine sends in place only what this finds contiguous
        if cont is not None:
            assert np.array_equal(blk[np.ix_(*(r.index() for r in t.send))].ravel(),
                                  np.arange(cont[0], cont[0] + cont[1]))
        elif not t.local and not direct:
            want[t.src] = want.get(t.src, 0) + 8 * t.count
    got = {r: v for r, v in loads([(lay(p), lay(q), src_ranks, 8)], dst_ranks, direct).items() if v}
    assert got == {r: v for r, v in want.items() if v}
    assert sum(got.values()) >= 8 * int(np.prod(shape))  # every element is copied at least once


def test_row_blocks_keep_the_fixed_mapping():
    # every 1-D BLOCK transfer is contiguous: a kept row costs the engine what a received one does
    for p, q in [(2, 4), (3, 4), (4, 3), (4, 2)]:
        src, dst = block((4000, 4000), p), block((4000, 4000), q)
        assert placement.choose([(src, dst, 8)], range(q)) == tuple(range(q))


def test_cheaper_needs_more_than_the_margin():
    assert cheaper((90, 100), (100, 100)) and not cheaper((96, 100), (100, 100))
    assert cheaper((100, 90), (100, 100)) and not cheaper((101, 50), (100, 100))


def test_grids_relabel_where_packing_is_saved():
    lay = lambda n: block_cyclic_2d((4000, 4000), nearly_square_grid(n), (64, 64))  # noqa: E731
    ranks = placement.choose([(lay(4), lay(6), 8)], range(6))
    assert ranks != tuple(range(6))
    assert cost([(lay(4), lay(6), None, 8)], ranks) < cost([(lay(4), lay(6), None, 8)], range(6))


def test_block_3_to_4_relabels_only_when_cheaper():
    src, dst = block((4000, 4000), 3), block((4000, 4000), 4)
    ranks = placement.choose([(src, dst, 8)], range(4))
    pairs = [(src, dst, None, 8)]
    assert ranks == (0, 1, 2, 3) or cost(pairs, ranks) < cost(pairs, (0, 1, 2, 3))
