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
from dataclasses import dataclass, field

import numpy as np
from mpi4py import MPI

from reshape import faults
from reshape.joblink import launchers
from reshape.joblink.advice import Advisor
from reshape.joblink.protocol import Advice, ResizePoint
from reshape.mpiutil import allreduce, bcast_obj, release
from reshape.redistribution import placement
from reshape.redistribution.layout import Layout, nearly_square_grid
from reshape.redistribution.redistribute import redistribute
from reshape.runtime import checkpoint, checks, ftcomm, recovery
from reshape.runtime.background import Background, Pending
from reshape.runtime.checkpoint import Checkpointer, Restored
from reshape.runtime.darray import DistArray, LayoutRule, Registered, layout_rule
from reshape.runtime.ending import Ending
from reshape.runtime.inplace import Buddies, failure
from reshape.runtime.parking import CallBack, CalledBack, Parking, Reserve
from reshape.runtime.recovery import Expanding
from reshape.runtime.results import EXPAND_PARTS, ResizeError, ResizeResult
from reshape.runtime.sizing import SECOND_SPAWN_OPEN_MPI, Sizing
from reshape.runtime.spawning import Joining, check_hosts, unspawnable
from reshape.runtime.watchdog import DEFAULT_TIMEOUT, Watchdog

__all__ = ["EXPAND_PARTS", "Registered", "ResizeError", "ResizeResult", "Resizer", "layout_rule"]


