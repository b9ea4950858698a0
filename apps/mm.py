"""Resizable matrix multiply, SUMMA on a 2-D block-cyclic grid (Sudarsan & Ribbens 2007 Table 1, "PDGEMM").

``A``, ``B`` and ``C`` (``n x n``) are registered arrays, block-cyclic in
``nb x nb`` blocks over the nearly-square process grid of the current size
(``rt.grid``, row-major ranks). One job iteration is one whole product
``C = A @ B`` by SUMMA (van de Geijn & Watts): for every block column ``k`` of
``A`` / block row ``k`` of ``B``, the owning process column broadcasts its
piece of ``A[:, k]`` along each process row, the owning process row
broadcasts ``B[k, :]`` down each process column, and every process adds the
outer product of the two pieces to its block of ``C``.

Legal sizes: any ``p`` (grids with more process rows or columns than blocks
leave some processes with empty blocks).

Verification: against ``A @ B`` in numpy. The sums are accumulated in blocks
of ``nb`` in a different order than one serial ``dgemm``, so the check uses a
tolerance, ``|C - A @ B| <= rtol * n * max|A| * max|B|`` with ``rtol = 1e-13``.

Run: ``mpiexec -n 4 python -m apps.mm --n 512 --nb 32 --iters 10``.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
from mpi4py import MPI

import reshape.runtime as runtime
from apps.common import add_options, finish, positive, rand, run, want_check
from reshape.mpiutil import wait
from reshape.redistribution.layout import Layout

__all__ = ["summa"]


def a_of(i, j):
    return rand(i, j, seed=4)


def b_of(i, j):
    return rand(i, j, seed=5)


def summa(comm: MPI.Intracomm, layout: Layout, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> None:
    """``c = a @ b`` for three matrices with the same 2-D block-cyclic ``layout``. Collective."""
    rd, cd = layout.dists
    myr, myc = layout.coords(comm.rank)
    rowcomm = comm.Split(myr, myc)  # my process row, ranked by column
    colcomm = comm.Split(myc, myr)  # my process column, ranked by row
    try:
        gi = rd.global_indices(myr)
        gj = cd.global_indices(myc)
        c[...] = 0.0
        n, nb = rd.n, rd.nb
        for k0 in range(0, n, nb):
            k1 = min(k0 + nb, n)
            jb = k1 - k0
            acol, brow = cd.owner(k0), rd.owner(k0)
            if myc == acol:
                lo = int(np.searchsorted(gj, k0))
                ap = np.ascontiguousarray(a[:, lo:lo + jb])
            else:
                ap = np.empty((gi.size, jb))
            if myr == brow:
                lo = int(np.searchsorted(gi, k0))
                bp = np.ascontiguousarray(b[lo:lo + jb, :])
            else:
                bp = np.empty((jb, gj.size))
            reqs = [rowcomm.Ibcast(ap, acol), colcomm.Ibcast(bp, brow)]
            for r in reqs:
                wait(r)
            c += ap @ bp
    finally:
        rowcomm.Free()
        colcomm.Free()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m apps.mm", description=__doc__.split("\n\n")[0])
    add_options(ap, n=256, size_help="matrix order n")
    ap.add_argument("--nb", type=int, default=32, help="block size (default 32)")
    ap.add_argument("--rtol", type=float, default=1e-13, help="check tolerance (see module doc; default 1e-13)")
    args = ap.parse_args(argv)
    positive(ap, n=args.n, iters=args.iters, nb=args.nb)
    n, nb = args.n, args.nb

    rt = runtime.init()
    A = rt.register_array("A", (n, n), layout="2d", block=(nb, nb), init=a_of, constant=True)
    B = rt.register_array("B", (n, n), layout="2d", block=(nb, nb), init=b_of, constant=True)
    C = rt.register_array("C", (n, n), layout="2d", block=(nb, nb), init=0.0)
    ref: list[np.ndarray] = []

    def step(it: int) -> None:
        summa(rt.comm, C.layout, A.local, B.local, C.local)

    def verify(done: int) -> str | None:
        gi, gj = A.layout.global_indices(rt.rank)
        if not np.array_equal(A.local, a_of(gi[:, None], gj[None, :])):
            return "A differs from its definition"
        if not np.array_equal(B.local, b_of(gi[:, None], gj[None, :])):
            return "B differs from its definition"
        if done == 0:
            return None if not np.any(C.local) else "C is not zero before the first product"
        if not ref:
            i = np.arange(n)
            ref.append(a_of(i[:, None], i[None, :]) @ b_of(i[:, None], i[None, :]))
        err = float(np.max(np.abs(C.local - ref[0][np.ix_(gi, gj)]), initial=0.0))
        bound = args.rtol * n * 0.25  # max|A| * max|B| <= 0.5 * 0.5
        return f"C off by {err:.3g} (bound {bound:.3g})" if err > bound else None

    ok, rows = run(rt, args.iters, step, verify if want_check(args) else None, args)
    return finish(rt, "mm", args, ok, rows, C, {"nb": nb})


if __name__ == "__main__":
    sys.exit(main())
