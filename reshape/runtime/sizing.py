"""Which sizes a resizable job accepts, announcing them to the scheduler, and the checks a resize makes
before anything moves (Sudarsan & Ribbens 2007 §3.1).

A collaborator of :class:`reshape.runtime.resizer.Resizer`: the checks of a size that do not depend on the
moment (``max_procs``, the ``sizes`` test, a layout for every registered array:
:func:`reshape.runtime.checks.size_problem`), those that do (the direction, the sizes run at:
:func:`reshape.runtime.checks.resize_problem`), and the cap on growth where the MPI cannot grow further
for now (Open MPI across hosts, :data:`SECOND_SPAWN_OPEN_MPI`); then, agreed on every rank, an
expansion's parked ranks to call back and hosts probed (:meth:`Sizing.new_ranks`) and a shrink's
placement (:meth:`Sizing.staying`).
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable

from reshape.joblink import jobenv as E
from reshape.joblink import launchers
from reshape.joblink.advice import Advisor
from reshape.joblink.protocol import MAX_SIZES
from reshape.mpiutil import bcast_obj, open_mpi
from reshape.redistribution import placement
from reshape.runtime import checks
from reshape.runtime.darray import Registered
from reshape.runtime.job import Job
from reshape.runtime.parking import CallBack, Reserve
from reshape.runtime.results import ResizeError
from reshape.runtime.spawning import check_hosts, unspawnable

__all__ = ["SECOND_SPAWN_OPEN_MPI", "Sizing"]


@functools.cache
def _started_across_hosts() -> bool:
    """Whether the job started on hosts other than this one (``RESHAPE_HOSTS``)."""
    return any(not launchers.is_local(h) for h in os.environ.get(E.HOSTS, "").split(",") if h)


#: Open MPI 5.0.11 across hosts: a rank of the job's first spawn cannot be reached by the ranks of a second
#: one (their PMIx data is not found; the TCP transport aborts the job), docs/mpi.md
SECOND_SPAWN_OPEN_MPI = ("on Open MPI across hosts a job grows by one spawn at a time: it grows again once it "
                         "is back at its starting size (Open MPI 5.0 cannot connect two spawned groups over TCP; "
                         "docs/mpi.md)")


class Sizing:
    """The size checks of a job (see the module docstring), over its :class:`~reshape.runtime.job.Job`.

    ``max_procs``, ``sizes`` (an extra test ``p -> bool``) and ``allow_new_sizes`` are the job's rules
    and may change while it runs.
    ``spawned_remote``: an expansion of this job spawned onto another host (rank 0's view).
    """

    def __init__(self, job: Job, max_procs: int | None = None, sizes: Callable[[int], bool] | None = None,
                 allow_new_sizes: bool = False):
        self.job = job
        self.max_procs = max_procs
        self.sizes = sizes
        self.allow_new_sizes = allow_new_sizes
        self.spawned_remote = False
        self._announced: tuple | None = None  # what the sizes last announced were computed from

    @property
    def size(self) -> int:
        return self.job.size

    @property
    def history(self) -> list[int]:
        return self.job.history

    @property
    def arrays(self) -> dict[str, Registered]:
        return self.job.arrays

    def check(self, q: int, action: str) -> str | None:
        """Why the job cannot ``action`` (expand or shrink) to ``q`` processes now, or None."""
        return checks.resize_problem(self, q, action)

    def legal_sizes(self, upto: int) -> list[int]:
        """The sizes in ``1..upto`` this job accepts, ascending (:meth:`reshape.runtime.Resizer.legal_sizes`)."""
        return [q for q in range(1, upto + 1) if checks.size_problem(self, q) is None]

    def announce(self, advisor: Advisor | None) -> None:
        """Rank 0: give ``advisor`` the sizes this job accepts, again when arrays or ``max_procs`` changed."""
        announce = getattr(advisor, "announce_sizes", None)
        cap = self.growth_cap()
        key = (tuple(self.arrays), self.max_procs, self.sizes, cap)
        if announce is None or key == self._announced:
            return
        self._announced = key
        try:
            announce(self.legal_sizes(min(cap or self.max_procs or MAX_SIZES, MAX_SIZES)))
        except Exception as e:  # a sizes test that fails on some size must not stop the job
            print(f"[reshape] cannot announce the job's sizes: {type(e).__name__}: {e}", file=sys.stderr, flush=True)

    def growth_cap(self) -> int | None:
        """The size this job may not grow past for now (:data:`SECOND_SPAWN_OPEN_MPI`: on Open MPI, while
        ranks of a spawn are in a job that spans hosts or spawned onto another host), else None."""
        start = self.history[0] if self.history else self.size
        if self.size > start and open_mpi() and (self.spawned_remote or _started_across_hosts()):
            return self.size
        return None

    def new_ranks(self, nprocs: int, hosts, reserve: Reserve | None) -> CallBack | None:
        """An expansion's checks (collective): the parked ranks of ``reserve`` to call back and the rest to
        spawn (a parked rank fits: :meth:`~reshape.runtime.parking.Reserve.pick`; ``reserve`` None: reuse
        off), or ``None`` to spawn them all; ResizeError on every rank if refused (hosts to spawn on are
        probed now, before anything changes)."""
        problem = self.check(nprocs, "expand") if self.job.rank == 0 else None
        if problem is None and self.job.rank == 0 and self.growth_cap() is not None:
            problem = SECOND_SPAWN_OPEN_MPI
        back = None
        if self.job.rank == 0 and problem is None:
            back = reserve.pick(nprocs - self.size, hosts) if reserve is not None else None
            if back is None or back.rest:  # ranks to spawn: they must be able to run the program
                problem = unspawnable()
            if problem is None and back is None:
                problem = check_hosts(hosts, nprocs - self.size)
            elif problem is None and back.rest:
                problem = check_hosts(back.rest_hosts, back.rest)
        problem, back = bcast_obj(self.job.comm, (problem, back))
        if problem:
            raise ResizeError(problem)
        return back

    def staying(self, nprocs: int) -> tuple[int, ...]:
        """A shrink's checks and placement: the comm rank of every position at ``nprocs``. Collective.

        Raises :class:`ResizeError` on every rank when the shrink is refused.
        """
        problem, ranks = (self.check(nprocs, "shrink"), ()) if self.job.rank == 0 else (None, ())
        if self.job.rank == 0 and problem is None:
            ranks = self.job.positions(nprocs, placement.staying(self.job.keys, nprocs))
        problem, ranks = bcast_obj(self.job.comm, (problem, ranks))
        if problem:
            raise ResizeError(problem)
        return tuple(ranks)
