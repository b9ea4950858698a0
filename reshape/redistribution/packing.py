"""Packing a transfer for MPI: chunks of a few MiB, packed into a small pool of buffers kept warm.

A transfer that is not contiguous in the sender's block is packed before it
is sent (:class:`reshape.redistribution.redistribute.Exchange` says why the
sending side packs). Packed whole, every byte of it lands in a buffer of
fresh memory: on a host that takes freed memory back (a VM with free page
reporting: :mod:`reshape.redistribution.pages`) that memory faults in at
0.7-2 GB/s, against 3 GB/s for the strided pack into memory already touched
(measured here, 2-D 64 x 64 blocks, 1 x 3 -> 2 x 2, N = 8000: 42 MB per
transfer). So a packed transfer goes as chunks of about :data:`CHUNK_BYTES`
(:func:`split`: whole rows of axis 0, the same cut on both sides), each
packed into one of :data:`DEPTH` buffers of the exchange and sent; a buffer
is packed again once its message has left. The receiver receives each chunk
through its own derived datatype, straight into its block, in order (MPI
keeps the order of messages between two ranks on one tag). The buffers go
back to a process-wide pool when the exchange ends (at most :data:`KEEP`
kept, ``KEEP * CHUNK_BYTES`` = 16 MiB per process), so the next resize packs
into memory that is already the process's. A chunk of the pack overlaps the
receiver's copy of the previous one.
"""

from __future__ import annotations

import itertools
import threading
from contextlib import suppress

import numpy as np
from mpi4py import MPI

from reshape.redistribution import runcopy
from reshape.redistribution.schedule import Runs, Transfer, run_groups

__all__ = ["CHUNK_BYTES", "DEPTH", "KEEP", "Buffers", "pack", "pooled", "split"]

CHUNK_BYTES = 4 << 20  # a chunk: a few per rank fit the 32 MiB L3 here; messages stay few (128 MB -> 32)
DEPTH = 4  # buffers per exchange: packing runs up to three chunks ahead of the receivers' copies
KEEP = 4  # buffers kept between exchanges (per process)

_pool: list[np.ndarray] = []
_orphans: list[tuple[MPI.Request, np.ndarray]] = []  # buffers of abandoned exchanges, held while MPI may read
_lock = threading.Lock()  # exchanges may run in two threads (the runtime's background expansion)


def pooled() -> int:
    """How many buffers the process keeps for the next exchange (tests read it)."""
    return len(_pool)


