"""Starting a resizable job: :func:`init`, on the ranks ``mpiexec`` started and on spawned ones.

Reads the job's settings (``RESHAPE_*``, checked on every rank: :func:`reshape.runtime.checks.job_settings`),
makes the process's :class:`reshape.runtime.resizer.Resizer`, joins a running job on a spawned rank
(:mod:`reshape.runtime.spawning`), resumes from a checkpoint (:mod:`reshape.runtime.checkpoint`) and
turns on in-place recovery (:mod:`reshape.runtime.inplace`) where asked.
"""

from __future__ import annotations

import atexit
import contextlib
import io
import sys
import time
from collections.abc import Callable

from mpi4py import MPI

from reshape import mpiutil
from reshape.joblink import jobenv as E
from reshape.joblink import launchers
from reshape.joblink.advice import Advisor, advisor_from_env
from reshape.mpiutil import barrier, open_mpi
from reshape.redistribution import placement
from reshape.runtime import checkpoint, checks
from reshape.runtime.inplace import Buddies
from reshape.runtime.resizer import Resizer
from reshape.runtime.spawning import process_start, unspawnable
from reshape.runtime.watchdog import install_excepthook

__all__ = ["NO_PARKING_OPEN_MPI", "init", "whole_lines"]

_RUNTIME: Resizer | None = None
# Open MPI 5.0.11: a parked rank's MPI_Finalize, once the job ends, crashes in its dynamic-process teardown
NO_PARKING_OPEN_MPI = "a parked rank's MPI_Finalize crashes in Open MPI 5.0 (docs/mpi.md)"


def whole_lines() -> None:
    """Each line this process prints reaches its output in one ``write``. Jobs run with ``PYTHONUNBUFFERED=1``
    (``reshape.joblink.launch.mpi_env``), where ``print("a", r)`` writes each piece on its own and the pieces of
    several ranks interleave mid-line in the job's output (all ranks share ``mpiexec``'s); an unbuffered standard
    output or error becomes line-buffered (a line, or a longer ``print``, is held until its newline: nothing
    waits longer than a line, as under ``PYTHONUNBUFFERED``). A stream the program buffers itself is left alone."""
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper) and stream.write_through:
            with contextlib.suppress(ValueError, OSError):  # closed, or not a stream that can change
                stream.reconfigure(line_buffering=True, write_through=False)


def _parking(reuse: bool, standby: int, spawned: bool) -> tuple[bool, int]:
    """``reuse`` and ``standby`` as this launcher and MPI allow them (each dropped with a line on rank 0)."""
    launcher = launchers.from_env()
    no_parking = (f"the {launcher.name} launcher: {launcher.no_parking}" if launcher.no_parking else
                  f"Open MPI: {NO_PARKING_OPEN_MPI}" if open_mpi() else None)
    if reuse and no_parking:
        if MPI.COMM_WORLD.rank == 0 and not spawned:
            print(f"[reshape] {E.REUSE}=1{' and standby ranks' if standby else ''} ignored under "
                  f"{no_parking}", file=sys.stderr, flush=True)
        reuse, standby = False, 0
    if standby and (why := unspawnable()):
        if MPI.COMM_WORLD.rank == 0:
            print(f"[reshape] {E.STANDBY}={standby} ignored: {why}", file=sys.stderr, flush=True)
        standby = 0
    return reuse, standby


def _go_inplace(rt: Resizer, buddy_every) -> None:
    """Recover lost ranks in place (:mod:`reshape.runtime.inplace`): errors come back as exceptions."""
    rt.inplace = True
    rt.comm = rt.comm  # now an FTComm (reshape.runtime.ftcomm)
    atexit.register(lambda: rt._ending.exit_after_recovery(bool(rt.recoveries)))  # runs after every other handler
    rt.comm.Set_errhandler(MPI.ERRORS_RETURN)
    mpiutil.watch(rt)
    rt._buddies = Buddies(buddy_every)


