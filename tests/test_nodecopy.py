"""reshape.redistribution.nodecopy in one process: memfd arrays, their descriptors, mapping back through /proc, cleanup.

The peer here is this process itself (``/proc/self``'s pid): the same open-map-check path a
rank takes for a peer on its host. The multi-rank behaviour (direct reads, the per-transfer
fallback) is in ``tests/mpi_ranks/test_onecopy.py``.
"""

from __future__ import annotations

import gc
import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reshape.redistribution import nodecopy
from reshape.redistribution.redistribute import _Peers
from reshape.redistribution.schedule import Runs, Transfer
from reshape.runtime.settings import env_problems


def fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def maps() -> int:
    with open("/proc/self/maps") as f:
        return sum(1 for _ in f)


def test_large_arrays_are_memfd_backed_small_ones_and_switched_off_are_plain(monkeypatch):
    big = nodecopy.empty((600, 300), shared=True)
    assert big.shape == (600, 300) and big.dtype == np.float64 and big.flags.writeable and big.flags.c_contiguous
    d = nodecopy.describe(big)
    assert d is not None and d.pid == os.getpid() and d.offset == 0 and d.nbytes == big.nbytes
    assert os.readlink(f"/proc/self/fd/{d.fd}").startswith("/memfd:reshape-array")
    assert nodecopy.describe(nodecopy.empty((10, 10), shared=True)) is None  # below MIN_BYTES
    assert nodecopy.describe(nodecopy.empty(7, np.int32, shared=True, min_bytes=0)) is not None
    assert nodecopy.describe(np.empty((600, 300))) is None  # not ours
    assert nodecopy.describe(big[:, :10]) is None  # not contiguous
    assert nodecopy.describe(nodecopy.empty((0, 5), shared=True, min_bytes=0)) is None  # nothing to share
    monkeypatch.setenv("RESHAPE_ONECOPY", "0")
    assert not nodecopy.enabled() and nodecopy.describe(nodecopy.empty((600, 300), shared=True)) is None


def test_arrays_go_to_memfd_by_default_only_where_shmem_gets_huge_pages(monkeypatch):
    """auto (unset): a memfd array is slower to touch first and to stream through than numpy's
    huge-page-backed anonymous memory unless shmem gets huge pages too."""
    monkeypatch.delenv("RESHAPE_ONECOPY", raising=False)
    assert nodecopy.mode() == "auto" and nodecopy.allocating() == nodecopy.shmem_huge_pages()
    assert (nodecopy.describe(nodecopy.empty((600, 300))) is not None) == nodecopy.shmem_huge_pages()
    monkeypatch.setenv("RESHAPE_ONECOPY", "1")
    assert nodecopy.allocating() and nodecopy.describe(nodecopy.empty((600, 300))) is not None
    assert nodecopy.describe(nodecopy.empty((600, 300), shared=False)) is None


@settings(max_examples=40, deadline=None)
@given(shape=st.lists(st.integers(1, 40), min_size=1, max_size=3),
       dtype=st.sampled_from([np.float64, np.float32, np.int32, np.complex128, np.uint8]))
def test_plain_arrays_start_on_a_page_and_behave_as_numpy_arrays(shape, dtype):
    """nodecopy.aligned: the layout numpy would give, shifted to a page boundary (cache-line runs stay whole)."""
    a = nodecopy.aligned(shape, dtype)
    assert a.shape == tuple(shape) and a.dtype == np.dtype(dtype) and a.flags.c_contiguous and a.flags.writeable
    assert a.ctypes.data % nodecopy.ALIGN == 0
    a[...] = 3
    assert np.array_equal(a, np.full(shape, 3, dtype)) and np.array_equal(a.copy(), a)


def test_large_plain_arrays_from_empty_are_page_aligned(monkeypatch):
    monkeypatch.setenv("RESHAPE_ONECOPY", "0")
    assert nodecopy.empty((600, 300)).ctypes.data % nodecopy.ALIGN == 0
    monkeypatch.setenv("RESHAPE_ONECOPY", "auto")
    assert nodecopy.empty((600, 300), shared=False).ctypes.data % nodecopy.ALIGN == 0


def test_a_bad_switch_is_refused_naming_it():
    assert not env_problems({"RESHAPE_ONECOPY": "0"})[1]  # a bad value: tests/test_checks.py
    with pytest.raises(ValueError, match="RESHAPE_ONECOPY"):
        nodecopy.enabled({"RESHAPE_ONECOPY": "2"})


@settings(max_examples=40, deadline=None)
@given(rows=st.integers(1, 40), cols=st.integers(1, 30), dtype=st.sampled_from(["f8", "i4", "c16", "u1"]),
       data=st.data())
