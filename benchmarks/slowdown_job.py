"""A loosely synchronous CPU-bound MPI job (Figueira & Berman's target): fixed uniform work per rank.

Each rank pins itself to core ``rank % ncores``, runs ``ITERS`` iterations of
a fixed compute kernel followed by an allreduce (waited on politely, so a rank
that finishes early does not steal its core), and rank 0 prints the elapsed
time of the iteration loop as JSON. Usage: ``python -m benchmarks.slowdown_job ITERS [F0,F1,...]``:
with fractions, rank ``r`` does ``size * F_r`` times the uniform work (a load-dependent or
constraint-based partition of the same total work).
"""

from __future__ import annotations

import json
import os
import sys
import time
from array import array

from mpi4py import MPI

from reshape.mpiutil import barrier, wait


def kernel(n: int) -> float:
    s = 0.0
    for i in range(n):
        s += (i % 7) * 0.5
    return s


def main() -> int:
    iters = int(sys.argv[1]) if len(sys.argv) > 1 else 25
    comm = MPI.COMM_WORLD
    fractions = [float(x) for x in sys.argv[2].split(",")] if len(sys.argv) > 2 else [1.0 / comm.size] * comm.size
    work = round(1_000_000 * comm.size * fractions[comm.rank])
    cores = sorted(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cores[comm.rank % len(cores)]})
    kernel(20_000)  # warm up
    barrier(comm)
    t0 = time.perf_counter()
    for _ in range(iters):
        send = array("d", [kernel(work)])
        recv = array("d", [0.0])
        wait(comm.Iallreduce([send, MPI.DOUBLE], [recv, MPI.DOUBLE]))
    barrier(comm)
    dt = time.perf_counter() - t0
    if comm.rank == 0:
        print(json.dumps({"seconds": dt, "ranks": comm.size, "iters": iters}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
