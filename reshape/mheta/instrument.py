"""The instrumented iteration (Nakazawa 2005 §5.2): what MHETA measures under BLOCK.

A :class:`Recorder` per rank collects, during one iteration:

* per-stage wall time minus the I/O time inside the stage = ``T_phi``;
* per-array read/write time and rows moved;
* seek overheads ``O_r``/``O_w`` from a disk probe (:func:`probe_disk`): reads
  and writes of 1 row and of ``k`` rows, the intercept of the line through
  their medians; ``O_A``, the cost of handing a read to the prefetch thread
  and taking its result, from the same probe. The per-row latencies ``r(m)``/``w(m)`` then come from the
  iteration's own I/O: ``(time - calls * O) / rows``.

Forced I/O: the application streams every potentially out-of-core array from
its file during the instrumented iteration, even if it fits, so ``r(m)`` and
``w(m)`` are never learned as zero. Prefetching is turned into synchronous
reads (the thesis's trick to measure ``T_A`` and ``T_r`` separately).

:func:`measure_comm` is the communication microbenchmark: a ping-pong between
ranks 0 and 1 with the same polite waiting the applications use, and a
synchronised all-rank reduction whose time beyond two message latencies is
the reduction's ``T_r``.
"""

from __future__ import annotations

import statistics
import time
from collections import defaultdict
from contextlib import contextmanager

import numpy as np
from mpi4py import MPI

from reshape.mheta.model import CommProfile, NodeProfile, Profile
from reshape.mpiutil import barrier, wait, wait_all

__all__ = ["Recorder", "gather_profile", "measure_comm", "median_node_profile", "probe_disk"]


class Recorder:
    """Per-rank timings of one instrumented iteration."""

    def __init__(self) -> None:
        self.enabled = False
        self.compute: dict[str, float] = defaultdict(float)
        self.io_time: dict[tuple[str, str], float] = defaultdict(float)
        self.io_rows: dict[tuple[str, str], int] = defaultdict(int)
        self.io_calls: dict[tuple[str, str], int] = defaultdict(int)
        self._io_in_stage = 0.0
        self.read_seek = 0.0
        self.write_seek = 0.0
        self.async_overhead = 0.0  # O_A, from probe_disk

    def io(self, kind: str, array: str, rows: int, seconds: float) -> None:
        if not self.enabled:
            return
        key = (kind, array)
        self.io_time[key] += seconds
        self.io_rows[key] += rows
        self.io_calls[key] += 1
        self._io_in_stage += seconds

    @contextmanager
    def stage(self, name: str):
        """Time a stage; its computation time excludes the I/O recorded inside it."""
        if not self.enabled:
            yield
            return
        self._io_in_stage = 0.0
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.compute[name] += max(0.0, time.perf_counter() - t0 - self._io_in_stage)

    def reset(self) -> None:
        """Forget the timings (keeps the probed seek overheads)."""
        self.compute.clear()
        self.io_time.clear()
        self.io_rows.clear()
        self.io_calls.clear()

    def node_profile(self, rows: int, memory: int, stages: list[str]) -> NodeProfile:
        def per_row(kind: str, seek: float) -> dict[str, float]:
            out = {}
            for (k, a), t in self.io_time.items():
                if k == kind and self.io_rows[(k, a)] > 0:
                    out[a] = max(0.0, t - self.io_calls[(k, a)] * seek) / self.io_rows[(k, a)]
            return out

        return NodeProfile(
            rows=rows, memory=memory,
            compute={s: self.compute.get(s, 0.0) for s in stages},
            read_seek=self.read_seek, write_seek=self.write_seek,
            read_row=per_row("read", self.read_seek), write_row=per_row("write", self.write_seek),
            async_overhead=self.async_overhead,
        )


def _intercept(t1: list[float], tk: list[float], k: int) -> float:
    a, b = statistics.median(t1), statistics.median(tk)
    slope = (b - a) / (k - 1) if k > 1 else 0.0
    return max(0.0, a - slope)


