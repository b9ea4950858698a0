"""A resizable program that never calls rt.finish(): run with RESHAPE_REUSE=1 and a plan that ends shrunk.

Rank 0's exit must still release the parked ranks, or the job would hang in MPI_Finalize.
"""

import reshape.runtime as reshape

rt = reshape.init()
x = rt.register_array("x", (40,), init=lambda i: i)
for _ in rt.iterations(4):
    x.local[...] += 1
    rt.log(0.01)
    rt.resize()
total = rt.comm.allreduce(float(x.local.sum()))
if rt.rank == 0:
    print(f"sum {total:.0f} size {rt.size} sizes {[r.new for r in rt.results]}", flush=True)
