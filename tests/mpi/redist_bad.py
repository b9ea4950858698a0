"""Bad redistribution input raises the same clear error on every rank, and writes nothing.

Run under mpiexec with 4 ranks. Exits 1 if any rank did not raise, raised the
wrong error, hung (the test's timeout), or had its output buffer touched.
"""

import sys

import numpy as np
from mpi4py import MPI

from reshape.layout import block, block_cyclic_1d, block_cyclic_2d
from reshape.redistribute import RedistributionError, redistribute

comm = MPI.COMM_WORLD
me = comm.rank
SENTINEL = -12345.0


def expect_refusal(name, match, fn):
    try:
        fn()
    except RedistributionError as e:
        if match not in str(e):
            print(f"rank {me} [{name}]: wrong message: {e}", flush=True)
            return False
        return True
    except Exception as e:  # any other exception breaks the contract
        print(f"rank {me} [{name}]: raised {type(e).__name__}: {e}", flush=True)
        return False
    print(f"rank {me} [{name}]: did not raise", flush=True)
    return False


def main():
    ok = True
    src = block((20, 6), 4)
    dst = block((20, 6), 2)
    good = np.full(src.local_shape(me), float(me))
    out = np.full(dst.local_shape(me), SENTINEL) if me < 2 else None

    def call(src_layout=src, local=good, dst_layout=dst, out=out, **kw):
        return redistribute(comm, src_layout, local, dst_layout, out=out, **kw)

    ok &= expect_refusal("shape", "global shapes differ", lambda: call(dst_layout=block((21, 6), 2)))
    ok &= expect_refusal("local shape on one rank", "rank 2: source block has shape",
                         lambda: call(local=good if me != 2 else np.zeros((3, 6))))
    ok &= expect_refusal("dtype differs across ranks", "different dtypes",
                         lambda: call(local=good if me != 1 else good.astype(np.float32),
                                      out=None))
    ok &= expect_refusal("layout larger than communicator", "does not fit a communicator of 4",
                         lambda: call(dst_layout=block((20, 6), 6), out=None))
    ok &= expect_refusal("ranks disagree on the layout", "different layouts",
                         lambda: call(dst_layout=dst if me != 3 else block_cyclic_1d((20, 6), 2, 3)))
    ok &= expect_refusal("bad output buffer on one rank", "rank 1: output block",
                         lambda: call(out=out if me != 1 else np.zeros((2, 2))))
    ok &= expect_refusal("unknown method", "unknown method", lambda: call(method="carrier-pigeon"))
    ok &= expect_refusal("unsupported dtype", "no MPI datatype",
                         lambda: call(local=np.zeros(src.local_shape(me), dtype=object), out=None))
    ok &= expect_refusal("2-D layout does not fit", "does not fit",
                         lambda: call(dst_layout=block_cyclic_2d((20, 6), (3, 2)), out=None))
    if out is not None and not (out == SENTINEL).all():
        print(f"rank {me}: output buffer was written by a refused call", flush=True)
        ok = False
    # the communicator still works: a good call succeeds afterwards
    res = call()
    if me < 2:
        want = np.repeat(np.arange(4, dtype=float), 5)[me * 10:(me + 1) * 10]
        ok &= bool(np.array_equal(res[:, 0], want))
    return ok


if __name__ == "__main__":
    ok = main()
    all_ok = comm.allreduce(int(ok), op=MPI.MIN)
    if me == 0:
        print("bad-input:", "OK" if all_ok else "FAILED", flush=True)
    sys.exit(0 if all_ok else 1)
