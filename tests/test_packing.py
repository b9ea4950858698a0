"""reshape.redistribution.packing: a transfer cut into chunks, each packed and received as its datatype
says, moves the same elements to the same places; each chunk within the byte limit unless one axis-0
index is wider.

Single process: the transfers are those of real plans (``make_plan``) between block-cyclic layouts.
"""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from reshape.redistribution import packing, runcopy
from reshape.redistribution.layout import block_cyclic_2d, nearly_square_grid
from reshape.redistribution.schedule import make_plan, run_groups


def unpack(buf: np.ndarray, t, out: np.ndarray) -> None:
    """What the receiver's derived datatype does with a message (redistribute._Types.buffer): the receive
    side's group combinations, in product order."""
    groups = runcopy.sides([run_groups(a, b) for a, b in zip(t.send, t.recv, strict=True)], 1)
    off = 0
    for combo in itertools.product(*groups):
        v = runcopy.view(out, combo)
        v[...] = buf[off : off + v.size].reshape(v.shape)
        off += v.size
    assert off == buf.size


@settings(max_examples=80, deadline=None)
@given(rows=st.integers(1, 40), cols=st.integers(1, 30), p=st.integers(1, 6), q=st.integers(1, 6),
       bs=st.tuples(st.integers(1, 5), st.integers(1, 5)), bd=st.tuples(st.integers(1, 5), st.integers(1, 5)),
       limit=st.integers(1, 900))
def test_chunks_move_what_the_transfer_moves_in_its_order(rows, cols, p, q, bs, bd, limit):
    src = block_cyclic_2d((rows, cols), nearly_square_grid(p), bs)
    dst = block_cyclic_2d((rows, cols), nearly_square_grid(q), bd)
    g = np.arange(rows * cols, dtype=np.float64).reshape(rows, cols)
    for t in make_plan(src, dst).transfers:
        block = src.local_block(g, t.src)
        chunks = packing.split(t, 8, limit)
        assert sum(c.count for c in chunks) == t.count
        out = np.full(dst.local_shape(t.dst), -1.0)
        ref = out.copy()
        runcopy.copy(block, t.send, ref, t.recv)
        for c in chunks:
            assert c.count * 8 <= limit or c.send[0].total == 1, "a chunk over the limit holds one index"
            assert np.array_equal(c.send[0].lens, c.recv[0].lens)
            buf = np.full(c.count, np.nan)
            packing.pack(block, c, buf)
            unpack(buf, c, out)
        assert np.array_equal(out, ref), "the chunks, packed and received as their datatypes say, are the transfer"


def test_a_transfer_within_the_limit_is_one_chunk_and_the_default_limit_is_chunk_bytes():
    src = block_cyclic_2d((64, 64), (1, 3), (4, 4))
    dst = block_cyclic_2d((64, 64), (2, 2), (4, 4))
    t = next(t for t in make_plan(src, dst).transfers if not t.local)
    assert packing.split(t, 8) == [t]
    assert len(packing.split(t, 8, 8 * t.count // t.send[0].total)) == t.send[0].total
