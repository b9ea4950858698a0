"""A resizable iterative program checked after every resize; run under mpiexec with RESHAPE_PLAN set.

Each iteration adds ``it + 1`` times a known function to a 2-D block-cyclic
array and a 1-D row-distributed vector, so every block's expected value is
known everywhere. After each resize every rank checks its blocks (a local
check, no gather) and logs ``pid size rank`` to ``--pidlog``.
"""

import argparse
import os
import sys
import time

import numpy as np

import reshape.runtime as runtime


def f(i, j):
    return (i * 31 + j * 7) % 13 + 0.25


def g(i):
    return np.sin(i) + 2.0


def expected_A(i, j, done):
    return f(i, j) * (1 + done * (done + 1) / 2)  # initial + sum_{k<done} (k+1) f


def report_retired(pids: set[int]) -> None:
    """Print which retired ranks exited within 10 s and which stay parked in MPI_Finalize."""
    import psutil

    deadline = time.monotonic() + (2 if os.environ.get("RESHAPE_REUSE") == "1" else 10)  # parked ranks stay
    left = set(pids)
    while left and time.monotonic() < deadline:
        for p in list(left):
            try:
                if psutil.Process(p).status() == psutil.STATUS_ZOMBIE:
                    left.discard(p)
            except psutil.NoSuchProcess:
                left.discard(p)
        time.sleep(0.05)
    print(f"retired {len(pids)}: exited {len(pids) - len(left)} parked {len(left)}", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=37)
    ap.add_argument("--iters", type=int, default=6)
    ap.add_argument("--pidlog", default=None)
    ap.add_argument("--sleep", type=float, default=0.0)
    args = ap.parse_args()

    rt = runtime.init()
    n = args.n
    A = rt.register_array("A", (n, n + 3), layout="2d", block=(4, 5), init=f)
    x = rt.register_array("x", (n,), dtype=np.int32, layout="rows", init=lambda i: i * 3)
    if not rt.joined:
        rt["checksum"] = 0
    if rt.rank == 0 and rt.advisor is not None:  # where the reports say ranks are parked (RESHAPE_REUSE)
        advise = rt.advisor.advise

        def logged(report):
            parked = report.parked or ()  # None: no rank is parked
            print(f"PARKED {len(parked)} here {parked.count(report.host)}", flush=True)
            return advise(report)

        rt.advisor.advise = logged

    def check(done: int, where: str) -> bool:
        gi, gj = A.layout.global_indices(rt.rank)
        ok = np.allclose(A.local, expected_A(gi[:, None], gj[None, :], done), rtol=0, atol=0)
        (xi,) = x.layout.global_indices(rt.rank)
        ok &= bool(np.array_equal(x.local, (xi * 3 + done).astype(np.int32)))
        if not ok:
            print(f"rank {rt.rank}/{rt.size}: data WRONG {where} after {done} iterations", flush=True)
        return ok

    def pidlog(tag: str) -> None:
        if args.pidlog:
            with open(args.pidlog, "a") as fh:
                fh.write(f"{os.getpid()} {rt.size} {rt.rank} {tag}\n")

    ok = check(rt.iteration, "at start" if not rt.joined else "after joining")
    pidlog("join" if rt.joined else "start")
    for it in rt.iterations(args.iters):
        t0 = time.perf_counter()
        gi, gj = A.layout.global_indices(rt.rank)
        A.local[...] += (it + 1) * f(gi[:, None], gj[None, :])
        x.local[...] += 1
        rt["checksum"] += it
        if args.sleep:
            time.sleep(args.sleep)
        rt.log(time.perf_counter() - t0)
        before = rt.comm.allgather(os.getpid())
        res = rt.resize()
        # rt.iteration, not it: a parked rank called back (RESHAPE_REUSE) resumes here in the job's iteration
        ok &= check(rt.iteration + 1, f"after resize {res.old}->{res.new} ({res.action})")
        if res.action != "continue":
            pidlog(f"{res.action}")
        if res.action == "shrink" and rt.rank == 0:
            report_retired(set(before) - set(rt.comm.allgather(os.getpid())))
        elif res.action == "shrink":
            rt.comm.allgather(os.getpid())
    total = rt.comm.allreduce(int(ok), op=__import__("mpi4py").MPI.MIN)
    want_checksum = sum(range(args.iters))
    if rt.rank == 0:
        sizes = [r.new for r in rt.results]
        print(f"final size {rt.size} sizes {sizes} checksum {rt['checksum']} "
              f"data {'OK' if total and rt['checksum'] == want_checksum else 'WRONG'} "
              f"called back {[r.called_back for r in rt.results if r.action == 'expand']}", flush=True)
        for r in rt.results:
            if r.error:
                print(f"refused: {r.error}", flush=True)
    rt.finish()
    return 0 if total else 1


if __name__ == "__main__":
    sys.exit(main())
