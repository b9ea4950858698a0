"""Redistribution on every rank: bit-exact over layout pairs of every process count up to the
communicator's, through each method; bad input refused on every rank with nothing written."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from reshape.redistribution.layout import block, block_cyclic_1d, block_cyclic_2d, gen_block, nearly_square_grid
from reshape.redistribution.redistribute import RedistributionError, redistribute
from reshape.runtime.darray import DistArray
from tests.mpi_ranks import assert_on_every_rank, comm

pytestmark = pytest.mark.mpi

N = comm.size
ME = comm.rank
DTYPES = (np.float64, np.complex128, np.int32)


def global_array(shape, dtype):
    g = np.arange(np.prod(shape)).reshape(shape)
    if np.dtype(dtype).kind == "c":
        return (g + 1j * (g % 7 - 3.5) / 3).astype(dtype)
    if np.dtype(dtype).kind == "f":
        return (g / 3.0 + 0.1).astype(dtype)  # not exactly representable: catches any arithmetic
    return g.astype(dtype)


def moved(src, dst, dtype, method="circulant", src_ranks=None, dst_ranks=None) -> list[str]:
    """Redistribute the global array from ``src`` to ``dst``; this rank's problems (none: bit-exact)."""
    g = global_array(src.shape, dtype)
    src_ranks = tuple(range(src.nprocs)) if src_ranks is None else src_ranks
    dst_ranks = tuple(range(dst.nprocs)) if dst_ranks is None else dst_ranks
    local = src.local_block(g, src_ranks.index(ME)) if ME in src_ranks else None
    before = None if local is None else local.copy()
    b = DistArray(src, local, comm, src_ranks).redistribute(dst, dst_ranks, method=method)
    if ME in dst_ranks:
        want = dst.local_block(g, dst_ranks.index(ME))
        ok = b.local.dtype == want.dtype and np.array_equal(b.local, want)
    else:
        ok = b.local is None
    if before is not None and not np.array_equal(before, local):
        ok = False  # the source block must be left as it was
    return [] if ok else [f"{src.describe()} -> {dst.describe()} {np.dtype(dtype)} {method}: mismatch"]


def test_1d_block_cyclic_between_every_pair_of_process_counts():
    problems = []
    for p, q in itertools.product(range(1, N + 1), repeat=2):
        for axis, shape, nb_src, nb_dst, dt in (
            (0, (37, 5), 4, 4, DTYPES[p % 3]),  # blocks do not divide 37
            (0, (36, 3), 3, 2, DTYPES[(p + q) % 3]),  # different block sizes, dividing
            (1, (4, 29), 2, 5, DTYPES[q % 3]),  # column distribution
        ):
            problems += moved(block_cyclic_1d(shape, p, nb_src, axis), block_cyclic_1d(shape, q, nb_dst, axis), dt)
    assert_on_every_rank(problems)


def test_2d_block_cyclic_between_grids_that_fit():
    grids = [g for g in [(1, 1), (1, 2), (2, 1), (2, 2), (1, 3), (3, 1), (2, 3), (3, 2), (3, 3)] if g[0] * g[1] <= N]
    problems = []
    for i, (gs, gd) in enumerate(itertools.product(grids, repeat=2)):
        shape = (23, 19) if i % 2 else (24, 18)
        blocks = [(2, 3), (4, 4), (5, 1)][i % 3]
        src = block_cyclic_2d(shape, gs, blocks, order="RC"[i % 2])
        dst = block_cyclic_2d(shape, gd, blocks[::-1] if i % 4 == 3 else blocks, src=(0, gd[1] - 1))
        problems += moved(src, dst, DTYPES[i % 3])
    assert_on_every_rank(problems)


def test_gen_block_to_and_from_block_cyclic():
    shape = (31, 7)
    splits = [[31], [10, 21], [0, 31, 0], [5, 5, 5, 16], [1, 2, 3, 4, 21], [6, 5, 5, 5, 5, 5]]
    splits = [s for s in splits if len(s) <= N]
    problems = []
    for i, counts in enumerate(splits):
        gb = gen_block(shape, counts)
        for q in range(1, N + 1):
            dt = DTYPES[(i + q) % 3]
            bc = block_cyclic_1d(shape, q, 3)
            bc2 = block_cyclic_2d(shape, nearly_square_grid(q), (4, 2))
            for a, b in ((gb, bc), (bc, gb), (gb, bc2), (bc2, gb)):
                problems += moved(a, b, dt)
        problems += moved(gb, gen_block(shape, splits[(i + 1) % len(splits)]), np.float64)
    assert_on_every_rank(problems)