def init(
    advisor: Advisor | None = None,
    *,
    allow_new_sizes: bool | None = None,
    sizes: Callable[[int], bool] | None = None,
    max_procs: int | None = None,
    background: bool | None = None,
    reuse: bool | None = None,
    standby: int | None = None,
) -> Resizer:
    """Start (or, on a spawned rank, join) the resizable job. Call once per process.

    ``advisor`` defaults to :func:`reshape.joblink.advice.advisor_from_env` (the daemon
    when it started the job, else ``RESHAPE_PLAN``, else static).
    ``allow_new_sizes`` (default from ``RESHAPE_ALLOW_NEW_SIZES=1``) lets a job
    shrink to sizes it has not run at; ``max_procs`` (default from
    ``RESHAPE_MAX_PROCS``) caps expansions; ``sizes`` is an extra legality test.
    ``RESHAPE_REDIST_METHOD`` picks the redistribution method (default
    ``circulant``; ``checkpoint`` and ``alltoallv`` are the baselines).
    ``background`` (default from ``RESHAPE_BACKGROUND=1``) moves the arrays
    registered ``constant=True`` while the job keeps iterating on its old
    ranks after an expansion (:meth:`Resizer.resize`). ``reuse`` (default from
    ``RESHAPE_REUSE=1``) parks the ranks a shrink retires and calls them back at
    a later expansion instead of spawning (:mod:`reshape.runtime.parking`).
    ``standby`` (default from ``RESHAPE_STANDBY``, 0; needs reuse) spawns that
    many ranks at start that park at once, so that the first expansion calls
    them back too.
    ``RESHAPE_RESIZE_TIMEOUT`` bounds each resize (seconds, default 120): a
    resize still under way then aborts the job with the reason reported, as
    does an uncaught exception on any rank (``RESHAPE_ABORT_ON_ERROR=0``
    keeps Python's default); see :mod:`reshape.runtime.watchdog`.
    """
    global _RUNTIME
    if _RUNTIME is not None:
        return _RUNTIME
    whole_lines()
    parent = MPI.Comm.Get_parent()
    if parent != MPI.COMM_NULL:  # new ranks arrive one by one (reshape.runtime.spawned): the first ones sleep
        barrier(MPI.COMM_WORLD)
    cfg = checks.job_settings(MPI.COMM_WORLD, parent != MPI.COMM_NULL, max_procs=max_procs, reuse=reuse,
                              standby=standby)  # and RESHAPE_*
    allow_new_sizes = cfg.allow_new_sizes if allow_new_sizes is None else allow_new_sizes
    max_procs = cfg.max_procs if max_procs is None else max_procs
    method, timeout, job_id, relabel = cfg.method, cfg.resize_timeout, cfg.job_id, cfg.relabel
    background = cfg.background if background is None else background
    reuse = cfg.reuse if reuse is None else reuse
    standby = int(cfg.standby if standby is None else standby)
    reuse, standby = _parking(reuse, standby, spawned=parent != MPI.COMM_NULL)
    if parent != MPI.COMM_NULL:
        called = time.time()
        rt = Resizer(MPI.COMM_WORLD, None, job_id, allow_new_sizes, sizes, max_procs, method, timeout, background,
                     relabel, reuse)
        rt.inplace = cfg.inplace  # a loss while it joins undoes the expansion (reshape.runtime.recovery)
        install_excepthook(rt._ending.report_abort, lambda: rt.rank)
        rt._join(parent, started=(process_start(), called))
    else:
        comm = MPI.COMM_WORLD.Dup()
        adv = None
        if comm.rank == 0:
            adv = advisor if advisor is not None else advisor_from_env()
        rt = Resizer(comm, adv, job_id, allow_new_sizes, sizes, max_procs, method, timeout, background, relabel,
                     reuse)
        rt._job.keys = [(0, r) for r in range(comm.size)]
        if reuse and comm.rank == 0:
            atexit.register(rt._parking.release)  # parked ranks must not outlive a program that skips finish()
        install_excepthook(rt._ending.report_abort, lambda: rt.rank)
        atexit.register(rt._ending.done_at_exit)
        if standby:
            rt._joiner.start_standby(standby)
        if adv is not None and relabel:  # every method relabels (reshape.redistribution.placement)
            placement.prefetch()  # the solver's import (scipy) runs during the first iterations, not in a resize
        checkpoint.resume(rt, cfg)
    rt._ckpt = checkpoint.from_settings(rt.comm, cfg, job_id, spawned=rt.joined, directory=rt.checkpoint_dir)
    if rt._ckpt is not None:  # runs before done_at_exit and the parked ranks' release (atexit is LIFO)
        atexit.register(rt._ckpt.at_exit)
    if cfg.inplace:  # reshape.runtime.inplace: errors come back as exceptions, copies refreshed by run()
        _go_inplace(rt, cfg.buddy_every)
    rt._plan = None if rt.joined else cfg.plan
    _RUNTIME = rt
    return rt
