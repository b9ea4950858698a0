"""What every out-of-core SHARED application rank has in common (Nakazawa 2005 ch. 5-6).

:class:`OOCApp` holds one rank's emulated node, its instrumentation recorder
and its HDF5 store, and provides the instrumented run that produces the MHETA
profile (:meth:`OOCApp._instrumented`), the timed run used for validation
(:meth:`OOCApp.timed`) and cleanup. A subclass supplies ``structure`` (its
:class:`~reshape.mheta.structure.AppStructure`), ``iterate()``, ``n`` (its
current row count) and ``instrument()``, which calls ``_instrumented``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

import numpy as np
from mpi4py import MPI

from reshape.mheta.cluster import Cluster, Emulator
from reshape.mheta.instrument import Recorder, gather_profile, measure_comm, median_node_profile
from reshape.mheta.model import Profile
from reshape.mheta.ooc import LocalStore
from reshape.mpiutil import barrier

__all__ = ["OOCApp"]


class OOCApp:
    """One rank of an out-of-core run on an emulated heterogeneous node (collective methods)."""

    n: int  # rows held by this rank now (set by the subclass's distribute)

    def __init__(self, comm: MPI.Comm, cluster: Cluster, rows: int, cols: int, workdir: str,
                 name: str, structure: Callable, prefetch: bool = False):
        if len(cluster) != comm.size:
            raise ValueError(f"cluster has {len(cluster)} nodes but the run has {comm.size} ranks")
        self.comm, self.cluster, self.rows, self.cols = comm, cluster, rows, cols
        self.node = cluster.nodes[comm.rank]
        self.emu = Emulator(self.node, cluster.element_time)
        self.rec = Recorder()
        self.prefetch = prefetch
        self.app = structure(rows, cols, prefetch)
        self.store = LocalStore(os.path.join(workdir, f"{name}-{comm.rank}.h5"), self.emu, self.rec)
        self.forced = False

    def iterate(self) -> float:
        raise NotImplementedError

    def _instrumented(self, repeats: int, before: Callable[[], None] | None = None) -> Profile:
        """``repeats`` instrumented iterations (forced I/O, synchronous reads) -> the MHETA profile.

        The median of each quantity is kept
        (:func:`~reshape.mheta.instrument.median_node_profile`); ``before``
        runs untimed before each iteration.
        """
        cp = measure_comm(self.comm, self.cols * 8)
        profiles = []
        for _ in range(repeats):
            if before is not None:
                before()
            barrier(self.comm)
            self.rec.reset()
            self.forced, self.rec.enabled = True, True
            try:
                self.iterate()
            finally:
                self.forced, self.rec.enabled = False, False
            profiles.append(self.rec.node_profile(self.n, self.node.memory, self.app.stage_names()))
        return gather_profile(self.comm, median_node_profile(profiles), cp)

    def timed(self, iters: int) -> list[float]:
        """Run ``iters`` iterations; per-iteration times (max over ranks) on every rank."""
        barrier(self.comm)
        t0 = time.perf_counter()  # CLOCK_MONOTONIC: comparable across ranks of one host
        ends = []
        for _ in range(iters):
            self.iterate()
            ends.append(time.perf_counter())
        m = np.max(np.array(self.comm.allgather([t0, *ends])), axis=0)
        return [float(m[k] - m[k - 1]) for k in range(1, len(m))]

    def close(self) -> None:
        self.store.close()
