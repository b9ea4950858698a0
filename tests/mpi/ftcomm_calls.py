"""Every blocking point-to-point call of an FTComm (reshape.runtime.ftcomm) gives what MPI's own gives.

``mpiexec -n 3 python -m tests.mpi.ftcomm_calls``: a ring exchange through each call, statuses
included; rank 0 prints ``ftcomm ok PEERS`` (the peers each rank's calls noted, while recording).
"""

import numpy as np
from mpi4py import MPI

from reshape.runtime.ftcomm import FTComm, neighbours, wrap

comm = wrap(MPI.COMM_WORLD.Dup())
assert isinstance(comm, FTComm) and wrap(comm) is comm
r, p = comm.rank, comm.size
right, left = (r + 1) % p, (r - 1) % p
comm.record = True

out = np.empty(4)
st = MPI.Status()
comm.Sendrecv(np.full(4, r, dtype="f8"), dest=right, sendtag=5, recvbuf=out, source=left, recvtag=5, status=st)
assert (out == left).all() and st.Get_source() == left and st.Get_tag() == 5, (out, st.Get_source())

buf = np.full(3, 10.0 * r)
comm.Sendrecv_replace(buf, dest=right, source=left)
assert (buf == 10.0 * left).all(), buf

if r % 2 == 0:
    comm.Send(np.arange(2.0) + r, dest=right, tag=7)
    got = np.empty(2)
    comm.Recv(got, source=left, tag=7, status=st)
else:
    got = np.empty(2)
    comm.Recv(got, source=left, tag=7, status=st)
    comm.Ssend(np.arange(2.0) + r, dest=right, tag=7)
assert (got == np.arange(2.0) + left).all() and st.Get_source() == left

obj = comm.sendrecv({"from": r, "data": [r] * 3}, dest=right, source=left)
assert obj == {"from": left, "data": [left] * 3}, obj
if r % 2 == 0:
    comm.send(("tuple", r), dest=right, tag=3)
    got_obj = comm.recv(source=MPI.ANY_SOURCE, tag=3, status=st)
else:
    got_obj = comm.recv(source=left, tag=3, status=st)
    comm.ssend(("tuple", r), dest=right, tag=3)
assert got_obj == ("tuple", left) and st.Get_source() == left, got_obj

sub = comm.Split(r % 2, r)
assert isinstance(sub, FTComm) and isinstance(comm.Dup(), FTComm)
comm.record = False
comm.Sendrecv(np.zeros(1), dest=MPI.PROC_NULL, recvbuf=np.zeros(1), source=MPI.PROC_NULL)
peers = comm.allgather(sorted(neighbours(comm)))
if r == 0:
    print(f"ftcomm ok {peers}", flush=True)
sub.Free()
comm.Free()