def probe_disk(store, name: str, rec: Recorder, k: int = 16, reps: int = 3,
               write: bool = True) -> None:
    """Measure ``O_r`` (and ``O_w``) on dataset ``name`` of ``store``; store them in ``rec``."""
    n = store.rows(name)
    k = max(2, min(k, n))
    if n < 1:
        return
    saved, store.recorder = store.recorder, None
    try:
        def timed(fn) -> float:
            t0 = time.perf_counter()
            fn()
            return time.perf_counter() - t0

        r1 = [timed(lambda: store.read(name, 0, 1)) for _ in range(reps)]
        rk = [timed(lambda: store.read(name, 0, min(k, n))) for _ in range(reps)]
        rec.read_seek = _intercept(r1, rk, min(k, n))
        rec.async_overhead = store.async_overhead()
        if write:
            row = store.read(name, 0, min(k, n))
            w1 = [timed(lambda: store.write(name, 0, row[:1])) for _ in range(reps)]
            wk = [timed(lambda: store.write(name, 0, row)) for _ in range(reps)]
            rec.write_seek = _intercept(w1, wk, row.shape[0])
    finally:
        store.recorder = saved


def measure_comm(comm: MPI.Comm, nbytes: int, reps: int = 20) -> CommProfile:
    """Ping-pong microbenchmark between ranks 0 and 1 (collective; same result on all ranks)."""
    res = np.zeros(4)
    if comm.size > 1 and comm.rank < 2:
        buf = np.zeros(max(1, nbytes // 8))
        other = 1 - comm.rank
        rtt, sends, recvs = [], [], []
        for _ in range(reps):
            t0 = time.perf_counter()
            if comm.rank == 0:
                s0 = time.perf_counter()
                req = comm.Isend(buf, other, 7)
                sends.append(time.perf_counter() - s0)
                wait(req)
                r0 = time.perf_counter()
                rr = comm.Irecv(buf, other, 7)
                recvs.append(time.perf_counter() - r0)
                wait(rr)
                rtt.append(time.perf_counter() - t0)
            else:
                rr = comm.Irecv(buf, other, 7)
                wait(rr)
                wait(comm.Isend(buf, other, 7))
        if comm.rank == 0:
            o_s, o_r = statistics.median(sends), statistics.median(recvs)
            lat = max(0.0, statistics.median(rtt) / 2 - o_s - o_r)
            res[:] = [o_s, o_r, lat, 0.0]
    wait_all([comm.Ibcast(res, root=0)])
    # the reduction's own cost with all ranks (T_r): a synchronised Iallreduce,
    # less the two message latencies and overheads the model adds around it
    red = []
    one, out = np.zeros(1), np.zeros(1)
    for _ in range(reps // 2):
        barrier(comm)
        t0 = time.perf_counter()
        wait(comm.Iallreduce(one, out, op=MPI.SUM))
        red.append(time.perf_counter() - t0)
    t_red = comm.allreduce(statistics.median(red), op=MPI.MAX)
    extra = max(0.0, t_red - 2 * (res[0] + res[1] + res[2]))
    return CommProfile(send_overhead=float(res[0]), recv_overhead=float(res[1]),
                       latency=float(res[2]), per_byte=0.0, reduce_time=float(extra))


def median_node_profile(ps: list[NodeProfile]) -> NodeProfile:
    """Element-wise median of several instrumented iterations' profiles of one node.

    The thesis instruments one iteration; on a shared machine a single
    iteration's timings carry scheduling noise, so the applications here may
    instrument a few and take the median of every measured quantity.
    """
    def med(key: str) -> dict[str, float]:
        names = set().union(*(getattr(p, key) for p in ps))
        return {k: statistics.median(getattr(p, key).get(k, 0.0) for p in ps) for k in names}

    first = ps[0]
    return NodeProfile(
        rows=first.rows, memory=first.memory, compute=med("compute"),
        read_seek=first.read_seek, write_seek=first.write_seek,
        read_row=med("read_row"), write_row=med("write_row"),
        async_overhead=statistics.median(p.async_overhead for p in ps),
    )


def gather_profile(comm: MPI.Comm, node: NodeProfile, cp: CommProfile) -> Profile:
    """All ranks' node profiles (in rank order) plus the communication costs, on every rank."""
    nodes = comm.allgather(node)
    return Profile(tuple(nodes), cp)
