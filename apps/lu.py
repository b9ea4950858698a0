"""Resizable LU factorization with partial pivoting, PDGETRF-style (Sudarsan & Ribbens 2007 Table 1, "LU").

The input ``A`` and the factors ``F`` (``n x n``) are registered arrays,
block-cyclic in ``nb x nb`` blocks over the nearly-square process grid of the
current size (``rt.grid``, row-major ranks); the pivot vector is a registered
value. One job iteration is one whole factorization ``P A = L U`` of ``A``
into ``F`` (unit ``L`` below the diagonal, ``U`` on and above it), as
ScaLAPACK's right-looking PDGETRF does it, one ``nb``-wide panel at a time:

1. panel factorization in the process column owning the panel: for each
   column, pivot search down the process column (one ``Iallgather`` of the
   local candidates with their rows; the largest magnitude wins, ties to the
   smallest row, as ``idamax``), swap of the two panel rows, scaling, rank-1
   update of the rest of the panel;
2. broadcast of the factored panel and its pivots along the process rows;
3. the panel's row interchanges applied to all other columns (left and
   right, as ``dlaswp`` in PDGETRF): the affected rows are exchanged inside
   each process column;
4. triangular solve ``U12 = L11^-1 A12`` in the process row owning the panel
   rows, broadcast of ``U12`` down the process columns;
5. trailing update ``A22 -= L21 @ U12``.

Legal sizes: any ``p``.

Verification: against a serial numpy right-looking LU with partial pivoting
(unblocked). Pivots must be identical; the factors agree within
``rtol * n`` relative to ``max|A|`` (``rtol = 1e-12``; blocked and unblocked
updates round differently), and ``|P A - L U| / max|A|`` is reported.

Run: ``mpiexec -n 4 python -m apps.lu --n 512 --nb 32 --iters 10``.
"""

from __future__ import annotations

import argparse
import contextlib
import sys

import numpy as np
from mpi4py import MPI

import reshape.runtime as runtime
from apps.common import add_options, finish, positive, rand, run, want_check
from reshape.mpiutil import wait, watched
from reshape.redistribution.layout import Layout

__all__ = ["factor", "serial_lu", "unpack"]

PANEL_SLEEP = 1e-4  # longest sleep while waiting inside the panel (short, latency-bound exchanges)


def a_of(i, j):
    return rand(i, j, seed=6)


