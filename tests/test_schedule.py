"""Redistribution plans: complete, contention-free, and as short as König's bound allows."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reshape.redistribution.layout import LayoutError, block, block_cyclic_1d, block_cyclic_2d, gen_block
from reshape.redistribution.schedule import make_plan
from tests.test_layout import layouts


def apply_plan(plan, g):
    """Execute a plan serially in numpy: the destination blocks it produces."""
    src_blocks = {plan.src_ranks[i]: plan.src.local_block(g, i) for i in range(plan.src.nprocs)}
    out = {plan.dst_ranks[j]: np.full(plan.dst.local_shape(j), -1, dtype=g.dtype)
           for j in range(plan.dst.nprocs)}
    written = {r: np.zeros(b.shape, dtype=np.int64) for r, b in out.items()}
    for t in plan.local + [t for step in plan.steps for t in step]:
        data = src_blocks[t.src][np.ix_(*[r.index() for r in t.send])]
        idx = np.ix_(*[r.index() for r in t.recv])
        out[t.dst][idx] = data
        written[t.dst][idx] += 1
    return out, written


def check_plan(plan, g):
    # contention-free: every rank sends <= 1 and receives <= 1 message per step
    for st_ in plan.steps:
        assert len({t.src for t in st_}) == len(st_)
        assert len({t.dst for t in st_}) == len(st_)
        assert all(not t.local for t in st_)
    # every remote transfer scheduled exactly once; steps == König's bound
    sched = [(t.src, t.dst) for st_ in plan.steps for t in st_]
    assert sorted(sched) == sorted((t.src, t.dst) for t in plan.remote)
    assert len(plan.steps) == plan.max_degree
    # complete: every destination element written exactly once, with the right value
    out, written = apply_plan(plan, g)
    for j in range(plan.dst.nprocs):
        r = plan.dst_ranks[j]
        assert (written[r] == 1).all()
        assert np.array_equal(out[r], plan.dst.local_block(g, j))
    # same counts on both sides of every transfer
    for t in plan.transfers:
        assert [r.total for r in t.send] == [r.total for r in t.recv]


@settings(max_examples=200, deadline=None)
@given(data=st.data(), m=st.integers(1, 36), n=st.integers(1, 24), shift=st.integers(0, 3))
def test_random_layout_pairs(data, m, n, shift):
    src = data.draw(layouts((m, n)))
    dst = data.draw(layouts((m, n)))
    # place the destination set anywhere in a communicator holding both sets
    size = max(src.nprocs, dst.nprocs) + shift
    dst_ranks = data.draw(st.permutations(range(size)))[: dst.nprocs]
    plan = make_plan(src, dst, None, tuple(dst_ranks))
    check_plan(plan, np.arange(m * n, dtype=np.int64).reshape(m, n))


@pytest.mark.parametrize("p", range(1, 7))
@pytest.mark.parametrize("q", range(1, 7))
def test_1d_block_cyclic_full_superblocks_are_pure_circulant(p, q):
    """With whole superblocks, the circulant assignment needs no repair (Park et al.)."""
    n = 4 * np.lcm(p, q) * 3
    plan = make_plan(block_cyclic_1d((n,), p, 3), block_cyclic_1d((n,), q, 3))
    check_plan(plan, np.arange(n))
    assert plan.circulant_placed == len(plan.remote)


def test_block_expand_2_to_4_keeps_local_data_and_needs_two_steps():
    # rank 0 keeps rows 0-15; rank 1's rows 32-63 go to ranks 2 and 3: degree 2
    plan = make_plan(block((64, 8), 2), block((64, 8), 4))
    assert [(t.src, t.dst) for t in plan.local] == [(0, 0)]
    assert len(plan.steps) == 2
    assert {(t.src, t.dst) for st in plan.steps for t in st} == {(0, 1), (1, 2), (1, 3)}


def test_cyclic_expand_2_to_4_is_one_step():
    plan = make_plan(block_cyclic_1d((64, 8), 2, 4), block_cyclic_1d((64, 8), 4, 4))
    assert len(plan.local) == 2 and len(plan.steps) == 1
    assert {(t.src, t.dst) for t in plan.steps[0]} == {(0, 2), (1, 3)}


def test_2d_checkerboard_and_gen_block():
    g = np.arange(30 * 30).reshape(30, 30)
    for src, dst in [
        (block_cyclic_2d((30, 30), (2, 2), (4, 4)), block_cyclic_2d((30, 30), (3, 3), (4, 4))),
        (block_cyclic_2d((30, 30), (3, 3), (5, 2)), block_cyclic_2d((30, 30), (1, 2), (3, 7), order="C")),
        (gen_block((30, 30), [1, 20, 9]), block_cyclic_2d((30, 30), (2, 3), (4, 4))),
        (block_cyclic_1d((30, 30), 4, 2, axis=1), gen_block((30, 30), [0, 30])),
    ]:
        check_plan(make_plan(src, dst), g)


def test_table_prints_destination_processor_table():
    text = make_plan(block_cyclic_1d((48,), 2, 2), block_cyclic_1d((48,), 4, 2)).table()
    assert text.splitlines()[0].startswith("step |")
    assert "  L  |" in text


def test_mismatched_shapes_are_refused():
    with pytest.raises(LayoutError, match="global shapes differ"):
        make_plan(block((10, 4), 2), block((10, 5), 2))
    with pytest.raises(LayoutError, match="distinct"):
        make_plan(block((10, 4), 2), block((10, 4), 2), (0, 0), (0, 1))