@pytest.mark.parametrize("method", ["circulant", "alltoallv", "checkpoint"])
def test_every_method_gives_the_same_bits(method):
    shape = (40, 12)
    pairs = sorted({(1, N), (N, 1), (max(1, N // 2), N), (N, min(3, N))})
    problems = []
    for p, q in pairs:
        for dt in DTYPES:
            problems += moved(block_cyclic_2d(shape, nearly_square_grid(p), (3, 5)), block_cyclic_1d(shape, q, 7),
                              dt, method)
    assert_on_every_rank(problems)


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("method", ["circulant", "alltoallv", "checkpoint"])
def test_disjoint_process_sets_and_permuted_destination_ranks(method):
    half = N // 2
    shape = (40, 12)
    problems = moved(block_cyclic_1d(shape, half, 2), block_cyclic_1d(shape, N - half, 3), np.float64, method,
                     tuple(range(half)), tuple(reversed(range(half, N))))
    problems += moved(block_cyclic_1d(shape, N - half, 3), block_cyclic_1d(shape, half, 2), np.int32, method,
                      tuple(reversed(range(half, N))), tuple(range(half)))
    assert_on_every_rank(problems)


# --------------------------------------------------------------------------- bad input
SHAPE = (20, 6)
SRC = block(SHAPE, N)
Q = max(1, N // 2)
DST = block(SHAPE, Q)
LAST = N - 1
SENTINEL = -12345.0

# name -> (what this rank passes instead of the good arguments, part of the message every rank sees)
REFUSALS = {
    "global shapes differ": (lambda: {"dst": block((21, 6), Q)}, "global shapes differ"),
    "one rank's block has the wrong shape": (
        lambda: {"local": np.zeros((3, 6))} if ME == LAST else {}, f"rank {LAST}: source block has shape"),
    "layout larger than the communicator": (lambda: {"dst": block(SHAPE, N + 2), "out": None},
                                            f"does not fit a communicator of {N}"),
    "one rank's output buffer is wrong": (lambda: {"out": np.zeros((2, 2))} if ME == Q - 1 else {},
                                          f"rank {Q - 1}: output block"),
    "unknown method": (lambda: {"method": "carrier-pigeon"}, "unknown method"),
    "a dtype MPI cannot send": (lambda: {"local": np.zeros(SRC.local_shape(ME), dtype=object), "out": None},
                                "no MPI datatype"),
    "a 2-D layout that does not fit": (lambda: {"dst": block_cyclic_2d(SHAPE, (N, 2)), "out": None}, "does not fit"),
}
ACROSS_RANKS = {  # need two ranks to disagree
    "ranks pass different dtypes": (lambda: {"local": good_block().astype(np.float32), "out": None} if ME == LAST
                                    else {"out": None}, "different dtypes"),
    "ranks pass different layouts": (lambda: {"dst": block_cyclic_1d(SHAPE, Q, 3)} if ME == LAST else {},
                                     "different layouts"),
}


def good_block():
    return np.full(SRC.local_shape(ME), float(ME))


def refused_and_untouched(change, match) -> list[str]:
    out = np.full(DST.local_shape(ME), SENTINEL) if ME < Q else None
    args = {"local": good_block(), "dst": DST, "out": out, **change()}
    problems = []
    try:
        redistribute(comm, SRC, args.pop("local"), args.pop("dst"), **args)
        problems.append("did not raise")
    except RedistributionError as e:
        if match not in str(e):
            problems.append(f"wrong message: {e}")
    except Exception as e:  # any other exception breaks the contract
        problems.append(f"raised {type(e).__name__}: {e}")
    if out is not None and not (out == SENTINEL).all():
        problems.append("the output buffer was written by a refused call")
    # the communicator still works: a good call succeeds afterwards
    res = redistribute(comm, SRC, good_block(), DST)
    if ME < Q:
        want = np.concatenate([np.full(SRC.local_shape(r)[0], float(r)) for r in range(N)])
        want = want[DST.global_indices(ME)[0]]
        if not np.array_equal(res[:, 0], want):
            problems.append("a good call after the refusal moved the wrong data")
    return problems


@pytest.mark.parametrize("name", list(REFUSALS))
def test_bad_input_is_refused_on_every_rank_and_nothing_is_written(name):
    assert_on_every_rank(refused_and_untouched(*REFUSALS[name]))


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("name", list(ACROSS_RANKS))
def test_ranks_that_disagree_are_refused_on_every_rank(name):
    assert_on_every_rank(refused_and_untouched(*ACROSS_RANKS[name]))


@pytest.mark.parametrize("window", [None, 1])
def test_started_in_the_background_gives_the_same_bits(window):
    """start() returns at once; the source may be read meanwhile; wait() gives what redistribute() gives."""
    from reshape.redistribution.redistribute import start

    problems = []
    grids = [g for g in [(1, 2), (2, 2), (2, 1), (1, 3)] if g[0] * g[1] <= N]
    for gs, gd in itertools.product(grids, repeat=2):
        src, dst = block_cyclic_2d((26, 21), gs, (3, 2)), block_cyclic_2d((26, 21), gd, (2, 4))
        g = global_array(src.shape, np.float64)
        local = src.local_block(g, ME) if src.nprocs > ME else None
        handle = start(comm, src, local, dst, window=window)
        total = 0.0 if local is None else float(local.sum())  # the application keeps reading its old block
        got = handle.wait()
        if dst.nprocs > ME and not np.array_equal(got, dst.local_block(g, ME)):
            problems.append(f"{gs} -> {gd} window {window}: mismatch")
        if local is not None and total != float(src.local_block(g, ME).sum()):
            problems.append(f"{gs} -> {gd}: the source block changed")
        if not handle.test():
            problems.append("a completed exchange does not test complete")
    assert_on_every_rank(problems)


def test_relabelled_destination_is_bit_exact_and_moves_no_more():
    from reshape.redistribution.relabel import relabel
    from reshape.redistribution.schedule import make_plan

    problems = []
    for p, q in itertools.product(range(1, N + 1), repeat=2):
        for src, dst in ((block((30, 7), p), block((30, 7), q)),
                         (block_cyclic_2d((24, 18), nearly_square_grid(p), (2, 3)),
                          block_cyclic_2d((24, 18), nearly_square_grid(q), (2, 3), order="C"))):
            ranks = relabel(src, dst, fixed={0: 0}, dst_candidates=range(max(p, q)))
            if make_plan(src, dst, None, ranks).moved > make_plan(src, dst).moved:
                problems.append(f"{src.describe()} -> {dst.describe()}: relabelling moves more")
            problems += moved(src, dst, np.float64, dst_ranks=ranks)
    assert_on_every_rank(problems)


@pytest.mark.parametrize("chunk,depth", [(64, 1), (200, 2), (1 << 20, 4)])
def test_packed_transfers_sent_in_chunks_from_a_few_buffers_are_bit_exact(monkeypatch, chunk, depth):
    """Chunks of a few rows (runs cut in the middle, a row wider than a chunk), one to four pack buffers
    reused while earlier chunks are still being received; the pool keeps at most KEEP buffers after."""
    from reshape.redistribution import packing
    from reshape.redistribution.redistribute import start

    monkeypatch.setattr(packing, "CHUNK_BYTES", chunk)
    monkeypatch.setattr(packing, "DEPTH", depth)
    problems = []
    grids = [g for g in [(1, 2), (2, 2), (2, 1), (1, 3), (1, 4)] if g[0] * g[1] <= N]
    for gs, gd in itertools.product(grids, repeat=2):
        for dt in (np.float64, np.int32):
            problems += moved(block_cyclic_2d((37, 29), gs, (3, 2)), block_cyclic_2d((37, 29), gd, (2, 5)), dt)
        problems += moved(block_cyclic_1d((23, 50), gs[1], 3, 1), block_cyclic_1d((23, 50), gd[1], 4, 1),
                          np.complex128)  # every row of a column-cyclic transfer is a chunk of its own
        src, dst = block_cyclic_2d((37, 29), gs, (3, 2)), block_cyclic_2d((37, 29), gd, (2, 5))
        g = global_array(src.shape, np.float64)
        got = start(comm, src, src.local_block(g, ME) if src.nprocs > ME else None, dst, window=1).wait()
        if dst.nprocs > ME and not np.array_equal(got, dst.local_block(g, ME)):
            problems.append(f"{gs} -> {gd} window 1, chunks of {chunk} B: mismatch")
    if packing.pooled() > packing.KEEP:
        problems.append(f"{packing.pooled()} pack buffers kept, at most {packing.KEEP} expected")
    assert_on_every_rank(problems)
