"""A real resizable MPI job for the daemon tests (reshape.runtime; spawn, redistribution).

Each iteration adds 1 to a registered row-distributed array and sleeps
``work / p + overhead * p`` seconds (a sweet spot at sqrt(work / overhead));
after every resize each rank checks its rows. Exits 1 if any value is wrong.
"""

import argparse
import sys
import time

import numpy as np
from mpi4py import MPI

import reshape.runtime as runtime


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--work", type=float, default=0.6)
    ap.add_argument("--overhead", type=float, default=0.05)
    a = ap.parse_args()
    rt = runtime.init()
    x = rt.register_array("x", (24, 3), layout="rows", init=lambda i, j: i * 10.0 + j)
    ok = True
    for it in rt.iterations(a.iters):
        t0 = time.perf_counter()
        x.local[...] += 1
        time.sleep(a.work / rt.size + a.overhead * rt.size)
        rt.log(time.perf_counter() - t0)
        rt.resize()
        gi, gj = x.layout.global_indices(rt.rank)
        ok &= bool(np.array_equal(x.local, gi[:, None] * 10.0 + gj[None, :] + it + 1))
    ok = rt.comm.allreduce(int(ok), op=MPI.MIN)
    if rt.rank == 0:
        print(f"sizes {[r.new for r in rt.results]} data {'ok' if ok else 'WRONG'} "
              f"called back {[r.called_back for r in rt.results if r.action == 'expand']}", flush=True)
    rt.finish()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