def split(t: Transfer, itemsize: int, limit: int | None = None) -> list[Transfer]:
    """``t`` as transfers of whole axis-0 indices of at most ``limit`` bytes (default :data:`CHUNK_BYTES`;
    at least one index each).

    The send and receive runs of axis 0 pair up run by run with equal lengths,
    so cutting both after the same number of indices keeps them aligned. Each
    chunk is a transfer of its own: packed (:func:`pack`) and received through
    its own datatype in the same element order, so together they move exactly
    what ``t`` moves.
    """
    a, b = t.send[0], t.recv[0]
    row = itemsize
    for r in t.send[1:]:
        row *= r.total
    rows = max(1, (CHUNK_BYTES if limit is None else limit) // max(row, 1))
    total = a.total
    if total <= rows:
        return [t]
    ends = np.cumsum(a.lens)
    out = []
    for lo in range(0, total, rows):
        hi = min(lo + rows, total)
        i0 = int(np.searchsorted(ends, lo, side="right"))  # first run ending after lo
        i1 = int(np.searchsorted(ends, hi, side="left")) + 1  # runs i0..i1-1 hold [lo, hi)
        lens = a.lens[i0:i1].astype(np.int64)
        first = lo - (int(ends[i0]) - int(a.lens[i0]))  # indices of run i0 before lo
        sa = a.starts[i0:i1].astype(np.int64)
        sb = b.starts[i0:i1].astype(np.int64)
        sa[0] += first
        sb[0] += first
        lens[0] -= first
        lens[-1] -= int(ends[i1 - 1]) - hi
        out.append(Transfer(t.src, t.dst, (Runs(sa, lens), *t.send[1:]), (Runs(sb, lens.copy()), *t.recv[1:])))
    return out


def pack(arr: np.ndarray, t: Transfer, buf: np.ndarray) -> None:
    """Pack the send side of ``t`` into ``buf`` in the element order of the receiver's datatype
    (:meth:`reshape.redistribution.redistribute._Types.buffer`): one strided copy per group combination."""
    groups = runcopy.sides([run_groups(a, b) for a, b in zip(t.send, t.recv, strict=True)], 0)
    off = 0
    for combo in itertools.product(*groups):
        v = runcopy.view(arr, combo)
        buf[off : off + v.size].reshape(v.shape)[...] = v
        off += v.size


class Buffers:
    """One exchange's pack buffers: taken from the pool (or allocated) on demand, up to :data:`DEPTH` at once."""

    def __init__(self) -> None:
        self.depth, self.nbytes = DEPTH, CHUNK_BYTES
        self._free: list[np.ndarray] = []
        self._busy: list[tuple[MPI.Request, np.ndarray]] = []  # a send in flight from each

    def take(self, nbytes: int) -> np.ndarray | None:
        """A buffer of at least ``nbytes`` no message is being sent from; ``None`` while ``depth`` are in
        flight. A chunk larger than :data:`CHUNK_BYTES` (one axis-0 index of a wide transfer) gets a
        buffer of its own, not kept."""
        if not self._free:
            self.reclaim()
        fit = next((i for i, b in enumerate(self._free) if b.nbytes >= nbytes), None)
        if fit is not None:
            return self._free.pop(fit)
        if len(self._busy) + len(self._free) >= self.depth:
            if not self._free:
                return None
            self._free.pop()  # too small for this chunk: let it go
        with _lock:
            if _pool and _pool[-1].nbytes >= nbytes:
                return _pool.pop()
        from reshape.redistribution.nodecopy import empty

        return empty(max(nbytes, self.nbytes), np.uint8, shared=False)  # fresh: pages.py faults it in

    def sending(self, req: MPI.Request, buf: np.ndarray) -> None:
        """``buf`` is in use until ``req`` (its message's send) completes."""
        self._busy.append((req, buf))

    def reclaim(self) -> bool:
        """Free the buffers whose sends completed; ``True`` if any was."""
        if not self._busy:
            return False
        MPI.Request.Testsome([r for r, _ in self._busy])
        done = [b for r, b in self._busy if r == MPI.REQUEST_NULL]
        self._busy = [(r, b) for r, b in self._busy if r != MPI.REQUEST_NULL]
        self._free += done
        return bool(done)

    def forsake(self) -> list[np.ndarray]:
        """After an error: every buffer of this exchange, taken out of use for good (a send from it may
        still be read by MPI after its request completed in error: :func:`reshape.mpiutil.abandon`)."""
        bufs = [b for _, b in self._busy] + self._free
        self._busy, self._free = [], []
        return bufs

    def release(self) -> None:
        """Return the free buffers to the pool (up to :data:`KEEP`). A buffer still being sent from (an
        exchange abandoned on an error) is held aside, never reused, until its send completes."""
        with suppress(MPI.Exception):  # a failed peer's request: held on until it completes in error
            self.reclaim()
        with _lock:
            _orphans.extend(self._busy)
            self._busy.clear()
            if _orphans:
                with suppress(MPI.Exception):
                    MPI.Request.Testsome([r for r, _ in _orphans])
                _orphans[:] = [(r, b) for r, b in _orphans if r != MPI.REQUEST_NULL]
            while self._free and len(_pool) < KEEP:
                buf = self._free.pop()
                if buf.nbytes == CHUNK_BYTES:
                    _pool.append(buf)
        self._free.clear()
