"""How a job ends: what the scheduler is told at :meth:`reshape.runtime.resizer.Resizer.finish`
(collective, after the last iteration), the ``done`` told at a plain exit, the exit after an in-place
recovery, and the reason told to the scheduler at an abort.

:class:`Ending` is the collaborator of :class:`reshape.runtime.resizer.Resizer` that owns the job's
line to the scheduler (its ``advisor``, rank 0's) and what it was last told.
"""

from __future__ import annotations

import os
import sys

from reshape.joblink import jobenv as E
from reshape.joblink.advice import Advisor

__all__ = ["Ending"]


class Ending:
    """The end of a job's run (see the module docstring). ``advisor``: rank 0's line to the scheduler
    (None on the other ranks; a survivor takes it over when rank 0 was lost, :mod:`reshape.runtime.recovery`)."""

    def __init__(self, advisor: Advisor | None):
        self.advisor = advisor
        self.finished = False  # finish() was called, or an abort reported (else rank 0 reports done at exit)
        self.status: str | None = None  # what finish() was told

    def begin(self, status: str) -> None:
        """``finish(status)`` was called: no ``done`` at exit, and the exit status follows ``status``."""
        self.finished = True
        self.status = status

    def tell(self, status: str, rank: int) -> None:
        """At :meth:`~reshape.runtime.resizer.Resizer.finish`, once every rank is there: rank 0 tells the
        scheduler the job ended with ``status``."""
        if rank == 0 and self.advisor:
            try:
                self.advisor.finished(status)
            except Exception as e:
                print(f"[reshape] advisor error at finish: {e}", file=sys.stderr, flush=True)

    def done_at_exit(self) -> None:
        """At a normal exit of rank 0 of a program that never called ``finish()``: tell the scheduler
        ``done``. Without it a clean exit could not be told from one Hydra reports as 0 after a rank of
        the job was killed (the scheduler restarts a checkpointed job that exits 0 unannounced)."""
        if not self.finished and self.advisor is not None:  # only rank 0 has one; no MPI call (finalized)
            self.finished = True
            try:
                self.advisor.finished("done")
            except Exception as e:
                print(f"[reshape] advisor error at exit: {e}", file=sys.stderr, flush=True)

    def exit_after_recovery(self, recovered: bool) -> None:
        """At the exit of a process that ``recovered`` from a lost rank (reshape.runtime.inplace): leave
        without ``MPI_Finalize``, whose fence in Open MPI 5.0.11 sometimes never completes once a rank of the
        job was lost (docs/mpi.md); ``mpirun --with-ft ulfm`` takes such an exit as a normal one. The exit
        status is the one ``finish()`` was told (0 for ``done``)."""
        if recovered:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(0 if self.status in (None, "done") else 1)

    def report_abort(self, reason: str, lost: bool = False) -> None:
        """Tell the scheduler (any rank may) why the job is being aborted; bounded, best effort.
        ``lost``: a process was lost mid-resize (status ``lost``: the job may be restarted from its checkpoint)."""
        status = "lost" if lost else "error"
        self.finished = True  # no "done" at exit after this
        if os.environ.get(E.SCHEDULER):
            from reshape.joblink.client import SchedulerClient

            env = {**os.environ, E.SCHEDULER_TIMEOUT: "2.0"}
            SchedulerClient.from_env(env).finished(status, reason)
        elif self.advisor is not None:
            self.advisor.finished(status, reason)
