"""The one-copy path on every rank: receivers read their peers' memfd blocks directly (all ranks here
share one host), bit-identical to the MPI path; per-transfer fallback when a source is not in a memfd
or cannot be mapped; background exchanges; no descriptor or mapping left behind."""

from __future__ import annotations

import gc
import itertools
import os
import resource

import numpy as np
import pytest

from reshape.redistribution import nodecopy, pages, runcopy
from reshape.redistribution.layout import block, block_cyclic_1d, block_cyclic_2d, gen_block, nearly_square_grid
from reshape.redistribution.redistribute import start
from reshape.redistribution.schedule import make_plan
from tests.mpi_ranks import assert_on_every_rank, comm

pytestmark = pytest.mark.mpi

N = comm.size
ME = comm.rank


def global_array(shape, dtype=np.float64):
    return (np.arange(np.prod(shape)).reshape(shape) / 3.0 + 0.1).astype(dtype)


def source(lay, g, ranks, shared=True):
    """This rank's block of ``g``: in a memfd mapping (``shared``) or a plain numpy array."""
    if ME not in ranks:
        return None
    want = lay.local_block(g, ranks.index(ME))
    blk = nodecopy.empty(want.shape, want.dtype, shared=True, min_bytes=0) if shared else np.empty_like(want)
    blk[...] = want
    return blk


def incoming(src, dst, src_ranks, dst_ranks) -> list[int]:
    """The senders of this rank's remote transfers."""
    return [t.src for t in make_plan(src, dst, src_ranks, dst_ranks).remote if t.dst == ME]


def run(src, dst, g, shared=True, src_ranks=None, dst_ranks=None, out=None):
    src_ranks = tuple(range(src.nprocs)) if src_ranks is None else src_ranks
    dst_ranks = tuple(range(dst.nprocs)) if dst_ranks is None else dst_ranks
    local = source(src, g, src_ranks, shared if not callable(shared) else shared(ME))
    h = start(comm, src, local, dst, src_ranks=src_ranks, dst_ranks=dst_ranks, out=out)
    got = h.wait()
    ok = got is None if ME not in dst_ranks else np.array_equal(got, dst.local_block(g, dst_ranks.index(ME)))
    return ok, h.stats, incoming(src, dst, src_ranks, dst_ranks)


