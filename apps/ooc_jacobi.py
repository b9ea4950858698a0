"""Out-of-core Jacobi on emulated heterogeneous nodes (Nakazawa 2005 §6.1, "Jacobi iteration").

A 5-point Jacobi sweep over an ``rows x cols`` grid (zero boundary), rows in
GEN_BLOCK over the ranks. Each rank keeps both grid planes (old and new) in
its own HDF5 file; when they do not fit the node's emulated memory they stream
through memory in ICLA pieces every iteration (read old, compute, write new),
optionally prefetching the next piece. Structure (two sections):

1. stage ``sweep`` (reads and writes ``grid``) -> nearest-neighbour exchange
   of the new plane's boundary rows (read from disk when out of core);
2. no stage -> reduction of the residual (``Iallreduce``).

Run: ``mpiexec -n 4 python -m apps.ooc_jacobi --rows 256 --cols 512 --iters 5
--nodes cluster.json --counts 40,80,80,56 --check``.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
from mpi4py import MPI

from reshape.mheta.app import OOCApp
from reshape.mheta.cluster import Cluster, load_cluster
from reshape.mheta.instrument import (
    probe_disk,
)
from reshape.mheta.model import Profile
from reshape.mheta.ooc import pieces, remove_tree, scratch_dir
from reshape.mheta.structure import (
    AppStructure,
    ArraySpec,
    CommSpec,
    Section,
    Stage,
    StructureError,
    plan_memory,
)
from reshape.mpiutil import barrier, wait, wait_all
from reshape.redistribution.layout import even_counts, gen_block
from reshape.redistribution.redistribute import redistribute
from reshape.runtime.darray import DistArray
from reshape.runtime.watchdog import fail_together

__all__ = ["OOCJacobi", "check_counts", "initial", "serial", "structure"]


def structure(rows: int, cols: int, prefetch: bool = False) -> AppStructure:
    """Jacobi's MHETA structure: one two-plane grid array, two sections."""
    row = cols * 8
    grid = ArraySpec("grid", rows, 2 * row, read_row_bytes=row, write_row_bytes=row)
    sweep = Stage("sweep", reads=("grid",), writes=("grid",), prefetch=prefetch)
    return AppStructure("jacobi", (grid,), (
        Section("sweep", (sweep,), CommSpec("nearest-neighbour", row, "grid", 1)),
        Section("residual", (), CommSpec("reduction", 8)),
    ))


def initial(i: np.ndarray, j: np.ndarray) -> np.ndarray:
    """Deterministic initial grid from global indices."""
    return np.sin(0.37 * i + 1.0) * np.cos(0.11 * j) + ((i * 7 + j * 3) % 11) / 11.0


def _stencil(ext: np.ndarray) -> np.ndarray:
    mid = ext[1:-1]
    lr = np.zeros_like(mid)
    lr[:, 1:] += mid[:, :-1]
    lr[:, :-1] += mid[:, 1:]
    return 0.25 * (ext[:-2] + ext[2:] + lr)


def serial(rows: int, cols: int, iters: int) -> np.ndarray:
    """The in-core reference run."""
    u = initial(*np.ix_(np.arange(rows), np.arange(cols))).astype(np.float64)
    z = np.zeros((1, cols))
    for _ in range(iters):
        u = _stencil(np.vstack([z, u, z]))
    return u


def check_counts(counts, p: int, rows: int) -> list[int]:
    """``counts`` as ints, or StructureError unless it gives ``p`` ranks >= 1 row summing to ``rows``."""
    counts = [int(c) for c in counts]
    if len(counts) != p or sum(counts) != rows or min(counts) < 1:
        raise StructureError(
            f"distribution {counts} must give each of {p} ranks >= 1 row and sum to {rows} "
            f"(it has {len(counts)} parts summing to {sum(counts)})"
        )
    return counts


