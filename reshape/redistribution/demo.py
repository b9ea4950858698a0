"""``reshape redistribution-demo``: grow and shrink a distributed matrix and show what moved.

Runs under ``mpiexec`` (relaunching itself when started plainly): a matrix in a
2-D block-cyclic layout goes P -> Q -> R processes with the circulant engine;
the demo prints each schedule (the destination processor table), times the
move against the checkpoint baseline, and checks the result bit for bit. It
uses the library as an application would: :func:`redistribute` between the
layouts, one call per move. ``python -m reshape.redistribution.demo`` takes
the same options.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time

import numpy as np

from reshape.joblink.advice import parse_plan


def _matrix(comm, layout, n: int):
    """This rank's block of the demo matrix ``i * n + j + 0.5`` in ``layout`` (``None`` outside it), in
    memory that ranks of the same host can read directly, as the runtime's arrays (:func:`nodecopy.empty`)."""
    from reshape.redistribution import nodecopy

    if comm.rank >= layout.nprocs:
        return None
    idx = layout.global_indices(comm.rank)
    gi, gj = np.ix_(*idx)
    values = np.asarray(gi * n + gj + 0.5, dtype=np.float64)
    block = nodecopy.empty(tuple(len(i) for i in idx), values.dtype)
    block[...] = values
    return block


def _run(args) -> int:
    from mpi4py import MPI

    from reshape.mpiutil import barrier
    from reshape.redistribution.layout import block_cyclic_1d, block_cyclic_2d, nearly_square_grid
    from reshape.redistribution.redistribute import redistribute
    from reshape.redistribution.schedule import make_plan

    comm = MPI.COMM_WORLD
    sizes = parse_plan(args.plan, "--plan")
    n, nb = args.n, args.block
    if max(sizes) > comm.size:
        if comm.rank == 0:
            print(f"plan {sizes} needs {max(sizes)} ranks, have {comm.size}", file=sys.stderr)
        return 2

    def lay(p):
        return block_cyclic_2d((n, n), nearly_square_grid(p), (nb, nb))

    a = _matrix(comm, lay(sizes[0]), n)
    if comm.rank == 0:
        walk = " -> ".join(map(str, sizes))
        print(f"{n}x{n} float64 matrix ({n * n * 8 / 1e6:.1f} MB), {nb}x{nb} blocks, plan {walk}")
    for p, q in itertools.pairwise(sizes):
        plan = make_plan(lay(p), lay(q))
        times = {}
        for method in ("checkpoint", "circulant"):
            barrier(comm)
            t0 = time.perf_counter()
            b = redistribute(comm, lay(p), a, lay(q), method=method)
            times[method] = comm.allreduce(time.perf_counter() - t0, op=MPI.MAX)
        whole = redistribute(comm, lay(q), b, block_cyclic_1d((n, n), 1, n), dst_ranks=(0,))  # on rank 0
        if comm.rank == 0:
            gi, gj = np.indices((n, n))
            ok = np.array_equal(whole, gi * n + gj + 0.5)
            grid_p, grid_q = nearly_square_grid(p), nearly_square_grid(q)
            print(f"\n{p} -> {q} processes (grid {grid_p[0]}x{grid_p[1]} -> {grid_q[0]}x{grid_q[1]}): "
                  f"{len(plan.local)} local copies, {len(plan.remote)} messages in {len(plan.steps)} "
                  f"contention-free steps (lower bound {plan.max_degree})")
            if args.tables:
                print(plan.table())
            print(f"  circulant {times['circulant'] * 1e3:8.2f} ms   checkpoint {times['checkpoint'] * 1e3:8.2f} ms"
                  f"   ratio {times['checkpoint'] / times['circulant']:5.1f}x   bit-exact: {'yes' if ok else 'NO'}")
            if not ok:
                return 1
        a = b
    return 0


def run(args) -> int:
    from reshape.joblink.launch import relaunch, under_mpiexec

    if under_mpiexec():
        return _run(args)
    argv = ["--plan", args.plan, "--n", str(args.n), "--block", str(args.block)] + (["--tables"] if args.tables else [])
    return relaunch("reshape.redistribution.demo", max(parse_plan(args.plan, "--plan")), argv, timeout=600)


def _options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--plan", default="2,4,6,3", help="process counts to walk through (default 2,4,6,3)")
    p.add_argument("--n", type=int, default=1200, help="matrix order (default 1200)")
    p.add_argument("--block", type=int, default=32, help="block size (default 32)")
    p.add_argument("--tables", action="store_true", help="print each destination processor table")


def add_commands(sub) -> None:
    p = sub.add_parser("redistribution-demo", help="grow and shrink a distributed matrix; show the schedules",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    _options(p)
    p.set_defaults(func=run)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(prog="python -m reshape.redistribution.demo")
    _options(ap)
    sys.exit(run(ap.parse_args()))
