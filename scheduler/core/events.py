"""The core's own event and result types: what a job or a node monitor tells the scheduler core, in its terms.

The daemon decodes a request off the wire (``reshape.joblink.protocol``), checks it at the edge and hands the
core one of these (:func:`scheduler.daemon.handlers.core_event`); the core answers a resize point with its
:class:`Advice`, which the daemon sends back as the protocol's. Each type holds only the fields the core
reads, under the protocol's names; a field the wire may omit keeps the protocol's default. Frozen and
plain: the simulator and the tests build them directly.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["EVENTS", "Advice", "Event", "Finished", "Heartbeat", "Hello", "JobEnded", "Lost", "NodeRegister",
           "ResizePoint", "Resized"]


@dataclass(frozen=True, slots=True)
class Hello:
    """The job (re)connected at ``nprocs``; ``sizes``: every size its program accepts."""

    job_id: int
    nprocs: int
    sizes: tuple[int, ...] | None = None


@dataclass(frozen=True, slots=True)
class ResizePoint:
    """The job reached a resize point (Sudarsan & Ribbens 2007 §3.2.1): its iteration, size and timings."""

    job_id: int
    iteration: int
    nprocs: int
    iter_time: float
    redist_time: float | None = None
    redist_from: int | None = None
    parked: tuple[str, ...] | None = None
    total: int | None = None


@dataclass(frozen=True, slots=True)
class Resized:
    """The job confirms the resize it was advised, ``old`` -> ``new`` in ``seconds`` (or says why it failed)."""

    job_id: int
    old: int
    new: int
    seconds: float
    error: str | None = None


@dataclass(frozen=True, slots=True)
class Lost:
    """The job lost ``ranks`` of its ``old`` and goes on, in place, on ``new`` survivors."""

    job_id: int
    old: int
    new: int
    ranks: tuple[int, ...]
    reason: str


@dataclass(frozen=True, slots=True)
class Finished:
    """The job's own report of its end: ``done``, ``error`` or ``lost``."""

    job_id: int
    status: str
    error: str | None = None


@dataclass(frozen=True, slots=True)
class JobEnded:
    """A node monitor saw the job's processes on ``node`` end (``attempt``; ``code``: its ``mpiexec``'s status)."""

    job_id: int
    node: str
    status: str
    detail: str | None = None
    attempt: int | None = None
    code: int | None = None


@dataclass(frozen=True, slots=True)
class NodeRegister:
    """A node monitor (re)starts on ``node`` as ``incarnation`` (its ``pid`` on ``host``)."""

    node: str
    incarnation: str
    pid: int | None = None
    host: str | None = None


@dataclass(frozen=True, slots=True)
class Heartbeat:
    """A heartbeat of ``node``'s monitor: the jobs its scan sees, the runs it holds, the attempts it killed."""

    node: str
    incarnation: str
    jobs: tuple[int, ...] = ()
    runs: tuple[dict[str, Any], ...] | None = None
    killed: tuple[dict[str, Any], ...] | None = None


@dataclass(frozen=True, slots=True)
class Advice:
    """The Remap Scheduler's answer at a resize point: ``expand``/``shrink`` to ``nprocs`` (onto ``hosts``),
    or ``continue``."""

    action: str
    nprocs: int
    hosts: tuple[str, ...] = ()
    reason: str = ""


Event = Hello | ResizePoint | Resized | Lost | Finished | JobEnded | NodeRegister | Heartbeat
EVENTS: tuple[type, ...] = (Hello, ResizePoint, Resized, Lost, Finished, JobEnded, NodeRegister, Heartbeat)
