"""Bit-exact redistribution over many layout pairs; run under mpiexec with >= 6 ranks.

Usage: python -m tests.mpi.redist_pairs {1d|2d|genblock|methods}
Every rank checks its own destination block against the layout applied to the
global array; the program exits 1 if any rank saw a mismatch.
"""

import itertools
import sys

import numpy as np
from mpi4py import MPI

from reshape.darray import DistArray
from reshape.layout import block_cyclic_1d, block_cyclic_2d, gen_block, nearly_square_grid

comm = MPI.COMM_WORLD
DTYPES = (np.float64, np.complex128, np.int32)


def global_array(shape, dtype):
    g = np.arange(np.prod(shape)).reshape(shape)
    if np.dtype(dtype).kind == "c":
        return (g + 1j * (g % 7 - 3.5) / 3).astype(dtype)
    if np.dtype(dtype).kind == "f":
        return (g / 3.0 + 0.1).astype(dtype)  # not exactly representable: catches any arithmetic
    return g.astype(dtype)


def check(src, dst, dtype, method="circulant", src_ranks=None, dst_ranks=None):
    g = global_array(src.shape, dtype)
    src_ranks = tuple(range(src.nprocs)) if src_ranks is None else src_ranks
    dst_ranks = tuple(range(dst.nprocs)) if dst_ranks is None else dst_ranks
    local = None
    if comm.rank in src_ranks:
        local = src.local_block(g, src_ranks.index(comm.rank))
    before = None if local is None else local.copy()
    a = DistArray(src, local, comm, src_ranks)
    b = a.redistribute(dst, dst_ranks, method=method)
    ok = True
    if comm.rank in dst_ranks:
        want = dst.local_block(g, dst_ranks.index(comm.rank))
        ok = b.local.dtype == want.dtype and np.array_equal(b.local, want)
    else:
        ok = b.local is None
    if before is not None:
        ok = ok and np.array_equal(before, local)  # source untouched
    if not ok:
        print(f"rank {comm.rank}: MISMATCH {src.describe()} -> {dst.describe()} {np.dtype(dtype)} {method}",
              flush=True)
    return ok


def case_1d():
    n = comm.size
    ok = True
    for p, q in itertools.product(range(1, n + 1), repeat=2):
        for axis, (m, k), nb_src, nb_dst, dt in (
            (0, (37, 5), 4, 4, DTYPES[p % 3]),  # blocks do not divide 37
            (0, (36, 3), 3, 2, DTYPES[(p + q) % 3]),  # different block sizes, dividing
            (1, (4, 29), 2, 5, DTYPES[q % 3]),  # column distribution
        ):
            src = block_cyclic_1d((m, k), p, nb_src, axis)
            dst = block_cyclic_1d((m, k), q, nb_dst, axis)
            ok &= check(src, dst, dt)
    return ok


def case_2d():
    grids = [(1, 1), (1, 2), (2, 1), (2, 2), (1, 3), (3, 1), (2, 3), (3, 2), (3, 3)]
    grids = [g for g in grids if g[0] * g[1] <= comm.size]
    ok = True
    for i, (gs, gd) in enumerate(itertools.product(grids, repeat=2)):
        shape = (23, 19) if i % 2 else (24, 18)
        blocks = [(2, 3), (4, 4), (5, 1)][i % 3]
        src = block_cyclic_2d(shape, gs, blocks, order="RC"[i % 2])
        dst = block_cyclic_2d(shape, gd, blocks[::-1] if i % 4 == 3 else blocks, src=(0, gd[1] - 1))
        ok &= check(src, dst, DTYPES[i % 3])
    return ok


def case_genblock():
    ok = True
    shape = (31, 7)
    splits = [[31], [10, 21], [0, 31, 0], [5, 5, 5, 16], [1, 2, 3, 4, 21], [6, 5, 5, 5, 5, 5]]
    splits = [s for s in splits if len(s) <= comm.size]
    for i, counts in enumerate(splits):
        gb = gen_block(shape, counts)
        for q in range(1, comm.size + 1):
            dt = DTYPES[(i + q) % 3]
            bc = block_cyclic_1d(shape, q, 3)
            bc2 = block_cyclic_2d(shape, nearly_square_grid(q), (4, 2))
            ok &= check(gb, bc, dt) and check(bc, gb, dt) and check(gb, bc2, dt) and check(bc2, gb, dt)
        ok &= check(gb, gen_block(shape, splits[(i + 1) % len(splits)]), np.float64)
    return ok


def case_methods():
    """Baselines give the same bits; and disjoint / permuted rank sets."""
    ok = True
    n = comm.size
    shape = (40, 12)
    for method in ("circulant", "alltoallv", "checkpoint"):
        for p, q in ((1, n), (n, 1), (2, n - 1), (n, 3)):
            for dt in DTYPES:
                ok &= check(block_cyclic_2d(shape, nearly_square_grid(p), (3, 5)),
                            block_cyclic_1d(shape, q, 7), dt, method)
        # disjoint sets inside one communicator, permuted destination ranks
        half = n // 2
        ok &= check(block_cyclic_1d(shape, half, 2), block_cyclic_1d(shape, n - half, 3), np.float64, method,
                    tuple(range(half)), tuple(reversed(range(half, n))))
    return ok


if __name__ == "__main__":
    which = sys.argv[1]
    ok = {"1d": case_1d, "2d": case_2d, "genblock": case_genblock, "methods": case_methods}[which]()
    all_ok = comm.allreduce(int(ok), op=MPI.MIN)
    if comm.rank == 0:
        print(f"{which}: {'OK' if all_ok else 'FAILED'}", flush=True)
    sys.exit(0 if all_ok else 1)
