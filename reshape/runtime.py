"""The resize runtime: grow and shrink a running MPI job at iteration boundaries (seed 001 §3.2).

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

**Expansion** (``expand_processors`` + ``redistribute``): the current ranks
spawn the new ones with ``MPI_Comm_spawn_multiple`` (one command per target
host, MPI Info ``host``), merge the intercommunicator into one
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
size it has run at (seed 001 §3.1); such a shrink always retires whole spawn
groups, so retired ranks exit at once. Shrinking to a new size is possible
(``allow_new_sizes=True``); then a retired rank whose spawn group (or, for an
original rank, ``mpiexec``'s ``MPI_COMM_WORLD``) keeps running members stays
parked inside ``MPI_Finalize`` (no CPU) until those members finish, because
MPI_Finalize is collective over connected processes.

**Failures.** A resize refused before any process is started or any byte
moves (unknown or unreachable host, spawn error, impossible size for a
layout, a shrink to a size never run at) is reported on rank 0's stderr and
to the advisor; the job carries on with its current processes and intact
data. A failure after that point (a rank that dies or raises, a spawn,
merge or transfer that does not complete within ``RESHAPE_RESIZE_TIMEOUT``)
aborts the whole job at once, with the reason reported to the scheduler
(:mod:`reshape.watchdog`): MPICH cannot shrink a communicator around a lost
rank, and waiting would leave the job holding its slots forever.

The redistribution time of each resize is measured (slowest rank) and sent
with the next resize point's report, as the paper does.
"""

from __future__ import annotations

import atexit
import os
import pickle
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np
from mpi4py import MPI

from reshape import checks, faults, launchers, parking, placement
from reshape import jobenv as E
from reshape.advice import ENV_SCHEDULER, Advice, Advisor, ResizeReport, advisor_from_env
from reshape.darray import DistArray
from reshape.layout import Layout, LayoutError, block, block_cyclic_1d, block_cyclic_2d, nearly_square_grid
from reshape.mpiutil import barrier, bcast_obj, wait
from reshape.protocol import MAX_SIZES
from reshape.redistribute import redistribute, start
from reshape.watchdog import DEFAULT_TIMEOUT, Watchdog, abort, install_excepthook

__all__ = ["EXPAND_PARTS", "Registered", "ResizeError", "ResizeResult", "Resizer", "init", "layout_rule"]

LayoutRule = Callable[[int], Layout]


class ResizeError(RuntimeError):
    """A resize that cannot be done; the job continues at its current size."""


class _CalledBack(BaseException):
    """A parked rank was called back by an expansion: unwinds its shrink; ``resize()`` returns ``result``."""

    def __init__(self, result: ResizeResult):
        super().__init__(result)
        self.result = result


def layout_rule(
    shape: tuple[int, ...], layout: str | LayoutRule = "rows", block_size: tuple[int, ...] | int | None = None
) -> LayoutRule:
    """A function ``p -> Layout`` for ``shape``.

    ``layout`` is a callable, or one of ``"rows"`` (contiguous row blocks),
    ``"cols"``, ``"rows-cyclic"`` / ``"cols-cyclic"`` (1-D block-cyclic with
    ``block_size``), ``"2d"`` (block-cyclic over the nearly-square grid of
    ``p``, ``block_size`` = (mb, nb), ScaLAPACK style).
    """
    if callable(layout):
        return layout
    shape = tuple(int(s) for s in shape)
    bs = block_size
    if layout == "rows":
        return lambda p: block(shape, p, 0)
    if layout == "cols":
        return lambda p: block(shape, p, 1)
    if layout in ("rows-cyclic", "cols-cyclic"):
        nb = int(bs if isinstance(bs, int) else (bs or (1,))[0])
        axis = 0 if layout == "rows-cyclic" else 1
        return lambda p: block_cyclic_1d(shape, p, nb, axis)
    if layout == "2d":
        mb, nb = (bs, bs) if isinstance(bs, int) else (bs or (64, 64))
        return lambda p: block_cyclic_2d(shape, nearly_square_grid(p), (mb, nb))
    raise LayoutError(f"unknown layout {layout!r}: use rows, cols, rows-cyclic, cols-cyclic, 2d or a callable")


@dataclass
class Registered:
    """A registered global array (:meth:`Resizer.register_array`); it survives resizes.

    ``local``: this rank's current block, a numpy array (a new one after every
    resize: read it afresh each iteration). ``layout``: how the global array is
    split now (:class:`reshape.layout.Layout`; ``layout.global_indices(rank)``
    gives a block's global indices). ``dist``: the underlying
    :class:`reshape.darray.DistArray` (layout, local block, communicator and
    the ranks holding it), replaced at each resize. ``rule``: the function
    ``p -> Layout`` giving the layout at any size.
    """

    name: str
    rule: LayoutRule
    dist: DistArray
    constant: bool = False  # never written after init: may move in the background (Resizer.background)

    @property
    def local(self) -> np.ndarray:
        return self.dist.local

    @property
    def layout(self) -> Layout:
        return self.dist.layout

    def gather(self, root: int = 0) -> np.ndarray | None:
        """The whole global array on rank ``root`` of ``rt.comm`` (``None`` on the others).

        Collective: every rank must call it. It builds the full array in one
        process's memory, so it is meant for checks and output of small data.
        """
        return self.dist.gather(root)