def test_a_contiguous_part_read_back_through_proc_is_bit_identical(rows, cols, dtype, data):
    a = nodecopy.empty((rows, cols), dtype, shared=True, min_bytes=0)
    a[...] = np.arange(rows * cols).reshape(rows, cols).astype(dtype) * (3 if dtype != "u1" else 1)
    r0 = data.draw(st.integers(0, rows - 1))
    r1 = data.draw(st.integers(r0 + 1, rows))
    part = a[r0:r1]  # rows of a block: contiguous, at an offset into the file
    d = nodecopy.describe(part)
    assert d is not None and d.offset == r0 * cols * np.dtype(dtype).itemsize
    got = nodecopy.read(d, part.shape, dtype, lambda blk: (blk.flags.writeable, blk.copy()))
    assert got[0] is False and np.array_equal(got[1], part)
    a[r0, 0] += 1  # a kept mapping sees the owner's current data (shared, not a snapshot)
    assert nodecopy.read(d, part.shape, dtype, lambda blk: blk[0, 0] == a[r0, 0])


def test_wrong_descriptors_raise_map_error():
    a = nodecopy.empty((300, 500), shared=True)
    d = nodecopy.describe(a)
    with pytest.raises(nodecopy.MapError, match="does not match"):
        nodecopy.read(d, (300, 499), np.float64, lambda b: None)
    with pytest.raises(nodecopy.MapError, match="not the described file"):
        nodecopy.read(d._replace(ino=d.ino + 1), a.shape, np.float64, lambda b: None)
    with pytest.raises(nodecopy.MapError, match="cannot open"):
        nodecopy.read(d._replace(fd=fds() + 900), a.shape, np.float64, lambda b: None)
    with pytest.raises(nodecopy.MapError, match="cannot open"):
        nodecopy.read(d._replace(pid=2**22 + 17), a.shape, np.float64, lambda b: None)  # no such process


def test_freeing_an_array_closes_its_file_and_empties_kept_mappings():
    nodecopy.forget()
    gc.collect()
    before_fds, before_maps, before_live = fds(), maps(), nodecopy.live_segments()
    for i in range(30):
        a = nodecopy.empty((256, 512 + i), shared=True)
        a[...] = i
        d = nodecopy.describe(a)
        assert nodecopy.read(d, a.shape, a.dtype, lambda b: float(b[-1, -1])) == i
        path = f"/proc/self/fd/{d.fd}"
        del a
        gc.collect()
        assert not os.path.exists(path) or os.stat(path).st_ino != d.ino  # the owner closed it
        assert nodecopy.sweep() == 0  # and the kept mapping of it is gone
    assert (fds(), maps(), nodecopy.live_segments()) == (before_fds, before_maps, before_live)


def test_a_kept_mapping_of_a_freed_array_holds_no_memory():
    nodecopy.forget()
    a = nodecopy.empty((1024, 1024), shared=True)
    a[...] = 1.0
    d = nodecopy.describe(a)
    nodecopy.read(d, a.shape, a.dtype, lambda b: b.sum())
    key = (d.pid, d.fd, d.dev, d.ino)
    kept = nodecopy._maps[key]
    del a
    gc.collect()
    # the file behind the kept mapping is empty now: its pages went back with the owner's array
    assert len(kept) == d.nbytes and kept.size() == 0
    assert nodecopy.sweep() == 0 and key not in nodecopy._maps


def test_direct_transfers_need_one_host_and_a_described_source():
    r = Runs(np.array([0]), np.array([2]))
    t01, t10, t00 = Transfer(0, 1, (r,), (r,)), Transfer(1, 0, (r,), (r,)), Transfer(0, 0, (r,), (r,))
    d = nodecopy.Descriptor(1, 3, 4, 5, 0, 16)
    peers = _Peers(("h", "h", "other"), (d, None, d), 0)
    assert peers.direct(t01)  # same host, rank 0's block described
    assert not peers.direct(t10)  # rank 1's block is not in a memfd: MPI
    assert not peers.direct(t00)  # a local copy is never a transfer
    assert not _Peers(("h", "g"), (d, d), 0).direct(t01)  # other host (or PID namespace)
    assert not _Peers((None, None), (d, d), 0).direct(t01)  # the path switched off


def test_the_host_key_names_the_kernel_and_the_pid_and_network_namespaces():
    with open("/proc/sys/kernel/random/boot_id") as f:
        boot = f.read().strip()
    ns = [os.stat(f"/proc/self/ns/{k}").st_ino for k in ("pid", "net")]
    assert nodecopy.host_key() == f"{boot}/{ns[0]}/{ns[1]}"
