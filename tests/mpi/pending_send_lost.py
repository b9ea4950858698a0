"""A rank lost while another's large ``Isend`` to a slow live peer is still pending.

``mpirun --with-ft ulfm -n 3 python -m tests.mpi.pending_send_lost`` with ``RESHAPE_INPLACE=1`` and
``RESHAPE_FAULT=iteration2:rank2:kill``: in iteration 2 on 3 ranks, rank 0 posts an 8 MB ``Isend`` to
rank 1 and an ``Irecv`` from rank 2 and waits on both with ``MPI.Request.Waitall``; rank 1 posts its
receive only a second later; rank 2 dies. Rank 0's wait raises with its send still pending and the
program drops the requests, as programs do. The survivors must recover in place on 2 ranks and rank 0
prints ``final size 2``. (A request mpi4py frees while Open MPI's ``ob1`` still moves it: a segmentation
fault in the recovery's ``MPIX_Comm_shrink`` once rank 1's receive acknowledges the send.)
"""

import time

import numpy as np
from mpi4py import MPI

import reshape

rt = reshape.init()
x = rt.register_array("x", (8, 8), init=1.0)
BIG = 1 << 20  # doubles: 8 MB, far above the eager limit


def step(it):
    comm = rt.comm
    if it == 2 and comm.size == 3:
        if comm.rank == 0:
            MPI.Request.Waitall([comm.Isend(np.ones(BIG), 1, tag=5), comm.Irecv(np.zeros(4), 2, tag=6)])
        elif comm.rank == 1:
            time.sleep(1.0)
            comm.Recv(np.zeros(BIG), 0, tag=5)
        else:
            time.sleep(0.5)  # killed 50 ms into the step
    x.local[...] += 1.0
    rt.log(0.01)


rt.run(step, 4)
total = float(rt.comm.allreduce(float(x.local.sum())))
if rt.rank == 0:
    print(f"final size {rt.size} total {total:g}", flush=True)
rt.finish()