@dataclass(frozen=True)
class ResizeResult:
    action: str  # "expand" | "shrink" | "continue" | "failed"
    old: int
    new: int
    seconds: float = 0.0  # redistribution time (slowest rank), with the hand-over of an expansion
    spawn_seconds: float = 0.0  # spawn + merge
    error: str | None = None
    reason: str = ""
    # the parts of an expansion (rank 0's clock; 0.0 for other actions), see EXPAND_PARTS
    spawn_call_seconds: float = 0.0
    merge_seconds: float = 0.0
    handover_seconds: float = 0.0
    launch_seconds: float = 0.0
    startup_seconds: float = 0.0
    ready_seconds: float = 0.0


EXPAND_PARTS = {
    "spawn_call_seconds": "MPI_Comm_spawn_multiple on the running ranks (part of spawn_seconds)",
    "merge_seconds": "MPI_Intercomm_merge and the disconnects (part of spawn_seconds)",
    "handover_seconds": "the job's state to the new ranks (part of seconds)",
    "launch_seconds": "spawn call -> the last new process started (the process manager)",
    "startup_seconds": "a new process's start -> its runtime.init() (interpreter, imports, MPI_Init); slowest",
    "ready_seconds": "a new process's start -> it calls MPI_Intercomm_merge; slowest",
}


@dataclass
class _JoinState:
    """What rank 0 sends to newly spawned ranks."""

    iteration: int
    values: dict
    arrays: list[tuple[str, Layout, Layout, str]]  # name, old layout, new layout, dtype
    history: list[int]
    old_size: int
    background: tuple[str, ...] = ()  # arrays moving in the background; the rest move at the switch
    ranks: tuple[int, ...] = ()  # merged comm rank of every new layout position (reshape.placement)
    keys: tuple[placement.Seniority, ...] = ()  # seniority of every merged comm rank


@dataclass
class _SwitchState:
    """What rank 0 sends the new ranks when a background expansion switches over."""

    iteration: int
    values: dict
    history: list[int]


@dataclass
class _Pending:
    """An expansion under way behind the job's iteration (see :meth:`Resizer._expand_background`)."""

    old: int
    new: int
    spawn_comm: MPI.Intracomm  # a duplicate of the job's communicator, for the helper thread
    reason: str = ""
    thread: threading.Thread | None = None
    merged: MPI.Intracomm | None = None  # the communicator the job switches to
    moves: dict[str, tuple[Layout, object]] = field(default_factory=dict)  # constant arrays in flight
    spawn_seconds: float = 0.0
    start_seconds: float = 0.0
    refused: str | None = None  # the spawn was refused: the job carries on at its size
    error: str | None = None  # anything else: the job is aborted at the switch


