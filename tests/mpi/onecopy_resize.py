"""A resizable program whose arrays are large enough for memfd (redistribution.nodecopy); run with RESHAPE_PLAN set.

After every resize each rank checks its blocks exactly, and that they are memfd-backed exactly when
nodecopy allocates there (RESHAPE_ONECOPY=1, or auto where shmem gets huge pages); at the end rank 0
prints the direct reads the final ranks made and the data verdict.
"""

import sys

import numpy as np
from mpi4py import MPI

import reshape.runtime as runtime
from reshape.redistribution import nodecopy


def f(i, j):
    return (i * 31 + j * 7) % 13 + 0.25


def main() -> int:
    rt = runtime.init()
    shape = (800, 660)  # float64: 4.2 MB, every rank's block above nodecopy.MIN_BYTES up to 4 ranks
    A = rt.register_array("A", shape, layout="2d", block=(8, 6), init=f, constant=True)
    B = rt.register_array("B", shape, layout="rows", init=f)
    on = nodecopy.allocating()
    ok = True
    for it in rt.iterations(5):
        B.local[...] += it + 1
        rt.resize()
        gi, gj = A.layout.global_indices(rt.rank)
        ok &= bool(np.array_equal(A.local, f(gi[:, None], gj[None, :])))
        gi, gj = B.layout.global_indices(rt.rank)
        ok &= bool(np.array_equal(B.local, f(gi[:, None], gj[None, :]) + (it + 1) * (it + 2) / 2))
        for a in (A.local, B.local):  # redistribution outputs are memfd-backed: the next resize reads them
            ok &= (nodecopy.describe(a) is not None) == (on and a.nbytes >= nodecopy.MIN_BYTES)
    ok = rt.comm.allreduce(int(ok), op=MPI.MIN)
    reads = rt.comm.allreduce(nodecopy.counts["reads"])
    if rt.rank == 0:
        print(f"final size {rt.size} direct reads {reads} data {'OK' if ok else 'WRONG'}", flush=True)
    rt.finish()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
