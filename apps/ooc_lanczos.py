"""Out-of-core Lanczos on emulated heterogeneous nodes (Nakazawa 2005 §6.1, "Lanczos").

The Lanczos iteration for the same stored symmetric positive-definite 5-point
operator as :mod:`apps.ooc_cg` (rows in GEN_BLOCK over the ranks, the
read-only matrix in each rank's HDF5 file, streamed through memory in ICLA
pieces beyond the node's emulated memory, optionally prefetched; the Lanczos
vectors stay in core). Each iteration extends the tridiagonal ``T`` by
``alpha_j``, ``beta_{j+1}`` (Paige's variant, no re-orthogonalisation)::

    w = A v - beta_j v_prev;  alpha_j = w.v;  w -= alpha_j v
    beta_{j+1} = |w|;  v_prev, v = v, w / beta_{j+1}

Structure (three sections, four stages):

1. stages ``matvec`` (reads ``matrix``) and ``project`` (``w -= beta v_prev``,
   ``w.v``) -> reduction of ``alpha``;
2. stage ``orthogonalise`` (``w -= alpha v``, ``w.w``) -> reduction of ``beta^2``;
3. stage ``normalise`` -> nearest-neighbour exchange of ``v``'s boundary rows.

The thesis's Lanczos (a dense matrix, 15 sections) is not given in detail; this
one keeps what matters to MHETA: a read-only out-of-core matrix, a section with
two stages, in-core vectors, and a high computation-to-I/O ratio (the mat-vec
costs 5 elements of work per grid point, one per stored coefficient, where
CG's emulation charges 1).

Run: ``mpiexec -n 3 python -m apps.ooc_lanczos --rows 60 --cols 40 --iters 10 --check``.
"""

from __future__ import annotations

import sys

import numpy as np
from mpi4py import MPI

from apps import ooc_cli
from apps.ooc_cg import OOCCG, _apply, coefficients
from apps.ooc_jacobi import initial
from reshape.mheta.cluster import Cluster
from reshape.mheta.structure import AppStructure, ArraySpec, CommSpec, Section, Stage

__all__ = ["OOCLanczos", "serial", "structure"]


def structure(rows: int, cols: int, prefetch: bool = False) -> AppStructure:
    """Lanczos's MHETA structure: an out-of-core matrix, in-core vectors, three sections."""
    row = cols * 8
    matrix = ArraySpec("matrix", rows, 5 * row, read_only=True, frequency=1)
    vectors = ArraySpec("vectors", rows, 3 * row, frequency=4, resident=True)  # v, v_prev, w: in core
    return AppStructure("lanczos", (matrix, vectors), (
        Section("matvec", (Stage("matvec", reads=("matrix",), prefetch=prefetch), Stage("project")),
                CommSpec("reduction", 8)),
        Section("orthogonalise", (Stage("orthogonalise"),), CommSpec("reduction", 8)),
        Section("normalise", (Stage("normalise"),), CommSpec("nearest-neighbour", row, "vectors")),
    ))


def serial(rows: int, cols: int, iters: int) -> tuple[list[float], list[float], np.ndarray]:
    """The in-core reference run: ``alpha``, ``beta`` (``beta_2 .. beta_{iters+1}``) and the last ``v``."""
    i, j = np.ix_(np.arange(rows), np.arange(cols))
    coef = coefficients(i, j)
    b = initial(i, j)
    z = np.zeros((1, cols))
    v = b / np.sqrt(np.sum(b * b))
    v_prev, beta = np.zeros_like(v), 0.0
    alphas, betas = [], []
    for _ in range(iters):
        w = _apply(coef, np.vstack([z, v, z])) - beta * v_prev
        alpha = float(np.sum(w * v))
        w -= alpha * v
        beta = float(np.sqrt(np.sum(w * w)))
        v_prev, v = v, w / beta
        alphas.append(alpha)
        betas.append(beta)
    return alphas, betas, v


class OOCLanczos(OOCCG):
    """One rank of the out-of-core Lanczos run (the CG rank's placement, mat-vec and exchange).

    ``p`` is the current Lanczos vector ``v`` (the one ``A`` is applied to and
    whose boundary rows are exchanged), ``r`` the previous one.
    """

    NAME = "lanczos"
    STRUCTURE = staticmethod(structure)
    STATE = ("p", "r")
    MATVEC_WORK = 5

    def __init__(self, comm: MPI.Comm, cluster: Cluster, rows: int, cols: int,
                 workdir: str, prefetch: bool = False):
        self.alphas: list[float] = []
        self.betas: list[float] = []
        super().__init__(comm, cluster, rows, cols, workdir, prefetch)

    def _fresh(self, b: np.ndarray) -> dict[str, np.ndarray]:
        norm = np.sqrt(self._allreduce(float(np.sum(b * b))))
        return {"p": b / norm, "r": np.zeros_like(b)}

    def _set_state(self, state: dict[str, np.ndarray]) -> None:
        self.p, self.r = state["p"], state["r"]
        self.x = self.p  # what gather() returns
        self.beta = self.betas[-1] if self.betas else 0.0

    def iterate(self) -> float:
        """One Lanczos step; returns ``beta_{j+1}``."""
        elems = self.n * self.cols
        with self.rec.stage("matvec"):
            w = self._matvec()
        with self.rec.stage("project"):
            def project():
                w[...] -= self.beta * self.r
                return float(np.sum(w * self.p))

            wv = self.emu.compute(elems, project)
        alpha = self._allreduce(wv)
        with self.rec.stage("orthogonalise"):
            def orth():
                w[...] -= alpha * self.p
                return float(np.sum(w * w))

            ww = self.emu.compute(elems, orth)
        beta = float(np.sqrt(self._allreduce(ww)))
        with self.rec.stage("normalise"):
            self.r, self.p = self.p, self.emu.compute(elems, lambda: w / beta)
        self.x, self.beta = self.p, beta
        self.alphas.append(alpha)
        self.betas.append(beta)
        self._exchange()
        return beta


def main(argv: list[str] | None = None) -> int:
    args = ooc_cli.parser("apps.ooc_lanczos", __doc__, iters=5).parse_args(argv)

    def check(app: OOCLanczos, whole) -> bool:
        alphas, betas, v = serial(args.rows, args.cols, args.iters)
        return (np.allclose(app.alphas, alphas, rtol=1e-9) and np.allclose(app.betas, betas, rtol=1e-9)
                and np.allclose(whole, v, rtol=1e-7, atol=1e-10))

    return ooc_cli.run(args, lambda comm, cluster, workdir: OOCLanczos(comm, cluster, args.rows, args.cols,
                                                                       workdir, args.prefetch), "lanczos", check,
                       extra=lambda app: f" alpha {app.alphas[-1]:.6f} beta {app.betas[-1]:.6f}")


if __name__ == "__main__":
    sys.exit(main())