@dataclass
class Resizer:
    """The per-process handle of a resizable job (see module docstring); :func:`init` makes it.

    ``comm`` is the job's communicator (a new one after every resize), ``rank``
    and ``size`` this process's place in it. ``history`` lists the sizes the
    job has run at, in order (``[2, 4, 3]``: started on 2, then 4, then 3; a
    rank spawned by a resize receives it). ``results`` holds one
    :class:`ResizeResult` per resize point on this rank (action, old and new
    size, seconds, error). ``iteration`` is the current iteration number,
    ``arrays`` the registered arrays by name, ``values`` the values set with
    ``rt[name] = value``.
    """

    comm: MPI.Intracomm
    advisor: Advisor | None
    job_id: int = 0
    allow_new_sizes: bool = False
    sizes: Callable[[int], bool] | None = None  # extra legality test for a size
    max_procs: int | None = None
    method: str = "circulant"  # redistribution method: circulant | alltoallv | checkpoint
    resize_timeout: float = DEFAULT_TIMEOUT  # seconds a whole resize may take before the job is aborted
    background: bool = False  # expansions move constant arrays while the job keeps iterating
    relabel: bool = True  # positions go to the ranks that keep the most data (reshape.placement)
    reuse: bool = False  # a shrink parks retired ranks for a later expansion (reshape.parking)
    iteration: int = 0
    values: dict = field(default_factory=dict)
    arrays: dict[str, Registered] = field(default_factory=dict)
    history: list[int] = field(default_factory=list)  # sizes run at, in order
    joined: bool = False  # this process was spawned by a resize
    results: list[ResizeResult] = field(default_factory=list)
    _pending_join: tuple[int, int] | None = None  # (old, new) size after expand_processors
    _pending_arrays: dict[str, tuple[Layout, np.ndarray | None]] = field(default_factory=dict)
    _times: list[float] = field(default_factory=list)
    _last_redist: tuple[int, float] | None = None  # (old size, seconds) to report next time
    _in_body: bool = False
    _dog: Watchdog | None = None  # bounds each resize (reshape.watchdog)
    _announced: tuple | None = None  # what the sizes last announced to the advisor were computed from
    _pending: _Pending | None = None  # a background expansion waiting for its switch
    _end: int | None = None  # the loop's iteration count, when the job uses iterations()
    _parts: dict[str, float] = field(default_factory=dict)  # the parts of the expansion under way (EXPAND_PARTS)
    _started: tuple[float, float] | None = None  # spawned rank: (process start, runtime.init) epoch seconds
    _keys: list[placement.Seniority] = field(default_factory=list)  # seniority of every comm rank
    _reserve: parking.Reserve = field(default_factory=parking.Reserve)  # pools of parked ranks (reshape.parking)

    # ------------------------------------------------------------ basics
    @property
    def size(self) -> int:
        return self.comm.size

    @property
    def rank(self) -> int:
        return self.comm.rank

    @property
    def grid(self) -> tuple[int, int]:
        """The nearly-square process grid of the current size."""
        return nearly_square_grid(self.comm.size)

    def log(self, iteration_time: float) -> None:
        """Record the time of the iteration just done (the paper's ``log``)."""
        self._times.append(float(iteration_time))

    def iterations(self, n: int) -> Iterator[int]:
        """Iteration numbers ``iteration .. n-1``; ranks spawned mid-run start where the job is."""
        self._end = n
        while self.iteration < n:
            self._in_body = True
            yield self.iteration
            self._in_body = False
            self.iteration += 1

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
        raises the same :class:`reshape.checks.UsageError` on all of them. On a rank spawned by a
        resize the array arrives from the running ranks instead and ``init``
        is not called. ``constant=True`` promises that the application never
        writes the array after this call; with ``background`` on, such arrays
        move while the job keeps iterating (see :meth:`resize`).
        """
        spawned = name in self._pending_arrays  # the array arrives from the running ranks
        rule = checks.array_rule(None if spawned else self.comm, self.size, name, shape, dtype, layout, block,
                                 init, self.arrays)
        if spawned:
            lay, local = self._pending_arrays.pop(name)
            if tuple(lay.shape) != tuple(int(s) for s in shape):
                raise ValueError(f"array {name!r}: shape {shape} differs from the running job's {lay.shape}")
            reg = Registered(name, rule, DistArray(lay, local, self.comm, tuple(range(lay.nprocs))), constant)
        else:
            lay, fn = rule(self.size), checks.init_function(init)
            dist = checks.collectively(self.comm, f"register_array({name!r}): init",
                                       lambda: DistArray.from_function(self.comm, lay, fn, dtype))
            reg = Registered(name, rule, dist, constant)
        self.arrays[name] = reg
        return reg

    def __getitem__(self, name: str):
        return self.values[name]

    def __setitem__(self, name: str, value) -> None:
        """Register or update a value (scalar or small picklable object) that survives resizes."""
        self.values[name] = value

    # ------------------------------------------------------------ advanced API
    def contact_scheduler(self, iter_time: float | None = None) -> Advice:
        """Report this resize point and get the decision (the paper's ``contact_scheduler``). Collective."""
        advice = None
        if self.rank == 0:
            t = iter_time if iter_time is not None else (float(np.mean(self._times)) if self._times else 0.0)
            prev = self._last_redist
            report = ResizeReport(
                job_id=self.job_id, iteration=self.iteration + (1 if self._in_body else 0),
                nprocs=self.size, grid=self.grid, iter_time=t,
                redist_time=prev[1] if prev else None, redist_from=prev[0] if prev else None,
                host=socket.gethostname(),
            )
            self._announce_sizes()
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
        problem = self._check_size(nprocs, "expand") if self.rank == 0 else None
        back = None
        if self.rank == 0 and problem is None:
            back = self._reserve.pick(nprocs - old, hosts) if self.reuse else None
            if back is None:
                problem = _check_hosts(hosts, nprocs - old)
        problem, back = bcast_obj(self.comm, (problem, back))
        if problem:
            raise ResizeError(problem)
        t0 = time.perf_counter()
        self._parts = {"_wall": time.time()}
        if back is not None:
            self._phase(f"calling back {nprocs - old} parked ranks")
            inter = self._reserve.call_back(self.comm, *back)
        else:
            inter = self._spawn(nprocs - old, hosts)
        t1 = time.perf_counter()
        self._phase("merging with the spawned ranks")
        merged = inter.Merge(high=False)
        inter.Disconnect()  # the merged communicator carries everything from now on
        self._pending_join = (old, nprocs)
        self._replace_comm(merged)
        t2 = time.perf_counter()
        self._parts.update(spawn_call_seconds=t1 - t0, merge_seconds=t2 - t1)
        return t2 - t0

    def _spawn(self, n: int, hosts) -> MPI.Intercomm:
        """``MPI_Comm_spawn_multiple`` of ``n`` new ranks of this program (one command per host)."""
        cmds, argvs, counts, infos = _spawn_commands(n, hosts)
        self._phase(f"spawning {n} ranks" + (f" on {','.join(sorted(set(hosts)))}" if hosts else ""))
        try:
            return self.comm.Spawn_multiple(cmds, argvs, counts, infos, root=0)
        except MPI.Exception as e:
            raise ResizeError(f"spawn of {n} ranks failed: {e.Get_error_string()}") from e
        finally:
            for i in infos:
                if i != MPI.INFO_NULL:
                    i.Free()

    def redistribute(self) -> float:
        """Move every registered array to its layout at the current size. Collective; returns seconds.

        After an expansion this first sends the new ranks their state.
        """
        join, self._pending_join = self._pending_join, None
        old = join[0] if join else None
        t0 = time.perf_counter()
        self._phase("redistributing the arrays")
        ranks, keys = tuple(range(self.size)), self._keys
        if join:
            state = self._hand_over(old)
            ranks, keys = state.ranks, list(state.keys)
        for reg in self.arrays.values():
            src = reg.layout
            dst = reg.rule(self.size)
            new = redistribute(self.comm, src, reg.local, dst, src_ranks=range(src.nprocs), dst_ranks=ranks,
                               method=self.method)
            reg.dist = DistArray(dst, new, self.comm, ranks)
        dt = self.comm.allreduce(time.perf_counter() - t0, op=MPI.MAX)
        self._renumber(ranks, keys)
        return dt

    def _positions(self, q: int, candidates) -> tuple[int, ...]:
        """Rank 0: the comm rank of every position at size ``q`` (:func:`reshape.placement.choose`)."""
        return placement.choose(((r.layout, r.rule(q), r.local.dtype.itemsize) for r in self.arrays.values()),
                                candidates, self.relabel)

    def _renumber(self, ranks: tuple[int, ...], keys: list[placement.Seniority]) -> None:
        """After the arrays moved to ``ranks``: make comm rank ``j`` the holder of position ``j``. Collective."""
        if tuple(ranks) == tuple(range(self.comm.size)):
            self._keys = list(keys)
            return
        self._phase("renumbering the ranks")
        new = placement.renumber(self.comm, ranks)
        old, self.comm = self.comm, new
        self._keys = [keys[r] for r in ranks]
        for reg in self.arrays.values():
            reg.dist = DistArray(reg.dist.layout, reg.dist.local, new, tuple(range(reg.dist.layout.nprocs)))
        old.Free()

    def shrink_processors(self, nprocs: int) -> float:
        """Move the arrays to the first ``nprocs`` ranks and retire the others. Collective.

        Returns the redistribution seconds on the ranks that stay; retired ranks
        do not return (they finalize MPI and raise ``SystemExit(0)``).
        """
        t0 = time.perf_counter()
        problem, ranks = (self._check_size(nprocs, "shrink"), ()) if self.rank == 0 else (None, ())
        if self.rank == 0 and problem is None:
            ranks = self._positions(nprocs, placement.staying(self._keys, nprocs))
        problem, ranks = bcast_obj(self.comm, (problem, ranks))
        if problem:
            raise ResizeError(problem)
        keep = self.rank in ranks
        self._phase("redistributing the arrays")
        for reg in self.arrays.values():
            dst = reg.rule(nprocs)
            new = redistribute(self.comm, reg.layout, reg.local, dst, src_ranks=range(reg.layout.nprocs),
                               dst_ranks=ranks, method=self.method)
            reg.dist = DistArray(dst, new, self.comm, ranks)
        dt = self.comm.allreduce(time.perf_counter() - t0, op=MPI.MAX)
        self._phase("retiring ranks")
        if not keep:
            faults.hit("retire", self.rank, self.size)
        hosts = self.comm.gather(socket.gethostname(), root=0) if self.reuse else None
        new_comm = placement.renumber(self.comm, ranks)
        if not self.reuse:
            self.comm.Disconnect()
            if not keep:
                self._retire()
        elif keep:  # the old communicator stays: the retired ranks wait on it (reshape.parking)
            retired = {r: hosts[r] for r in range(self.size) if r not in ranks} if self.rank == 0 else {}
            self._reserve.keep(self.comm, retired)
        else:
            self._park()
        self.comm = new_comm
        self._keys = [self._keys[r] for r in ranks]
        for reg in self.arrays.values():
            reg.dist = DistArray(reg.dist.layout, reg.dist.local, new_comm, tuple(range(nprocs)))
        return dt

    # ------------------------------------------------------------ simple API
    def resize(self) -> ResizeResult:
        """Contact the scheduler and expand, shrink or continue (the paper's ``resize``). Collective.

        Never raises for a refused or failed resize: the job continues at its
        size and the result (also sent to the advisor) says why.
        """
        old = self.size
        if not self.history or self.history[-1] != old:
            self.history.append(old)
        if self._pending is not None:
            result, advice = self._switch(), None
        else:
            advice = self.contact_scheduler()
            try:
                result = self._act(advice, old)
            except _CalledBack as back:  # this rank was parked by a shrink and an expansion took it back
                result = back.result
        self.results.append(result)
        if self.rank == 0:
            if result.error:
                print(f"[reshape] resize {old} -> {result.new} refused: {result.error}; "
                      f"continuing on {self.size} processes", file=sys.stderr, flush=True)
            if self.advisor and result.action not in ("continue", "expanding"):
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
        (:mod:`reshape.watchdog`): MPICH cannot recover a communicator that
        lost a member.
        """
        if advice.action == "continue" or advice.nprocs == old:
            return ResizeResult("continue", old, old, reason=advice.reason)
        what = f"{advice.action} {old}->{advice.nprocs}"
        self._arm(what)
        try:
            if advice.action == "expand" and self._overlap():
                return self._expand_background(advice, old)
            if advice.action == "expand":
                spawn = self.expand_processors(advice.nprocs, advice.hosts)
                secs = self.redistribute()
                parts = {k: v for k, v in self._parts.items() if k in EXPAND_PARTS}
                return ResizeResult("expand", old, self.size, secs, spawn, reason=advice.reason, **parts)
            if advice.action == "shrink":
                secs = self.shrink_processors(advice.nprocs)
                return ResizeResult("shrink", old, self.size, secs, reason=advice.reason)
            raise ResizeError(f"unknown action {advice.action!r}")
        except ResizeError as e:
            return ResizeResult("failed", old, self.size, error=str(e), reason=advice.reason)
        except Exception as e:
            abort(f"{what} failed on rank {self.rank} ({self._dog.step}): {type(e).__name__}: {e}",
                  self._report_abort)
            raise  # not reached
        finally:
            self._disarm()

    def finish(self, status: str = "done") -> None:
        """Tell the scheduler the job ended. Collective; call it once, after the last iteration.

        A background expansion still waiting for its switch completes first, so
        the ranks it spawned are not left waiting.
        """
        if self._pending is not None:
            self.results.append(self._switch())
        self._release_parked()
        barrier(self.comm)
        if self.rank == 0 and self.advisor:
            try:
                self.advisor.finished(status)
            except Exception as e:
                print(f"[reshape] advisor error at finish: {e}", file=sys.stderr, flush=True)

    # ------------------------------------------------------------ background expansion
    def _overlap(self) -> bool:
        """Whether this expansion moves data in the background: asked for, a constant array
        to move, and an iteration left to overlap with."""
        return (self.background and self.method == "circulant" and any(r.constant for r in self.arrays.values())
                and (self._end is None or self.iteration + 1 < self._end))

    def _expand_background(self, advice: Advice, old: int) -> ResizeResult:
        """Start an expansion that runs behind the job's next iteration (MaM-style).

        The checks run now (a refusal leaves the job as it is). Then a helper
        thread on every running rank spawns the new ranks, merges with them,
        hands them the state and starts moving the ``constant`` arrays, while
        the application runs its next iteration on its old communicator and
        layouts. The job switches to the new size at its next resize point
        (:meth:`_switch`). Needs ``MPI_THREAD_MULTIPLE``; without it the spawn
        runs here and only the data motion overlaps the iteration.
        """
        nprocs, hosts = advice.nprocs, tuple(advice.hosts)
        problem = self._check_size(nprocs, "expand") if self.rank == 0 else None
        if self.rank == 0 and problem is None:
            problem = _check_hosts(hosts, nprocs - old)
        problem = bcast_obj(self.comm, problem)
        if problem:
            raise ResizeError(problem)
        moving = tuple(name for name, r in self.arrays.items() if r.constant)
        state = None
        if self.rank == 0:
            state = _JoinState(
                iteration=self.iteration + 1, values={}, history=[], old_size=old, background=moving,
                arrays=[(r.name, r.layout, r.rule(nprocs), str(r.local.dtype)) for r in self.arrays.values()],
                ranks=tuple(range(nprocs)), keys=tuple(placement.grown(self._keys, nprocs - old)),
            )
        pend = _Pending(old, nprocs, self.comm.Dup(), advice.reason)
        pend.thread = threading.Thread(target=self._spawn_behind, args=(pend, hosts, state, moving),
                                       name="reshape-expand", daemon=True)
        self._pending = pend
        if MPI.Query_thread() == MPI.THREAD_MULTIPLE:
            pend.thread.start()
        else:
            pend.thread.run()
        return ResizeResult("expanding", old, nprocs, reason=advice.reason)

    def _spawn_behind(self, pend: _Pending, hosts: tuple[str, ...], state, moving: tuple[str, ...]) -> None:
        """The helper thread of a background expansion: spawn, merge, hand over, start the moves."""
        try:
            t0 = time.perf_counter()
            cmds, argvs, counts, infos = _spawn_commands(pend.new - pend.old, hosts)
            try:
                inter = pend.spawn_comm.Spawn_multiple(cmds, argvs, counts, infos, root=0)
            except MPI.Exception as e:
                pend.refused = f"spawn of {pend.new - pend.old} ranks failed: {e.Get_error_string()}"
                return
            finally:
                for i in infos:
                    if i != MPI.INFO_NULL:
                        i.Free()
            merged = inter.Merge(high=False)
            inter.Disconnect()
            pend.spawn_seconds = time.perf_counter() - t0
            t1 = time.perf_counter()
            data = pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL) if state is not None else None
            head = _exchange_head(merged, len(data) if data is not None else 0, 0.0, 0.0, 0.0)
            _bcast_bytes(merged, data, int(head[0]))
            for name in moving:
                reg = self.arrays[name]
                dst = reg.rule(merged.size)
                pend.moves[name] = (dst, start(merged, reg.layout, reg.local, dst, src_ranks=range(reg.layout.nprocs)))
            pend.start_seconds = time.perf_counter() - t1
            pend.merged = merged
        except BaseException as e:  # reported at the switch, where the job is aborted
            pend.error = f"{type(e).__name__}: {e}"

    def _switch(self) -> ResizeResult:
        """Finish a background expansion at this resize point and continue on the new ranks.

        Waits for the constant arrays, sends the new ranks the iteration counter
        and values as they are now, moves the other arrays (blocking) and
        replaces the communicator. Returns the expansion's result; its seconds
        are the data motion outside the overlapped iteration.
        """
        pend, self._pending = self._pending, None
        what = f"expand {pend.old}->{pend.new} (switch)"
        self._arm(what)
        try:
            self._phase("waiting for the background spawn")
            pend.thread.join()
            pend.spawn_comm.Free()
            if pend.refused:
                return ResizeResult("failed", pend.old, self.size, error=pend.refused, reason=pend.reason)
            if pend.error:
                raise RuntimeError(f"background expansion: {pend.error}")
            t0 = time.perf_counter()
            merged = pend.merged
            self._phase("completing the background redistribution")
            done = {name: (dst, ex.wait()) for name, (dst, ex) in pend.moves.items()}
            state = None
            if self.rank == 0:
                state = _SwitchState(self.iteration + (1 if self._in_body else 0), self.values, self.history)
            bcast_obj(merged, state)
            self._phase("redistributing the arrays")
            for reg in self.arrays.values():
                if reg.name in done:
                    dst, new = done[reg.name]
                else:
                    dst = reg.rule(merged.size)
                    new = redistribute(merged, reg.layout, reg.local, dst, src_ranks=range(reg.layout.nprocs),
                                       method=self.method)
                reg.dist = DistArray(dst, new, merged, tuple(range(dst.nprocs)))
            dt = merged.allreduce(time.perf_counter() - t0, op=MPI.MAX)
            self._replace_comm(merged)
            self._keys = placement.grown(self._keys, pend.new - pend.old)
            return ResizeResult("expand", pend.old, merged.size, pend.start_seconds + dt, pend.spawn_seconds,
                                reason=pend.reason)
        except Exception as e:
            abort(f"{what} failed on rank {self.rank} ({self._dog.step}): {type(e).__name__}: {e}",
                  self._report_abort)
            raise  # not reached
        finally:
            self._disarm()

    # ------------------------------------------------------------ internals
    def _arm(self, what: str) -> None:
        if self._dog is None:
            self._dog = Watchdog(self._report_abort)
        self._dog.arm(what, self.resize_timeout)
        self._dog.phase("starting")

    def _phase(self, name: str) -> None:
        if self._dog is not None:
            self._dog.phase(name)

    def _disarm(self) -> None:
        if self._dog is not None:
            self._dog.disarm()

    def _report_abort(self, reason: str) -> None:
        """Tell the scheduler (any rank may) why the job is being aborted; bounded, best effort."""
        if os.environ.get(ENV_SCHEDULER):
            from reshape.client import SchedulerClient

            env = {**os.environ, E.SCHEDULER_TIMEOUT: "2.0"}
            SchedulerClient.from_env(env).finished("error", reason)
        elif self.advisor is not None:
            self.advisor.finished("error", reason)

    def _check_size(self, q: int, action: str) -> str | None:
        """Why the job cannot ``action`` (expand or shrink) to ``q`` processes now, or None."""
        p = self.size
        if not isinstance(q, int | np.integer) or q < 1:
            return f"invalid target size {q!r}"
        if action == "expand" and q <= p:
            return f"expand to {q} is not larger than the current {p}"
        if action == "shrink" and q >= p:
            return f"shrink to {q} is not smaller than the current {p}"
        if action == "shrink" and not self.allow_new_sizes and q not in self.history:
            return (f"shrink to {q}: the job has only run on {sorted(set(self.history))} processes "
                    f"(a job shrinks only to sizes it has run at; allow_new_sizes=True lifts this)")
        return self._size_problem(q)

    def _size_problem(self, q: int) -> str | None:
        """Why the job can never run on ``q`` processes (max_procs, the sizes test, an array's layout), or None."""
        if self.max_procs and q > self.max_procs:
            return f"{q} exceeds the job's maximum of {self.max_procs} processes"
        if self.sizes and not self.sizes(q):
            return f"{q} processes is not a legal size for this job"
        for reg in self.arrays.values():
            try:
                reg.rule(q)
            except LayoutError as e:
                return f"array {reg.name!r} has no layout on {q} processes: {e}"
        return None

    def legal_sizes(self, upto: int) -> list[int]:
        """The sizes in ``1..upto`` this job accepts, ascending.

        The checks a resize makes that do not depend on the moment: ``max_procs``,
        the ``sizes`` test and a layout for every registered array. Left out:
        the direction (an expansion must grow, a shrink must shrink) and the
        rule that a job shrinks only to sizes it has run at. Local, no
        communication. Rank 0 announces the result to the scheduler
        (``hello``'s ``sizes``, up to ``reshape.protocol.MAX_SIZES``), which
        then advises only sizes the job accepts.
        """
        return [q for q in range(1, upto + 1) if self._size_problem(q) is None]

    def _announce_sizes(self) -> None:
        """Rank 0: give the advisor the sizes this job accepts, again when arrays or ``max_procs`` changed."""
        announce = getattr(self.advisor, "announce_sizes", None)
        key = (tuple(self.arrays), self.max_procs, self.sizes)
        if announce is None or key == self._announced:
            return
        self._announced = key
        try:
            announce(self.legal_sizes(min(self.max_procs or MAX_SIZES, MAX_SIZES)))
        except Exception as e:  # a sizes test that fails on some size must not stop the job
            print(f"[reshape] cannot announce the job's sizes: {type(e).__name__}: {e}", file=sys.stderr, flush=True)

    def _replace_comm(self, new: MPI.Intracomm) -> None:
        old = self.comm
        self.comm = new
        for reg in self.arrays.values():
            reg.dist = DistArray(reg.dist.layout, reg.dist.local, new, reg.dist.ranks)
        old.Disconnect()

    def _park(self) -> None:
        """A rank retired with reuse on: wait on the old communicator until called back or told to leave.

        Called back, it joins the running ranks as a spawned rank does and unwinds
        to ``resize()`` (:class:`_CalledBack`); told to leave, it retires.
        """
        pool = self.comm
        self._disarm()
        members = parking.park(pool)
        if members is None:
            self._retire()
        t0 = time.perf_counter()
        inter = parking.rejoin(pool, members)
        self._reserve.keep(pool, {})
        old = inter.Get_remote_size()
        self._join(inter)
        for name, (lay, local) in self._pending_arrays.items():
            self.arrays[name].dist = DistArray(lay, local, self.comm, tuple(range(lay.nprocs)))
        self._pending_arrays.clear()
        if self._in_body:  # the loop's own increment brings it to the job's next iteration
            self.iteration -= 1
        raise _CalledBack(ResizeResult("expand", old, self.size, spawn_seconds=time.perf_counter() - t0,
                                       reason="called back from the parked ranks"))

    def _release_parked(self) -> None:
        """Rank 0: tell the parked ranks to leave (finish(), or the interpreter's exit without it)."""
        if self.rank == 0 and self._reserve.parked:
            self._reserve.release()

    def _retire(self) -> None:
        sys.stdout.flush()
        sys.stderr.flush()
        MPI.Finalize()
        raise SystemExit(0)

    def _hand_over(self, old: int) -> _JoinState:
        """Running ranks, after an expansion: send the new ranks the job's state (rank 0's); returns it.

        One allreduce and one broadcast: the allreduce carries the size of the
        pickled state from rank 0 and, from the new ranks, when they started
        (the parts of the expansion, :data:`EXPAND_PARTS`). The state carries
        the placement of the new layouts' positions, which every rank needs.
        """
        t0 = time.perf_counter()
        data = None
        if self.rank == 0:
            state = _JoinState(
                iteration=self.iteration + (1 if self._in_body else 0), values=self.values,
                arrays=[(r.name, r.layout, r.rule(self.size), str(r.local.dtype)) for r in self.arrays.values()],
                history=self.history, old_size=old, ranks=self._positions(self.size, range(self.size)),
                keys=tuple(placement.grown(self._keys, self.size - old)),
            )
            data = pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL)
        head = _exchange_head(self.comm, len(data) if data is not None else 0, 0.0, 0.0, 0.0)
        data = _bcast_bytes(self.comm, data, int(head[0]))
        if self.rank != 0:
            state = pickle.loads(data)
        spawned_at, init_age, ready_age = head[1], head[2], head[3]
        parts = self._parts
        parts["handover_seconds"] = time.perf_counter() - t0
        if "_wall" in parts and spawned_at > 0:
            parts.update(launch_seconds=max(0.0, spawned_at - parts["_wall"]), startup_seconds=init_age,
                         ready_seconds=ready_age)
        return state

    def _join(self, parent: MPI.Intercomm) -> None:
        """Run on a spawned rank: merge, take the state, receive the array blocks.

        Bounded by the same deadline as the running ranks' resize.
        """
        old = parent.Get_remote_size()
        faults.set_spawned()
        self._arm(f"expand {old}->{old + MPI.COMM_WORLD.size}")
        self._phase("a new rank merging with the running ranks")
        ready = time.time()
        faults.hit("join", MPI.COMM_WORLD.rank + old, old + MPI.COMM_WORLD.size, old)
        merged = parent.Merge(high=True)
        parent.Disconnect()
        self.comm = merged
        self._phase("a new rank receiving the arrays")
        began, init = self._started or (ready, ready)
        head = _exchange_head(merged, 0, began, init - began, ready - began)
        state: _JoinState = pickle.loads(_bcast_bytes(merged, None, int(head[0])))
        self.iteration = state.iteration
        self.values = state.values
        self.history = [*state.history, merged.size]
        self.joined = True
        ranks = state.ranks or tuple(range(merged.size))
        moves = {name: (dst, start(merged, src, None, dst, src_ranks=range(src.nprocs), dst_ranks=ranks))
                 for name, src, dst, _dtype in state.arrays if name in state.background}
        if state.background:
            # The running ranks finish an iteration before they switch: wait without
            # spinning and without the resize deadline, then take the state as it is then.
            self._disarm()
            _wait_politely(moves.values())
            sw: _SwitchState = bcast_obj(merged, None)
            self._arm(f"expand {old}->{merged.size} (switch)")
            self.iteration, self.values, self.history = sw.iteration, sw.values, [*sw.history, merged.size]
        for name, src, dst, _dtype in state.arrays:
            if name in moves:
                new = moves[name][1].wait()
            else:
                new = redistribute(merged, src, None, dst, src_ranks=range(src.nprocs), dst_ranks=ranks,
                                   method=self.method)
            self._pending_arrays[name] = (dst, new)
        merged.allreduce(0.0, op=MPI.MAX)  # matches the parents' timing reduction
        self._renumber(ranks, list(state.keys))
        self._disarm()


def _wait_politely(moves, max_sleep: float = 1e-3) -> None:
    """Progress background redistributions until done, sleeping between tests (a spawned rank idles here)."""
    delay = 1e-5
    while not all([ex.test() for _, ex in moves]):
        time.sleep(delay)
        delay = min(2 * delay, max_sleep)


def _exchange_head(comm: MPI.Intracomm, nbytes: int, start: float, init_age: float, ready_age: float) -> np.ndarray:
    """The hand-over's first step: max over ranks of (state bytes, a new rank's start epoch, its ages)."""
    out = np.zeros(4)
    wait(comm.Iallreduce(np.array([nbytes, start, init_age, ready_age], dtype=np.float64), out, MPI.MAX))
    return out


def _bcast_bytes(comm: MPI.Intracomm, data: bytes | None, n: int) -> bytes:
    """Broadcast ``n`` bytes from rank 0 (``data`` there), waiting politely."""
    buf = np.frombuffer(data, dtype=np.uint8) if comm.rank == 0 else np.empty(n, dtype=np.uint8)
    wait(comm.Ibcast(buf, 0))
    return data if comm.rank == 0 else buf.tobytes()


def _process_start() -> float:
    """When this process started, epoch seconds (Linux: /proc, 10 ms resolution; else now)."""
    now = time.time()
    try:
        with open("/proc/self/stat") as fh:
            ticks = int(fh.read().rsplit(")", 1)[1].split()[19])
        return now - (time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError, AttributeError):
        return now


def _check_hosts(hosts, n: int, timeout: float = 5.0) -> str | None:
    """Refuse hosts Hydra could not launch on, before spawning.

    A host that resolves but cannot be reached makes Hydra abort the whole job
    (MPICH 5: "Launch proxy failed"), so each remote host is probed first with
    the launcher Hydra will use (:meth:`reshape.launchers.Launcher.probe`). The
    probe must succeed within ``timeout`` seconds.
    """
    if not hosts:
        return None
    launcher = launchers.from_env()
    if len(hosts) != n:
        return f"{len(hosts)} hosts given for {n} new ranks"
    for h in sorted(set(hosts)):
        try:
            socket.getaddrinfo(h, None)
        except OSError:
            return f"unknown host {h!r}: cannot resolve it"
        cmd = launcher.probe(h, timeout)
        if cmd is None:
            continue
        try:
            r = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout)
        except FileNotFoundError:
            return f"host {h!r} is not reachable: launcher {cmd[0]!r} not found"
        except subprocess.TimeoutExpired:
            return f"host {h!r} is not reachable: {' '.join(cmd[:1])} probe timed out after {timeout:.0f}s"
        if r.returncode != 0:
            why = (r.stderr or r.stdout).decode(errors="replace").strip().splitlines()
            return f"host {h!r} is not reachable by the launcher ({why[-1] if why else f'exit {r.returncode}'})"
    return None


