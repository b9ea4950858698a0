"""Out-of-core conjugate gradient on emulated heterogeneous nodes (Nakazawa 2005 §6.1, "CG").

Solves ``A x = b`` for a symmetric positive-definite 5-point operator on an
``rows x cols`` grid whose coefficients are stored explicitly, rows in
GEN_BLOCK over the ranks. The matrix (5 coefficients per grid point,
read-only) lives in each rank's HDF5 file and, beyond the node's emulated
memory, streams through memory in ICLA pieces every iteration (optionally
prefetched); the CG vectors stay in core (``resident``: a node whose memory
cannot hold them for its rows cannot run the split, and the model knows it). Structure (three sections):

1. stage ``matvec`` (reads ``matrix``) -> reduction of ``p.q``;
2. stage ``update`` (``x``, ``r``) -> reduction of ``r.r``;
3. stage ``direction`` (``p``) -> nearest-neighbour exchange of ``p``'s boundary rows.

Run: ``mpiexec -n 3 python -m apps.ooc_cg --rows 60 --cols 40 --iters 10 --check``.
"""

from __future__ import annotations

import sys

import numpy as np
from mpi4py import MPI

from apps import ooc_cli
from apps.ooc_jacobi import check_counts, initial
from reshape.mheta.app import OOCApp
from reshape.mheta.cluster import Cluster
from reshape.mheta.instrument import (
    probe_disk,
)
from reshape.mheta.model import Profile
from reshape.mheta.structure import (
    AppStructure,
    ArraySpec,
    CommSpec,
    Section,
    Stage,
    StructureError,
    plan_memory,
)
from reshape.mpiutil import wait, wait_all
from reshape.redistribution.layout import gen_block
from reshape.redistribution.redistribute import redistribute
from reshape.runtime.darray import DistArray

__all__ = ["OOCCG", "coefficients", "serial", "structure"]


def structure(rows: int, cols: int, prefetch: bool = False) -> AppStructure:
    """CG's MHETA structure: an out-of-core matrix, in-core vectors, three sections."""
    row = cols * 8
    matrix = ArraySpec("matrix", rows, 5 * row, read_only=True, frequency=1)
    vectors = ArraySpec("vectors", rows, 4 * row, frequency=3, resident=True)  # x, r, p, q: in core
    return AppStructure("cg", (matrix, vectors), (
        Section("matvec", (Stage("matvec", reads=("matrix",), prefetch=prefetch),),
                CommSpec("reduction", 8)),
        Section("update", (Stage("update"),), CommSpec("reduction", 8)),
        Section("direction", (Stage("direction"),), CommSpec("nearest-neighbour", row, "vectors")),
    ))


def coefficients(i: np.ndarray, j: np.ndarray) -> np.ndarray:
    """Matrix rows for grid points ``(i, j)``: [centre, north, south, west, east].

    Off-diagonals are -1 (symmetric), the diagonal 4.2..5.2 (strictly dominant: SPD).
    """
    i, j = np.broadcast_arrays(i, j)
    c = np.empty((*i.shape[:1], 5, i.shape[1]))
    c[:, 0, :] = 4.7 + 0.5 * np.sin(0.3 * i + 0.7 * j)
    c[:, 1:, :] = -1.0
    return c


def _apply(coef: np.ndarray, pext: np.ndarray) -> np.ndarray:
    """``A p`` for rows whose ``p`` (with one ghost row above and below) is ``pext``."""
    mid = pext[1:-1]
    out = coef[:, 0] * mid + coef[:, 1] * pext[:-2] + coef[:, 2] * pext[2:]
    out[:, 1:] += coef[:, 3, 1:] * mid[:, :-1]
    out[:, :-1] += coef[:, 4, :-1] * mid[:, 1:]
    return out


def serial(rows: int, cols: int, iters: int) -> np.ndarray:
    """The in-core reference run: ``x`` after ``iters`` CG iterations from ``x = 0``."""
    i, j = np.ix_(np.arange(rows), np.arange(cols))
    coef = coefficients(i, j)
    b = initial(i, j)
    z = np.zeros((1, cols))
    x, r = np.zeros_like(b), b.copy()
    p, rr = r.copy(), float(np.sum(r * r))
    for _ in range(iters):
        q = _apply(coef, np.vstack([z, p, z]))
        alpha = rr / float(np.sum(p * q))
        x += alpha * p
        r -= alpha * q
        rr_new = float(np.sum(r * r))
        p = r + (rr_new / rr) * p
        rr = rr_new
    return x


