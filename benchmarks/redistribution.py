"""Redistribution benchmark: circulant engine vs. checkpoint/restart vs. Alltoallv (seed 001 Fig. 3b).

``python -m benchmarks.redistribution [--quick]`` relaunches itself under
``mpiexec`` and redistributes an N x N float64 matrix from P to Q processes
for several N and (P, Q), with each method in the same run, in two layouts:
1-D row blocks (BLOCK) and 2-D block-cyclic 64 x 64 on nearly-square grids
(ScaLAPACK style). Times are the slowest rank's, median of repeats, output
allocation included. The checkpoint writes the whole array through rank 0 to
an HDF5 file, fsyncs it and reads it back.

Summary (``benchmarks/results/redistribution.json``):
  checkpoint_over_circulant   median over cases of checkpoint / circulant time
  alltoallv_over_circulant    median over cases of alltoallv / circulant time
  fraction_of_copy_bandwidth  largest N, 1-D 2 -> 4: (array bytes / circulant time into a
                              preallocated, already-touched output block) / bandwidth of a
                              warm one-process numpy copy into a preallocated buffer
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time

import numpy as np

from benchmarks._common import table, write_result
from reshape.launch import relaunch, under_mpiexec

PAIRS = [(1, 2), (2, 4), (4, 2), (3, 4), (4, 3)]


def parse(argv):
    p = argparse.ArgumentParser(prog="python -m benchmarks.redistribution", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="small sizes, fewer repeats")
    p.add_argument("--sizes", type=int, nargs="+", help="matrix orders N (default 2000 4000; quick 1000 2000)")
    p.add_argument("--repeats", type=int, default=None, help="repeats per method (default 5; quick 3)")
    p.add_argument("--block", type=int, default=64, help="block size of the 2-D layout")
    p.add_argument("--dir", default=None, help="checkpoint directory (default: system temp dir)")
    return p.parse_args(argv)


def worker(args) -> int:
    from mpi4py import MPI

    from reshape.layout import block, block_cyclic_2d, nearly_square_grid
    from reshape.mpiutil import barrier
    from reshape.redistribute import redistribute
    from reshape.schedule import make_plan

    comm = MPI.COMM_WORLD
    me = comm.rank
    sizes = args.sizes or ([1000, 2000] if args.quick else [2000, 4000])
    reps = args.repeats or (3 if args.quick else 5)
    ckdir = args.dir or tempfile.gettempdir()

    def timed(*args, **kw):
        """Slowest rank's time of one redistribute call, and its result."""
        barrier(comm)
        t0 = time.perf_counter()
        out = redistribute(comm, *args, **kw)
        dt = time.perf_counter() - t0
        return comm.allreduce(dt, op=MPI.MAX), out

    # warm single-process copy bandwidth on rank 0 (same array size as the largest case)
    copy_bw = None
    if me == 0:
        n = max(sizes)
        a = np.random.default_rng(0).random((n, n))
        b = np.empty_like(a)
        best = float("inf")
        for _ in range(7):
            t0 = time.perf_counter()
            np.copyto(b, a)
            best = min(best, time.perf_counter() - t0)
        copy_bw = a.nbytes / best
        del a, b
    barrier(comm)  # the other ranks sleep meanwhile instead of spinning in bcast
    copy_bw = comm.bcast(copy_bw)

    rows = []
    for n in sizes:
        for p, q in PAIRS:
            if max(p, q) > comm.size:
                continue
            for kind in ("1d-block", "2d-cyclic"):
                if kind == "1d-block":
                    src, dst = block((n, n), p), block((n, n), q)
                else:
                    src = block_cyclic_2d((n, n), nearly_square_grid(p), (args.block, args.block))
                    dst = block_cyclic_2d((n, n), nearly_square_grid(q), (args.block, args.block))
                local = None
                if me < p:
                    rng = np.random.default_rng(me)
                    local = rng.random(src.local_shape(me))
                res = {}
                out_ref = None
                for method in ("circulant", "alltoallv", "checkpoint"):
                    r = reps if method != "checkpoint" else max(1, reps // 2)
                    ts = []
                    for _ in range(r):
                        dt, out = timed(src, local, dst, method=method, checkpoint_dir=ckdir)
                        ts.append(dt)
                        if method == "circulant":
                            out_ref = out
                        elif out_ref is not None and not np.array_equal(out_ref, out):
                            raise SystemExit(f"{method} result differs from circulant for N={n} {p}->{q}")
                    res[method] = statistics.median(ts)
                # circulant into a preallocated, already-touched output block: the
                # memory-bound figure compared with the warm copy bandwidth
                warm_out = None if out_ref is None else np.zeros_like(out_ref)
                ts = []
                for _ in range(reps):
                    ts.append(timed(src, local, dst, out=warm_out)[0])
                res["circulant_warm"] = statistics.median(ts)
                plan = make_plan(src, dst)
                nbytes = n * n * 8
                rows.append({
                    "N": n, "P": p, "Q": q, "layout": kind, "bytes": nbytes,
                    "steps": len(plan.steps), "max_degree": plan.max_degree,
                    "circulant_s": res["circulant"], "circulant_warm_s": res["circulant_warm"],
                    "alltoallv_s": res["alltoallv"],
                    "checkpoint_s": res["checkpoint"],
                    "circulant_GBps": nbytes / res["circulant"] / 1e9,
                    "checkpoint_over_circulant": res["checkpoint"] / res["circulant"],
                    "alltoallv_over_circulant": res["alltoallv"] / res["circulant"],
                    "fraction_of_copy_bw": nbytes / res["circulant_warm"] / copy_bw,
                })
    if me != 0:
        return 0
    big = max(sizes)
    ref = [r for r in rows if r["N"] == big and (r["P"], r["Q"]) == (2, 4) and r["layout"] == "1d-block"]
    summary = {
        "checkpoint_over_circulant": statistics.median(r["checkpoint_over_circulant"] for r in rows),
        "alltoallv_over_circulant": statistics.median(r["alltoallv_over_circulant"] for r in rows),
        "fraction_of_copy_bandwidth": ref[0]["fraction_of_copy_bw"] if ref else None,
        "fraction_of_copy_bandwidth_min_at_largest_N": min(
            r["fraction_of_copy_bw"] for r in rows if r["N"] == big),
        "copy_bandwidth_GBps": copy_bw / 1e9,
        "targets": {"checkpoint_over_circulant": 5.0, "alltoallv_over_circulant": 1.0,
                    "fraction_of_copy_bandwidth": 0.5},
    }
    print(table(rows, [
        ("N", "N", "d"), ("P", "P", "d"), ("Q", "Q", "d"), ("layout", "layout", "s"),
        ("steps", "steps", "d"), ("circulant_s", "circulant s", ".4f"), ("circulant_GBps", "GB/s", ".2f"),
        ("circulant_warm_s", "warm-out s", ".4f"),
        ("alltoallv_s", "alltoallv s", ".4f"), ("checkpoint_s", "checkpoint s", ".4f"),
        ("checkpoint_over_circulant", "ckpt/circ", ".1f"), ("alltoallv_over_circulant", "a2av/circ", ".2f"),
        ("fraction_of_copy_bw", "of copy bw", ".2f"),
    ]))
    print()
    for k, v in summary.items():
        if k != "targets":
            print(f"{k:45s} {v:.3f}" if isinstance(v, float) else f"{k:45s} {v}")
    path = write_result("redistribution", {
        "quick": args.quick, "nranks": comm.size, "sizes": sizes, "repeats": reps,
        "cases": rows, "summary": summary,
    })
    print(f"\nwrote {path}")
    return 0


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse(argv)
    if not under_mpiexec():
        return relaunch("benchmarks.redistribution", max(max(p) for p in PAIRS), argv)
    return worker(args)


if __name__ == "__main__":
    sys.exit(main())
