"""Background expansion (MaM's approach): data motion behind the job's next iteration.

With ``background`` on (``RESHAPE_BACKGROUND=1`` or ``init(background=True)``),
an expansion's checks run at the resize point; then a helper thread on every
running rank spawns the new ranks (or calls parked ones back: :mod:`reshape.runtime.parking`),
merges with them, hands them the state and
starts moving the arrays registered ``constant=True``, while the application
runs one more iteration on its old communicator and layouts. At the next
resize point (:meth:`Background.switch`) the job waits for those arrays,
sends the new ranks the iteration counter and values as they are then, moves
the other arrays (blocking) and switches communicators. A shrink works the same
way without the helper thread: the constant arrays start moving to the ranks
that stay, every rank (the retiring ones too) runs one more iteration on the
old communicator and layouts, and at the next resize point the other arrays
move and the retiring ranks retire (:meth:`Background.shrink`).
:class:`Background` holds these steps for :class:`reshape.runtime.Resizer`.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from mpi4py import MPI

from reshape.joblink.protocol import Advice
from reshape.mpiutil import allreduce, bcast_obj
from reshape.redistribution import placement
from reshape.redistribution.layout import Layout
from reshape.redistribution.redistribute import redistribute, start
from reshape.runtime.darray import DistArray
from reshape.runtime.job import Job
from reshape.runtime.parking import CallBack, Parking
from reshape.runtime.results import ResizeError, ResizeResult
from reshape.runtime.spawning import Joiner, JoinState, SwitchState, share, spawn
from reshape.runtime.watchdog import Deadline

__all__ = ["Background", "Pending"]


@dataclass
class Pending:
    """An expansion or shrink under way behind the job's iteration (:meth:`Background.expand`,
    :meth:`Background.shrink`)."""

    old: int
    new: int
    spawn_comm: MPI.Intracomm  # a duplicate of the job's communicator: the helper thread's, a shrink's moves
    reason: str = ""
    thread: threading.Thread | None = None
    merged: MPI.Intracomm | None = None  # the communicator the job switches to
    moves: dict[str, tuple[Layout, object]] = field(default_factory=dict)  # constant arrays in flight
    spawn_seconds: float = 0.0
    start_seconds: float = 0.0
    called_back: int = 0  # new ranks that were parked ranks called back
    shrink: tuple[int, ...] = ()  # a shrink: the comm rank of every position at the new size
    refused: str | None = None  # the spawn was refused: the job carries on at its size
    error: str | None = None  # anything else: the job is aborted at the switch


class Background:
    """Expansions and shrinks behind the job's next iteration, over its :class:`~reshape.runtime.job.Job`.

    ``deadline`` bounds the resize at its switch; ``joiner`` brings the new ranks in
    (:class:`~reshape.runtime.spawning.Joiner`); ``parking`` retires (or parks) a shrink's ranks
    (:class:`~reshape.runtime.parking.Parking`); ``enabled``: the job asked for background resizes.
    ``pending`` is the expansion or shrink waiting for its switch: ``resize()`` and ``finish()``
    switch when it is set.
    """

    def __init__(self, job: Job, deadline: Deadline, joiner: Joiner, parking: Parking, enabled: bool = False):
        self.job = job
        self.deadline = deadline
        self.joiner = joiner
        self.parking = parking
        self.enabled = enabled
        self.pending: Pending | None = None

    def overlap(self) -> bool:
        """Whether this resize moves data in the background: asked for, a constant array
        to move, and an iteration left to overlap with."""
        job = self.job
        return (self.enabled and job.method == "circulant" and any(r.constant for r in job.arrays.values())
                and (job.end is None or job.iteration + 1 < job.end))

    def expand(self, advice: Advice, old: int, back: CallBack | None) -> ResizeResult:
        """Start an expansion that runs behind the job's next iteration (MaM-style), once its checks
        passed (``back``: the parked ranks to call back, or None to spawn them all).

        A helper thread on every running rank spawns the new ranks, merges with
        them, hands them the state and starts moving the ``constant`` arrays,
        while the application runs its next iteration on its old communicator
        and layouts. The job switches to the new size at its next resize point
        (:meth:`switch`). Needs ``MPI_THREAD_MULTIPLE``; without it the spawn
        runs here and only the data motion overlaps the iteration.
        """
        job, nprocs, hosts = self.job, advice.nprocs, tuple(advice.hosts)
        moving = tuple(name for name, r in job.arrays.items() if r.constant)
        state = None
        if job.rank == 0:
            state = JoinState(
                iteration=job.iteration + 1, values={}, history=[], background=moving,
                arrays=[(r.name, r.layout, r.rule(nprocs), str(r.local.dtype)) for r in job.arrays.values()],
                ranks=tuple(range(nprocs)), keys=tuple(placement.grown(job.keys, nprocs - old)),
            )
        pend = Pending(old, nprocs, job.comm.Dup(), advice.reason, called_back=len(back.members) if back else 0)
        pend.thread = threading.Thread(target=self._spawn_behind, args=(pend, hosts, back, state, moving),
                                       name="reshape-expand", daemon=True)
        self.pending = pend
        if MPI.Query_thread() == MPI.THREAD_MULTIPLE:
            pend.thread.start()
        else:
            pend.thread.run()
        return ResizeResult("expanding", old, nprocs, reason=advice.reason)

    def _spawn_behind(self, pend: Pending, hosts: tuple[str, ...], back, state, moving: tuple[str, ...]) -> None:
        """The helper thread of a background expansion: spawn (or call ``back`` parked ranks), merge,
        hand over, start the moves."""
        try:
            t0 = time.perf_counter()
            try:
                merged, _ = self.joiner.bring_in(pend.spawn_comm, back, pend.new - pend.old, hosts, spawn)
            except ResizeError as e:
                pend.refused = str(e)
                return
            pend.spawn_seconds = time.perf_counter() - t0
            t1 = time.perf_counter()
            share(merged, state)
            for name in moving:
                reg = self.job.arrays[name]
                dst = reg.rule(merged.size)
                pend.moves[name] = (dst, start(merged, reg.layout, reg.local, dst, src_ranks=range(reg.layout.nprocs)))
            pend.start_seconds = time.perf_counter() - t1
            pend.merged = merged
        except BaseException as e:  # reported at the switch, where the job is aborted
            pend.error = f"{type(e).__name__}: {e}"

    def shrink(self, advice: Advice, old: int, ranks: tuple[int, ...]) -> ResizeResult:
        """Start a shrink whose ``constant`` arrays move behind the job's next iteration, once its checks
        passed (``ranks``: the comm rank of every position at the new size).

        The moves of the constant arrays to the ranks that stay start on a
        duplicate of the job's communicator, and every rank, the retiring ones
        too, runs the next iteration on the old communicator and layouts
        (that iteration's MPI calls progress the moves). At the next resize
        point (:meth:`switch`) the other arrays move and the retiring ranks
        retire, as in a blocking shrink.
        """
        nprocs = advice.nprocs
        t0 = time.perf_counter()
        pend = Pending(old, nprocs, self.job.comm.Dup(), advice.reason, shrink=ranks)
        for name, reg in self.job.arrays.items():
            if reg.constant:
                dst = reg.rule(nprocs)
                pend.moves[name] = (dst, start(pend.spawn_comm, reg.layout, reg.local, dst,
                                               src_ranks=range(reg.layout.nprocs), dst_ranks=ranks))
        pend.start_seconds = time.perf_counter() - t0
        self.pending = pend
        return ResizeResult("shrinking", old, nprocs, reason=advice.reason)

    def switch(self) -> ResizeResult:
        """Finish a background expansion at this resize point and continue on the new ranks.

        Waits for the constant arrays, sends the new ranks the iteration counter
        and values as they are now, moves the other arrays (blocking) and
        replaces the communicator. Returns the expansion's result; its seconds
        are the data motion outside the overlapped iteration.
        """
        pend, self.pending = self.pending, None
        if pend.shrink:
            return self._switch_shrink(pend)
        job, what = self.job, f"expand {pend.old}->{pend.new} (switch)"
        self.deadline.arm(what)
        try:
            self.deadline.phase("waiting for the background spawn")
            pend.thread.join()
            pend.spawn_comm.Free()
            if pend.refused:
                return ResizeResult("failed", pend.old, job.size, error=pend.refused, reason=pend.reason,
                                    asked=pend.new)
            if pend.error:
                raise RuntimeError(f"background expansion: {pend.error}")
            t0 = time.perf_counter()
            merged = pend.merged
            self.deadline.phase("completing the background redistribution")
            done = {name: (dst, ex.wait()) for name, (dst, ex) in pend.moves.items()}
            state = SwitchState(job.next_iteration, job.values, job.history) if job.rank == 0 else None
            bcast_obj(merged, state)
            self._move_rest(done, merged, tuple(range(merged.size)))
            dt = allreduce(merged, time.perf_counter() - t0)
            job.replace_comm(merged)
            job.keys = placement.grown(job.keys, pend.new - pend.old)
            return ResizeResult("expand", pend.old, merged.size, pend.start_seconds + dt, pend.spawn_seconds,
                                reason=pend.reason, called_back=pend.called_back)
        except Exception as e:
            self.deadline.abort(what, e, job.rank)
        finally:
            self.deadline.disarm()

    def _move_rest(self, done: dict, comm: MPI.Comm, dst_ranks: tuple[int, ...]) -> None:
        """At a switch: install the arrays whose moves ``done`` completed and move every other one
        now, to ``len(dst_ranks)`` positions held by ``dst_ranks`` of ``comm``."""
        self.deadline.phase("redistributing the arrays")
        for reg in self.job.arrays.values():
            if reg.name in done:
                dst, new = done[reg.name]
            else:
                dst = reg.rule(len(dst_ranks))
                new = redistribute(comm, reg.layout, reg.local, dst, src_ranks=range(reg.layout.nprocs),
                                   dst_ranks=dst_ranks, method=self.job.method)
            reg.dist = DistArray(dst, new, comm, dst_ranks)

    def _switch_shrink(self, pend: Pending) -> ResizeResult:
        """Finish a background shrink: complete the constant arrays' moves, move the others, retire.

        Retired ranks do not return (as from ``shrink_processors``). The
        result's seconds are the data motion outside the overlapped iteration.
        """
        job, what = self.job, f"shrink {pend.old}->{pend.new} (switch)"
        self.deadline.arm(what)
        try:
            t0 = time.perf_counter()
            self.deadline.phase("completing the background redistribution")
            done = {name: (dst, ex.wait()) for name, (dst, ex) in pend.moves.items()}
            pend.spawn_comm.Free()
            self._move_rest(done, job.comm, pend.shrink)
            dt = allreduce(job.comm, time.perf_counter() - t0)
            self.parking.retire_others(pend.shrink)
            return ResizeResult("shrink", pend.old, job.size, pend.start_seconds + dt, reason=pend.reason)
        except Exception as e:
            self.deadline.abort(what, e, job.rank)
        finally:
            self.deadline.disarm()
