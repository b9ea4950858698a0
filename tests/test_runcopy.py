"""reshape.redistribution.runcopy: filling a block band by band through a tile equals copying piece by piece.

Single process: every source rank's block is a local array, the pieces are one destination rank's
transfers of a real plan (``make_plan``), and tiny tiles force runs to cross band edges.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from reshape.redistribution import runcopy
from reshape.redistribution.layout import block, block_cyclic_2d, nearly_square_grid
from reshape.redistribution.schedule import make_plan


def pieces_of(src, dst, d, g):
    plan = make_plan(src, dst)
    blocks = {i: src.local_block(g, i).copy() for i in range(src.nprocs)}
    return [(blocks[t.src], t.send, t.recv) for t in plan.transfers if t.dst == d]


@settings(max_examples=60, deadline=None)
@given(rows=st.integers(1, 40), cols=st.integers(1, 40), p=st.integers(1, 6), q=st.integers(1, 6),
       bs=st.tuples(st.integers(1, 5), st.integers(1, 5)), bd=st.tuples(st.integers(1, 5), st.integers(1, 5)),
       tile=st.integers(1, 600), data=st.data())
def test_band_fill_equals_piece_by_piece(rows, cols, p, q, bs, bd, tile, data):
    src = block_cyclic_2d((rows, cols), nearly_square_grid(p), bs)
    dst = block_cyclic_2d((rows, cols), nearly_square_grid(q), bd)
    d = data.draw(st.integers(0, q - 1))
    g = np.arange(rows * cols, dtype=np.float64).reshape(rows, cols)
    pieces = pieces_of(src, dst, d, g)
    want = dst.local_block(g, d)
    ref = np.full(want.shape, -1.0)
    for s, a, b in pieces:
        runcopy.copy(s, a, ref, b)
    assert np.array_equal(ref, want)
    if ref.size == 0:
        return
    out = np.full(want.shape, -1.0)
    runcopy.fill(out, pieces, tile_bytes=tile * 8)  # a band of tile // cols rows (at least one)
    assert np.array_equal(out, want)


def test_worth_only_when_pieces_cover_the_block_and_share_rows():
    g = np.arange(48 * 48, dtype=np.float64).reshape(48, 48)
    col3 = block_cyclic_2d(g.shape, (1, 3), (4, 4))
    col2 = block_cyclic_2d(g.shape, (1, 2), (4, 4))
    out = np.empty(col2.local_shape(0))
    pieces = pieces_of(col3, col2, 0, g)
    assert runcopy.worth(out, pieces)  # each row of the block gathers runs of 2 sources
    assert not runcopy.worth(out, pieces[:-1])  # not covered: a message writes the rest
    rows = pieces_of(block(g.shape, 2), block(g.shape, 4), 0, g)
    assert not runcopy.worth(np.empty(block(g.shape, 4).local_shape(0)), rows)  # whole rows: copy directly
    assert not runcopy.worth(np.empty(48), [])  # 1-D
