"""A 1-D heat solver written as users write them: the public API only, blocking ``comm.Sendrecv`` halos
(or non-blocking ones).

``python -m tests.mpi.heat1d_sendrecv [--n N] [--width W] [--steps S] [--work SECONDS]``: ``W`` rods of
``N`` points each (an ``N x W`` array split by rows), hot in the middle, ``S`` explicit steps; each rank
trades its edge rows (``W`` values each) with its neighbours by two blocking ``Sendrecv`` calls per
step (``--halo waitall``: ``Isend``/``Irecv`` completed by ``MPI.Request.Waitall``; ``--halo rt-waitall``:
by ``rt.waitall``, as ``examples/heat.py`` does). Rank 0 prints ``sizes [...] sha256 HASH`` at the end. Run with
``RESHAPE_INPLACE=1`` (Open MPI) and kill a rank: the survivors must carry on and print the hash of a
run that never failed.
"""

import argparse
import hashlib
import time

import numpy as np
from mpi4py import MPI

import reshape

ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
ap.add_argument("--n", type=int, default=4096)
ap.add_argument("--width", type=int, default=1)
ap.add_argument("--steps", type=int, default=40)
ap.add_argument("--work", type=float, default=0.0, help="extra seconds per step shared by the ranks")
ap.add_argument("--halo", choices=("sendrecv", "waitall", "rt-waitall"), default="sendrecv",
                help="blocking Sendrecv (default), or Isend/Irecv completed by MPI.Request.Waitall or rt.waitall")
args = ap.parse_args()

rt = reshape.init()
mid = args.n // 2
u = rt.register_array("u", (args.n, args.width), init=lambda i, j: 100.0 * (abs(i - mid) <= args.n // 16) + 0.0 * j)


def step(it):
    t0 = time.perf_counter()
    x, comm = u.local, rt.comm
    left = comm.rank - 1 if comm.rank > 0 else MPI.PROC_NULL
    right = comm.rank + 1 if comm.rank < comm.size - 1 else MPI.PROC_NULL
    lo, hi = np.zeros((1, args.width)), np.zeros((1, args.width))
    if args.halo == "sendrecv":
        comm.Sendrecv(x[-1:].copy(), dest=right, recvbuf=lo, source=left)   # my last row goes right
        comm.Sendrecv(x[:1].copy(), dest=left, recvbuf=hi, source=right)    # my first row goes left
    else:
        reqs = [comm.Irecv(lo, left), comm.Irecv(hi, right), comm.Isend(x[-1:].copy(), right),
                comm.Isend(x[:1].copy(), left)]
        if args.halo == "waitall":
            MPI.Request.Waitall(reqs)
        else:
            rt.waitall(reqs)
    padded = np.concatenate([lo, x, hi])
    x[...] = x + 0.25 * (padded[:-2] - 2 * x + padded[2:])
    time.sleep(args.work / comm.size)
    rt.log(time.perf_counter() - t0)


rt.run(step, args.steps)
whole = u.gather()
if rt.rank == 0:
    sizes = [rt.history[0]] + [r.new for r in rt.results if r.action in ("expand", "shrink", "lost")]
    print(f"sizes {sizes} sha256 {hashlib.sha256(whole.tobytes()).hexdigest()[:16]}", flush=True)
rt.finish()
