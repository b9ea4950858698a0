"""Fill one destination block from several sources band by band, through a cache-sized tile.

A rank that reads every piece of its new block itself (its own data and,
on one host, its peers' blocks: :mod:`reshape.nodecopy`) would otherwise
copy piece after piece straight into the block. When the pieces interleave
along the last axis (2-D block-cyclic with a changed column distribution:
each piece is every second or third block of a row, 256 B - 1 KiB runs),
every piece strides through the whole block: reading strided runs and writing
strided runs each cost about half the bandwidth of a contiguous copy, and the
two together compound (measured here, 512 B runs: strided to contiguous
8.4 GB/s, contiguous to strided 8.9, strided to strided 4.9, a contiguous
copy 12-15). :func:`fill` instead gathers, for a band of rows at a time,
every piece's runs into a tile small enough to stay in cache, then copies
the tile's whole rows into the block with one contiguous copy, so the block
is written sequentially once.

:func:`worth` says when that pays: a 2-D block whose pieces cover it
exactly, where some piece's last-axis runs do not span a whole row.
"""

from __future__ import annotations

import numpy as np

from reshape.nodecopy import aligned
from reshape.schedule import Runs, run_groups

__all__ = ["TILE_BYTES", "Piece", "counts", "fill", "worth"]

TILE_BYTES = 1 << 20  # the tile: about one core's L2 here (1 MiB); a band is as many rows as fit

counts = {"fills": 0}  # blocks filled band by band in this process (tests check the path was taken)

Piece = tuple[np.ndarray, tuple[Runs, ...], tuple[Runs, ...]]  # (source block, its runs, the block's runs)


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
    out = []
    s0, s1 = src.strides
    t0, t1 = tile.strides
    for sa, da, sb, db, length, count in run_groups(send, recv):
        vs = np.lib.stride_tricks.as_strided(src[:, sa:], (src.shape[0], count, length), (s0, da * s1, s1))
        vt = np.lib.stride_tricks.as_strided(tile[:, sb:], (tile.shape[0], count, length), (t0, db * t1, t1))
        out.append((vs, vt))
    return out


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
