"""Bounded resizes and prompt aborts: a failed resize never leaves a job hanging.

MPICH has no fault-tolerant communicators: once ranks are spawned, a rank
that dies or stops answering leaves the others blocked in ``MPI_Comm_spawn``,
``MPI_Intercomm_merge`` or a transfer that no call can cancel, and a rank
that raised leaves them waiting for it in ``MPI_Finalize``. The runtime
therefore treats every failure after the first process was started or the
first byte moved as fatal to the job, and makes it *prompt*:

* :class:`Watchdog`: a thread per process. The runtime arms it with a
  deadline when a resize starts (``RESHAPE_RESIZE_TIMEOUT`` seconds, default
  :data:`DEFAULT_TIMEOUT`; the daemon passes the job file's
  ``resize_timeout``) and disarms it when the resize is done. A resize still
  running at the deadline is aborted: the reason is printed and reported to
  the scheduler, then ``MPI_Abort`` ends every process of the job.
* :func:`abort`: the same for an error raised inside a resize, and (through
  :func:`install_excepthook`) for an exception that would otherwise end one
  rank while the others wait for it.
* :func:`fail_together`: a block of collective work (the SHARED programs and
  benchmark workers) whose exception on one rank aborts the whole run at once
  with that rank's message. An excepthook is too late there: a ``finally``
  that closes files and meets the other ranks at a barrier runs first, and
  hangs, since the others wait in a collective of the failed block.

``MPI_Abort`` makes the process manager (Hydra, Slurm) kill every process of
the job, including ranks spawned on other nodes; if it has not ended the
process ``ABORT_GRACE`` seconds later, the process exits by itself. The
scheduler settles the job as failed with the reported reason and frees its
slots (``scheduler.core.state``); it also enforces the deadline itself, in case
no rank could report.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator

from reshape.joblink import jobenv as E

__all__ = ["ABORT_CODE", "DEFAULT_TIMEOUT", "ENV_TIMEOUT", "Deadline", "Watchdog", "abort", "fail_together",
           "install_excepthook", "resize_timeout"]

ENV_TIMEOUT = E.RESIZE_TIMEOUT
DEFAULT_TIMEOUT = E.RESIZE_TIMEOUT_DEFAULT  # seconds for one whole resize (spawn, merge, redistribution)
ABORT_CODE = 75
ABORT_GRACE = 5.0  # seconds MPI_Abort gets before the process exits by itself

Reporter = Callable[..., None]  # report(reason, lost=False); lost: a process was lost, not the program's error


def resize_timeout(env: dict[str, str] | None = None) -> float:
    """``RESHAPE_RESIZE_TIMEOUT`` in seconds (> 0); ValueError naming the variable otherwise."""
    env = os.environ if env is None else env
    text = env.get(ENV_TIMEOUT, "")
    if not text:
        return DEFAULT_TIMEOUT
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value > 0 or value == float("inf"):
        raise ValueError(f"{ENV_TIMEOUT}={text!r}: expected a number of seconds > 0")
    return value


def abort(reason: str, report: Reporter | None = None, code: int = ABORT_CODE, lost: bool = False) -> None:
    """Print ``reason``, tell the scheduler (best effort, bounded), end the whole job. Does not return.
    ``lost``: a process of the job was lost (a resize could not complete): the scheduler may restart
    the job from its checkpoint; otherwise the program failed."""
    print(f"[reshape] aborting the job: {reason}", file=sys.stderr, flush=True)
    if report is not None:
        try:
            report(reason, lost=lost)
        except Exception as e:  # the scheduler may be gone too: the abort must happen anyway
            print(f"[reshape] could not report the abort: {e}", file=sys.stderr, flush=True)
    threading.Thread(target=_exit_later, name="reshape-abort-grace", daemon=True).start()
    from mpi4py import MPI

    MPI.COMM_WORLD.Abort(code)
    os._exit(code)  # pragma: no cover - Abort does not return


def _exit_later() -> None:
    time.sleep(ABORT_GRACE)
    print("[reshape] MPI_Abort did not end the process; exiting", file=sys.stderr, flush=True)
    os._exit(ABORT_CODE)


class Watchdog:
    """Aborts the job if an armed deadline passes (see module docstring)."""

    def __init__(self, report: Reporter | None = None):
        self.report = report
        self._cond = threading.Condition()
        self._deadline: float | None = None
        self._what = ""
        self._step = ""
        self._timeout = 0.0
        self._thread: threading.Thread | None = None

    def arm(self, what: str, timeout: float) -> None:
        """Start the clock for ``what`` (e.g. ``"expand 2->4"``): ``timeout`` seconds from now."""
        with self._cond:
            self._deadline = time.monotonic() + timeout
            self._timeout = timeout
            self._what = what
            self._step = ""
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="reshape-watchdog", daemon=True)
                self._thread.start()
            self._cond.notify()

    def phase(self, step: str) -> None:
        """Name the step under way (it goes into the abort reason); the deadline stays."""
        with self._cond:
            self._step = step

    def disarm(self) -> None:
        with self._cond:
            self._deadline = None
            self._cond.notify()

    @property
    def step(self) -> str:
        """The step under way (``phase``), or ``""``."""
        return self._step

    def _run(self) -> None:
        with self._cond:
            while True:
                if self._deadline is None:
                    self._cond.wait()
                    continue
                left = self._deadline - time.monotonic()
                if left > 0:
                    self._cond.wait(left)
                    continue
                step = f", stuck {self._step}" if self._step else ""
                reason = (f"{self._what} did not complete within {self._timeout:g} s ({ENV_TIMEOUT}{step}); "
                          "a rank of the job is dead or unreachable")
                break
        abort(reason, self.report, lost=True)


class Deadline:
    """The bound on one resize, shared by every part of it (:class:`reshape.runtime.resizer.Resizer` and
    its collaborators): :meth:`arm` when a resize starts, :meth:`phase` at each step (it names the step
    in an abort's reason), :meth:`disarm` when it is done, :meth:`abort` when it failed once processes or
    data were in motion. ``timeout``: the seconds one resize may take; ``report`` tells the scheduler why
    the job is being aborted. The job's one :class:`Watchdog` is made at its first resize.
    """

    def __init__(self, timeout: float, report: Reporter):
        self.timeout = timeout
        self.report = report
        self.dog: Watchdog | None = None

    def arm(self, what: str) -> None:
        if self.dog is None:
            self.dog = Watchdog(self.report)
        self.dog.arm(what, self.timeout)
        self.dog.phase("starting")

    def phase(self, name: str) -> None:
        if self.dog is not None:
            self.dog.phase(name)

    def disarm(self) -> None:
        if self.dog is not None:
            self.dog.disarm()

    def abort(self, what: str, e: BaseException, rank: int) -> None:
        """A resize failed on ``rank`` once processes or data were in motion: abort the whole job, saying
        why (never returns)."""
        abort(f"{what} failed on rank {rank} ({self.dog.step}): {type(e).__name__}: {e}", self.report, lost=True)
        raise e  # not reached: abort ends the process


def install_excepthook(report: Reporter | None = None, rank: Callable[[], int] | None = None) -> None:
    """An uncaught exception on any rank aborts the job (with the reason reported) instead of
    leaving the other ranks waiting for this one forever. ``RESHAPE_ABORT_ON_ERROR=0`` opts out."""
    try:
        if not E.flag(E.ABORT_ON_ERROR, True):
            return
    except ValueError:  # refused with the other variables by reshape.runtime.checks; abort meanwhile
        pass
    previous = sys.excepthook

    def hook(kind, value, tb):
        if issubclass(kind, KeyboardInterrupt | SystemExit):
            previous(kind, value, tb)
            return
        traceback.print_exception(kind, value, tb, file=sys.stderr)
        who = f"rank {rank()}" if rank else f"pid {os.getpid()}"
        abort(f"{who}: uncaught {kind.__name__}: {value}", report)

    sys.excepthook = hook


@contextlib.contextmanager
def fail_together(rank: int, cleanup: Callable[[], None] | None = None,
                  report: Reporter | None = None) -> Iterator[None]:
    """Collective work in which an exception on one rank ends every rank of the run at once.

    The failing rank prints its traceback, runs ``cleanup`` (best effort: e.g.
    remove the run's scratch files, which nobody else will), and aborts the job
    with ``rank R: ErrorType: message`` (:func:`abort`, exit code
    :data:`ABORT_CODE`); the others are ended by ``MPI_Abort`` wherever they
    wait. Cleanup that needs every rank (a barrier, collective closes) belongs
    after the block, not in a ``finally`` inside it. ``KeyboardInterrupt`` and
    ``SystemExit`` pass through.
    """
    try:
        yield
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as e:
        traceback.print_exc(file=sys.stderr)
        if cleanup is not None:
            try:
                cleanup()
            except Exception as c:
                print(f"[reshape] cleanup before the abort failed: {c}", file=sys.stderr, flush=True)
        abort(f"rank {rank}: {type(e).__name__}: {e}", report)
