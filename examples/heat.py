"""Resizable 2-D heat diffusion: ``mpiexec -n 2 python examples/heat.py`` (try RESHAPE_PLAN=2,4,3)."""
import argparse
import hashlib
import time

import numpy as np
from mpi4py import MPI

import reshape

ap = argparse.ArgumentParser(description=__doc__)
ap.add_argument("--n", type=int, default=64, help="grid points per side (default 64)")
ap.add_argument("--steps", type=int, default=40, help="time steps (one resize point each)")
ap.add_argument("--work", type=float, default=0.0,
                help="extra seconds per step shared by the ranks (sleep work/p), as a larger grid would take")
args = ap.parse_args()

rt = reshape.init()  # on ranks spawned by a resize this joins the running job
hot = lambda i, j: 100.0 * ((i - args.n // 2) ** 2 + (j - args.n // 2) ** 2 < args.n)  # noqa: E731
T = rt.register_array("T", (args.n, args.n), layout="rows", init=hot)

def step(it):  # one time step; rt.run calls it, then rt.resize()
    t0 = time.perf_counter()
    u, comm = T.local, rt.comm  # both may change at every resize (and after a lost rank)
    up = comm.rank - 1 if comm.rank > 0 else MPI.PROC_NULL
    down = comm.rank + 1 if comm.rank < comm.size - 1 else MPI.PROC_NULL
    h = np.zeros((u.shape[0] + 2, u.shape[1] + 2))  # zero boundary all around
    h[1:-1, 1:-1] = u
    lo, hi = np.zeros(u.shape[1]), np.zeros(u.shape[1])  # halo rows from the ranks below and above
    # rt.waitall: MPI.Request.Waitall that a peer lost under RESHAPE_INPLACE=1 turns into an exception
    rt.waitall([comm.Isend(u[0].copy(), up), comm.Irecv(lo, down), comm.Isend(u[-1].copy(), down),
                comm.Irecv(hi, up)])
    h[-1, 1:-1], h[0, 1:-1] = lo, hi
    u[...] = u + 0.2 * (h[:-2, 1:-1] + h[2:, 1:-1] + h[1:-1, :-2] + h[1:-1, 2:] - 4 * u)
    time.sleep(args.work / comm.size)
    rt.log(time.perf_counter() - t0)

rt.run(step, args.steps)  # steps, resizes as told; RESHAPE_INPLACE=1: a lost rank is recovered in place
whole = T.gather()
if rt.rank == 0:
    sizes = [rt.history[0]] + [r.new for r in rt.results if r.action in ("expand", "shrink", "lost")]
    print(f"sizes {sizes} sha256 {hashlib.sha256(whole.tobytes()).hexdigest()[:16]}")
rt.finish()