def pairs():
    for p, q in itertools.product(range(1, N + 1), repeat=2):
        yield block((30, 7), p), block((30, 7), q)
        yield (block_cyclic_2d((24, 19), nearly_square_grid(p), (2, 3)),
               block_cyclic_2d((24, 19), nearly_square_grid(q), (3, 2), src=(0, nearly_square_grid(q)[1] - 1)))
        counts = [30 // p] * (p - 1) + [30 - 30 // p * (p - 1)]
        yield gen_block((30, 7), counts[::-1]), block_cyclic_1d((30, 7), q, 4)


def test_direct_reads_are_bit_identical_to_the_mpi_path(monkeypatch):
    problems = []
    fills = runcopy.counts["fills"]
    for src, dst in pairs():
        g = global_array(src.shape)
        ok, stats, senders = run(src, dst, g)
        what = f"{src.describe()} -> {dst.describe()}"
        if not ok:
            problems.append(f"{what}: one-copy result differs")
        if stats != {"direct": len(senders), "fallback": 0, "mpi": 0}:
            problems.append(f"{what}: expected every transfer read directly, got {stats}")
        monkeypatch.setenv("RESHAPE_ONECOPY", "0")
        ok, stats, senders = run(src, dst, g)
        monkeypatch.delenv("RESHAPE_ONECOPY")
        if not ok or stats["direct"]:
            problems.append(f"{what}: with RESHAPE_ONECOPY=0: ok={ok} {stats}")
    banded = comm.allreduce(runcopy.counts["fills"] - fills)
    if N > 1 and not banded:  # the 2-D pairs with a changed column distribution fill band by band
        problems.append("no block was filled band by band (reshape.redistribution.runcopy)")
    assert_on_every_rank(problems)


@pytest.mark.mpi(min_size=2)
def test_sources_not_in_a_memfd_go_over_mpi_per_transfer():
    problems = []
    for p, q in ((N, N - 1), (N - 1, N), (N, N)):
        src = block_cyclic_2d((26, 17), nearly_square_grid(p), (3, 2))
        dst = block_cyclic_2d((26, 17), nearly_square_grid(q), (2, 3), order="C")
        ok, stats, senders = run(src, dst, global_array(src.shape), shared=lambda r: r % 2 == 0)
        even = sum(1 for s in senders if s % 2 == 0)
        if not ok or stats != {"direct": even, "fallback": 0, "mpi": len(senders) - even}:
            problems.append(f"{p}->{q}: ok={ok} {stats}, senders {senders}")
    assert_on_every_rank(problems)


@pytest.mark.mpi(min_size=2)
def test_a_reader_that_cannot_map_gets_the_data_over_mpi():
    """The last rank runs out of file descriptors (a real EMFILE): its transfers are sent instead."""
    src = block_cyclic_2d((28, 22), nearly_square_grid(N), (3, 4))
    dst = block_cyclic_2d((28, 22), nearly_square_grid(N), (4, 3), order="C")
    g = global_array(src.shape)
    out = np.zeros(dst.local_shape(ME))
    local = source(src, g, tuple(range(N)))
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if ME == N - 1:
        nodecopy.forget()  # no kept mapping: every read must open the peer's file
        lowest = os.dup(0)
        os.close(lowest)
        resource.setrlimit(resource.RLIMIT_NOFILE, (lowest, hard))
    try:
        h = start(comm, src, local, dst, out=out)
        ok = np.array_equal(h.wait(), dst.local_block(g, ME))
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    stats, senders = h.stats, incoming(src, dst, tuple(range(N)), tuple(range(N)))
    want = {"direct": 0, "fallback": len(senders), "mpi": 0} if ME == N - 1 else \
        {"direct": len(senders), "fallback": 0, "mpi": 0}
    assert_on_every_rank([] if ok and stats == want else [f"ok={ok} {stats}, wanted {want}"])


@pytest.mark.parametrize("window", [None, 1])
def test_background_exchange_with_direct_reads(window):
    problems = []
    grids = [g for g in [(1, 2), (2, 2), (2, 1), (1, 3)] if g[0] * g[1] <= N]
    for gs, gd in itertools.product(grids, repeat=2):
        src, dst = block_cyclic_2d((26, 21), gs, (3, 2)), block_cyclic_2d((26, 21), gd, (2, 4))
        g = global_array(src.shape)
        local = source(src, g, tuple(range(src.nprocs)))
        handle = start(comm, src, local, dst, window=window)
        total = 0.0 if local is None else float(local.sum())  # the application keeps reading its old block
        got = handle.wait()
        if dst.nprocs > ME and not np.array_equal(got, dst.local_block(g, ME)):
            problems.append(f"{gs} -> {gd} window {window}: mismatch")
        if local is not None and (total != float(src.local_block(g, ME).sum())
                                  or not np.array_equal(local, src.local_block(g, ME))):
            problems.append(f"{gs} -> {gd}: the source block changed")
    assert_on_every_rank(problems)


def fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def mappings() -> int:
    with open("/proc/self/maps") as f:
        return sum(1 for _ in f)


def test_no_descriptor_or_mapping_is_left_after_many_redistributions():
    shape = (48, 36)
    lays = [block_cyclic_2d(shape, nearly_square_grid(p), (5, 4)) for p in range(1, N + 1)] + [block(shape, N)]
    g = global_array(shape)

    def chain(rounds):
        cur_lay = lays[-1]
        cur = source(cur_lay, g, tuple(range(cur_lay.nprocs)))
        for i in range(rounds):
            nxt = lays[i % len(lays)]
            out = nodecopy.empty(nxt.local_shape(ME), shared=True, min_bytes=0) if nxt.nprocs > ME else None
            cur = start(comm, cur_lay, cur, nxt, out=out).wait()
            cur_lay = nxt
        return cur_lay.nprocs <= ME or np.array_equal(cur, cur_lay.local_block(g, ME))

    def settled():
        gc.collect()
        comm.Barrier()  # every owner freed its arrays (and emptied their files)
        kept = nodecopy.sweep()
        pages.forget()  # the freed blocks kept for reuse: at most pages.KEPT, by design
        return fds(), mappings(), nodecopy.live_segments(), kept

    chain(3)
    before = settled()
    ok = chain(40)
    after = settled()
    problems = [] if ok else ["wrong data"]
    if after != before:
        problems.append(f"(fds, mappings, live arrays, kept peer mappings) {before} before, {after} after")
    assert_on_every_rank(problems)
