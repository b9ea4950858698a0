"""Resizable dense-matrix Jacobi solver (Sudarsan & Ribbens 2007 Table 1, "Jacobi").

Solves ``A x = b`` for a dense, strictly diagonally dominant ``n x n`` matrix
with the Jacobi iteration ``x' = (b - (A - D) x) / d``. ``A``, ``b`` and ``x``
are registered arrays in contiguous row blocks; each sweep gathers ``x``
(``Iallgatherv``) and updates the local rows.

One job iteration is ``--sweeps`` Jacobi sweeps (default 20) continuing from
the current ``x`` (our choice: the paper does not say what one iteration of
its Jacobi job is; continuing the solve makes the carried state matter, since
a resize that lost or misplaced a piece of ``x`` changes every later sweep).

Legal sizes: ``p`` must divide ``n`` (the paper's rule, §4).

Run: ``mpiexec -n 4 python -m apps.jacobi --n 240 --iters 10 --check``.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

import reshape.runtime as runtime
from apps.common import add_options, allreduce, finish, positive, rand, run, want_check
from reshape.mpiutil import wait

__all__ = ["matrix", "serial", "sweep"]


def matrix(i: np.ndarray, j: np.ndarray, n: int) -> np.ndarray:
    """A[i, j]: pseudo-random off-diagonal in [-0.5, 0.5), ``n`` on the diagonal (diagonally dominant)."""
    return np.where(i == j, float(n), rand(i, j, seed=1))


def rhs(i: np.ndarray) -> np.ndarray:
    return rand(i, seed=2) * 10.0


def sweep(a_local: np.ndarray, diag: np.ndarray, b_local: np.ndarray, x_local: np.ndarray,
          x: np.ndarray) -> np.ndarray:
    """One Jacobi update of the local rows given the whole current ``x``."""
    return (b_local - (a_local @ x - diag * x_local)) / diag


def serial(n: int, sweeps: int) -> np.ndarray:
    """The serial numpy reference: ``sweeps`` Jacobi sweeps from ``x = 0``."""
    i = np.arange(n)
    a = matrix(i[:, None], i[None, :], n)
    b = rhs(i)
    d = np.diag(a).copy()
    x = np.zeros(n)
    for _ in range(sweeps):
        x = sweep(a, d, b, x, x)
    return x


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m apps.jacobi", description=__doc__.split("\n\n")[0])
    add_options(ap, n=240, size_help="matrix order n")
    ap.add_argument("--sweeps", type=int, default=20, help="Jacobi sweeps per job iteration (default 20)")
    ap.add_argument("--rtol", type=float, default=1e-10, help="check tolerance relative to max|x| (default 1e-10)")
    args = ap.parse_args(argv)
    positive(ap, n=args.n, iters=args.iters, sweeps=args.sweeps)
    n = args.n

    rt = runtime.init(sizes=lambda p: n % p == 0)
    if not rt.joined and n % rt.size:
        if rt.rank == 0:
            print(f"jacobi: {rt.size} processes do not divide n = {n}", file=sys.stderr)
        return 2
    A = rt.register_array("A", (n, n), layout="rows", init=lambda i, j: matrix(i, j, n), constant=True)
    b = rt.register_array("b", (n,), layout="rows", init=rhs, constant=True)
    x = rt.register_array("x", (n,), layout="rows", init=0.0)
    ref: dict[int, np.ndarray] = {}

    def step(it: int) -> None:
        comm = rt.comm
        (gi,) = x.layout.global_indices(rt.rank)
        counts = [x.layout.local_shape(r)[0] for r in range(rt.size)]
        displs = np.concatenate(([0], np.cumsum(counts)[:-1])).tolist()
        diag = A.local[np.arange(gi.size), gi].copy()
        xg = np.empty(n)
        for _ in range(args.sweeps):
            wait(comm.Iallgatherv(x.local, [xg, (counts, displs)]))
            x.local[...] = sweep(A.local, diag, b.local, x.local, xg)
        wait(comm.Iallgatherv(x.local, [xg, (counts, displs)]))
        rt["residual"] = allreduce(comm, float(np.max(np.abs(b.local - A.local @ xg), initial=0.0)))

    def verify(done: int) -> str | None:
        gi, gj = A.layout.global_indices(rt.rank)
        if not np.array_equal(A.local, matrix(gi[:, None], gj[None, :], n)):
            return "A differs from its definition"
        if not np.array_equal(b.local, rhs(gi)):
            return "b differs from its definition"
        if done not in ref:
            ref.clear()
            ref[done] = serial(n, done * args.sweeps)
        want = ref[done][gi]
        err = np.max(np.abs(x.local - want), initial=0.0)
        scale = max(float(np.max(np.abs(ref[done]), initial=0.0)), 1e-300)
        return f"x off by {err:.3g} (rtol {args.rtol:g})" if err > args.rtol * scale else None

    ok, rows = run(rt, args.iters, step, verify if want_check(args) else None, args)
    if rt.rank == 0 and not args.quiet:
        print(f"residual max|b - A x| = {rt.values.get('residual', float('nan')):.3e}", flush=True)
    return finish(rt, "jacobi", args, ok, rows, x, {"sweeps": args.sweeps})


if __name__ == "__main__":
    sys.exit(main())
