"""The resize runtime: grow and shrink a running MPI job at iteration boundaries (Sudarsan & Ribbens 2007 §3.2).

An application registers the global arrays and values that must survive a
resize, and calls :meth:`Resizer.resize` at the end of each iteration::

    from reshape import runtime

    rt = runtime.init()
    A = rt.register_array("A", (n, n), layout="2d", block=(64, 64), init=lambda i, j: ...)
    for it in rt.iterations(20):
        t0 = time.perf_counter()
        step(A.local, rt.comm)            # A.local / rt.comm change across resizes
        rt.log(time.perf_counter() - t0)
        rt.resize()                       # expand, shrink or continue
    rt.finish()

**Expansion** (``expand_processors`` + ``redistribute``): rank 0 spawns the
new ranks with ``MPI_Comm_spawn_multiple`` (one command per target host, MPI
Info ``host``; :func:`reshape.runtime.spawning.spawn`), the running ranks join them
and merge the intercommunicator into one
intracommunicator (old ranks first), and rank 0 sends the new ranks the
registered state (iteration counter, values, array descriptions). Then every
registered array moves to its layout at the new size with the circulant
engine. New ranks run the same program: :func:`init` notices it was spawned,
joins, receives its blocks, and the program's loop resumes at the next
iteration (``rt.iterations`` starts there).

**Shrink** (``shrink_processors``): arrays move to the first ``q`` ranks,
``MPI_Comm_split`` makes the smaller communicator, every rank disconnects the
old one, and the retired ranks finalize MPI and leave with exit status 0
(``SystemExit(0)`` raised from ``resize``). By default a job shrinks only to a
size it has run at (Sudarsan & Ribbens 2007 §3.1); such a shrink always retires whole spawn
groups, so retired ranks exit at once. Shrinking to a new size is possible
(``allow_new_sizes=True``); then a retired rank whose spawn group (or, for an
original rank, ``mpiexec``'s ``MPI_COMM_WORLD``) keeps running members stays
parked inside ``MPI_Finalize`` (no CPU) until those members finish, because
MPI_Finalize is collective over connected processes.

**Failures.** A resize refused before any process is started or any byte
moves (unknown or unreachable host, spawn error, impossible size for a
layout, a shrink to a size never run at, an expansion of a program new ranks
cannot run, e.g. ``python -c``) is reported on rank 0's stderr and
to the advisor; the job carries on with its current processes and intact
data. A failure after that point (a rank that dies or raises, a spawn,
merge or transfer that does not complete within ``RESHAPE_RESIZE_TIMEOUT``)
aborts the whole job at once, with the reason reported to the scheduler
(:mod:`reshape.runtime.watchdog`): MPICH cannot shrink a communicator around a lost
rank, and waiting would leave the job holding its slots forever. On Open MPI with
``RESHAPE_INPLACE=1`` a job looping with :meth:`Resizer.run` instead recovers from a lost rank in
place, as a shrink (:mod:`reshape.runtime.inplace`).

The redistribution time of each resize is measured (slowest rank) and sent
with the next resize point's report, as the paper does.
"""

from __future__ import annotations

import socket
import sys
import time
from collections.abc import Callable, Iterator

import numpy as np
from mpi4py import MPI

from reshape import faults
from reshape.joblink import launchers
from reshape.joblink.advice import Advisor
from reshape.joblink.protocol import Advice, ResizePoint
from reshape.mpiutil import allreduce, barrier, bcast_obj
from reshape.redistribution.layout import nearly_square_grid
from reshape.redistribution.redistribute import redistribute
from reshape.runtime import checkpoint, checks, ftcomm, recovery
from reshape.runtime.background import Background
from reshape.runtime.checkpoint import Checkpointer, Restored
from reshape.runtime.darray import DistArray, LayoutRule, Registered, layout_rule
from reshape.runtime.ending import Ending
from reshape.runtime.inplace import Buddies, failure
from reshape.runtime.job import Job
from reshape.runtime.parking import CallBack, CalledBack, Parking, Reserve
from reshape.runtime.recovery import Expanding
from reshape.runtime.results import EXPAND_PARTS, ResizeError, ResizeResult
from reshape.runtime.sizing import Sizing
from reshape.runtime.spawning import Joiner
from reshape.runtime.watchdog import DEFAULT_TIMEOUT, Deadline

