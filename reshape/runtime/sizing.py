"""Which sizes a resizable job accepts, and announcing them to the scheduler (Sudarsan & Ribbens 2007 §3.1).

A mixin of :class:`reshape.runtime.resizer.Resizer`: the checks of a size that do not depend on the
moment (``max_procs``, the ``sizes`` test, a layout for every registered array:
:func:`reshape.runtime.checks.size_problem`), those that do (the direction, the sizes run at:
:func:`reshape.runtime.checks.resize_problem`), and the cap on growth where the MPI cannot grow further
for now (Open MPI across hosts, :data:`SECOND_SPAWN_OPEN_MPI`).
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
from reshape.mpiutil import open_mpi
from reshape.runtime import checks
from reshape.runtime.darray import Registered

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
    """The size checks of :class:`reshape.runtime.resizer.Resizer` (a mixin over its state, declared below)."""

    size: int
    history: list[int]  # sizes run at, in order
    advisor: Advisor | None
    arrays: dict[str, Registered]
    max_procs: int | None
    sizes: Callable[[int], bool] | None
    _announced: tuple | None  # what the sizes last announced were computed from
    _spawned_remote: bool  # an expansion of this job spawned onto another host

    def _check_size(self, q: int, action: str) -> str | None:
        """Why the job cannot ``action`` (expand or shrink) to ``q`` processes now, or None."""
        return checks.resize_problem(self, q, action)

    def _size_problem(self, q: int) -> str | None:
        """Why the job can never run on ``q`` processes (max_procs, the sizes test, an array's layout), or None."""
        return checks.size_problem(self, q)

    def legal_sizes(self, upto: int) -> list[int]:
        """The sizes in ``1..upto`` this job accepts, ascending.

        The checks a resize makes that do not depend on the moment: ``max_procs``,
        the ``sizes`` test and a layout for every registered array. Left out:
        the direction (an expansion must grow, a shrink must shrink) and the
        rule that a job shrinks only to sizes it has run at. Local, no
        communication. Rank 0 announces the result to the scheduler
        (``hello``'s ``sizes``, up to ``reshape.joblink.protocol.MAX_SIZES``), which
        then advises only sizes the job accepts.
        """
        return [q for q in range(1, upto + 1) if self._size_problem(q) is None]

    def _announce_sizes(self) -> None:
        """Rank 0: give the advisor the sizes this job accepts, again when arrays or ``max_procs`` changed."""
        announce = getattr(self.advisor, "announce_sizes", None)
        cap = self._growth_cap()
        key = (tuple(self.arrays), self.max_procs, self.sizes, cap)
        if announce is None or key == self._announced:
            return
        self._announced = key
        try:
            announce(self.legal_sizes(min(cap or self.max_procs or MAX_SIZES, MAX_SIZES)))
        except Exception as e:  # a sizes test that fails on some size must not stop the job
            print(f"[reshape] cannot announce the job's sizes: {type(e).__name__}: {e}", file=sys.stderr, flush=True)

    def _growth_cap(self) -> int | None:
        """The size this job may not grow past for now (:data:`SECOND_SPAWN_OPEN_MPI`: on Open MPI, while
        ranks of a spawn are in a job that spans hosts or spawned onto another host), else None."""
        start = self.history[0] if self.history else self.size
        if self.size > start and open_mpi() and (self._spawned_remote or _started_across_hosts()):
            return self.size
        return None