def _program() -> list[str]:
    """argv that restarts this program: ``python -m module args`` or ``python script args``."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    if spec is not None and spec.name and spec.name != "__main__":
        name = spec.name[: -len(".__main__")] if spec.name.endswith(".__main__") else spec.name
        return ["-m", name, *sys.argv[1:]]
    return [os.path.abspath(sys.argv[0]), *sys.argv[1:]]


def _spawn_commands(n: int, hosts) -> tuple[list[str], list[list[str]], list[int], list[MPI.Info]]:
    argv = _program()
    if not hosts:
        info = MPI.Info.Create()
        info.Set("wdir", os.getcwd())
        return [sys.executable], [argv], [n], [info]
    order: list[str] = []
    count: dict[str, int] = {}
    for h in hosts:
        if h not in count:
            order.append(h)
            count[h] = 0
        count[h] += 1
    infos = []
    for h in order:
        info = MPI.Info.Create()
        info.Set("host", h)
        info.Set("wdir", os.getcwd())
        infos.append(info)
    return [sys.executable] * len(order), [argv] * len(order), [count[h] for h in order], infos


_RUNTIME: Resizer | None = None


def init(
    advisor: Advisor | None = None,
    *,
    allow_new_sizes: bool | None = None,
    sizes: Callable[[int], bool] | None = None,
    max_procs: int | None = None,
    background: bool | None = None,
    reuse: bool | None = None,
) -> Resizer:
    """Start (or, on a spawned rank, join) the resizable job. Call once per process.

    ``advisor`` defaults to :func:`reshape.advice.advisor_from_env` (the daemon
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
    a later expansion instead of spawning (:mod:`reshape.parking`).
    ``RESHAPE_RESIZE_TIMEOUT`` bounds each resize (seconds, default 120): a
    resize still under way then aborts the job with the reason reported, as
    does an uncaught exception on any rank (``RESHAPE_ABORT_ON_ERROR=0``
    keeps Python's default); see :mod:`reshape.watchdog`.
    """
    global _RUNTIME
    if _RUNTIME is not None:
        return _RUNTIME
    parent = MPI.Comm.Get_parent()
    cfg = checks.job_settings(MPI.COMM_WORLD, parent != MPI.COMM_NULL, max_procs=max_procs)  # and RESHAPE_*
    allow_new_sizes = cfg.allow_new_sizes if allow_new_sizes is None else allow_new_sizes
    max_procs = cfg.max_procs if max_procs is None else max_procs
    method, timeout, job_id, relabel = cfg.method, cfg.resize_timeout, cfg.job_id, cfg.relabel
    background = cfg.background if background is None else background
    reuse = cfg.reuse if reuse is None else reuse
    if reuse and launchers.from_env().name == "slurm":
        # nodes go back to Slurm empty: a rank parked there would be killed with its expander job
        if MPI.COMM_WORLD.rank == 0 and parent == MPI.COMM_NULL:
            print(f"[reshape] {E.REUSE}=1 ignored under the slurm launcher: nodes given back to Slurm must be "
                  f"empty", file=sys.stderr, flush=True)
        reuse = False
    if parent != MPI.COMM_NULL:
        called = time.time()
        rt = Resizer(MPI.COMM_WORLD, None, job_id, allow_new_sizes, sizes, max_procs, method, timeout, background,
                     relabel, reuse)
        install_excepthook(rt._report_abort, lambda: rt.rank)
        rt._started = (_process_start(), called)
        rt._join(parent)
    else:
        comm = MPI.COMM_WORLD.Dup()
        adv = None
        if comm.rank == 0:
            adv = advisor if advisor is not None else advisor_from_env()
        rt = Resizer(comm, adv, job_id, allow_new_sizes, sizes, max_procs, method, timeout, background, relabel,
                     reuse)
        rt._keys = [(0, r) for r in range(comm.size)]
        if reuse and comm.rank == 0:
            atexit.register(rt._release_parked)  # parked ranks must not outlive a program that skips finish()
        install_excepthook(rt._report_abort, lambda: rt.rank)
        if adv is not None and relabel and method == "circulant":
            placement.prefetch()  # the solver's import (scipy) runs during the first iterations, not in a resize
    _RUNTIME = rt
    return rt
