"""Layouts: ScaLAPACK index maps and the partition property."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reshape.redistribution.layout import (
    BlockCyclic,
    LayoutError,
    block,
    block_cyclic_1d,
    block_cyclic_2d,
    gen_block,
    indxg2l,
    indxg2p,
    indxl2g,
    nearly_square_grid,
    numroc,
)


@given(n=st.integers(0, 200), nb=st.integers(1, 17), p=st.integers(1, 9), src=st.integers(0, 8))
def test_scalapack_index_maps_agree_with_brute_force(n, nb, p, src):
    src %= p
    owners = [indxg2p(g, nb, src, p) for g in range(n)]
    for coord in range(p):
        mine = [g for g in range(n) if owners[g] == coord]
        assert numroc(n, nb, coord, src, p) == len(mine)
        assert [indxl2g(loc, nb, coord, src, p) for loc in range(len(mine))] == mine
        assert [indxg2l(g, nb, p) for g in mine] == list(range(len(mine)))
        assert BlockCyclic(n, nb, p, src).global_indices(coord).tolist() == mine


def layouts(shape):
    m, _n = shape
    bc1 = st.builds(
        lambda p, nb, axis: block_cyclic_1d(shape, p, nb, axis),
        st.integers(1, 6), st.integers(1, 9), st.integers(0, 1),
    )
    bc2 = st.builds(
        lambda pr, pc, mb, nb, sr, sc, order: block_cyclic_2d(shape, (pr, pc), (mb, nb), (sr % pr, sc % pc), order),
        st.integers(1, 3), st.integers(1, 3), st.integers(1, 7), st.integers(1, 7),
        st.integers(0, 2), st.integers(0, 2), st.sampled_from("RC"),
    )

    def gb(draw_counts):
        return gen_block(shape, draw_counts)

    counts = st.integers(1, 6).flatmap(
        lambda p: st.lists(st.integers(0, m), min_size=p - 1, max_size=p - 1).map(
            lambda cuts: np.diff([0, *sorted(cuts), m]).tolist()
        )
    )
    return st.one_of(bc1, bc2, counts.map(gb))


@settings(max_examples=150, deadline=None)
@given(data=st.data(), m=st.integers(1, 40), n=st.integers(1, 30))
def test_local_blocks_partition_the_array(data, m, n):
    lay = data.draw(layouts((m, n)))
    seen = np.zeros((m, n), dtype=np.int64)
    g = np.arange(m * n).reshape(m, n)
    for r in range(lay.nprocs):
        rows, cols = lay.global_indices(r)
        assert lay.local_shape(r) == (len(rows), len(cols))
        seen[np.ix_(rows, cols)] += 1
        blk = lay.local_block(g, r)
        for (i, gi) in enumerate(rows[:3]):
            for (j, gj) in enumerate(cols[:3]):
                assert blk[i, j] == g[gi, gj]
                assert lay.owner((gi, gj)) == r
    assert (seen == 1).all()


def test_rank_order_row_and_column_major():
    r = block_cyclic_2d((8, 8), (2, 3), order="R")
    c = block_cyclic_2d((8, 8), (2, 3), order="C")
    assert [r.coords(k) for k in range(6)] == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2)]
    assert [c.coords(k) for k in range(6)] == [(0, 0), (1, 0), (0, 1), (1, 1), (0, 2), (1, 2)]


@pytest.mark.parametrize("p,grid", [(1, (1, 1)), (2, (1, 2)), (4, (2, 2)), (6, (2, 3)), (9, (3, 3)),
                                    (12, (3, 4)), (7, (1, 7)), (16, (4, 4))])
def test_nearly_square_grid(p, grid):
    assert nearly_square_grid(p) == grid


@given(st.integers(1, 100_000))
def test_nearly_square_grid_is_the_most_square_factoring(p):
    pr, pc = nearly_square_grid(p)
    assert pr * pc == p and 1 <= pr <= pc
    # pr is maximal: no divisor of p lies between pr and sqrt(p)
    assert not any(p % d == 0 for d in range(pr + 1, math.isqrt(p) + 1))


def test_nearly_square_grid_needs_a_process():
    for p in (0, -3):
        with pytest.raises(LayoutError, match="process count"):
            nearly_square_grid(p)


def test_block_is_contiguous():
    lay = block((10, 4), 3)
    assert [lay.local_shape(r) for r in range(3)] == [(4, 4), (4, 4), (2, 4)]
    assert lay.global_indices(1)[0].tolist() == [4, 5, 6, 7]


@pytest.mark.parametrize(
    "make, msg",
    [
        (lambda: gen_block((10, 2), [3, 3, 3]), "sum to 9"),
        (lambda: gen_block((10, 2), [11, -1]), ">= 0"),
        (lambda: block_cyclic_1d((10,), 0), "process count"),
        (lambda: block_cyclic_1d((10,), 2, 0), "block size"),
        (lambda: block_cyclic_2d((4, 4), (2, 2), src=(2, 0)), "source process"),
        (lambda: block_cyclic_2d((4, 4), (2, 2), order="X"), "rank order"),
        (lambda: block_cyclic_1d((4, 4), 2, axis=2), "axis 2"),
    ],
)
def test_bad_layouts_are_refused_clearly(make, msg):
    with pytest.raises(LayoutError, match=msg):
        make()