def serial_lu(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Serial reference: unblocked right-looking LU with partial pivoting. Returns (factors, pivots)."""
    f = np.array(a, dtype=np.float64)
    n = f.shape[0]
    piv = np.zeros(n, dtype=np.int64)
    for j in range(n):
        p = j + int(np.argmax(np.abs(f[j:, j])))
        piv[j] = p
        if p != j:
            f[[j, p], :] = f[[p, j], :]
        if f[j, j] != 0.0:
            f[j + 1:, j] /= f[j, j]
        f[j + 1:, j + 1:] -= np.outer(f[j + 1:, j], f[j, j + 1:])
    return f, piv


def unpack(f: np.ndarray, piv: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(perm, L, U)`` with ``A[perm] = L @ U`` from LAPACK-style factors and pivots."""
    n = f.shape[0]
    perm = np.arange(n)
    for j, p in enumerate(piv):
        perm[[j, p]] = perm[[p, j]]
    return perm, np.tril(f, -1) + np.eye(n), np.triu(f)


def _bcast(comm, buf: np.ndarray, root: int) -> np.ndarray:
    if comm.size > 1:
        wait(comm.Ibcast(buf, root))
    return buf


def factor(comm: MPI.Intracomm, layout: Layout, f: np.ndarray) -> tuple[np.ndarray, int]:
    """Factor the distributed matrix ``f`` in place. Collective; returns (pivots, info).

    ``info`` is 0, or ``j + 1`` for the first exactly zero pivot ``j`` (LAPACK).
    """
    rd, cd = layout.dists
    n, nb = rd.n, rd.nb
    if cd.nb != nb or cd.n != n:
        raise ValueError("LU needs a square matrix with square blocks")
    myr, myc = layout.coords(comm.rank)
    cached = watched()  # in-place recovery on: split once per communicator (_lines)
    rowcomm, colcomm = _lines(comm, myr, myc) if cached else (comm.Split(myr, myc), comm.Split(myc, myr))
    gi = rd.global_indices(myr)
    gj = cd.global_indices(myc)
    piv = np.zeros(n, dtype=np.int64)
    info = 0
    try:
        for k0 in range(0, n, nb):
            k1 = min(k0 + nb, n)
            jb = k1 - k0
            pcol, prow = cd.owner(k0), rd.owner(k0)
            r0 = int(np.searchsorted(gi, k0))  # first local row >= k0
            r1 = int(np.searchsorted(gi, k1))  # first local row >= k1
            c1 = int(np.searchsorted(gj, k1))  # first local column >= k1
            # 1. panel factorization down process column pcol
            panel = np.empty((gi.size - r0, jb))
            kpiv = np.empty(jb, dtype=np.int64)
            if myc == pcol:
                c0 = int(np.searchsorted(gj, k0))
                panel[...] = f[r0:, c0:c0 + jb]
                info = _panel(colcomm, rd, gi[r0:], panel, k0, kpiv, info)
                f[r0:, c0:c0 + jb] = panel
            # 2. panel and pivots along the process rows
            _bcast(rowcomm, panel, pcol)
            _bcast(rowcomm, kpiv, pcol)
            piv[k0:k1] = kpiv
            # 3. row interchanges on every column outside the panel
            cols = np.ones(gj.size, dtype=bool)
            if myc == pcol:
                cols[c0:c0 + jb] = False
            _swap_rows(colcomm, rd, gi, f, cols, k0, kpiv)
            # 4. U12 = L11^-1 A12 in process row prow, then down the process columns
            u12 = np.empty((jb, gj.size - c1))
            if myr == prow:
                l11 = np.tril(panel[:jb], -1) + np.eye(jb)
                if u12.size:
                    u12[...] = np.linalg.solve(l11, f[r0:r0 + jb, c1:])
                f[r0:r0 + jb, c1:] = u12
            _bcast(colcomm, u12, prow)
            # 5. trailing update
            if u12.size and r1 < gi.size:
                f[r1:, c1:] -= panel[r1 - r0:] @ u12
    finally:
        if not cached:
            rowcomm.Free()
            colcomm.Free()
    return piv, info


_LINES: list = []  # [comm, row, column, row communicator, column communicator] of the last factorization


def _lines(comm: MPI.Intracomm, myr: int, myc: int) -> tuple[MPI.Intracomm, MPI.Intracomm]:
    """With in-place recovery on: this process's row and column communicators (``MPI_Comm_split`` of
    ``comm``), made once per communicator and kept: split at every factorization, a rank lost while the
    others split crashed Open MPI 5.0's ULFM (docs/mpi.md); a new ``comm`` (after a resize or a
    recovery) frees the old pair. Otherwise each factorization splits and frees its own (a rank a
    shrink retires must hold no communicator shared with the ranks that stay)."""
    if not (_LINES and _LINES[0] is comm and _LINES[1:3] == [myr, myc]):
        for c in _LINES[3:]:
            with contextlib.suppress(MPI.Exception):
                c.Free()
        _LINES[:] = [comm, myr, myc, comm.Split(myr, myc), comm.Split(myc, myr)]  # row by column, column by row
    return _LINES[3], _LINES[4]


def _panel(colcomm, rd, grows: np.ndarray, panel: np.ndarray, k0: int, kpiv: np.ndarray, info: int) -> int:
    """Factor the ``jb``-wide panel held down one process column (rows ``grows``, all >= k0).

    One ``Iallgather`` per column carries each process's pivot candidate
    (magnitude, row, value, and that row of the panel) and the current row
    ``j`` from its owner, so every process of the column can swap and update
    without further messages (PDGETF2 needs a max-reduction, a swap and a
    broadcast for the same).
    """
    jb = panel.shape[1]
    me = colcomm.rank  # = process row coordinate (the split is keyed by it)
    mine = np.empty(3 + 2 * jb)
    allc = np.empty((colcomm.size, 3 + 2 * jb))
    for jj in range(jb):
        j = k0 + jj
        s = int(np.searchsorted(grows, j))
        col = panel[s:, jj]
        mine[3:] = 0.0
        if col.size:
            t = int(np.argmax(np.abs(col)))
            mine[:3] = (abs(col[t]), grows[s + t], col[t])
            mine[3:3 + jb] = panel[s + t]
        else:
            mine[:3] = (-1.0, np.inf, 0.0)
        oj = rd.owner(j)
        if me == oj:
            mine[3 + jb:] = panel[s]
        if colcomm.size > 1:
            wait(colcomm.Iallgather(mine, allc), PANEL_SLEEP)
        else:
            allc[0] = mine
        best = max(range(allc.shape[0]), key=lambda r: (allc[r, 0], -allc[r, 1]))
        p, v = int(allc[best, 1]), float(allc[best, 2])
        kpiv[jj] = p
        urow = allc[best, 3:3 + jb]  # the pivot row, row j after the swap
        if p != j:
            if me == rd.owner(p):
                panel[int(np.searchsorted(grows, p))] = allc[oj, 3 + jb:]
            if me == oj:
                panel[s] = urow
        if v == 0.0:
            info = info or j + 1
        s1 = int(np.searchsorted(grows, j + 1))
        if v != 0.0:
            panel[s1:, jj] /= v
        panel[s1:, jj + 1:] -= np.outer(panel[s1:, jj], urow[jj + 1:])
    return info


def _swap_rows(colcomm, rd, gi: np.ndarray, f: np.ndarray, cols: np.ndarray, k0: int, kpiv: np.ndarray) -> None:
    """Apply the panel's interchanges ``k0 + jj <-> kpiv[jj]`` (in order) to the local columns ``cols``."""
    src = {}
    for jj, p in enumerate(kpiv):
        j = k0 + jj
        p = int(p)
        src.setdefault(j, j)
        src.setdefault(p, p)
        src[j], src[p] = src[p], src[j]
    moved = sorted(r for r, s in src.items() if r != s)  # row r receives old row src[r]
    if not moved or not cols.any():
        return
    rows = sorted(set(moved) | {src[r] for r in moved})
    where = {r: i for i, r in enumerate(rows)}
    owned = {int(g): li for li, g in enumerate(gi)}
    buf = np.zeros((len(rows), int(cols.sum())))
    for r in rows:
        if r in owned:
            buf[where[r]] = f[owned[r], cols]
    if colcomm.size > 1:  # each row is owned by exactly one process of the column; the others add zeros
        out = np.empty_like(buf)
        wait(colcomm.Iallreduce(buf, out, MPI.SUM))
        buf = out
    for r in moved:
        if r in owned:
            f[owned[r], cols] = buf[where[src[r]]]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m apps.lu", description=__doc__.split("\n\n")[0])
    add_options(ap, n=256, size_help="matrix order n")
    ap.add_argument("--nb", type=int, default=32, help="block size (default 32)")
    ap.add_argument("--rtol", type=float, default=1e-12, help="check tolerance (see module doc; default 1e-12)")
    args = ap.parse_args(argv)
    positive(ap, n=args.n, iters=args.iters, nb=args.nb)
    n, nb = args.n, args.nb

    rt = runtime.init()
    A = rt.register_array("A", (n, n), layout="2d", block=(nb, nb), init=a_of, constant=True)
    F = rt.register_array("F", (n, n), layout="2d", block=(nb, nb), init=0.0)
    if not rt.joined:
        rt["piv"] = None
        rt["info"] = 0
    ref: list = []

    def step(it: int) -> None:
        F.local[...] = A.local
        piv, info = factor(rt.comm, F.layout, F.local)
        rt["piv"] = piv
        rt["info"] = info

    def verify(done: int) -> str | None:
        gi, gj = A.layout.global_indices(rt.rank)
        if not np.array_equal(A.local, a_of(gi[:, None], gj[None, :])):
            return "A differs from its definition"
        if done == 0:
            return None
        if not ref:
            i = np.arange(n)
            ref.extend(serial_lu(a_of(i[:, None], i[None, :])))
        fr, pr = ref
        if rt["piv"] is None or not np.array_equal(rt["piv"], pr):
            return "pivots differ from the serial reference"
        err = float(np.max(np.abs(F.local - fr[np.ix_(gi, gj)]), initial=0.0))
        bound = args.rtol * n * 0.5
        return f"factors off by {err:.3g} (bound {bound:.3g})" if err > bound else None

    ok, rows = run(rt, args.iters, step, verify if want_check(args) else None, args)
    if want_check(args) and args.out is None:
        whole = F.gather(0)
        if rt.rank == 0:
            i = np.arange(n)
            perm, lo, up = unpack(whole, rt["piv"])
            res = np.max(np.abs(a_of(i[:, None], i[None, :])[perm] - lo @ up)) / 0.5
            if not args.quiet:
                print(f"max|P A - L U| / max|A| = {res:.3e}  info {rt['info']}", flush=True)
    return finish(rt, "lu", args, ok, rows, F, {"nb": nb, "info": rt["info"]})


if __name__ == "__main__":
    sys.exit(main())
