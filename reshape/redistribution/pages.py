"""Fresh memory for the blocks a resize writes: huge pages where they come fast, else 4 KiB pages.

Every destination block of a resize is memory the rank has not touched (a
new rank's, or a survivor's larger block), so its first touch is part of the
move. numpy advises transparent huge pages for every large array: one fault
per 2 MiB instead of 512, the faster choice where a machine's memory stays
with it. It is the slower one in a VM whose host takes freed memory back
(virtio-balloon *free page reporting*, as on this project's 2-core VM: the
guest reports free blocks of 2 MiB and more, the host discards them): a huge
page then comes from such a block and the host faults every 4 KiB of it in
again, while 4 KiB pages come mostly from smaller free fragments, never
reported. Memory freed in the last second or two is usually not reported
yet, so the same mapping may fault in at either speed, depending on what
the process (or its neighbours) freed just before.

Measured here, fresh 256 MiB mappings filled after 2 s of quiet: huge pages
0.23-0.88 GB/s, 4 KiB pages 0.7-2.2 GB/s; huge pages 5-12 GB/s when the
process had just freed memory. So ``RESHAPE_PAGES`` (:func:`mode`):

* ``auto`` (default): :func:`empty` faults the block in at allocation, 4 MiB
  at a time in huge pages, and gives the rest of the block 4 KiB pages as
  soon as a chunk comes in slower than :data:`SLOW` (measured in the
  thread's CPU time, so a rank that loses its core meanwhile does not count
  as slow); where memory is fast it keeps huge pages throughout. At most one
  slow chunk per block is spent finding out.
* ``huge``: numpy's choice (huge pages, faulted in on first touch);
* ``small``: 4 KiB pages, faulted in on first touch.

With ``auto``, a block of at least :data:`KEEP_MIN` bytes the process frees
is not unmapped but kept for the next allocation of about its size (up to
:data:`KEPT` blocks, newest kept;
``RESHAPE_KEEP_BLOCKS=0`` turns it off): ``madvise(MADV_FREE)`` lets the
kernel take its pages back whenever it needs memory, and until then they
are still the process's, so the next block of that size is written at copy
speed instead of being faulted in. A shrink is where this tells: it returns
to a size the job has run at (Sudarsan & Ribbens 2007 §3.1), so each staying rank's new
block is the size of a block it freed at the expansion before. Kept blocks
count in the process's resident size until the kernel reclaims them.

In the LU application (n = 6000, 2 -> 4 -> 2 -> 3, three runs each) the
redistributions took 0.70-0.86 s with 4 KiB pages and 1.07-1.20 s with huge
ones; in Jacobi, whose iterations free large temporaries just before a
resize, 0.23-0.25 s with 4 KiB pages and 0.10-0.13 s with huge ones, hence
the adaptive default rather than a fixed kind: with it, LU 0.50-0.78 s and
Jacobi 0.13-0.15 s (huge pages 0.10-0.15 s). ``python -m benchmarks.pages``
measures both applications, with and without kept blocks (below);
``benchmarks.redistribution`` has the ``huge pages`` row beside every case.
"""

from __future__ import annotations

import math
import mmap
import os
import statistics
import threading
import time
import weakref
from contextlib import suppress

import numpy as np

from reshape.joblink import jobenv as E

__all__ = ["CHUNK", "KEPT", "MODES", "SLOW", "counts", "empty", "forget", "keeping", "kept", "mode", "probe"]

MODES = ("auto", "huge", "small")
CHUNK = 4 << 20  # bytes faulted in at a time by auto: two huge pages
SLOW = 1.5e9  # bytes per CPU second: a huge-page chunk slower than this gives the rest of the block 4 KiB pages
MADV_POPULATE_WRITE = getattr(mmap, "MADV_POPULATE_WRITE", 23 if os.name == "posix" else None)  # Linux 5.14
MADV_FREE = getattr(mmap, "MADV_FREE", None)  # Linux 4.5
KEPT = 4  # freed blocks kept for reuse, newest first
KEEP_MIN = 16 << 20  # smaller blocks (tiles, pack buffers) are unmapped: they fault in within milliseconds
FIT = 1.5  # a kept block serves a request of more than 1/FIT of its size

_kept: list[mmap.mmap] = []  # lazily freed mappings, oldest first
_lock = threading.RLock()  # a block may be freed in any thread (the runtime's background expansion)
counts = {"reused": 0}  # blocks served from the kept ones (tests read it)


def mode(env=None) -> str:
    """``RESHAPE_PAGES``: ``auto`` (unset), ``huge`` or ``small``; ValueError naming a bad value."""
    text = (os.environ if env is None else env).get(E.PAGES, "") or "auto"
    if text not in MODES:
        raise ValueError(f"{E.PAGES}={text!r}: expected one of {', '.join(MODES)}")
    return text


def keeping(env=None) -> bool:
    """``RESHAPE_KEEP_BLOCKS``: keep freed blocks for reuse (default on; with ``RESHAPE_PAGES=auto`` only)."""
    return E.flag(E.KEEP_BLOCKS, True, env)


