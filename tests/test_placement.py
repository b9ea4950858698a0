"""Placement at a resize: which ranks stay on a shrink, which rank takes which position (pure, hypothesis)."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reshape.redistribution import placement
from reshape.redistribution.layout import block, block_cyclic_2d, nearly_square_grid
from reshape.redistribution.relabel import kept_elements


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
