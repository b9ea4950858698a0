"""One-copy redistribution between ranks of one host: arrays in ``memfd`` mappings, read by peers.

Over MPI every moved byte of a non-contiguous transfer is copied twice: the
sender packs its strided runs into a contiguous buffer, then the receiver
copies the message out of the sender's memory (MPICH's CMA / shared-memory
path). On one host the receiver can instead read the sender's block itself,
with one strided numpy copy straight into its destination block. For that
the block must live in memory another process can map:

* :func:`empty` allocates an array in an anonymous ``memfd_create`` file
  mapped shared (the runtime's arrays, redistribution outputs and the
  benchmark's arrays come from here, by the policy below). The file has no name; it vanishes when
  the last process holding it exits, so a crash leaks nothing (unlike named
  ``/dev/shm`` segments).
* :func:`describe` says where an array's bytes are: ``pid``, ``fd``, the
  file's identity (device, inode) and the offset, or ``None`` when the array
  is not in such a mapping (e.g. the application rebound it to its own
  array).
* :func:`read` maps a peer's file read-only through ``/proc/<pid>/fd/<fd>``
  (same host, same PID namespace, and the right to open the peer's
  descriptors: same uid, or root) and checks it is the file described; any
  failure raises :class:`MapError` and the caller falls back to MPI for that
  transfer. The mapping is kept for the next read of the same file, so a
  block read again (an array moved back and forth, a repeated benchmark)
  costs one copy and no page faults; :func:`sweep` unmaps the files whose
  owner freed them. The owner empties a file when it frees the array, so a
  peer's kept mapping never holds memory the owner let go.

Why not ``process_vm_readv`` (CMA, no special allocation): it pins the
remote pages once per iovec, and a 2-D block-cyclic transfer is runs of a
block row (256 B - 1 KiB): measured here 0.4 GB/s against 6-7 GB/s for a
strided numpy copy from a mapping (the first read of a mapping also faults
its page-table entries in: about 0.2-0.4 us per 4 KiB page touched).

The cost of memfd arrays is their pages. numpy's large arrays are anonymous
memory on transparent huge pages; shmem gets huge pages only where
``/sys/kernel/mm/transparent_hugepage/shmem_enabled`` (or a multi-size
``hugepages-*/shmem_enabled``) allows it. Without them, measured here
(2-core VM, ``shmem_enabled`` = never): streaming kernels on a memfd array
(matvec, ``a += 1``) ran 15-30% slower. (First touching one ran at
1.2-1.9 GB/s against 8-9.7 GB/s anonymous, but that anonymous memory had just
been freed by the same process; fresh memory is slower: :mod:`.pages`.) Hence
``RESHAPE_ONECOPY`` (:func:`mode`):

* ``auto`` (unset): the direct path is on for every memfd source; :func:`empty`
  (the runtime's arrays, redistribution outputs) uses memfd only where shmem
  gets huge pages (:func:`shmem_huge_pages`), plain numpy elsewhere;
* ``1``: memfd for those arrays everywhere (for jobs dominated by
  redistribution of arrays read more than once);
* ``0``: no memfd arrays, no direct reads.

Arrays below :data:`MIN_BYTES` stay plain numpy arrays (they move over MPI).

Peers agree on "same host" by :func:`host_key`: the kernel's boot id plus the
PID and network namespaces, so containers on one machine (and the namespace
cluster's emulated hosts) use MPI between them without trying.
"""

from __future__ import annotations

import errno
import functools
import glob
import math
import mmap
import os
import sys
import weakref
from collections.abc import Callable
from contextlib import suppress
from typing import NamedTuple, TypeVar

import numpy as np

from reshape.joblink import jobenv as E
from reshape.redistribution import pages

__all__ = ["ALIGN", "MIN_BYTES", "MODES", "Descriptor", "MapError", "aligned", "allocating", "counts", "describe",
           "empty", "enabled", "forget", "host_key", "live_segments", "mode", "read", "shmem_huge_pages", "sweep",
           "view"]

T = TypeVar("T")

MIN_BYTES = 1 << 20  # smaller arrays are plain numpy arrays: MPI moves them as fast, without two fds each
ALIGN = 4096  # plain arrays of at least MIN_BYTES start on a page (and so on a cache line): see aligned()


class MapError(OSError):
    """A peer's block could not be mapped (the transfer then goes over MPI)."""


class Descriptor(NamedTuple):
    """Where an array's bytes are: a memfd of process ``pid`` (its descriptor ``fd``)."""

    pid: int
    fd: int
    dev: int
    ino: int
    offset: int  # of the array's first byte in the file
    nbytes: int


class _Segment(NamedTuple):
    addr: int
    size: int
    fd: int
    dev: int
    ino: int


_segments: dict[int, _Segment] = {}  # by start address; entries leave when their mapping is freed
_unavailable: str | None = None if sys.platform.startswith("linux") and hasattr(os, "memfd_create") \
    else "memfd_create needs Linux"


MODES = ("auto", "1", "0")


