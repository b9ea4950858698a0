"""Distributed arrays: a local numpy block, its layout and the ranks holding it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from mpi4py import MPI

from reshape.layout import Layout, block_cyclic_1d
from reshape.redistribute import redistribute

__all__ = ["DistArray", "gather", "scatter"]


@dataclass
class DistArray:
    """A global array distributed by ``layout`` over ``ranks`` of ``comm``.

    ``local`` is this rank's block (``None`` on ranks of ``comm`` outside
    ``ranks``). ``ranks[i]`` is the comm rank holding layout process ``i``.
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
            local = np.ascontiguousarray(np.asarray(fn(*np.ix_(*idx)), dtype=dtype))
            local = np.broadcast_to(local, tuple(len(i) for i in idx)).copy()
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
