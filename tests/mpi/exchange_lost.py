"""A redistribution that loses a rank mid-transfer keeps its memory on the ranks that survive.

``mpirun --with-ft ulfm -n 3 python -m tests.mpi.exchange_lost`` with ``RESHAPE_FAULT=transfer:rank1:kill``
(Open MPI, ULFM): rank 1 dies once its sends are posted. A survivor that sees the error prints
``rank R kept source S destination D pack P``: whether the exchange's source block, destination block and
pack buffers are held for good (``reshape.mpiutil.abandon``). Open MPI's ``ob1`` may still read a send's
buffer after the revocation completed its request in error (a live receiver's rendezvous acknowledgement),
and a buffer let go then is freed or unmapped memory (a segmentation fault). A survivor whose messages with
rank 1 all completed before it died (on one host the receiver copies a posted send out of the sender's
memory itself, CMA, and rank 1 pulls the survivor's message while it posts its own) has nothing
outstanding and no error to see: it prints ``rank R: no error, complete C``, whether its destination block
holds every source rank's values, rank 1's included. Survivors leave without ``MPI_Finalize`` (docs/mpi.md,
ULFM's problem 11).
"""

import os
import sys

import numpy as np
from mpi4py import MPI

from reshape import mpiutil
from reshape.redistribution.layout import block_cyclic_1d
from reshape.redistribution.redistribute import redistribute

comm = MPI.COMM_WORLD.Dup()
comm.Set_errhandler(MPI.ERRORS_RETURN)
n = 600
src, dst = block_cyclic_1d((n, n), comm.size, 8, axis=1), block_cyclic_1d((n, n), comm.size, 8, axis=0)
mine = np.full(src.local_shape(comm.rank), float(comm.rank))
out = np.empty(dst.local_shape(comm.rank))
try:
    redistribute(comm, src, mine, dst, out=out)
    gi, gj = dst.global_indices(comm.rank)
    whole = np.array([[src.owner((i, j)) for j in gj] for i in gi], dtype=float)  # each value: its source rank
    print(f"rank {comm.rank}: no error, complete {np.array_equal(out, whole)}", flush=True)
except MPI.Exception as e:
    held = {id(x) for x in mpiutil._ABANDONED}
    pack = [x for x in mpiutil._ABANDONED if isinstance(x, np.ndarray) and x.dtype == np.uint8]
    print(f"rank {comm.rank} ({e.Get_error_string()}) kept source {id(mine) in held} destination {id(out) in held} "
          f"pack {bool(pack)}", flush=True)
sys.stdout.flush()
os._exit(0)
