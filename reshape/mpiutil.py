"""Small MPI helpers: polite waiting, numpy <-> MPI datatypes, collective error checks.

Why polite waiting: MPICH busy-polls inside blocking calls. On an
oversubscribed node (more ranks than cores, common in development, tests and
while a job is being resized) the pollers steal the CPU from the ranks doing
real work; on this project's 2-core test machine a computing rank with five
ranks waiting in ``MPI_Barrier`` ran 3x slower, and MPICH's
``MPIR_CVAR_POLLS_BEFORE_YIELD`` / ``MPIR_CVAR_CH4_PROGRESS_THROTTLE`` did not
help. Waiting with ``MPI_Test`` plus an exponentially growing sleep (capped at
``max_sleep``) gives the core back; everything in ``reshape`` that may wait for
long waits this way.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable

import numpy as np
from mpi4py import MPI
from mpi4py.util import dtlib

__all__ = ["CollectiveError", "abandon", "allreduce", "barrier", "bcast_obj", "check_collectively", "mpi_type",
           "open_mpi", "release", "until", "wait", "wait_all", "wait_any", "watch", "watched"]

MAX_SLEEP = 1e-3
_WATCHED: list = [None]  # the job's communicator when lost ranks are recovered in place (watch)
_ABANDONED: list = []  # requests an error left pending (abandon)


def abandon(reqs, buffers=()) -> None:
    """Keep the requests of ``reqs`` that are still pending (and their buffers), and ``buffers``, for the
    life of the process.

    An error (a lost rank, with in-place recovery) can end a wait with requests still pending. A
    request object that is garbage-collected is freed (``MPI_Request_free``), and in Open MPI 5.0.11
    a freed request that later fails aborts the job ("Send error after request freed", fatal on no
    communicator); its buffer may also still be written. So they are never let go. A few per recovery.
    ``buffers``: the memory of requests an error completed (``MPI_ERR_REVOKED``, the request set to
    ``MPI_REQUEST_NULL`` and its buffer let go by mpi4py) while Open MPI's ``ob1`` still moves it: a
    live receiver's rendezvous acknowledgement makes the sender read its buffer after the revocation
    (a segmentation fault in ``mca_pml_ob1_send_request_schedule_once`` once the buffer was unmapped).
    """
    _ABANDONED.extend(r for r in reqs if r is not None and r != MPI.REQUEST_NULL)
    _ABANDONED.extend(b for b in buffers if b is not None)


def watch(holder) -> None:
    """With in-place recovery (:mod:`reshape.runtime.inplace`): :func:`wait_all` raises
    ``MPI_ERR_REVOKED`` once ``holder.comm`` (the job's communicator of the moment: read at each
    check, as a resize replaces it) is revoked, so that a rank waiting on a communicator of its own
    (split from it) learns that another rank saw a peer fail. ``None`` stops watching."""
    _WATCHED[0] = holder


def watched() -> bool:
    """Whether in-place recovery watches the job's communicator in this process (:func:`watch`)."""
    return _WATCHED[0] is not None


def _revoked() -> None:
    comm = getattr(_WATCHED[0], "comm", None)
    if comm is not None and comm != MPI.COMM_NULL and comm.Is_revoked():
        raise MPI.Exception(MPI.ERR_REVOKED)


class CollectiveError(RuntimeError):
    """Raised identically on every rank when any rank found a problem."""


@functools.cache
def open_mpi() -> bool:
    """True when the MPI library loaded is Open MPI (:mod:`reshape.joblink.mpis`; MPICH otherwise)."""
    return MPI.Get_library_version().startswith("Open MPI")


def release(comm: MPI.Comm) -> None:
    """Let go of a communicator the job no longer uses: ``MPI_Comm_disconnect`` on MPICH (waits for
    its pending messages); ``MPI_Comm_free`` on Open MPI, whose 5.0 disconnect of a communicator
    joining ranks of several spawns hangs (every pending message is complete where this is called)."""
    if open_mpi():
        comm.Free()
    else:
        comm.Disconnect()


def _testall(reqs: list[MPI.Request], statuses: list | None = None) -> bool:
    """``MPI_Testall``; an ``MPI_ERR_IN_STATUS`` is raised as the first request's own error (a lost
    peer's ``MPI_ERR_PROC_FAILED``, for :mod:`reshape.runtime.inplace`). ``statuses``: one
    ``MPI.Status`` (or None) per request, filled when they complete."""
    mine = [st if st is not None else MPI.Status() for st in statuses] if statuses else [MPI.Status() for _ in reqs]
    try:
        return MPI.Request.Testall(reqs, mine)
    except MPI.Exception as e:
        if e.Get_error_class() != MPI.ERR_IN_STATUS:
            raise
        codes = [st.Get_error() for st in mine]
        raise MPI.Exception(next((c for c in codes if c not in (MPI.SUCCESS, MPI.ERR_PENDING)),
                                 MPI.ERR_IN_STATUS)) from None


