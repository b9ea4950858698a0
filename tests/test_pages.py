"""reshape.redistribution.pages: fresh blocks in huge pages where they come fast, else 4 KiB pages (real mappings)."""

from __future__ import annotations

import ctypes
import mmap
import os

import numpy as np
import pytest

from reshape.redistribution import pages

THP = os.path.exists("/sys/kernel/mm/transparent_hugepage/enabled") and hasattr(mmap, "MADV_HUGEPAGE")


def resident(a: np.ndarray) -> int:
    """Bytes of ``a`` (page-aligned) in memory now, by ``mincore``."""
    libc = ctypes.CDLL(None, use_errno=True)
    npages = -(-a.nbytes // mmap.PAGESIZE)
    vec = (ctypes.c_ubyte * npages)()
    assert libc.mincore(ctypes.c_void_p(a.ctypes.data), ctypes.c_size_t(a.nbytes), vec) == 0, ctypes.get_errno()
    return sum(v & 1 for v in vec) * mmap.PAGESIZE


def vmas(addr: int, size: int) -> list[dict]:
    """The kernel's mappings over [addr, addr + size): per VMA its range, flags and LazyFree kB (smaps)."""
    out, cur = [], None
    with open("/proc/self/smaps") as f:
        for line in f:
            head = line.split()
            if "-" in head[0] and not head[0].endswith(":"):
                lo, hi = (int(x, 16) for x in head[0].split("-"))
                cur = {"lo": lo, "hi": hi} if lo < addr + size and hi > addr else None
                if cur is not None:
                    out.append(cur)
            elif cur is not None and head[0] == "VmFlags:":
                cur["flags"] = set(head[1:])
            elif cur is not None and head[0] == "LazyFree:":
                cur["lazyfree_kb"] = int(head[1])
    return out


@pytest.fixture(autouse=True)
def nothing_kept(monkeypatch):
    """Every test starts with no kept block and the default settings (a kept block is not zero-filled)."""
    monkeypatch.delenv("RESHAPE_KEEP_BLOCKS", raising=False)
    pages.forget()
    yield
    pages.forget()


def lazily_freed(addr: int, size: int) -> int:
    """kB of [addr, addr + size) the kernel may take back (smaps ``LazyFree``)."""
    return sum(v.get("lazyfree_kb", 0) for v in vmas(addr, size))


def test_mode_names_a_bad_value_and_what_is_allowed():
    assert pages.mode({}) == "auto" and pages.mode({"RESHAPE_PAGES": "small"}) == "small"
    with pytest.raises(ValueError, match=r"RESHAPE_PAGES='large': expected one of auto, huge, small"):
        pages.mode({"RESHAPE_PAGES": "large"})


@pytest.mark.parametrize("which", pages.MODES)
@pytest.mark.parametrize("shape,dtype", [((600, 300), np.float64), ((5,), np.int32), ((0, 4), np.float64),
                                         ((3, 1000, 7), np.complex128)])
def test_empty_gives_a_page_aligned_writeable_array(monkeypatch, which, shape, dtype):
    monkeypatch.setenv("RESHAPE_PAGES", which)
    a = pages.empty(shape, dtype)
    assert a.shape == shape and a.dtype == dtype and a.flags.c_contiguous and a.flags.writeable
    if a.size:
        assert a.ctypes.data % mmap.PAGESIZE == 0
    a[...] = 7
    assert np.array_equal(a, np.full(shape, 7, dtype))


@pytest.mark.skipif(not THP, reason="no transparent huge pages in this kernel")
@pytest.mark.parametrize("which,flag", [("huge", "hg"), ("small", "nh")])
def test_a_fixed_kind_is_advised_and_faulted_in_lazily(monkeypatch, which, flag):
    monkeypatch.setenv("RESHAPE_PAGES", which)
    a = pages.empty((4 * pages.CHUNK,), np.uint8)
    (vma,) = vmas(a.ctypes.data, a.nbytes)
    assert flag in vma["flags"] and resident(a) == 0


@pytest.mark.skipif(not THP, reason="no transparent huge pages in this kernel")
@pytest.mark.parametrize("populate", [True, False])
def test_auto_switches_to_small_pages_after_a_slow_chunk_and_faults_everything_in(monkeypatch, populate):
    if not populate:  # an older kernel: pages touched one by one instead
        monkeypatch.setattr(pages, "MADV_POPULATE_WRITE", None)
    monkeypatch.delenv("RESHAPE_PAGES", raising=False)
    size = 5 * pages.CHUNK + 12345
    monkeypatch.setattr(pages, "SLOW", float("inf"))  # every chunk is slow: the first one decides
    a = pages.empty((size,), np.uint8)
    first, rest = vmas(a.ctypes.data, a.nbytes)
    assert first["hi"] == rest["lo"] == a.ctypes.data + pages.CHUNK
    assert "hg" in first["flags"] and "nh" in rest["flags"] and resident(a) >= size
    monkeypatch.setattr(pages, "SLOW", 0.0)  # never slow: huge pages throughout
    b = pages.empty((size,), np.uint8)
    (vma,) = vmas(b.ctypes.data, b.nbytes)
    assert "hg" in vma["flags"] and resident(b) >= size
    assert not a.any() and not b.any()  # faulted in, still zero


def test_probe_reports_each_kind():
    rates = pages.probe(2 * pages.CHUNK, rounds=1, pause=0.0)
    assert set(rates) == set(pages.MODES) and all(v > 0 for v in rates.values())


KEEPS = pages.MADV_FREE is not None


@pytest.mark.skipif(not KEEPS, reason="no MADV_FREE on this platform")
def test_a_freed_block_is_kept_lazily_freed_and_serves_the_next_block_of_about_its_size():
    size = pages.KEEP_MIN + 3 * pages.CHUNK
    a = pages.empty((size,), np.uint8)
    addr = a.ctypes.data
    a[...] = 5
    del a
    assert pages.kept() == size and lazily_freed(addr, size) > 0, "freed: kept, pages the kernel may take"
    before = dict(pages.counts)
    small = pages.empty((size // 2,), np.uint8)  # 2x smaller than the kept block: not served by it
    assert small.ctypes.data != addr
    del small  # below KEEP_MIN: unmapped, not kept
    assert pages.kept() == size
    small = pages.empty((size // 2,), np.uint8)
    assert small.ctypes.data != addr and pages.kept() == size
    b = pages.empty((size - 4096,), np.uint8)  # within 1.5x: the kept block, all of it resident again
    assert b.ctypes.data == addr and pages.kept() == 0 and pages.counts["reused"] == before["reused"] + 1
    assert resident(b) >= b.nbytes and lazily_freed(addr, size) < size // 1024
    c = pages.empty((size,), np.uint8)  # the kept block is in use: a fresh one
    assert c.ctypes.data != addr and not c.any()
    view = b[100:200]
    del b
    assert pages.kept() == 0, "a view still holds the block: not kept yet"
    del view
    assert pages.kept() == size


@pytest.mark.skipif(not KEEPS, reason="no MADV_FREE on this platform")
def test_only_the_newest_blocks_are_kept_and_the_others_unmapped():
    blocks = [pages.empty((pages.KEEP_MIN + i * 8192,), np.uint8) for i in range(pages.KEPT + 2)]
    addrs = [b.ctypes.data for b in blocks]
    while blocks:
        blocks.pop(0)  # freed oldest first
    assert pages.kept() == sum(pages.KEEP_MIN + i * 8192 for i in range(2, pages.KEPT + 2))
    assert not vmas(addrs[0], pages.CHUNK) and not vmas(addrs[1], pages.CHUNK), "the oldest two were unmapped"
    tile = pages.empty((pages.KEEP_MIN - 4096,), np.uint8)
    addr = tile.ctypes.data
    del tile
    assert not vmas(addr, 4096), "a block under KEEP_MIN is unmapped when freed"


@pytest.mark.parametrize("env", [{"RESHAPE_KEEP_BLOCKS": "0"}, {"RESHAPE_PAGES": "small"}, {"RESHAPE_PAGES": "huge"}])
def test_no_block_is_kept_when_turned_off_or_with_a_fixed_kind(monkeypatch, env):
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    a = pages.empty((pages.KEEP_MIN,), np.uint8)
    addr = a.ctypes.data
    del a
    assert pages.kept() == 0 and not vmas(addr, pages.CHUNK)


def test_keep_blocks_names_a_bad_value():
    with pytest.raises(ValueError, match=r"RESHAPE_KEEP_BLOCKS='maybe': expected 1/true/yes/on or 0/false/no/off"):
        pages.keeping({"RESHAPE_KEEP_BLOCKS": "maybe"})