class OOCJacobi(OOCApp):
    """One rank of the out-of-core Jacobi run (collective methods)."""

    def __init__(self, comm: MPI.Comm, cluster: Cluster, rows: int, cols: int,
                 workdir: str, prefetch: bool = False):
        super().__init__(comm, cluster, rows, cols, workdir, "jacobi", structure, prefetch)
        self.counts: list[int] = []
        self.cur = 0  # index of the current plane

    # ---- placement -------------------------------------------------------
    def distribute(self, counts: list[int], local: np.ndarray | None = None) -> None:
        """Place the grid in GEN_BLOCK ``counts`` (from ``initial`` or this rank's ``local``)."""
        counts = check_counts(counts, self.comm.size, self.rows)
        self.counts = counts
        self.layout = gen_block((self.rows, self.cols), counts)
        n = counts[self.comm.rank]
        if local is None:
            local = DistArray.from_function(self.comm, self.layout, initial).local
        self.cur = 0
        self.store.create("u0", local)
        self.store.create("u1", np.zeros_like(local))
        self.n = n
        self.icla = plan_memory(self.app, n, self.node.memory)["grid"]
        self.mem = None if self.icla is not None else [local.copy(), np.zeros_like(local)]
        first, last = local[:1], local[-1:]
        self._exchange(first, last)

    def redistribute(self, counts: list[int]) -> None:
        """Move the current grid to GEN_BLOCK ``counts`` with the redistribution engine."""
        counts = check_counts(counts, self.comm.size, self.rows)
        new = gen_block((self.rows, self.cols), counts)
        local = redistribute(self.comm, self.layout, self.current(), new)
        self.distribute(counts, local)

    def current(self) -> np.ndarray:
        """This rank's rows of the current plane (untimed)."""
        if self.mem is not None:
            return self.mem[self.cur].copy()
        return self.store.load(f"u{self.cur}")

    def gather(self) -> np.ndarray | None:
        return DistArray(self.layout, self.current(), self.comm, tuple(range(self.comm.size))).gather()

    # ---- one iteration -----------------------------------------------------
    def _exchange(self, first: np.ndarray, last: np.ndarray) -> None:
        r, p, c = self.comm.rank, self.comm.size, self.cols
        self.top = np.zeros((1, c))
        self.bot = np.zeros((1, c))
        reqs = []
        if r > 0:
            reqs.append(self.comm.Irecv(self.top, r - 1, 11))
        if r < p - 1:
            reqs.append(self.comm.Irecv(self.bot, r + 1, 12))
        if r > 0:
            reqs.append(self.comm.Isend(np.ascontiguousarray(first()) if callable(first)
                                        else first, r - 1, 12))
        if r < p - 1:
            reqs.append(self.comm.Isend(np.ascontiguousarray(last()) if callable(last)
                                        else last, r + 1, 11))
        wait_all(reqs)

    def _sweep(self) -> float:
        old, new = f"u{self.cur}", f"u{1 - self.cur}"
        ooc = self.mem is None or self.forced
        res = 0.0
        icla = self.icla if self.icla is not None else self.n
        if ooc:
            src = self.store.stream(old, icla, self.prefetch and not self.forced, "grid")
        else:
            src = ((s, e, self.mem[self.cur][s:e]) for s, e in pieces(self.n, None))
        carry = self.top
        out = 0
        for _s, e, block in src:
            parts = [carry, block] + ([self.bot] if e == self.n else [])
            ext = np.vstack(parts)
            k = ext.shape[0] - 2

            def work(ext=ext):
                v = _stencil(ext)
                return v, float(np.sum((v - ext[1:-1]) ** 2))

            vals, r2 = self.emu.compute(k * self.cols, work)
            res += r2
            if k > 0:
                if ooc:
                    self.store.write(new, out, vals, "grid")
                if self.mem is not None:
                    self.mem[1 - self.cur][out:out + k] = vals
                out += k
            carry = ext[-2:]
        self.cur = 1 - self.cur
        return res

    def iterate(self) -> float:
        """One Jacobi iteration; returns the global residual (sum of squared changes)."""
        with self.rec.stage("sweep"):
            res = self._sweep()
        cur = f"u{self.cur}"
        if self.mem is None or self.forced:
            self._exchange(lambda: self.store.read(cur, 0, 1, "grid"),
                           lambda: self.store.read(cur, self.n - 1, self.n, "grid"))
        else:
            self._exchange(self.mem[self.cur][:1], self.mem[self.cur][-1:])
        tot = np.zeros(1)
        wait(self.comm.Iallreduce(np.array([res]), tot, op=MPI.SUM))
        return float(tot[0])

    def instrument(self, repeats: int = 3) -> Profile:
        """Instrumented iterations (forced I/O, synchronous reads) -> the MHETA profile.

        ``repeats`` iterations are instrumented and the median of each quantity
        kept (see :func:`~reshape.mheta.instrument.median_node_profile`).
        """
        probe_disk(self.store, f"u{1 - self.cur}", self.rec)

        def sync_disk_copy() -> None:  # forced I/O reads the disk copy: make it current (untimed)
            if self.mem is not None:
                self.store.f[f"u{self.cur}"][...] = self.mem[self.cur]

        return self._instrumented(repeats, sync_disk_copy)