__all__ = ["EXPAND_PARTS", "Registered", "ResizeError", "ResizeResult", "Resizer", "layout_rule"]


def _forward(part: str, name: str, doc: str) -> property:
    """An attribute of the handle that lives in one of its collaborators (read and written there)."""
    return property(lambda self: getattr(getattr(self, part), name),
                    lambda self, value: setattr(getattr(self, part), name, value), doc=doc)


class Resizer:
    """The per-process handle of a resizable job (see module docstring); :func:`reshape.runtime.start.init`
    makes it.

    ``comm`` is the job's communicator (a new one after every resize), ``rank``
    and ``size`` this process's place in it. ``history`` lists the sizes the
    job has run at, in order (``[2, 4, 3]``: started on 2, then 4, then 3; a
    rank spawned by a resize receives it). ``results`` holds one
    :class:`ResizeResult` per resize point on this rank (action, old and new
    size, seconds, error). ``iteration`` is the current iteration number,
    ``arrays`` the registered arrays by name, ``values`` the values set with
    ``rt[name] = value``.

    A façade over collaborators, each made here with what it needs
    (:mod:`reshape.runtime.job`): the job's state (:class:`~reshape.runtime.job.Job`),
    the resize deadline (:class:`~reshape.runtime.watchdog.Deadline`), the sizes the job
    accepts (:class:`~reshape.runtime.sizing.Sizing`), new ranks joining
    (:class:`~reshape.runtime.spawning.Joiner`), retired ranks leaving or parked for reuse
    (:class:`~reshape.runtime.parking.Parking`), resizes behind the next iteration
    (:class:`~reshape.runtime.background.Background`) and the job's end
    (:class:`~reshape.runtime.ending.Ending`).
    """

    comm = _forward("_job", "comm", "The job's communicator (a new one after every resize).")
    iteration = _forward("_job", "iteration", "The current iteration number.")
    values = _forward("_job", "values", "The values set with ``rt[name] = value``.")
    arrays = _forward("_job", "arrays", "The registered arrays by name.")
    history = _forward("_job", "history", "The sizes the job has run at, in order.")
    joined = _forward("_job", "joined", "This process was spawned by a resize.")
    checkpoint_dir = _forward("_job", "checkpoint_dir", "A spawned rank: the running job's checkpoint directory.")
    inplace = _forward("_job", "inplace", "A lost rank is recovered in place (reshape.runtime.inplace).")
    method = _forward("_job", "method", "The redistribution method: circulant | alltoallv | checkpoint.")
    relabel = _forward("_job", "relabel", "Positions go to the ranks that keep the most data.")
    max_procs = _forward("_sizing", "max_procs", "The largest size the job accepts (None: no cap).")
    sizes = _forward("_sizing", "sizes", "An extra legality test ``p -> bool`` of a size (None: none).")
    allow_new_sizes = _forward("_sizing", "allow_new_sizes", "A shrink may go to a size the job never ran at.")
    advisor = _forward("_ending", "advisor", "Rank 0's line to the scheduler (None on the other ranks).")
    background = _forward("_background", "enabled", "Expansions move constant arrays while the job iterates.")
    reuse = _forward("_parking", "reuse", "A shrink parks retired ranks for a later expansion.")
    resize_timeout = _forward("_deadline", "timeout", "Seconds a whole resize may take before the job is aborted.")

    def __init__(self, comm: MPI.Intracomm, advisor: Advisor | None, job_id: int = 0, allow_new_sizes: bool = False,
                 sizes: Callable[[int], bool] | None = None, max_procs: int | None = None, method: str = "circulant",
                 resize_timeout: float = DEFAULT_TIMEOUT, background: bool = False, relabel: bool = True,
                 reuse: bool = False, iteration: int = 0, values: dict | None = None,
                 arrays: dict[str, Registered] | None = None, history: list[int] | None = None, joined: bool = False,
                 results: list[ResizeResult] | None = None, *, checkpoint_dir: str | None = None,
                 inplace: bool = False, recoveries: list[dict] | None = None):
        self._job = Job(comm, method, relabel, iteration, {} if values is None else values,
                        {} if arrays is None else arrays, [] if history is None else history, joined,
                        checkpoint_dir=checkpoint_dir, inplace=inplace)
        self._ending = Ending(advisor)
        self._deadline = Deadline(resize_timeout, self._ending.report_abort)
        self._sizing = Sizing(self._job, max_procs, sizes, allow_new_sizes)
        self._reserve = Reserve()  # pools of parked ranks (reshape.runtime.parking), shared by joining and parking
        self._joiner = Joiner(self._job, self._deadline, self._reserve)
        self._parking = Parking(self._job, self._deadline, self._reserve, self._joiner.join, reuse)
        self._background = Background(self._job, self._deadline, self._joiner, self._parking, background)
        self.job_id = job_id
        self.results: list[ResizeResult] = [] if results is None else results
        self.recoveries: list[dict] = [] if recoveries is None else recoveries  # one per in-place recovery
        self._pending_join: tuple[int, int] | None = None  # (old, new) size after expand_processors
        self._times: list[float] = []
        self._last_redist: tuple[int, float] | None = None  # (old size, seconds) to report next time
        self._plan: tuple[int, ...] | None = None  # RESHAPE_PLAN on the ranks mpiexec started: checked against arrays
        self._ckpt: Checkpointer | None = None  # periodic checkpoints (RESHAPE_CHECKPOINT, reshape.runtime.checkpoint)
        self._restored: Restored | None = None  # the checkpoint this run resumed from, filling the arrays registered
        self._buddies: Buddies | None = None  # the in-memory copies in-place recovery reads (reshape.runtime.inplace)
        self._expanding: Expanding | None = None  # an expansion under way, with in-place recovery (recovery.py)

    # ------------------------------------------------------------ basics
    @property
    def size(self) -> int:
        return self._job.size

    @property
    def rank(self) -> int:
        return self._job.rank

    @property
    def grid(self) -> tuple[int, int]:
        """The nearly-square process grid of the current size."""
        return nearly_square_grid(self.comm.size)

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
        return self._sizing.legal_sizes(upto)

    def _new_ranks(self, nprocs: int, hosts) -> CallBack | None:
        """An expansion's checks (:meth:`Sizing.new_ranks`): the parked ranks to call back, or None to spawn."""
        return self._sizing.new_ranks(nprocs, hosts, self._reserve if self.reuse else None)

    def _check_size(self, q: int, action: str) -> str | None:
        """Why the job cannot ``action`` (expand or shrink) to ``q`` processes now, or None."""
        return self._sizing.check(q, action)

    def log(self, iteration_time: float) -> None:
        """Record the time of the iteration just done (the paper's ``log``)."""
        self._times.append(float(iteration_time))

    def waitall(self, requests: list[MPI.Request], statuses: list | None = None) -> None:
        """``MPI.Request.Waitall`` for the program's own non-blocking messages, safe under in-place
        recovery: a lost peer raises ``MPI_ERR_PROC_FAILED`` here, and a peer gone to recover
        ``MPI_ERR_REVOKED``, where Open MPI 5.0.11's blocking ``MPI_Waitall`` aborted the job after about
        two losses in five (docs/mpi.md, problem 14). It tests, then sleeps between tests (an idle
        rank yields its core); the same on any MPI."""
        ftcomm.waitall(requests, statuses)

    def iterations(self, n: int) -> Iterator[int]:
        """Iteration numbers ``iteration .. n-1``; ranks spawned mid-run start where the job is."""
        self._job.end = n
        while self.iteration < n:
            self._job.in_body = True
            yield self.iteration
            self._job.in_body = False
            self.iteration += 1

    def run(self, step: Callable[[int], None], n: int,
            after: Callable[[int, ResizeResult], None] | None = None) -> None:
        """The job's loop as a step function: for each iteration ``it`` from ``iteration`` to ``n - 1``,
        ``step(it)``, then :meth:`resize`, then ``after(it, result)`` if given. Collective.

        The same as ``for it in rt.iterations(n): step(it); rt.resize()``, and needed for in-place
        recovery (``RESHAPE_INPLACE=1``, :mod:`reshape.runtime.inplace`): a rank lost anywhere in
        ``step``, in ``resize`` or in ``after`` makes the survivors shrink the communicator, rebuild
        the registered arrays and values at the newest iteration they hold a copy of, and call
        ``step`` again from there, on fewer ranks (read ``rt.comm``, ``A.local`` and ``A.layout``
        afresh in every step). ``step`` must leave the program's own state in the registered
        arrays and values only (or rebuild the rest from them), so that an iteration can be run again.
        Ranks spawned by an expansion call ``run`` with the same arguments and carry on where the job is.
        With in-place recovery it returns once every rank agrees that none was lost (:meth:`_leave_loop`).
        """
        self._job.end = n
        while True:
            ending = self.iteration >= n
            try:
                if ending:
                    self._leave_loop()
                    return
                self._iterate(step, after)
            except Exception as e:
                self._job.in_body = False
                if not (self.inplace and failure(e)):
                    raise
                recovery.recover(self, e, agreed=ending)

    def _iterate(self, step: Callable[[int], None], after: Callable[[int, ResizeResult], None] | None) -> None:
        """One iteration of :meth:`run`: copies due, ``step``, :meth:`resize`, ``after``."""
        if self._buddies is not None:
            self._buddies.poll()
            if self._buddies.due(self):
                self._buddies.refresh(self)
        faults.iteration(self.iteration, self.rank, self.size)
        self._job.in_body = True
        if self.inplace:  # the program's own messages show its pattern (reshape.runtime.ftcomm)
            ftcomm.settle()
            self.comm.record = True
        step(self.iteration)
        faults.settle()  # an iterationN fault lands in iteration N's step (reshape.faults)
        if self.inplace:
            self.comm.record = False
        result = self.resize()
        self._job.in_body = False
        if (self._buddies is not None and result.action == "shrink"
                and self._buddies.generation is not self.comm):  # covered again before after()
            self._buddies.refresh(self, self.iteration + 1)
        if after is not None:
            after(self.iteration, result)
        self.iteration += 1

    def _leave_loop(self) -> None:
        """With in-place recovery, :meth:`run` returns only once every rank agrees that none is lost and
        none recovering (``MPIX_Comm_agree``, the same outcome on every survivor): a rank lost after its
        last message of the last iteration is noticed by no collective of the loop, and the ranks that
        left it would meet the loss in the program's own code after the loop, where nothing recovers it.
        A rank that recovers meanwhile agrees on 0 (:func:`reshape.runtime.recovery.recover`); either way
        this raises a failure, and :meth:`run` recovers and runs the iterations again from the copies."""
        if self.inplace and not self.comm.Agree(1):
            raise MPI.Exception(MPI.ERR_REVOKED)

    # ------------------------------------------------------------ registration
    def register_array(
        self,
        name: str,
        shape: tuple[int, ...],
        dtype=np.float64,
        layout: str | LayoutRule = "rows",
        block: tuple[int, ...] | int | None = None,
        init: Callable[..., np.ndarray] | np.ndarray | float | None = None,
        constant: bool = False,
    ) -> Registered:
        """Register a global array that survives resizes and return its handle.

        ``init`` builds each block from global index grids (``init(i, j)``),
        is a scalar fill, or the whole array (shape ``shape``, each rank keeps
        its block); ``None`` leaves zeros. Every rank must pass the same
        arguments: they are checked on every rank and a problem on any rank
        raises the same :class:`reshape.runtime.checks.UsageError` on all of them. On a rank spawned by a
        resize the array arrives from the running ranks instead and ``init``
        is not called. ``constant=True`` promises that the application never
        writes the array after this call; with ``background`` on, such arrays
        move while the job keeps iterating (see :meth:`resize`).
        """
        spawned = name in self._job.pending_arrays  # the array arrives from the running ranks
        rule = checks.array_rule(None if spawned else self.comm, self.size, name, shape, dtype, layout, block,
                                 init, self.arrays)
        limit = checks.data_limit(name, shape, layout, block)
        if not spawned:  # the size the job runs on, and a scripted plan, against the data, before anything is built
            checks.agree(self.comm, checks.start_data_problem(self.size, limit)
                         or checks.plan_data_problem(self._plan, limit), f"register_array({name!r})")
        if spawned:
            lay, local = self._job.pending_arrays.pop(name)
            if tuple(lay.shape) != tuple(int(s) for s in shape):
                raise ValueError(f"array {name!r}: shape {shape} differs from the running job's {lay.shape}")
            reg = Registered(name, rule, DistArray(lay, local, self.comm, tuple(range(lay.nprocs))), constant)
        elif self._restored is not None and name in self._restored.meta["arrays"]:
            reg = Registered(name, rule, checkpoint.restored_array(self._restored, self.comm, name, shape, dtype,
                                                                   rule), constant)
        else:
            lay, fn = rule(self.size), checks.init_function(init)
            dist = checks.collectively(self.comm, f"register_array({name!r}): init",
                                       lambda: DistArray.from_function(self.comm, lay, fn, dtype))
            reg = Registered(name, rule, dist, constant)
        reg.limit = limit
        self.arrays[name] = reg
        return reg

    def __getitem__(self, name: str):
        return self.values[name]

    def __setitem__(self, name: str, value) -> None:
        """Register or update a value that survives resizes (and checkpoints: None, bool, int, float, str,
        lists, tuples and str-keyed dicts of these, numpy arrays and scalars; :mod:`reshape.runtime.ckptfiles`)."""
        self.values[name] = value

    # ------------------------------------------------------------ advanced API
    def contact_scheduler(self, iter_time: float | None = None) -> Advice:
        """Report this resize point and get the decision (the paper's ``contact_scheduler``). Collective."""
        advice = None
        if self.rank == 0:
            t = iter_time if iter_time is not None else (float(np.mean(self._times)) if self._times else 0.0)
            prev = self._last_redist
            report = ResizePoint(
                job_id=self.job_id, iteration=self.iteration + (1 if self._job.in_body else 0),
                nprocs=self.size, grid=tuple(self.grid), iter_time=float(t),
                redist_time=prev[1] if prev else None, redist_from=prev[0] if prev else None,
                host=socket.gethostname(), parked=tuple(self._reserve.parked_hosts()) or None,
                total=None if self._job.end is None else int(self._job.end),
            )
            self._sizing.announce(self.advisor)
            try:
                advice = self.advisor.advise(report) if self.advisor else Advice("continue", self.size)
            except Exception as e:  # an advisor failure must not stop the job
                advice = Advice("continue", self.size, reason=f"advisor error: {e}")
            self._last_redist = None
        self._times.clear()
        return bcast_obj(self.comm, advice)

    def expand_processors(self, nprocs: int, hosts: tuple[str, ...] | list[str] = ()) -> float:
        """Spawn ranks up to ``nprocs`` in total and merge them in. Collective; returns seconds.

        Must be followed by :meth:`redistribute` (which also hands the new ranks their state).
        """
        old = self.size
        back = self._new_ranks(nprocs, hosts)
        self._sizing.spawned_remote = self._sizing.spawned_remote or any(not launchers.is_local(h) for h in hosts)
        t0 = time.perf_counter()
        self._joiner.parts = {"_wall": time.time()}
        self._joiner.called_back = len(back.members) if back is not None else 0
        merged, call = self._joiner.bring_in(self.comm, back, nprocs - old, hosts, self._joiner.spawn)
        if self._expanding is not None:  # in-place recovery: errors come back; a loss now undoes the expansion
            merged.Set_errhandler(MPI.ERRORS_RETURN)
            self._expanding.merged = merged
        self._pending_join = (old, nprocs)
        self._job.replace_comm(merged)
        t2 = time.perf_counter()
        self._joiner.parts.update(spawn_call_seconds=call, merge_seconds=t2 - t0 - call)
        return t2 - t0

    def redistribute(self) -> float:
        """Move every registered array to its layout at the current size. Collective; returns seconds.

        After an expansion this first sends the new ranks their state.
        """
        join, self._pending_join = self._pending_join, None
        old = join[0] if join else None
        t0 = time.perf_counter()
        self._deadline.phase("redistributing the arrays")
        ranks, keys = tuple(range(self.size)), self._job.keys
        if join:
            state = self._joiner.hand_over(old, self._ckpt.directory if self._ckpt is not None else None)
            ranks, keys = state.ranks, list(state.keys)
        for reg in self.arrays.values():
            src = reg.layout
            dst = reg.rule(self.size)
            new = redistribute(self.comm, src, reg.local, dst, src_ranks=range(src.nprocs), dst_ranks=ranks,
                               method=self.method)
            reg.dist = DistArray(dst, new, self.comm, ranks)
        dt = allreduce(self.comm, time.perf_counter() - t0)
        if self._expanding is not None:  # the new ranks too: every rank has its blocks, or a loss undoes it all
            self.comm.Agree(1)
        self._job.renumber(ranks, keys, self._deadline.phase)
        return dt

    def shrink_processors(self, nprocs: int) -> float:
        """Move the arrays to the first ``nprocs`` ranks and retire the others. Collective.

        Returns the redistribution seconds on the ranks that stay; retired ranks
        do not return (they finalize MPI and raise ``SystemExit(0)``).
        """
        t0 = time.perf_counter()
        ranks = self._sizing.staying(nprocs)
        self._deadline.phase("redistributing the arrays")
        for reg in self.arrays.values():
            dst = reg.rule(nprocs)
            new = redistribute(self.comm, reg.layout, reg.local, dst, src_ranks=range(reg.layout.nprocs),
                               dst_ranks=ranks, method=self.method)
            reg.dist = DistArray(dst, new, self.comm, ranks)
        dt = allreduce(self.comm, time.perf_counter() - t0)
        self._parking.retire_others(ranks)
        return dt

    # ------------------------------------------------------------ simple API
    def resize(self) -> ResizeResult:
        """Contact the scheduler and expand, shrink or continue (the paper's ``resize``). Collective.

        Never raises for a refused or failed resize: the job continues at its
        size and the result (also sent to the advisor) says why.
        """
        old = self.size
        if self._plan and self.rank == 0 and not self.joined and not self.results:
            warning = checks.oversubscribed_warning(self._plan)
            if warning:
                print(warning, file=sys.stderr, flush=True)
        if not self.history or self.history[-1] != old:
            self.history.append(old)
        if self._ckpt is not None:
            self._ckpt.at_iteration_end(self)
        try:
            if self._background.pending is not None and self._ckpt is not None:
                self._ckpt.settle(self.comm, wait=True)
            pending = self._background.pending is not None
            result = self._background.switch() if pending else self._act(self.contact_scheduler(), old)
        except CalledBack as back:  # this rank was parked by a shrink and an expansion took it back
            result = back.result
        self.results.append(result)
        if self.rank == 0:
            if result.error:
                print(f"[reshape] resize {old} -> {result.asked} refused: {result.error}; "
                      f"continuing on {self.size} processes", file=sys.stderr, flush=True)
            if self.advisor and result.action not in ("continue", "expanding", "shrinking"):
                try:
                    self.advisor.resized(old, result.new, result.seconds, result.error)
                except Exception as e:
                    print(f"[reshape] advisor error after resize: {e}", file=sys.stderr, flush=True)
        if result.action in ("expand", "shrink"):
            self._last_redist = (old, result.seconds)
            if self.size not in self.history or self.history[-1] != self.size:
                self.history.append(self.size)
        return result

    def _act(self, advice: Advice, old: int) -> ResizeResult:
        """Carry out the advice within the resize deadline.

        A refusal found before any process is started or any byte moves
        (:class:`ResizeError`) leaves the job running on its processes with
        its data. Anything else (an error or a deadline overrun once spawning
        or data motion began) aborts the whole job with the reason reported
        (:mod:`reshape.runtime.watchdog`): MPICH cannot recover a communicator that
        lost a member.
        """
        if advice.action == "continue" or advice.nprocs == old:
            return ResizeResult("continue", old, old, reason=advice.reason)
        if self._ckpt is not None:  # a checkpoint in flight completes on the communicator that writes it
            self._ckpt.settle(self.comm, wait=True)
        if self._buddies is not None and self.size > 1:  # reshape.runtime.inplace: a resize point is covered
            self._buddies.cover(self, self.iteration + (1 if self._job.in_body else 0))
        what = f"{advice.action} {old}->{advice.nprocs}"
        self._deadline.arm(what)
        try:
            if advice.action == "expand" and self._background.overlap():
                return self._background.expand(advice, old, self._new_ranks(advice.nprocs, tuple(advice.hosts)))
            if advice.action == "expand":
                if self.inplace:  # a loss before the new ranks have their blocks undoes it (recovery.py)
                    self._expanding = Expanding(old, self.rank, self._buddies.generation)
                spawn = self.expand_processors(advice.nprocs, advice.hosts)
                secs = self.redistribute()
                self._expanding = None
                parts = {k: v for k, v in self._joiner.parts.items() if k in EXPAND_PARTS}
                return ResizeResult("expand", old, self.size, secs, spawn, reason=advice.reason,
                                    called_back=self._joiner.called_back, **parts)
            if advice.action == "shrink" and self._background.overlap():
                return self._background.shrink(advice, old, self._sizing.staying(advice.nprocs))
            if advice.action == "shrink":
                secs = self.shrink_processors(advice.nprocs)
                return ResizeResult("shrink", old, self.size, secs, reason=advice.reason)
            raise ResizeError(f"unknown action {advice.action!r}")
        except ResizeError as e:
            return ResizeResult("failed", old, self.size, error=str(e), reason=advice.reason, asked=advice.nprocs)
        except Exception as e:
            if self.inplace and failure(e):
                raise  # a rank lost in the resize: recovered in place by run() (reshape.runtime.recovery)
            self._deadline.abort(what, e, self.rank)
        finally:
            self._deadline.disarm()

    def finish(self, status: str = "done") -> None:
        """Tell the scheduler the job ended. Collective; call it once, after the last iteration.

        A background expansion or shrink still waiting for its switch completes
        first, so the ranks it spawned are not left waiting (a shrink's retiring
        ranks retire here: they do not return).
        """
        self._ending.begin(status)
        if self._background.pending is not None:
            self.results.append(self._background.switch())
        if self._ckpt is not None:
            self._ckpt.close(self.comm)
        self._parking.release()
        if self._buddies is not None:  # what the buddy copies cost (reshape.runtime.inplace), slowest rank
            secs = allreduce(self.comm, self._buddies.seconds)
            if self.rank == 0:
                print(f"[reshape] buddy copies: {self._buddies.refreshes} made, {secs:.3f} s on the slowest rank",
                      file=sys.stderr, flush=True)
        barrier(self.comm)
        self._ending.tell(status, self.rank)

    def _join(self, parent: MPI.Intercomm, started: tuple[float, float] | None = None) -> None:
        """A rank spawned by an expansion: join the running ranks (:meth:`Joiner.join`); a standby rank parks
        (:meth:`Parking.stand_by`) until an expansion calls it back or the job ends."""
        pool = self._joiner.join(parent, started=started)
        if pool is not None:
            self._parking.stand_by(pool)
