"""The command line of the out-of-core SHARED apps (CG, Lanczos, wavefront): one parser, one run.

Each app gives its options' defaults, how to build it, its check against a
serial run and anything extra rank 0 reports; :func:`run` does the rest the
same way for all of them: the cluster and the GEN_BLOCK row counts are
checked first (a bad value is one line on rank 0 and exit status 2), rank 0
reports the same line for each, the app runs in a scratch directory that
is removed whatever happens, and a rank that fails fails the whole run
(:func:`reshape.runtime.watchdog.fail_together`). ``apps.ooc_jacobi`` keeps its own
``main``: it also instruments and predicts.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

import numpy as np
from mpi4py import MPI

from apps.ooc_jacobi import check_counts
from reshape.mheta.cluster import Cluster, load_cluster
from reshape.mheta.ooc import remove_tree, scratch_dir
from reshape.mheta.structure import StructureError
from reshape.mpiutil import barrier
from reshape.redistribution.layout import even_counts
from reshape.runtime.watchdog import fail_together

__all__ = ["parser", "run"]


def parser(prog: str, doc: str, iters: int, *, cols_help: str = "grid columns", prefetch: bool = True,
           check_help: str = "compare with an in-core serial run") -> argparse.ArgumentParser:
    """The options every out-of-core app takes (``--prefetch`` only where the app reads from disk)."""
    ap = argparse.ArgumentParser(prog=f"python -m {prog}", description=doc.split("\n")[0])
    ap.add_argument("--rows", type=int, default=256, help="grid rows (the distributed dimension)")
    ap.add_argument("--cols", type=int, default=512, help=cols_help)
    ap.add_argument("--iters", type=int, default=iters, help="iterations")
    ap.add_argument("--nodes", help="cluster description: JSON file or inline JSON")
    ap.add_argument("--counts", help="GEN_BLOCK rows per rank, comma separated (default BLOCK)")
    if prefetch:
        ap.add_argument("--prefetch", action="store_true", help="overlap the next piece's read")
    ap.add_argument("--check", action="store_true", help=check_help)
    return ap


def run(args: argparse.Namespace, make: Callable, name: str, check: Callable[..., bool],
        validate: Callable[[], None] | None = None, *, extra: Callable[..., str] = lambda app: "",
        against: str = "in-core run") -> int:
    """``make(comm, cluster, workdir)`` -> the app; ``args.iters`` timed iterations on ``args.counts``.

    Rank 0 prints ``name``, the size, the row counts and the median iteration
    (then ``extra(app)``); with ``--check`` it prints whether ``check(app, whole)``
    (``whole``: the gathered result) agrees with the ``against`` reference.
    ``validate()`` may raise :class:`StructureError` for app-specific options. Exit status: 0, 1 if
    the check failed, 2 for a bad option.
    """
    comm = MPI.COMM_WORLD
    try:
        cluster = load_cluster(args.nodes) if args.nodes else Cluster.uniform(comm.size)
        counts = check_counts(args.counts.split(",") if args.counts
                              else even_counts(args.rows, comm.size), comm.size, args.rows)
        if validate is not None:
            validate()
    except (StructureError, ValueError) as e:
        if comm.rank == 0:
            print(f"error: {e}", file=sys.stderr)
        return 2
    workdir = comm.bcast(scratch_dir() if comm.rank == 0 else None)
    ok = True
    with fail_together(comm.rank, cleanup=lambda: remove_tree(workdir)):
        app = make(comm, cluster, workdir)
        app.distribute(counts)
        times = app.timed(args.iters)
        whole = app.gather()
        if comm.rank == 0:
            print(f"{name} {args.rows}x{args.cols} counts={counts} median iteration {np.median(times):.4f}s"
                  f"{extra(app)}")
            if args.check:
                ok = bool(check(app, whole))
                print(f"check against {against}:", "ok" if ok else "MISMATCH")
    app.close()
    barrier(comm)
    if comm.rank == 0:
        remove_tree(workdir)
    return 0 if comm.bcast(ok) else 1