def _parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m apps.ooc_jacobi", description=__doc__.split("\n")[0])
    p.add_argument("--rows", type=int, default=256, help="grid rows (the distributed dimension)")
    p.add_argument("--cols", type=int, default=512, help="grid columns")
    p.add_argument("--iters", type=int, default=5, help="iterations")
    p.add_argument("--nodes", help="cluster description: JSON file or inline JSON "
                   "(default: identical nodes with ample memory)")
    p.add_argument("--counts", help="GEN_BLOCK rows per rank, comma separated (default BLOCK)")
    p.add_argument("--prefetch", action="store_true", help="overlap the next piece's read")
    p.add_argument("--check", action="store_true", help="compare with an in-core serial run")
    p.add_argument("--predict", action="store_true",
                   help="instrument one BLOCK iteration and print MHETA's prediction")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    comm = MPI.COMM_WORLD
    cluster = load_cluster(args.nodes) if args.nodes else Cluster.uniform(comm.size)
    try:
        counts = check_counts(args.counts.split(",") if args.counts
                              else even_counts(args.rows, comm.size), comm.size, args.rows)
    except (StructureError, ValueError) as e:
        if comm.rank == 0:
            print(f"error: {e}", file=sys.stderr)
        return 2
    workdir = scratch_dir() if comm.rank == 0 else None
    workdir = comm.bcast(workdir)
    ok = True
    with fail_together(comm.rank, cleanup=lambda: remove_tree(workdir)):
        app = OOCJacobi(comm, cluster, args.rows, args.cols, workdir, args.prefetch)
        app.distribute(even_counts(args.rows, comm.size))
        predicted = None
        if args.predict:
            from reshape.mheta.model import Mheta

            prof = app.instrument()
            app.distribute(even_counts(args.rows, comm.size))
            predicted = Mheta(app.app, prof).predict(counts)
        if counts != app.counts:
            app.redistribute(counts)
        times = app.timed(args.iters)
        whole = app.gather()
        if comm.rank == 0:
            msg = f"jacobi {args.rows}x{args.cols} counts={counts} median iteration " \
                  f"{np.median(times):.4f}s"
            if predicted is not None:
                msg += f" predicted {predicted:.4f}s"
            print(msg)
            if args.check:
                ref = serial(args.rows, args.cols, args.iters)
                ok = bool(np.array_equal(whole, ref))
                print("check against in-core run:", "ok" if ok else "MISMATCH")
    app.close()
    barrier(comm)
    if comm.rank == 0:
        remove_tree(workdir)
    ok = comm.bcast(ok)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