class OOCCG(OOCApp):
    """One rank of the out-of-core CG run (collective methods; same interface as OOCJacobi)."""

    NAME = "cg"
    STRUCTURE = staticmethod(structure)

    def __init__(self, comm: MPI.Comm, cluster: Cluster, rows: int, cols: int,
                 workdir: str, prefetch: bool = False):
        super().__init__(comm, cluster, rows, cols, workdir, self.NAME, self.STRUCTURE, prefetch)

    def _allreduce(self, v: float) -> float:
        out = np.zeros(1)
        wait(self.comm.Iallreduce(np.array([v]), out, op=MPI.SUM))
        return float(out[0])

    def distribute(self, counts: list[int], state: dict[str, np.ndarray] | None = None) -> None:
        """Place matrix and vectors in GEN_BLOCK ``counts`` (fresh start, or ``state``'s vectors)."""
        counts = check_counts(counts, self.comm.size, self.rows)
        self.counts = counts
        self.layout = gen_block((self.rows, self.cols), counts)
        self.n = n = counts[self.comm.rank]
        try:
            plan = plan_memory(self.app, n, self.node.memory)
        except StructureError as e:
            raise StructureError(f"node {self.comm.rank}: {e}") from None
        self.icla = plan["matrix"]
        lo = self.layout.global_indices(self.comm.rank)[0]
        i, j = np.ix_(lo, np.arange(self.cols))
        coef = coefficients(i, j)
        self.store.create("matrix", coef)
        self.coef = coef if self.icla is None else None
        self._set_state(state if state is not None else self._fresh(initial(i, j).astype(np.float64)))
        self._exchange()

    # the distributed vectors of the solver's state; ``p`` is the one ``A`` is applied to
    STATE: tuple[str, ...] = ("x", "r", "p")

    def _fresh(self, b: np.ndarray) -> dict[str, np.ndarray]:
        """The starting state from this rank's rows of the right-hand side ``b``."""
        return {"x": np.zeros_like(b), "r": b.copy(), "p": b.copy()}

    def _set_state(self, state: dict[str, np.ndarray]) -> None:
        self.x, self.r, self.p = state["x"], state["r"], state["p"]
        self.rr = self._allreduce(float(np.sum(self.r * self.r)))

    def redistribute(self, counts: list[int]) -> None:
        """Move the solver state to GEN_BLOCK ``counts`` with the redistribution engine."""
        counts = check_counts(counts, self.comm.size, self.rows)
        new = gen_block((self.rows, self.cols), counts)
        state = {k: redistribute(self.comm, self.layout, getattr(self, k), new) for k in self.STATE}
        self.distribute(counts, state)

    def gather(self) -> np.ndarray | None:
        return DistArray(self.layout, self.x, self.comm, tuple(range(self.comm.size))).gather()

    def _exchange(self) -> None:
        r, p, c = self.comm.rank, self.comm.size, self.cols
        self.top, self.bot = np.zeros((1, c)), np.zeros((1, c))
        reqs = []
        if r > 0:
            reqs.append(self.comm.Irecv(self.top, r - 1, 21))
        if r < p - 1:
            reqs.append(self.comm.Irecv(self.bot, r + 1, 22))
        if r > 0:
            reqs.append(self.comm.Isend(np.ascontiguousarray(self.p[:1]), r - 1, 22))
        if r < p - 1:
            reqs.append(self.comm.Isend(np.ascontiguousarray(self.p[-1:]), r + 1, 21))
        wait_all(reqs)

    MATVEC_WORK = 1  # emulated elements of work per grid point of the mat-vec

    def _matvec(self) -> np.ndarray:
        """``A p`` for this rank's rows, streaming the matrix in ICLA pieces when out of core."""
        pext = np.vstack([self.top, self.p, self.bot])
        q = np.empty_like(self.p)
        if self.coef is not None and not self.forced:
            src = [(0, self.n, self.coef)]
        else:
            icla = self.icla if self.icla is not None else self.n
            src = self.store.stream("matrix", icla, self.prefetch and not self.forced)
        for s, e, coef in src:
            q[s:e] = self.emu.compute(self.MATVEC_WORK * (e - s) * self.cols,
                                      lambda s=s, e=e, coef=coef: _apply(coef, pext[s:e + 2]))
        return q

    def iterate(self) -> float:
        """One CG iteration; returns the global ``r.r``."""
        elems = self.n * self.cols
        with self.rec.stage("matvec"):
            q = self._matvec()
            pq = float(np.sum(self.p * q))
        alpha = self.rr / self._allreduce(pq)
        with self.rec.stage("update"):
            def upd():
                self.x += alpha * self.p
                self.r -= alpha * q
                return float(np.sum(self.r * self.r))

            rr_local = self.emu.compute(elems, upd)
        rr_new = self._allreduce(rr_local)
        with self.rec.stage("direction"):
            beta = rr_new / self.rr
            self.p = self.emu.compute(elems, lambda: self.r + beta * self.p)
        self.rr = rr_new
        self._exchange()
        return rr_new

    def instrument(self, repeats: int = 3) -> Profile:
        """Instrumented iterations (forced I/O, synchronous reads) -> the MHETA profile."""
        probe_disk(self.store, "matrix", self.rec, write=False)
        return self._instrumented(repeats)


def main(argv: list[str] | None = None) -> int:
    args = ooc_cli.parser("apps.ooc_cg", __doc__, iters=10).parse_args(argv)

    def check(app: OOCCG, whole) -> bool:
        return np.allclose(whole, serial(args.rows, args.cols, args.iters), rtol=1e-9, atol=1e-12)

    return ooc_cli.run(args, lambda comm, cluster, workdir: OOCCG(comm, cluster, args.rows, args.cols, workdir,
                                                                  args.prefetch), "cg", check)


if __name__ == "__main__":
    sys.exit(main())
