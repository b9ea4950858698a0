"""Copying run products between blocks: piece by piece through strided views, or band by band.

A transfer is a product of runs per axis (:class:`reshape.redistribution.schedule.Runs`);
:func:`run_groups` splits paired runs into regular groups, so :func:`copy`
is one strided numpy view assignment per group combination, with no fancy
indexing (:func:`view`). The circulant engine copies local data and peers'
blocks this way, and the baselines pack and unpack with it.

:func:`fill` fills one destination block from several pieces, band by band,
through a cache-sized tile. A rank that reads every piece of its new block
itself (its own data and, on one host, its peers' blocks:
:mod:`reshape.redistribution.nodecopy`) would otherwise copy piece after piece straight into
the block. When the pieces interleave along the last axis (2-D block-cyclic
with a changed column distribution: each piece is every second or third
block of a row, 256 B - 1 KiB runs), every piece strides through the whole
block: reading strided runs and writing strided runs each cost about half the
bandwidth of a contiguous copy, and the two together compound (measured here,
512 B runs: strided to contiguous 8.4 GB/s, contiguous to strided 8.9,
strided to strided 4.9, a contiguous copy 12-15). :func:`fill` instead
gathers, for a band of rows at a time, every piece's runs into a tile small
enough to stay in cache, then copies the tile's whole rows into the block
with one contiguous copy, so the block is written sequentially once.
:func:`worth` says when that pays: a 2-D block whose pieces cover it
exactly, where some piece's last-axis runs do not span a whole row.
"""

from __future__ import annotations

import itertools

import numpy as np

from reshape.redistribution.nodecopy import aligned
from reshape.redistribution.schedule import RunGroup, Runs, run_groups

__all__ = ["TILE_BYTES", "Piece", "copy", "counts", "fill", "packed", "sides", "view", "worth"]

TILE_BYTES = 1 << 20  # the tile: about one core's L2 here (1 MiB); a band is as many rows as fit

counts = {"fills": 0}  # blocks filled band by band in this process (tests check the path was taken)

Piece = tuple[np.ndarray, tuple[Runs, ...], tuple[Runs, ...]]  # (source block, its runs, the block's runs)


def packed(r: Runs) -> Runs:
    """The same runs laid end to end from 0 (a pack buffer's view of them)."""
    return Runs(np.concatenate(([0], np.cumsum(r.lens)[:-1])).astype(np.int64), r.lens)


def view(arr: np.ndarray, combo: tuple[tuple[int, int, int, int], ...]) -> np.ndarray:
    """Strided view of ``arr``: per axis ``(start, stride, length, count)`` -> axes ``(count, length)``."""
    base = arr[tuple(slice(s, None) for s, _, _, _ in combo)]
    shape, strides = [], []
    for (_, stride, length, count), st in zip(combo, arr.strides, strict=True):
        shape += [count, length]
        strides += [stride * st, st]
    return np.lib.stride_tricks.as_strided(base, shape, strides)


def sides(groups: list[list[RunGroup]], side: int) -> list[list[tuple[int, int, int, int]]]:
    """One side (0: the ``a`` runs, 1: the ``b`` runs) of per-axis groups, as :func:`view` combos."""
    k = 0 if side == 0 else 2
    return [[(g[k], g[k + 1], g[4], g[5]) for g in axis] for axis in groups]


def copy(src: np.ndarray, src_runs, dst: np.ndarray, dst_runs) -> None:
    """``dst[dst_runs] = src[src_runs]`` through strided views (no fancy indexing)."""
    groups = [run_groups(a, b) for a, b in zip(src_runs, dst_runs, strict=True)]
    for cs, cd in zip(itertools.product(*sides(groups, 0)), itertools.product(*sides(groups, 1)), strict=True):
        view(dst, cd)[...] = view(src, cs)


def worth(out: np.ndarray, pieces: list[Piece]) -> bool:
    """Whether :func:`fill` applies and pays: 2-D, pieces covering ``out`` exactly, interleaved rows."""
    if out.ndim != 2 or not out.flags.c_contiguous or out.size == 0 or not pieces:
        return False
    if out.shape[1] * out.itemsize > TILE_BYTES // 2:
        return False  # fewer than two rows per band: no band to gather
    covered = sum(r[0].total * r[1].total for _, _, r in pieces)
    if covered != out.size:
        return False  # something else writes part of the block (a message): leave the block to it
    return any(r[1].total != out.shape[1] for _, _, r in pieces)  # some row is written by several pieces


def _views(src: np.ndarray, tile: np.ndarray, send: Runs, recv: Runs) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per column group: (every source row's runs, the tile rows' runs) as (rows, count, length) views."""
    return [(view(src, ((0, 1, src.shape[0], 1), (sa, da, length, count)))[0],
             view(tile, ((0, 1, tile.shape[0], 1), (sb, db, length, count)))[0])
            for sa, da, sb, db, length, count in run_groups(send, recv)]


def fill(out: np.ndarray, pieces: list[Piece], tile_bytes: int = TILE_BYTES) -> None:
    """``out[recv] = src[send]`` for every piece, band by band through a tile (see module docstring)."""
    counts["fills"] += 1
    rows, width = out.shape
    band = max(1, min(rows, tile_bytes // (width * out.itemsize)))
    tile = aligned((band, width), out.dtype)
    plans = []
    for src, send, recv in pieces:
        order = np.argsort(recv[0].starts, kind="stable")  # by destination row, for the search below
        starts = recv[0].starts[order].astype(np.int64)
        lens = recv[0].lens[order].astype(np.int64)
        plans.append((starts, starts + lens, send[0].starts[order].astype(np.int64),
                      _views(src, tile, send[1], recv[1])))
    for r0 in range(0, rows, band):
        r1 = min(rows, r0 + band)
        for starts, ends, sstarts, views in plans:
            i = int(np.searchsorted(ends, r0, side="right"))  # first run ending after r0
            while i < len(starts) and starts[i] < r1:
                lo, hi = max(int(starts[i]), r0), min(int(ends[i]), r1)
                s = int(sstarts[i]) + lo - int(starts[i])
                for vs, vt in views:
                    vt[lo - r0 : hi - r0] = vs[s : s + hi - lo]
                i += 1
        out[r0:r1] = tile[: r1 - r0]
