"""Rank program: an out-of-core Jacobi job under BLOCK is moved to the split MHETA + GBS choose.

Runs iterations under BLOCK, instruments, asks :func:`choose_split` for the
GEN_BLOCK split on its (emulated heterogeneous) nodes, redistributes the live
grid with the real engine, keeps iterating, and checks the result against an
in-core serial run. Exits non-zero on any failure.
"""

from __future__ import annotations

import sys

import numpy as np
from mpi4py import MPI

from apps.ooc_jacobi import OOCJacobi, serial
from reshape.mheta.cluster import Cluster, Node
from reshape.mheta.distribute import choose_split
from reshape.mheta.ooc import remove_tree, scratch_dir
from reshape.mpiutil import barrier
from reshape.redistribution.layout import even_counts, gen_block


def main() -> int:
    comm = MPI.COMM_WORLD
    rows, cols = 96, 64
    row = 2 * cols * 8
    nodes = [Node(cpu=0.5), Node(cpu=1.0, memory=8 * row, read_bw=2e6, write_bw=2e6),
             Node(cpu=2.0), Node(cpu=1.0)][: comm.size]
    cluster = Cluster(tuple(nodes), element_time=2e-6)
    prefetch = "--prefetch" in sys.argv
    workdir = comm.bcast(scratch_dir() if comm.rank == 0 else None)
    app = OOCJacobi(comm, cluster, rows, cols, workdir, prefetch=prefetch)
    ok = True
    try:
        app.distribute(even_counts(rows, comm.size))
        for _ in range(2):
            app.iterate()
        prof = app.instrument(repeats=1)  # one more (instrumented) iteration: 3 in total
        choice = choose_split(app.app, prof, cluster, budget=1.0)
        counts = list(choice.counts)
        gen_block((rows, cols), counts)  # usable as a GEN_BLOCK layout
        agree = comm.allgather(tuple(counts))
        ok &= len(set(agree)) == 1
        ok &= choice.search.certified and sum(counts) == rows
        ok &= choice.predicted <= choice.block_predicted
        # the slow CPU node gets fewer rows than the fast one; the small-memory slow disk fewer too
        ok &= counts[0] < counts[2] and counts[1] < counts[2]
        app.redistribute(counts)
        assert app.counts == counts
        for _ in range(2):
            app.iterate()
        whole = app.gather()
        if comm.rank == 0:
            ref = serial(rows, cols, 5)
            same = bool(np.array_equal(whole, ref))
            print(f"chosen {counts} predicted {choice.predicted:.4f}s "
                  f"(BLOCK {choice.block_predicted:.4f}s); result {'ok' if same else 'MISMATCH'}")
            ok &= same
    finally:
        app.close()
        barrier(comm)
        if comm.rank == 0:
            remove_tree(workdir)
    ok = all(comm.allgather(ok))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