def until(done: Callable[[], bool], max_sleep: float = MAX_SLEEP, spins: int = 0) -> None:
    """Return once ``done()`` is true: it is asked ``spins`` times in a row, then between sleeps that
    grow from 1 µs to ``max_sleep``. With in-place recovery watching (:func:`watch`), a revoked job
    communicator ends the wait with ``MPI_ERR_REVOKED``. Every wait of reshape's is one of these."""
    for _ in range(spins + 1):
        if done():
            return
    delay = 1e-6
    while not done():
        if _WATCHED[0] is not None:
            _revoked()
        time.sleep(delay)
        delay = min(delay * 2, max_sleep)


def wait_all(reqs: list[MPI.Request], max_sleep: float = MAX_SLEEP, statuses: list | None = None,
             spins: int = 0) -> None:
    """``MPI_Waitall`` that sleeps instead of spinning (:func:`until`)."""
    if not reqs:
        return
    try:
        until(lambda: _testall(reqs, statuses), max_sleep, spins)
    except BaseException:
        abandon(reqs)
        raise


def wait_any(reqs: list[MPI.Request], max_sleep: float = MAX_SLEEP) -> None:
    """Sleep until one of ``reqs`` completes (return at once when none is pending)."""
    until(lambda: (done := MPI.Request.Testsome(reqs)) is None or bool(done), max_sleep)  # None: every one is done


def wait(req: MPI.Request, max_sleep: float = MAX_SLEEP) -> None:
    wait_all([req], max_sleep)


def barrier(comm: MPI.Comm, max_sleep: float = MAX_SLEEP) -> None:
    """``MPI_Barrier`` that sleeps instead of spinning (blocking on Open MPI: see :func:`allreduce`)."""
    if open_mpi():
        comm.Barrier()
        return
    wait(comm.Ibarrier(), max_sleep)


def allreduce(comm: MPI.Comm, value, op: MPI.Op = MPI.MAX, max_sleep: float = MAX_SLEEP):
    """An ``MPI_Allreduce`` of a float (returned as a float) or of a small float array (returned as an
    array) that sleeps instead of spinning while waiting.

    On Open MPI the blocking call: its ranks yield while they wait (``mpi_yield_when_idle``,
    :mod:`reshape.joblink.mpis`), and in ``apps.mm`` under Open MPI 5.0.11 about one run in five
    had an ``MPI_Iallreduce`` here return its output buffer unwritten (every rank gave 1.0 to a
    MIN, the result read 0.0); the blocking call never did in the same runs (docs/mpi.md)."""
    scalar = np.ndim(value) == 0
    mine = np.array([float(value)]) if scalar else np.asarray(value, dtype=np.float64)
    out = np.zeros_like(mine)
    if open_mpi():
        comm.Allreduce(mine, out, op)
    else:
        wait(comm.Iallreduce(mine, out, op), max_sleep)
    return float(out[0]) if scalar else out


def mpi_type(dtype: np.dtype) -> MPI.Datatype:
    """The predefined MPI datatype of a numpy dtype."""
    try:
        return dtlib.from_numpy_dtype(np.dtype(dtype))
    except (ValueError, KeyError, TypeError) as e:
        raise TypeError(f"no MPI datatype for numpy dtype {np.dtype(dtype)}") from e


def check_collectively(comm: MPI.Comm, problem: str | None, what: str = "operation") -> None:
    """Raise :class:`CollectiveError` on every rank if any rank reports a problem.

    A collective, so every rank of ``comm`` must call it; it never hangs
    because one rank failed a local check.
    """
    problems = comm.allgather(problem)
    bad = [(r, p) for r, p in enumerate(problems) if p]
    if bad:
        detail = "; ".join(f"rank {r}: {p}" for r, p in bad[:8])
        more = f" (and {len(bad) - 8} more)" if len(bad) > 8 else ""
        raise CollectiveError(f"{what} refused: {detail}{more}")


def bcast_obj(comm: MPI.Comm, obj=None, root: int = 0, max_sleep: float = MAX_SLEEP):
    """``comm.bcast`` of a picklable object that sleeps instead of spinning while waiting."""
    import pickle

    if open_mpi():  # blocking on Open MPI, as allreduce
        return comm.bcast(obj, root)
    if comm.rank == root:
        data = np.frombuffer(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL), dtype=np.uint8)
        n = np.array([data.size], dtype=np.int64)
    else:
        n = np.zeros(1, dtype=np.int64)
    wait(comm.Ibcast(n, root), max_sleep)
    if comm.rank != root:
        data = np.empty(int(n[0]), dtype=np.uint8)
    wait(comm.Ibcast(data, root), max_sleep)
    return obj if comm.rank == root else pickle.loads(data.tobytes())