def kept() -> int:
    """Bytes of the freed blocks kept for reuse."""
    with _lock:
        return sum(len(mm) for mm in _kept)


def forget() -> None:
    """Unmap every kept block (the next allocations get fresh memory)."""
    with _lock:
        while _kept:
            _kept.pop().close()


def _take(nbytes: int) -> mmap.mmap | None:
    """The smallest kept block of ``nbytes`` to ``FIT * nbytes`` bytes, no longer kept; None if there is none."""
    with _lock:
        fits = [i for i, mm in enumerate(_kept) if nbytes <= len(mm) <= FIT * nbytes]
        if not fits:
            return None
        counts["reused"] += 1
        return _kept.pop(min(fits, key=lambda i: len(_kept[i])))


def _give_back(mm: mmap.mmap) -> None:
    """The array over ``mm`` was freed: keep ``mm``, lazily freed, or unmap it."""
    with _lock:
        try:
            mm.madvise(MADV_FREE)
        except (OSError, ValueError):
            mm.close()
            return
        _kept.append(mm)
        while len(_kept) > KEPT:
            _kept.pop(0).close()


def _advise(mm: mmap.mmap, which: str, start: int = 0, length: int | None = None) -> None:
    advice = getattr(mmap, "MADV_HUGEPAGE" if which == "huge" else "MADV_NOHUGEPAGE", None)
    if advice is not None:
        with suppress(OSError):  # no THP in this kernel: the advice means nothing here
            mm.madvise(advice, start, len(mm) - start if length is None else length)


def _map(nbytes: int, which: str) -> mmap.mmap:
    """An anonymous private mapping (page-aligned) advised for ``which`` pages where the platform can."""
    mm = mmap.mmap(-1, nbytes, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, mmap.PROT_READ | mmap.PROT_WRITE)
    _advise(mm, which)
    return mm


def _fault_in(mm: mmap.mmap, start: int, length: int) -> None:
    """Fault ``length`` bytes at ``start`` in for writing: one populate call, or a write per 4 KiB page."""
    if MADV_POPULATE_WRITE is not None:
        try:
            mm.madvise(MADV_POPULATE_WRITE, start, length)
            return
        except (OSError, ValueError):
            pass  # an older kernel: touch the pages instead
    view = np.frombuffer(mm, dtype=np.uint8)
    view[start : start + length : mmap.PAGESIZE] = 0


def _fill_adaptively(mm: mmap.mmap) -> str:
    """Fault ``mm`` in, huge pages chunk by chunk until one is slow, then the rest in 4 KiB pages.

    Returns ``"huge"``, or ``"small"`` when it switched.
    """
    size = len(mm)
    off = 0
    while off < size:
        length = min(CHUNK, size - off)
        t0 = time.thread_time()
        _fault_in(mm, off, length)
        spent = time.thread_time() - t0
        off += length
        if off < size and spent > 0 and length / spent < SLOW:
            _advise(mm, "small", off)
            _fault_in(mm, off, size - off)
            return "small"
    return "huge"


def empty(shape, dtype=np.float64) -> np.ndarray:
    """An uninitialised C-contiguous array in a fresh page-aligned mapping, its pages as :func:`mode` says."""
    shape = (int(shape),) if np.isscalar(shape) else tuple(int(s) for s in shape)
    dtype = np.dtype(dtype)
    count = math.prod(shape)
    if count == 0:
        return np.empty(shape, dtype)
    m = mode()
    nbytes = count * dtype.itemsize
    keep = m == "auto" and MADV_FREE is not None and nbytes >= KEEP_MIN and keeping()
    mm = _take(nbytes) if keep else None
    if mm is not None:
        _fault_in(mm, 0, nbytes)  # what the kernel took back faults in again; the rest is still here
    else:
        mm = _map(nbytes, "small" if m == "small" else "huge")
        if m == "auto":
            _fill_adaptively(mm)
    flat = np.frombuffer(mm, dtype=dtype, count=count)
    if keep:
        weakref.finalize(flat, _give_back, mm).atexit = False
    return flat.reshape(shape)


def probe(nbytes: int, rounds: int = 3, pause: float = 1.0) -> dict[str, float]:
    """Median GB/s at which fresh memory is faulted in, per kind: ``huge``, ``small`` and ``auto``.

    For reports (``benchmarks.redistribution``). Each mapping stays mapped
    until the end, so none reuses pages another has just freed, and
    ``pause`` seconds pass before each, as between two resizes.
    """
    held, rates = [], {k: [] for k in MODES}
    kinds = ("huge", "small", "auto")
    try:
        for r in range(rounds):
            for which in kinds[r % 3:] + kinds[: r % 3]:
                time.sleep(pause)
                mm = _map(nbytes, "small" if which == "small" else "huge")
                held.append(mm)
                t0 = time.perf_counter()
                if which == "auto":
                    _fill_adaptively(mm)
                else:
                    _fault_in(mm, 0, nbytes)
                rates[which].append(nbytes / (time.perf_counter() - t0) / 1e9)
    finally:
        for mm in held:
            mm.close()
    return {k: statistics.median(v) for k, v in rates.items()}
