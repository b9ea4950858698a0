"""Array layouts: block-cyclic (1-D and 2-D, ScaLAPACK semantics) and GEN_BLOCK.

A layout is a pure description of how a global array is split over ``nprocs``
processes; it never touches MPI, so the scheduler, the simulator, the
performance models and the tests use it freely.

A :class:`Layout` is a product of one 1-D distribution per array axis (a
:class:`BlockCyclic` or a :class:`GenBlock`) over a process grid whose shape is
the tuple of the axes' process counts.  Process ranks map to grid coordinates
in row-major (``"R"``, ScaLAPACK/BLACS default) or column-major (``"C"``) order.

Indices are 0-based throughout; the ScaLAPACK tool functions ``numroc``,
``indxg2p``, ``indxg2l`` and ``indxl2g`` are given with 0-based arguments.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np

__all__ = [
    "BlockCyclic",
    "GenBlock",
    "Layout",
    "LayoutError",
    "block",
    "block_cyclic_1d",
    "block_cyclic_2d",
    "gen_block",
    "indxg2l",
    "indxg2p",
    "indxl2g",
    "nearly_square_grid",
    "numroc",
]


class LayoutError(ValueError):
    """An impossible or inconsistent layout description."""


# --------------------------------------------------------------------------
# ScaLAPACK tool functions (0-based)
# --------------------------------------------------------------------------


def numroc(n: int, nb: int, iproc: int, isrcproc: int, nprocs: int) -> int:
    """Number of rows or columns of a block-cyclic axis owned by ``iproc``."""
    mydist = (nprocs + iproc - isrcproc) % nprocs
    nblocks = n // nb
    num = (nblocks // nprocs) * nb
    extra = nblocks % nprocs
    if mydist < extra:
        num += nb
    elif mydist == extra:
        num += n % nb
    return num


def indxg2p(indxglob: int, nb: int, isrcproc: int, nprocs: int) -> int:
    """Process coordinate owning global index ``indxglob``."""
    return (isrcproc + indxglob // nb) % nprocs


def indxg2l(indxglob: int, nb: int, nprocs: int) -> int:
    """Local index of global index ``indxglob`` on its owner."""
    return (indxglob // (nb * nprocs)) * nb + indxglob % nb


def indxl2g(indxloc: int, nb: int, iproc: int, isrcproc: int, nprocs: int) -> int:
    """Global index of local index ``indxloc`` on process coordinate ``iproc``."""
    mydist = (nprocs + iproc - isrcproc) % nprocs
    return nprocs * nb * (indxloc // nb) + mydist * nb + indxloc % nb


def nearly_square_grid(p: int) -> tuple[int, int]:
    """Factor ``p`` as ``pr x pc`` with ``pr <= pc`` and ``pr`` as large as possible.

    The one nearly-square factoring of the project (Sudarsan & Ribbens 2007: "nearly-square
    grids, smallest side grows"): the runtime's ``"2d"`` layouts, the grid a
    job reports at its resize points, the 2-D legal-size rule
    (:func:`scheduler.core.policy.legal_sizes`) and the remap policy's grid walk
    (:func:`scheduler.core.policies.reshape_remap.next_size`) all use it. Rows come
    first and are the smaller side (``pr <= pc``), so with row-major ranks a
    grid grows by adding rows until it is square.
    """
    if p < 1:
        raise LayoutError(f"process count must be >= 1, got {p}")
    pr = math.isqrt(p)
    while p % pr:
        pr -= 1
    return pr, p // pr


# --------------------------------------------------------------------------
# 1-D axis distributions
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class BlockCyclic:
    """Block-cyclic distribution of ``n`` indices in blocks of ``nb`` over ``p`` coordinates.

    Block ``b`` (global indices ``[b*nb, (b+1)*nb)``) lives on coordinate
    ``(src + b) % p`` at local offset ``(b // p) * nb``.
    """

    n: int
    nb: int
    p: int
    src: int = 0

    def __post_init__(self) -> None:
        if self.n < 0:
            raise LayoutError(f"axis length must be >= 0, got {self.n}")
        if self.nb < 1:
            raise LayoutError(f"block size must be >= 1, got {self.nb}")
        if self.p < 1:
            raise LayoutError(f"process count must be >= 1, got {self.p}")
        if not 0 <= self.src < self.p:
            raise LayoutError(f"source process {self.src} outside 0..{self.p - 1}")

    def local_len(self, coord: int) -> int:
        return numroc(self.n, self.nb, coord, self.src, self.p)

    def owner(self, g: int) -> int:
        return indxg2p(g, self.nb, self.src, self.p)

    def global_indices(self, coord: int) -> np.ndarray:
        """Global indices held by ``coord``, in local order."""
        loc = np.arange(self.local_len(coord), dtype=np.int64)
        mydist = (self.p + coord - self.src) % self.p
        return self.p * self.nb * (loc // self.nb) + mydist * self.nb + loc % self.nb

    def segments(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Contiguous pieces ``(gstart, owner, lstart)``; piece ``i`` ends at ``gstart[i+1]``."""
        b = np.arange(-(-self.n // self.nb), dtype=np.int64)
        return b * self.nb, (self.src + b) % self.p, (b // self.p) * self.nb

    def describe(self) -> str:
        return f"cyclic({self.nb})x{self.p}" + (f"@{self.src}" if self.src else "")


@dataclass(frozen=True)
class GenBlock:
    """Irregular contiguous split (HPF ``GEN_BLOCK``): coordinate ``i`` holds ``counts[i]`` indices."""

    counts: tuple[int, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "counts", tuple(int(c) for c in self.counts))
        if not self.counts:
            raise LayoutError("GEN_BLOCK needs at least one process")
        if any(c < 0 for c in self.counts):
            raise LayoutError(f"GEN_BLOCK counts must be >= 0, got {list(self.counts)}")

    @property
    def n(self) -> int:
        return sum(self.counts)

    @property
    def p(self) -> int:
        return len(self.counts)

    @cached_property
    def starts(self) -> tuple[int, ...]:
        return (0, *np.cumsum(self.counts).tolist())

    def local_len(self, coord: int) -> int:
        return self.counts[coord]

    def owner(self, g: int) -> int:
        return int(np.searchsorted(self.starts, g, side="right")) - 1

    def global_indices(self, coord: int) -> np.ndarray:
        return np.arange(self.starts[coord], self.starts[coord + 1], dtype=np.int64)

    def segments(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        nz = [i for i, c in enumerate(self.counts) if c]
        g = np.array([self.starts[i] for i in nz], dtype=np.int64)
        return g, np.array(nz, dtype=np.int64), np.zeros(len(nz), dtype=np.int64)

    def describe(self) -> str:
        return f"gen_block{list(self.counts)}"


Dist = BlockCyclic | GenBlock
_NP_ORDER = {"R": "C", "C": "F"}


# --------------------------------------------------------------------------
# N-d layout
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class Layout:
    """Product of per-axis distributions over a process grid.

    ``dists[k]`` distributes axis ``k``; the grid shape is
    ``tuple(d.p for d in dists)``; ``order`` maps ranks to grid coordinates
    (``"R"`` row-major as in BLACS' default, ``"C"`` column-major).
    """

    dists: tuple[Dist, ...]
    order: str = "R"

    def __post_init__(self) -> None:
        object.__setattr__(self, "dists", tuple(self.dists))
        if not self.dists:
            raise LayoutError("a layout needs at least one axis")
        if self.order not in ("R", "C"):
            raise LayoutError(f"rank order must be 'R' or 'C', got {self.order!r}")

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(d.n for d in self.dists)

    @property
    def ndim(self) -> int:
        return len(self.dists)

    @property
    def grid(self) -> tuple[int, ...]:
        return tuple(d.p for d in self.dists)

    @property
    def nprocs(self) -> int:
        return math.prod(self.grid)

    def coords(self, rank: int) -> tuple[int, ...]:
        if not 0 <= rank < self.nprocs:
            raise LayoutError(f"rank {rank} outside layout of {self.nprocs} processes")
        return tuple(int(c) for c in np.unravel_index(rank, self.grid, order=_NP_ORDER[self.order]))

    def rank(self, coords: tuple[int, ...]) -> int:
        return int(np.ravel_multi_index(coords, self.grid, order=_NP_ORDER[self.order]))

    def local_shape(self, rank: int) -> tuple[int, ...]:
        return tuple(d.local_len(c) for d, c in zip(self.dists, self.coords(rank), strict=True))

    def global_indices(self, rank: int) -> tuple[np.ndarray, ...]:
        """Per-axis global indices of ``rank``'s local block (use with ``np.ix_``)."""
        return tuple(d.global_indices(c) for d, c in zip(self.dists, self.coords(rank), strict=True))

    def owner(self, index: tuple[int, ...]) -> int:
        """Rank owning global element ``index``."""
        return self.rank(tuple(d.owner(g) for d, g in zip(self.dists, index, strict=True)))

    def local_block(self, a: np.ndarray, rank: int) -> np.ndarray:
        """``rank``'s local block of a global array (a copy, C-contiguous)."""
        if tuple(a.shape) != self.shape:
            raise LayoutError(f"array shape {a.shape} does not match layout shape {self.shape}")
        return np.ascontiguousarray(a[np.ix_(*self.global_indices(rank))])

    def describe(self) -> str:
        axes = " x ".join(d.describe() for d in self.dists)
        return f"{'x'.join(map(str, self.shape))} as [{axes}] order {self.order}"


# --------------------------------------------------------------------------
# Constructors
# --------------------------------------------------------------------------


def _shape(shape: int | tuple[int, ...]) -> tuple[int, ...]:
    s = (shape,) if isinstance(shape, int | np.integer) else tuple(int(x) for x in shape)
    if not s or any(x < 0 for x in s):
        raise LayoutError(f"invalid global shape {shape!r}")
    return s


def block_cyclic_1d(
    shape: int | tuple[int, ...], nprocs: int, block: int = 1, axis: int = 0, src: int = 0
) -> Layout:
    """1-D block-cyclic layout of axis ``axis`` (rows: 0, columns: 1) over ``nprocs`` processes."""
    s = _shape(shape)
    if not 0 <= axis < len(s):
        raise LayoutError(f"axis {axis} out of range for shape {s}")
    dists = [BlockCyclic(n, max(n, 1), 1) for n in s]
    dists[axis] = BlockCyclic(s[axis], block, nprocs, src)
    return Layout(tuple(dists))


def block(shape: int | tuple[int, ...], nprocs: int, axis: int = 0) -> Layout:
    """Plain BLOCK layout: contiguous pieces of ``ceil(n / nprocs)`` along ``axis``."""
    s = _shape(shape)
    n = s[axis] if 0 <= axis < len(s) else 0
    return block_cyclic_1d(s, nprocs, max(1, -(-n // max(nprocs, 1))), axis)


def block_cyclic_2d(
    shape: tuple[int, int],
    grid: tuple[int, int],
    block: tuple[int, int] = (1, 1),
    src: tuple[int, int] = (0, 0),
    order: str = "R",
) -> Layout:
    """2-D block-cyclic (checkerboard) layout with ScaLAPACK descriptor semantics."""
    s = _shape(shape)
    if len(s) != 2:
        raise LayoutError(f"2-D block-cyclic layout needs a 2-D shape, got {s}")
    return Layout(
        (BlockCyclic(s[0], block[0], grid[0], src[0]), BlockCyclic(s[1], block[1], grid[1], src[1])),
        order,
    )


def gen_block(shape: int | tuple[int, ...], counts: list[int] | tuple[int, ...], axis: int = 0) -> Layout:
    """GEN_BLOCK layout: process ``i`` holds ``counts[i]`` consecutive indices of ``axis``."""
    s = _shape(shape)
    if sum(counts) != s[axis]:
        raise LayoutError(
            f"GEN_BLOCK counts {list(counts)} sum to {sum(counts)}, but axis {axis} has {s[axis]}"
        )
    dists: list[Dist] = [BlockCyclic(n, max(n, 1), 1) for n in s]
    dists[axis] = GenBlock(tuple(counts))
    return Layout(tuple(dists))


def even_counts(n: int, p: int) -> list[int]:
    """Split ``n`` into ``p`` near-equal parts (the first ``n % p`` get one more)."""
    q, r = divmod(n, p)
    return [q + (i < r) for i in range(p)]
