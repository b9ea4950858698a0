"""How a job ends: :meth:`Ending.finish` (collective, after the last iteration), the ``done`` told at a
plain exit, the exit after an in-place recovery, and the reason told to the scheduler at an abort.

A mixin of :class:`reshape.runtime.resizer.Resizer`; it expects its communicator, advisor, checkpointer
and the background and parking halves (``_switch``, ``_release_parked``).
"""

from __future__ import annotations

import os
import sys

from reshape.joblink import jobenv as E
from reshape.mpiutil import allreduce, barrier

__all__ = ["Ending"]


class Ending:
    """The end of a job's run (see the module docstring)."""

    def finish(self, status: str = "done") -> None:
        """Tell the scheduler the job ended. Collective; call it once, after the last iteration.

        A background expansion or shrink still waiting for its switch completes
        first, so the ranks it spawned are not left waiting (a shrink's retiring
        ranks retire here: they do not return).
        """
        self._finished = True
        self._status = status
        if self._pending is not None:
            self.results.append(self._switch())
        if self._ckpt is not None:
            self._ckpt.close(self.comm)
        self._release_parked()
        if self._buddies is not None:  # what the buddy copies cost (reshape.runtime.inplace), slowest rank
            secs = allreduce(self.comm, self._buddies.seconds)
            if self.rank == 0:
                print(f"[reshape] buddy copies: {self._buddies.refreshes} made, {secs:.3f} s on the slowest rank",
                      file=sys.stderr, flush=True)
        barrier(self.comm)
        if self.rank == 0 and self.advisor:
            try:
                self.advisor.finished(status)
            except Exception as e:
                print(f"[reshape] advisor error at finish: {e}", file=sys.stderr, flush=True)


    def _done_at_exit(self) -> None:
        """At a normal exit of rank 0 of a program that never called :meth:`finish`: tell the scheduler
        ``done``. Without it a clean exit could not be told from one Hydra reports as 0 after a rank of
        the job was killed (the scheduler restarts a checkpointed job that exits 0 unannounced)."""
        if not self._finished and self.advisor is not None:  # only rank 0 has one; no MPI call (finalized)
            self._finished = True
            try:
                self.advisor.finished("done")
            except Exception as e:
                print(f"[reshape] advisor error at exit: {e}", file=sys.stderr, flush=True)

    def _exit_after_recovery(self) -> None:
        """At the exit of a process that recovered from a lost rank (reshape.runtime.inplace): leave without
        ``MPI_Finalize``, whose fence in Open MPI 5.0.11 sometimes never completes once a rank of the job
        was lost (docs/mpi.md); ``mpirun --with-ft ulfm`` takes such an exit as a normal one. The exit
        status is the one :meth:`finish` was told (0 for ``done``)."""
        if self.recoveries:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(0 if self._status in (None, "done") else 1)

    def _report_abort(self, reason: str, lost: bool = False) -> None:
        """Tell the scheduler (any rank may) why the job is being aborted; bounded, best effort.
        ``lost``: a process was lost mid-resize (status ``lost``: the job may be restarted from its checkpoint)."""
        status = "lost" if lost else "error"
        self._finished = True  # no "done" at exit after this
        if os.environ.get(E.SCHEDULER):
            from reshape.joblink.client import SchedulerClient

            env = {**os.environ, E.SCHEDULER_TIMEOUT: "2.0"}
            SchedulerClient.from_env(env).finished(status, reason)
        elif self.advisor is not None:
            self.advisor.finished(status, reason)
