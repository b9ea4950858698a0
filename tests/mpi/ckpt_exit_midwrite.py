"""A checkpointed program that exits, without ``rt.finish()``, while its checkpoint writer holds h5py's lock.

The writer thread is made to hold h5py's global lock (``phil``) for a second as it starts, the way a slow
write does; the program ends at once. A daemon thread frozen there at the interpreter's end would leave the
main thread's last deallocations of h5py objects waiting on that lock forever: the job would never exit.
"""

import time

import h5py

import reshape.runtime as reshape
from reshape.runtime.checkpoint import Checkpointer

_write = Checkpointer._write


def slow_write(self, *args):
    with h5py._objects.phil:
        time.sleep(1.0)
    _write(self, *args)


Checkpointer._write = slow_write
rt = reshape.init()
x = rt.register_array("x", (40,), init=lambda i: i)
for _ in rt.iterations(1):
    x.local[...] += 1
    rt.log(0.01)
    rt.resize()
with h5py._objects.phil:  # wait until the writer holds the lock (it sleeps inside it)
    pass
print(f"exiting at iteration {rt.iteration}", flush=True)
