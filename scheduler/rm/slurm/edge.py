"""The Slurm thread of a manager and the messages it exchanges with the daemon's loop.

:class:`SlurmEdge` runs Slurm's commands (:mod:`scheduler.rm.slurm.view`) off the daemon's loop,
so the loop never waits for Slurm: a look at the partition every second, and the operations the
manager queues. Both directions are frozen dataclasses defined here, the only schema of the queue:
the loop puts :data:`Order` values in the outbox (``sbatch`` expanders, ``scancel``, ``scontrol
update``), the thread puts :data:`Report` values in the inbox (a look, a submission, an error).
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from scheduler.rm.slurm.view import (
    SlurmError,
    SlurmJob,
    cancel_expanders,
    look,
    partition_args,
    run,
    submit_expander,
)

__all__ = ["CancelJob", "EndJob", "KeepNodes", "KeepRefused", "Look", "Order", "Report", "RequeueJob", "SlurmEdge",
           "SlurmFailed", "SubmitExpanders", "Submitted", "UpdateJob"]


# ---------------------------------------------------------------------- outbox (from the loop)
@dataclass(frozen=True)
class SubmitExpanders:
    """``sbatch`` ``nodes`` expander jobs of one node each for job ``main``; ``deadline``: its end (epoch s)."""

    main: str
    nodes: int
    deadline: float | None


@dataclass(frozen=True)
class CancelJob:
    """``scancel`` Slurm job ``job``."""

    job: str


@dataclass(frozen=True)
class EndJob:
    """``scancel`` job ``main`` and every expander of it (those this user submitted)."""

    main: str


@dataclass(frozen=True)
class RequeueJob:
    """``scontrol requeue`` job ``main``: back to Slurm's queue, to run again as a new batch attempt."""

    main: str


@dataclass(frozen=True)
class KeepNodes:
    """Shrink Slurm job ``job`` to ``hosts`` in one ``scontrol update``, its time limit with it (``minutes``)."""

    job: str
    hosts: Sequence[str]
    minutes: int | None = None


@dataclass(frozen=True)
class UpdateJob:
    """``scontrol update`` of job ``job``: ``NumNodes`` (a moldable start) and/or ``TimeLimit``, ..."""

    job: str
    fields: Mapping[str, int]


Order = SubmitExpanders | CancelJob | EndJob | RequeueJob | KeepNodes | UpdateJob


# ---------------------------------------------------------------------- inbox (to the loop)
@dataclass(frozen=True)
class Look:
    """One look at the partition: its jobs (and the watched ones' final states), idle nodes, when."""

    jobs: list[SlurmJob]
    idle: int
    seen: float


@dataclass(frozen=True)
class Submitted:
    """An expander job submitted for ``main`` (``job``), or the ``error`` that stopped it; ``t0``: when asked."""

    main: str
    job: str | None
    t0: float
    error: str | None = None


@dataclass(frozen=True)
class KeepRefused:
    """Slurm refused to shrink job ``job`` (:class:`KeepNodes`): it still holds the nodes given back."""

    job: str
    message: str


@dataclass(frozen=True)
class SlurmFailed:
    """A Slurm command failed (status shows it)."""

    message: str


Report = Look | Submitted | KeepRefused | SlurmFailed


class SlurmEdge:
    """Runs Slurm commands off the daemon's loop: a look every ``period`` s, the :data:`Order` values
    as queued in :attr:`outbox`; :data:`Report` values come back in :attr:`inbox`."""

    def __init__(self, partition: str | None, period: float = 1.0):
        self.period = period
        self.part = partition_args(partition)
        self.inbox: queue.SimpleQueue = queue.SimpleQueue()   # to the daemon's loop
        self.outbox: queue.SimpleQueue = queue.SimpleQueue()  # from it
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="slurm", daemon=True)
        self.watch: tuple[str, ...] = ()  # main jobs whose final state each look asks for (set by the loop)

    def start(self) -> None:
        self._thread.start()

    def follow(self, mains: tuple[str, ...]) -> None:
        """Ask each look for the final state of these main jobs once they leave Slurm's queue."""
        self.watch = mains

    def stop(self, cancel_expanders_of: tuple[str, ...] = ()) -> None:
        self._stop.set()
        self.outbox.put(None)
        self._thread.join(timeout=10)
        for main in cancel_expanders_of:
            with contextlib.suppress(SlurmError):
                cancel_expanders(main)

    def _do(self, op: Order) -> None:
        if isinstance(op, SubmitExpanders):  # one expander job per node: each goes back by scancel alone
            for _ in range(op.nodes):
                t0 = time.time()
                try:
                    self.inbox.put(Submitted(op.main, submit_expander(op.main, 1, self.part, op.deadline), t0))
                except SlurmError as e:
                    self.inbox.put(Submitted(op.main, None, t0, str(e)))
                    break
        elif isinstance(op, CancelJob):
            run(["scancel", op.job])
        elif isinstance(op, EndJob):  # a job and every expander of it (those we submitted: --user)
            run(["scancel", op.main])
            cancel_expanders(op.main)
        elif isinstance(op, RequeueJob):
            run(["scontrol", "requeue", op.main])
        elif isinstance(op, KeepNodes):  # one update: without accounting Slurm refuses any after a job's first shrink
            try:
                run(["scontrol", "update", f"JobId={op.job}", f"NodeList={','.join(op.hosts)}",
                     *([f"TimeLimit={op.minutes}"] if op.minutes else [])])
            except SlurmError as e:
                self.inbox.put(KeepRefused(op.job, str(e)))
        elif isinstance(op, UpdateJob):  # a pending job's NumNodes (a moldable start) and/or any job's TimeLimit
            run(["scontrol", "update", f"JobId={op.job}", *(f"{k}={v}" for k, v in op.fields.items())])

    def _run(self) -> None:
        last = 0.0
        while not self._stop.is_set():
            try:
                op = self.outbox.get(timeout=max(0.0, last + self.period - time.monotonic()))
            except queue.Empty:
                op = ()
            if op is None:
                break
            try:
                if op:
                    self._do(op)
                else:
                    last = time.monotonic()
                    seen = time.time()
                    self.inbox.put(Look(*look(self.part, self.watch), seen))
            except SlurmError as e:
                self.inbox.put(SlurmFailed(str(e)))
