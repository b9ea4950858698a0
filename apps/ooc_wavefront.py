"""A pipelined wavefront on emulated heterogeneous nodes: MHETA's pipeline pattern, live.

Nakazawa's (2005) RNA application (pseudoknot prediction) is "pipelined plus
reduction" and the thesis gives nothing more of it; this is the smallest
program with that communication structure. Each iteration sweeps an
``rows x cols`` grid (rows in GEN_BLOCK over the ranks) with the recurrence
``u[i] = 0.5 u[i-1] + 0.25 u_old[i] + c[i]`` down the rows, in ``tiles``
column tiles: for each tile a rank waits for the tile's last row from the rank
above, computes its rows of the tile, and sends its own last row on (a
receive-compute-send tile, §5.1), then the ranks reduce the sum of squared
changes. The grid stays in core (the program has no out-of-core path: the
array is ``resident``). Structure (two sections):

1. stage ``sweep`` in ``tiles`` tiles -> pipeline (one row of a tile down the chain);
2. no stage -> reduction of the residual.

Run: ``mpiexec -n 3 python -m apps.ooc_wavefront --rows 60 --cols 40 --iters 4 --check``.
"""

from __future__ import annotations

import sys

import numpy as np
from mpi4py import MPI

from apps import ooc_cli
from apps.ooc_jacobi import check_counts, initial
from reshape.mheta.app import OOCApp
from reshape.mheta.cluster import Cluster
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
from reshape.mpiutil import wait
from reshape.redistribution.layout import gen_block
from reshape.runtime.darray import DistArray

__all__ = ["TILES", "OOCWavefront", "serial", "structure"]

TILES = 8


def structure(rows: int, cols: int, prefetch: bool = False, tiles: int = TILES) -> AppStructure:
    """The wavefront's MHETA structure: a pipelined section of ``tiles`` tiles, then a reduction."""
    if prefetch:
        raise StructureError("the wavefront keeps its grid in core: there is nothing to prefetch")
    grid = ArraySpec("grid", rows, 2 * cols * 8, resident=True)
    return AppStructure("wavefront", (grid,), (
        Section("sweep", (Stage("sweep"),), CommSpec("pipeline", cols // tiles * 8), tiles),
        Section("residual", (), CommSpec("reduction", 8)),
    ))


def _source(i: np.ndarray, j: np.ndarray) -> np.ndarray:
    return 0.01 * np.cos(0.05 * i + 0.03 * j)


def serial(rows: int, cols: int, iters: int) -> np.ndarray:
    """The one-process reference run."""
    i, j = np.ix_(np.arange(rows), np.arange(cols))
    u, c = initial(i, j).astype(np.float64), _source(i, j)
    for _ in range(iters):
        new = np.empty_like(u)
        above = np.zeros(cols)
        for r in range(rows):
            above = new[r] = 0.5 * above + 0.25 * u[r] + c[r]
        u = new
    return u


class OOCWavefront(OOCApp):
    """One rank of the pipelined wavefront (collective methods; the interface of OOCJacobi)."""

    def __init__(self, comm: MPI.Comm, cluster: Cluster, rows: int, cols: int,
                 workdir: str, prefetch: bool = False):
        if cols % TILES:
            raise StructureError(f"cols ({cols}) must be a multiple of the {TILES} tiles")
        super().__init__(comm, cluster, rows, cols, workdir, "wavefront", structure, prefetch)

    def distribute(self, counts: list[int], local: np.ndarray | None = None) -> None:
        """Place the grid in GEN_BLOCK ``counts`` (fresh, or this rank's ``local`` rows)."""
        counts = check_counts(counts, self.comm.size, self.rows)
        self.counts = counts
        self.layout = gen_block((self.rows, self.cols), counts)
        self.n = counts[self.comm.rank]
        try:  # the grid stays in core: a node whose memory cannot hold its rows cannot run the split
            plan_memory(self.app, self.n, self.node.memory)
        except StructureError as e:
            raise StructureError(f"node {self.comm.rank}: {e}") from None
        lo = self.layout.global_indices(self.comm.rank)[0]
        i, j = np.ix_(lo, np.arange(self.cols))
        self.u = initial(i, j).astype(np.float64) if local is None else local
        self.c = _source(i, j)

    def gather(self) -> np.ndarray | None:
        return DistArray(self.layout, self.u, self.comm, tuple(range(self.comm.size))).gather()

    def iterate(self) -> float:
        """One pipelined sweep and the residual reduction; returns the global residual."""
        r, p = self.comm.rank, self.comm.size
        w = self.cols // TILES
        new = np.empty_like(self.u)
        sends = []
        for t in range(TILES):
            cs = slice(t * w, (t + 1) * w)
            above = np.zeros(w)
            if r > 0:
                wait(self.comm.Irecv(above, r - 1, 30 + t))
            with self.rec.stage("sweep"):
                def tile(above=above, cs=cs):
                    a = above
                    for k in range(self.n):
                        a = new[k, cs] = 0.5 * a + 0.25 * self.u[k, cs] + self.c[k, cs]

                self.emu.compute(self.n * w, tile)
            if r < p - 1:
                sends.append(self.comm.Isend(np.ascontiguousarray(new[-1, cs]), r + 1, 30 + t))
        for q in sends:
            wait(q)
        res = float(np.sum((new - self.u) ** 2))
        self.u = new
        tot = np.zeros(1)
        wait(self.comm.Iallreduce(np.array([res]), tot, op=MPI.SUM))
        return float(tot[0])

    def instrument(self, repeats: int = 3) -> Profile:
        """Instrumented iterations -> the MHETA profile (no disk: the grid is in core)."""
        return self._instrumented(repeats)


def main(argv: list[str] | None = None) -> int:
    args = ooc_cli.parser("apps.ooc_wavefront", __doc__, iters=4, prefetch=False,
                          cols_help=f"grid columns (a multiple of {TILES})",
                          check_help="compare with a one-process run").parse_args(argv)

    def tiles() -> None:
        if args.cols % TILES:
            raise StructureError(f"--cols {args.cols} must be a multiple of the {TILES} tiles")

    def check(app: OOCWavefront, whole) -> bool:
        return np.allclose(whole, serial(args.rows, args.cols, args.iters), rtol=1e-12, atol=1e-14)

    return ooc_cli.run(args, lambda comm, cluster, workdir: OOCWavefront(comm, cluster, args.rows, args.cols,
                                                                         workdir), "wavefront", check, tiles,
                       against="one-process run")


if __name__ == "__main__":
    sys.exit(main())