def mode(env=None) -> str:
    """``RESHAPE_ONECOPY``: ``auto`` (unset), ``1`` or ``0``; ValueError naming a bad value."""
    text = (os.environ if env is None else env).get(E.ONECOPY, "") or "auto"
    if text not in MODES:
        raise ValueError(f"{E.ONECOPY}={text!r}: expected one of {', '.join(MODES)}")
    return text


def enabled(env=None) -> bool:
    """The direct path: on unless ``RESHAPE_ONECOPY=0``, on a platform with memfd."""
    return mode(env) != "0" and _unavailable is None


@functools.cache
def shmem_huge_pages() -> bool:
    """Whether shmem (hence memfd) mappings can get transparent huge pages here (sysfs, read once).

    ``always``, ``within_size`` or ``advise`` (:func:`empty` advises) for the
    PMD size or any multi-size THP size; ``never``/``deny`` (or no THP) means
    4 KiB pages.
    """
    ok = False
    for path in ["/sys/kernel/mm/transparent_hugepage/shmem_enabled",
                 *glob.glob("/sys/kernel/mm/transparent_hugepage/hugepages-*/shmem_enabled")]:
        try:
            with open(path) as f:
                text = f.read()
        except OSError:
            continue
        chosen = text[text.find("[") + 1 : text.find("]")] if "[" in text else ""
        ok |= chosen in ("always", "within_size", "advise", "force")
    return ok


def allocating(env=None) -> bool:
    """Whether :func:`empty` puts arrays in memfd by default: ``RESHAPE_ONECOPY=1``, or ``auto`` where
    shmem gets huge pages (else a memfd array costs more to touch first and to stream through than
    an anonymous one, which numpy backs with huge pages: see the module docstring)."""
    m = mode(env)
    return _unavailable is None and (m == "1" or (m == "auto" and shmem_huge_pages()))


def aligned(shape, dtype=np.float64) -> np.ndarray:
    """An uninitialised C-contiguous array whose first byte is on a page boundary (hence a cache line).

    numpy's large arrays start 16 bytes into an ``mmap``-ed page (malloc's
    header), so a block-cyclic run of whole cache lines (a 64-element float64
    block row: 512 B) straddles nine lines instead of eight, and two runs
    copied by different transfers share a line. Measured here on a strided
    2-D copy pattern (3 of 4 block columns exchanged, blocks 32-128): 1.2-1.4x
    faster with both sides aligned (``python -m benchmarks.redistribution``
    compares cases, this is the layer underneath). The array is a mapping of
    its own, in the pages :mod:`reshape.redistribution.pages` chooses for
    fresh blocks.
    """
    return pages.empty(shape, dtype)


def _release(addr: int, fd: int) -> None:
    """The owner freed the array: empty the file, so peers' kept mappings hold no memory, and close it."""
    _segments.pop(addr, None)
    with suppress(OSError):
        os.ftruncate(fd, 0)
    os.close(fd)


