"""Distributed arrays: a local numpy block, its layout and the ranks holding it; the arrays a job registers."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from mpi4py import MPI

from reshape.redistribution import nodecopy
from reshape.redistribution.layout import (
    Layout,
    LayoutError,
    block,
    block_cyclic_1d,
    block_cyclic_2d,
    nearly_square_grid,
)
from reshape.redistribution.redistribute import redistribute

__all__ = ["DistArray", "LayoutRule", "Registered", "gather", "layout_rule", "scatter"]

LayoutRule = Callable[[int], Layout]


@dataclass
class DistArray:
    """A global array distributed by ``layout`` over ``ranks`` of ``comm``.

    ``local`` is this rank's block (``None`` on ranks of ``comm`` outside
    ``ranks``); blocks built here or by a redistribution come from
    :func:`reshape.redistribution.nodecopy.empty`: in a memfd mapping where that pays
    (``RESHAPE_ONECOPY``), so that peers on the same host read them directly
    when they are redistributed. ``ranks[i]`` is the comm rank holding layout process ``i``.
    ``layout.global_indices(i)`` gives the global indices of process ``i``'s
    block, one index array per axis.
    """

    layout: Layout
    local: np.ndarray | None
    comm: MPI.Comm
    ranks: tuple[int, ...]

    @classmethod
    def from_function(
        cls,
        comm: MPI.Comm,
        layout: Layout,
        fn: Callable[..., np.ndarray],
        dtype=np.float64,
        ranks=None,
    ) -> DistArray:
        """Build each block from ``fn(*global_index_grids)`` (no global array is formed)."""
        ranks = tuple(range(layout.nprocs)) if ranks is None else tuple(ranks)
        local = None
        if comm.rank in ranks:
            idx = layout.global_indices(ranks.index(comm.rank))
            values = np.asarray(fn(*np.ix_(*idx)), dtype=dtype)
            local = nodecopy.empty(tuple(len(i) for i in idx), values.dtype)  # peers on the host read it directly
            local[...] = values
        return cls(layout, local, comm, ranks)

    @property
    def dtype(self) -> np.dtype | None:
        return None if self.local is None else self.local.dtype

    def redistribute(self, layout: Layout, ranks=None, method: str = "circulant", **kw) -> DistArray:
        """A new DistArray holding the same global array in ``layout`` (collective)."""
        ranks = tuple(range(layout.nprocs)) if ranks is None else tuple(ranks)
        new = redistribute(
            self.comm, self.layout, self.local, layout,
            src_ranks=self.ranks, dst_ranks=ranks, method=method, **kw,
        )
        return DistArray(layout, new, self.comm, ranks)

    def gather(self, root: int = 0) -> np.ndarray | None:
        """The whole array on comm rank ``root`` (``None`` elsewhere). Collective; small data only."""
        return gather(self, root)


def _whole(shape: tuple[int, ...]) -> Layout:
    return block_cyclic_1d(shape, 1, max(shape[0], 1) if shape else 1)


def gather(a: DistArray, root: int = 0) -> np.ndarray | None:
    """Redistribute to a one-process layout on ``root``."""
    return redistribute(a.comm, a.layout, a.local, _whole(a.layout.shape),
                        src_ranks=a.ranks, dst_ranks=(root,))


def scatter(comm: MPI.Comm, whole: np.ndarray | None, layout: Layout, root: int = 0, ranks=None) -> DistArray:
    """Distribute ``whole`` (given on ``root``) by ``layout``. Collective; small data only."""
    ranks = tuple(range(layout.nprocs)) if ranks is None else tuple(ranks)
    src = _whole(layout.shape)
    local = np.ascontiguousarray(whole) if comm.rank == root else None
    new = redistribute(comm, src, local, layout, src_ranks=(root,), dst_ranks=ranks)
    return DistArray(layout, new, comm, ranks)


def layout_rule(
    shape: tuple[int, ...], layout: str | LayoutRule = "rows", block_size: tuple[int, ...] | int | None = None
) -> LayoutRule:
    """A function ``p -> Layout`` for ``shape``.

    ``layout`` is a callable, or one of ``"rows"`` (contiguous row blocks),
    ``"cols"``, ``"rows-cyclic"`` / ``"cols-cyclic"`` (1-D block-cyclic with
    ``block_size``), ``"2d"`` (block-cyclic over the nearly-square grid of
    ``p``, ``block_size`` = (mb, nb), ScaLAPACK style).
    """
    if callable(layout):
        return layout
    shape = tuple(int(s) for s in shape)
    bs = block_size
    if layout == "rows":
        return lambda p: block(shape, p, 0)
    if layout == "cols":
        return lambda p: block(shape, p, 1)
    if layout in ("rows-cyclic", "cols-cyclic"):
        nb = int(bs if isinstance(bs, int) else (bs or (1,))[0])
        axis = 0 if layout == "rows-cyclic" else 1
        return lambda p: block_cyclic_1d(shape, p, nb, axis)
    if layout == "2d":
        mb, nb = (bs, bs) if isinstance(bs, int) else (bs or (64, 64))
        return lambda p: block_cyclic_2d(shape, nearly_square_grid(p), (mb, nb))
    raise LayoutError(f"unknown layout {layout!r}: use rows, cols, rows-cyclic, cols-cyclic, 2d or a callable")


@dataclass
class Registered:
    """A registered global array (:meth:`Resizer.register_array`); it survives resizes.

    ``local``: this rank's current block, a numpy array (a new one after every
    resize: read it afresh each iteration). ``layout``: how the global array is
    split now (:class:`reshape.redistribution.layout.Layout`; ``layout.global_indices(rank)``
    gives a block's global indices). ``dist``: the underlying
    :class:`reshape.runtime.darray.DistArray` (layout, local block, communicator and
    the ranks holding it), replaced at each resize. ``rule``: the function
    ``p -> Layout`` giving the layout at any size; ``limit``: ``q -> None``, or why
    the array cannot be spread over ``q`` processes (more than its blocks).
    """

    name: str
    rule: LayoutRule
    dist: DistArray
    constant: bool = False  # never written after init: may move in the background (Resizer.background)
    limit: Callable[[int], str | None] | None = None  # q -> why the data cannot spread over q (checks.data_limit)

    @property
    def local(self) -> np.ndarray:
        return self.dist.local

    @property
    def layout(self) -> Layout:
        return self.dist.layout

    def gather(self, root: int = 0) -> np.ndarray | None:
        """The whole global array on rank ``root`` of ``rt.comm`` (``None`` on the others).

        Collective: every rank must call it. It builds the full array in one
        process's memory, so it is meant for checks and output of small data.
        """
        return self.dist.gather(root)
