"""The state every part of a resize reads and changes, and the steps over it that several parts share.

A resizable job's handle (:class:`reshape.runtime.resizer.Resizer`) is a façade over a few
collaborators, each made with what it needs (Sudarsan & Ribbens 2007 §3.2 names the steps):

* :class:`Job` (here): the communicator of the moment, the iteration, the registered arrays and
  values, the sizes run at and the seniority of every rank; :meth:`Job.replace_comm`,
  :meth:`Job.renumber` and :meth:`Job.positions` change or read them for every part;
* :class:`reshape.runtime.watchdog.Deadline`: the bound on one resize;
* :class:`reshape.runtime.sizing.Sizing`: the sizes the job accepts, announced to the scheduler;
* :class:`reshape.runtime.spawning.Joiner`: spawning new ranks, handing them the state, joining;
* :class:`reshape.runtime.parking.Parking`: retiring ranks, or parking them for a later expansion;
* :class:`reshape.runtime.background.Background`: expansions and shrinks behind the next iteration;
* :class:`reshape.runtime.ending.Ending`: what the scheduler is told when the job ends or aborts.

Each takes the :class:`Job` and the collaborators it calls in its constructor; none reaches
into another's fields. The dependencies run one way: Background -> Parking -> Joiner ->
Deadline, and every one of them -> Job.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from mpi4py import MPI

from reshape.mpiutil import release
from reshape.redistribution import placement
from reshape.redistribution.layout import Layout
from reshape.runtime import ftcomm
from reshape.runtime.darray import DistArray, Registered

__all__ = ["Job", "retire"]


@dataclass
class Job:
    """One process's view of the running job: what survives a resize, and where it lives now.

    ``comm`` is the job's communicator (a new one after every resize; an
    :class:`~reshape.runtime.ftcomm.FTComm` once ``inplace`` is on), ``iteration``
    the current iteration, ``values`` and ``arrays`` what the program registered,
    ``history`` the sizes run at, ``keys`` the seniority of every comm rank
    (:mod:`reshape.redistribution.placement`). ``in_body``: inside an iteration of
    ``rt.iterations()``; ``end``: the loop's iteration count when known.
    """

    comm: MPI.Intracomm
    method: str = "circulant"  # redistribution method: circulant | alltoallv | checkpoint
    relabel: bool = True  # positions go to the ranks that keep the most data (reshape.redistribution.placement)
    iteration: int = 0
    values: dict = field(default_factory=dict)
    arrays: dict[str, Registered] = field(default_factory=dict)
    history: list[int] = field(default_factory=list)  # sizes run at, in order
    joined: bool = False  # this process was spawned by a resize
    keys: list[placement.Seniority] = field(default_factory=list)  # seniority of every comm rank
    in_body: bool = False  # inside an iteration of rt.iterations()
    end: int | None = None  # the loop's iteration count, when the job uses iterations() or run()
    pending_arrays: dict[str, tuple[Layout, np.ndarray | None]] = field(default_factory=dict)  # a new rank's blocks
    checkpoint_dir: str | None = None  # a spawned rank: the running job's checkpoint directory (JoinState)
    inplace: bool = False  # a lost rank is recovered in place (RESHAPE_INPLACE, reshape.runtime.inplace)

    def __setattr__(self, name: str, value) -> None:
        """With in-place recovery on, every communicator the job is given is an :class:`FTComm` (blocking
        point-to-point a lost peer cannot crash: :mod:`reshape.runtime.ftcomm`)."""
        if name == "comm" and self.__dict__.get("inplace"):
            value = ftcomm.wrap(value)
        object.__setattr__(self, name, value)

    @property
    def size(self) -> int:
        return self.comm.size

    @property
    def rank(self) -> int:
        return self.comm.rank

    @property
    def next_iteration(self) -> int:
        """The iteration the job resumes at after this resize point (inside an iteration: the next one)."""
        return self.iteration + (1 if self.in_body else 0)

    def replace_comm(self, new: MPI.Intracomm) -> None:
        """Continue on ``new`` (an expansion's merged communicator; the arrays keep their blocks and
        positions) and release the old one."""
        old = self.comm
        self.comm = new
        for reg in self.arrays.values():
            reg.dist = DistArray(reg.dist.layout, reg.dist.local, new, reg.dist.ranks)
        release(old)

    def positions(self, q: int, candidates) -> tuple[int, ...]:
        """Rank 0: the comm rank of every position at size ``q`` (:func:`reshape.redistribution.placement.choose`)."""
        return placement.choose(((r.layout, r.rule(q), r.local.dtype.itemsize) for r in self.arrays.values()),
                                candidates, self.relabel)

    def renumber(self, ranks: tuple[int, ...], keys: list[placement.Seniority],
                 phase: Callable[[str], None]) -> None:
        """After the arrays moved to ``ranks``: make comm rank ``j`` the holder of position ``j``. Collective."""
        if tuple(ranks) == tuple(range(self.comm.size)):
            self.keys = list(keys)
            return
        phase("renumbering the ranks")
        new = placement.renumber(self.comm, ranks)
        old, self.comm = self.comm, new
        self.keys = [keys[r] for r in ranks]
        for reg in self.arrays.values():
            reg.dist = DistArray(reg.dist.layout, reg.dist.local, new, tuple(range(reg.dist.layout.nprocs)))
        old.Free()

    def settle_on(self, comm: MPI.Intracomm, ranks: tuple[int, ...]) -> None:
        """After a shrink to the positions held by ``ranks``: continue on ``comm``, renumbered to them."""
        self.comm = comm
        self.keys = [self.keys[r] for r in ranks]
        for reg in self.arrays.values():
            reg.dist = DistArray(reg.dist.layout, reg.dist.local, comm, tuple(range(len(ranks))))


def retire() -> None:
    """A retired rank leaves: finalize MPI and exit with status 0 (never returns)."""
    sys.stdout.flush()
    sys.stderr.flush()
    MPI.Finalize()
    raise SystemExit(0)