def empty(shape, dtype=np.float64, *, shared: bool | None = None, min_bytes: int = MIN_BYTES) -> np.ndarray:
    """An uninitialised C-contiguous array, in a memfd mapping that peers on this host can read (:func:`read`).

    ``shared=None`` follows :func:`allocating`; ``True`` asks for memfd
    whenever the direct path is on. A plain page-aligned numpy array
    (:func:`aligned`) when not asked, with ``RESHAPE_ONECOPY=0``, or where
    memfd is not available (then, and after ``memfd_create`` was refused,
    e.g. by a seccomp filter, every later call too); ``np.empty`` when
    smaller than ``min_bytes``.
    """
    global _unavailable
    shape = (int(shape),) if np.isscalar(shape) else tuple(int(s) for s in shape)
    dtype = np.dtype(dtype)
    nbytes = math.prod(shape) * dtype.itemsize
    if nbytes == 0 or nbytes < min_bytes:
        return np.empty(shape, dtype)
    if not enabled() or not (allocating() if shared is None else shared):
        return aligned(shape, dtype)
    fd = -1
    try:
        fd = os.memfd_create("reshape-array", os.MFD_CLOEXEC)
        os.ftruncate(fd, nbytes)
        mm = mmap.mmap(fd, nbytes, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        st = os.fstat(fd)
        with suppress(OSError):  # huge pages where shmem_enabled is "advise"; no effect elsewhere
            mm.madvise(mmap.MADV_HUGEPAGE)
    except OSError as e:
        if fd >= 0:
            os.close(fd)
        if e.errno in (errno.ENOSYS, errno.EPERM, errno.EACCES):  # not allowed here (seccomp): stop trying
            _unavailable = f"memfd_create failed: {e}"
        return aligned(shape, dtype)
    arr = np.frombuffer(mm, dtype=dtype, count=math.prod(shape)).reshape(shape)
    addr = arr.ctypes.data
    _segments[addr] = _Segment(addr, nbytes, fd, st.st_dev, st.st_ino)
    weakref.finalize(mm, _release, addr, fd)  # the fd lives exactly as long as the mapping
    return arr


def live_segments() -> int:
    """How many memfd arrays this process holds (for leak checks)."""
    return len(_segments)


def describe(arr: np.ndarray | None) -> Descriptor | None:
    """Where ``arr``'s bytes are, if it is a C-contiguous array inside a memfd mapping of this process."""
    if not isinstance(arr, np.ndarray) or not arr.flags.c_contiguous or arr.nbytes == 0:
        return None
    a = arr.ctypes.data
    for s in _segments.values():
        if s.addr <= a and a + arr.nbytes <= s.addr + s.size:
            return Descriptor(os.getpid(), s.fd, s.dev, s.ino, a - s.addr, arr.nbytes)
    return None


@functools.cache
def host_key() -> str | None:
    """Processes with equal keys can open each other's ``/proc/<pid>/fd``: same kernel, same PID namespace.

    The network namespace is part of the key too: ranks the project's
    namespace cluster places on different emulated hosts (``netns`` launcher)
    then talk over MPI, as on separate machines.
    """
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            boot = f.read().strip()
        ns = [os.stat(f"/proc/self/ns/{k}").st_ino for k in ("pid", "net")]
    except OSError:
        return None
    return f"{boot}/{ns[0]}/{ns[1]}"


counts = {"reads": 0, "maps": 0, "failed": 0}  # this process's direct reads, files mapped, mapping failures
_maps: dict[tuple[int, int, int, int], mmap.mmap] = {}  # peers' files mapped read-only, by (pid, fd, dev, ino)
MAX_MAPS = 64  # most peer mappings kept between redistributions (each holds one fd)


def _path(key: tuple[int, int, int, int]) -> str:
    return f"/proc/{key[0]}/fd/{key[1]}"


def _current(key: tuple[int, int, int, int], need: int) -> bool:
    """Whether the peer still holds the file under that descriptor, at least ``need`` bytes long."""
    try:
        st = os.stat(_path(key))
    except OSError:
        return False
    return (st.st_dev, st.st_ino) == key[2:] and st.st_size >= max(need, 1)


def _drop(key: tuple[int, int, int, int]) -> None:
    mm = _maps.pop(key, None)
    if mm is not None:
        with suppress(BufferError):  # a view escaped: the mapping goes when that view does
            mm.close()


def sweep() -> int:
    """Unmap peers' files that their owners freed (or that died with them); how many are left mapped."""
    for key in list(_maps):
        if not _current(key, 1):
            _drop(key)
    return len(_maps)


def forget() -> None:
    """Unmap every peer file."""
    for key in list(_maps):
        _drop(key)


def _mapping(desc: Descriptor) -> mmap.mmap:
    key = (desc.pid, desc.fd, desc.dev, desc.ino)
    need = desc.offset + desc.nbytes
    if key in _maps:
        if len(_maps[key]) >= need and _current(key, need):
            return _maps[key]
        _drop(key)
    path = _path(key)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError as e:
        counts["failed"] += 1
        raise MapError(f"cannot open {path}: {e}") from e
    try:
        st = os.fstat(fd)
        if (st.st_dev, st.st_ino) != (desc.dev, desc.ino) or st.st_size < need:
            raise MapError(f"{path} is not the described file")
        mm = mmap.mmap(fd, st.st_size, mmap.MAP_SHARED, mmap.PROT_READ)
    except OSError as e:
        counts["failed"] += 1
        raise e if isinstance(e, MapError) else MapError(f"cannot map {path}: {e}") from e
    finally:
        os.close(fd)  # the mapping holds its own reference to the file
    _maps[key] = mm
    counts["maps"] += 1
    while len(_maps) > MAX_MAPS:
        _drop(next(iter(_maps)))
    return mm


def view(desc: Descriptor, shape: tuple[int, ...], dtype) -> np.ndarray:
    """A peer's block mapped read-only; :class:`MapError` if it cannot be mapped.

    The mapping of the peer's file is kept for later reads (the page tables
    stay filled) until :func:`sweep` finds the owner freed it; an owner
    empties the file when it frees the array (:func:`empty`), so a kept
    mapping never holds the memory. Drop the view before the next
    :func:`sweep` (the exchange that took it is over by then).
    """
    dtype = np.dtype(dtype)
    if math.prod(shape) * dtype.itemsize != desc.nbytes:
        raise MapError(f"block {shape} {dtype} does not match the described {desc.nbytes} bytes")
    mapped = _mapping(desc)  # MapError before anything is counted
    counts["reads"] += 1
    return np.frombuffer(mapped, dtype=dtype, count=math.prod(shape), offset=desc.offset).reshape(shape)


def read(desc: Descriptor, shape: tuple[int, ...], dtype, fn: Callable[[np.ndarray], T]) -> T:
    """``fn(block)`` on a peer's block (:func:`view`); ``fn`` must not keep views of the block."""
    block = view(desc, shape, dtype)
    try:
        return fn(block)
    finally:
        del block