@dataclass
class Resizer(Joining, Background, Parking, Sizing, Ending):
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

    The steps of a resize come in parts, each a mixin that declares the fields
    it shares: :class:`~reshape.runtime.spawning.Joining` (expansions, new
    ranks joining), :class:`~reshape.runtime.background.Background` (resizes
    behind the next iteration), :class:`~reshape.runtime.parking.Parking`
    (retired ranks kept for reuse), :class:`~reshape.runtime.sizing.Sizing` (the sizes the job
    accepts), and under all of them
    :class:`~reshape.runtime.watchdog.Guarded` (the resize deadline).
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
    relabel: bool = True  # positions go to the ranks that keep the most data (reshape.redistribution.placement)
    reuse: bool = False  # a shrink parks retired ranks for a later expansion (reshape.runtime.parking)
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
    _dog: Watchdog | None = None  # bounds each resize (reshape.runtime.watchdog)
    _announced: tuple | None = None  # what the sizes last announced to the advisor were computed from
    _pending: Pending | None = None  # a background expansion waiting for its switch
    _end: int | None = None  # the loop's iteration count, when the job uses iterations()
    _spawned_remote: bool = False  # an expansion of this job spawned onto another host (rank 0's view)
    _parts: dict[str, float] = field(default_factory=dict)  # the parts of the expansion under way (EXPAND_PARTS)
    _called_back: int = 0  # of the expansion under way's new ranks, how many are parked ranks called back
    _plan: tuple[int, ...] | None = None  # RESHAPE_PLAN on the ranks mpiexec started: checked against the arrays
    _started: tuple[float, float] | None = None  # spawned rank: (process start, runtime.init) epoch seconds
    _finished: bool = False  # finish() was called (else rank 0 reports done at a normal exit: _done_at_exit)
    _keys: list[placement.Seniority] = field(default_factory=list)  # seniority of every comm rank
    _reserve: Reserve = field(default_factory=Reserve)  # pools of parked ranks (reshape.runtime.parking)
    _ckpt: Checkpointer | None = None  # periodic checkpoints (RESHAPE_CHECKPOINT, reshape.runtime.checkpoint)
    _restored: Restored | None = None  # the checkpoint this run resumed from, filling the arrays registered
    checkpoint_dir: str | None = None  # a spawned rank: the running job's checkpoint directory (JoinState)
    inplace: bool = False  # a lost rank is recovered in place (RESHAPE_INPLACE, reshape.runtime.inplace)
    _buddies: Buddies | None = None  # the in-memory copies in-place recovery reads (reshape.runtime.inplace)
    recoveries: list[dict] = field(default_factory=list)  # one per in-place recovery on this rank
    _expanding: Expanding | None = None  # an expansion under way, with in-place recovery (reshape.runtime.recovery)
    _status: str | None = None  # what finish() was told

    # ------------------------------------------------------------ basics
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
        """
        self._end = n
        while self.iteration < n:
            try:
                if self._buddies is not None:
                    self._buddies.poll()
                    if self._buddies.due(self):
                        self._buddies.refresh(self)
                faults.iteration(self.iteration, self.rank, self.size)
                self._in_body = True
                if self.inplace:  # the program's own messages show its pattern (reshape.runtime.ftcomm)
                    self.comm.record = True
                step(self.iteration)
                if self.inplace:
                    self.comm.record = False
                result = self.resize()
                self._in_body = False
                if (self._buddies is not None and result.action == "shrink"
                        and self._buddies.generation is not self.comm):  # covered again before after()
                    self._buddies.refresh(self, self.iteration + 1)
                if after is not None:
                    after(self.iteration, result)
                self.iteration += 1
            except Exception as e:
                self._in_body = False
                if not (self.inplace and failure(e)):
                    raise
                recovery.recover(self, e)

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
        spawned = name in self._pending_arrays  # the array arrives from the running ranks
        rule = checks.array_rule(None if spawned else self.comm, self.size, name, shape, dtype, layout, block,
                                 init, self.arrays)
        limit = checks.data_limit(name, shape, layout, block)
        if not spawned:  # the size the job runs on, and a scripted plan, against the data, before anything is built
            checks.agree(self.comm, checks.start_data_problem(self.size, limit)
                         or checks.plan_data_problem(self._plan, limit), f"register_array({name!r})")
        if spawned:
            lay, local = self._pending_arrays.pop(name)
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
                job_id=self.job_id, iteration=self.iteration + (1 if self._in_body else 0),
                nprocs=self.size, grid=tuple(self.grid), iter_time=float(t),
                redist_time=prev[1] if prev else None, redist_from=prev[0] if prev else None,
                host=socket.gethostname(), parked=tuple(self._reserve.parked_hosts()) or None,
                total=None if self._end is None else int(self._end),
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
        back = self._new_ranks_from(nprocs, hosts)
        self._spawned_remote = self._spawned_remote or any(not launchers.is_local(h) for h in hosts)
        t0 = time.perf_counter()
        self._parts = {"_wall": time.time()}
        self._called_back = len(back.members) if back is not None else 0
        merged, call = self._bring_in(self.comm, back, nprocs - old, hosts, self._spawn)
        if self._expanding is not None:  # in-place recovery: errors come back; a loss now undoes the expansion
            merged.Set_errhandler(MPI.ERRORS_RETURN)
            self._expanding.merged = merged
        self._pending_join = (old, nprocs)
        self._replace_comm(merged)
        t2 = time.perf_counter()
        self._parts.update(spawn_call_seconds=call, merge_seconds=t2 - t0 - call)
        return t2 - t0

    def _new_ranks_from(self, nprocs: int, hosts) -> CallBack | None:
        """An expansion's checks (collective): the parked ranks to call back and the rest to spawn (reuse
        on and a parked rank fits: :meth:`Reserve.pick`), or ``None`` to spawn them all; ResizeError on
        every rank if refused (hosts to spawn on are probed now, before anything changes)."""
        problem = self._check_size(nprocs, "expand") if self.rank == 0 else None
        if problem is None and self.rank == 0 and self._growth_cap() is not None:
            problem = SECOND_SPAWN_OPEN_MPI
        back = None
        if self.rank == 0 and problem is None:
            back = self._reserve.pick(nprocs - self.size, hosts) if self.reuse else None
            if back is None or back.rest:  # ranks to spawn: they must be able to run the program
                problem = unspawnable()
            if problem is None and back is None:
                problem = check_hosts(hosts, nprocs - self.size)
            elif problem is None and back.rest:
                problem = check_hosts(back.rest_hosts, back.rest)
        problem, back = bcast_obj(self.comm, (problem, back))
        if problem:
            raise ResizeError(problem)
        return back

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
        dt = allreduce(self.comm, time.perf_counter() - t0)
        if self._expanding is not None:  # the new ranks too: every rank has its blocks, or a loss undoes it all
            self.comm.Agree(1)
        self._renumber(ranks, keys)
        return dt

    def _positions(self, q: int, candidates) -> tuple[int, ...]:
        """Rank 0: the comm rank of every position at size ``q`` (:func:`reshape.redistribution.placement.choose`)."""
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
        ranks = self._staying(nprocs)
        self._phase("redistributing the arrays")
        for reg in self.arrays.values():
            dst = reg.rule(nprocs)
            new = redistribute(self.comm, reg.layout, reg.local, dst, src_ranks=range(reg.layout.nprocs),
                               dst_ranks=ranks, method=self.method)
            reg.dist = DistArray(dst, new, self.comm, ranks)
        dt = allreduce(self.comm, time.perf_counter() - t0)
        self._retire_others(ranks)
        return dt

    def _staying(self, nprocs: int) -> tuple[int, ...]:
        """A shrink's checks and placement: the comm rank of every position at ``nprocs``. Collective.

        Raises :class:`ResizeError` on every rank when the shrink is refused.
        """
        problem, ranks = (self._check_size(nprocs, "shrink"), ()) if self.rank == 0 else (None, ())
        if self.rank == 0 and problem is None:
            ranks = self._positions(nprocs, placement.staying(self._keys, nprocs))
        problem, ranks = bcast_obj(self.comm, (problem, ranks))
        if problem:
            raise ResizeError(problem)
        return tuple(ranks)

    def _retire_others(self, ranks: tuple[int, ...]) -> None:
        """A shrink's end, once the arrays are on ``ranks``: the others retire (or park); the rest renumber."""
        keep = self.rank in ranks
        self._phase("retiring ranks")
        if not keep:
            faults.hit("retire", self.rank, self.size)
        hosts = self.comm.gather(socket.gethostname(), root=0) if self.reuse else None
        new_comm = placement.renumber(self.comm, ranks)
        if not self.reuse:
            release(self.comm)
            if not keep:
                self._retire()
        elif keep:  # the old communicator stays: the retired ranks wait on it (reshape.runtime.parking)
            retired = {r: hosts[r] for r in range(self.size) if r not in ranks} if self.rank == 0 else {}
            self._reserve.keep(self.comm, retired)
        else:
            self._park()
        self.comm = new_comm
        self._keys = [self._keys[r] for r in ranks]
        for reg in self.arrays.values():
            reg.dist = DistArray(reg.dist.layout, reg.dist.local, new_comm, tuple(range(len(ranks))))

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
            if self._pending is not None and self._ckpt is not None:
                self._ckpt.settle(self.comm, wait=True)
            result = self._switch() if self._pending is not None else self._act(self.contact_scheduler(), old)
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
            self._buddies.cover(self, self.iteration + (1 if self._in_body else 0))
        what = f"{advice.action} {old}->{advice.nprocs}"
        self._arm(what)
        try:
            if advice.action == "expand" and self._overlap():
                return self._expand_background(advice, old)
            if advice.action == "expand":
                if self.inplace:  # a loss before the new ranks have their blocks undoes it (recovery.py)
                    self._expanding = Expanding(old, self.rank, self._buddies.generation)
                spawn = self.expand_processors(advice.nprocs, advice.hosts)
                secs = self.redistribute()
                self._expanding = None
                parts = {k: v for k, v in self._parts.items() if k in EXPAND_PARTS}
                return ResizeResult("expand", old, self.size, secs, spawn, reason=advice.reason,
                                    called_back=self._called_back, **parts)
            if advice.action == "shrink" and self._overlap():
                return self._shrink_background(advice, old)
            if advice.action == "shrink":
                secs = self.shrink_processors(advice.nprocs)
                return ResizeResult("shrink", old, self.size, secs, reason=advice.reason)
            raise ResizeError(f"unknown action {advice.action!r}")
        except ResizeError as e:
            return ResizeResult("failed", old, self.size, error=str(e), reason=advice.reason, asked=advice.nprocs)
        except Exception as e:
            if self.inplace and failure(e):
                raise  # a rank lost in the resize: recovered in place by run() (reshape.runtime.recovery)
            self._abort_resize(what, e)
        finally:
            self._disarm()

    # ------------------------------------------------------------ internals
    def _replace_comm(self, new: MPI.Intracomm) -> None:
        old = self.comm
        self.comm = new
        for reg in self.arrays.values():
            reg.dist = DistArray(reg.dist.layout, reg.dist.local, new, reg.dist.ranks)
        release(old)

    def _retire(self) -> None:
        sys.stdout.flush()
        sys.stderr.flush()
        MPI.Finalize()
        raise SystemExit(0)
