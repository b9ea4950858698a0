"""The core's own event and result types: what a job, a node monitor or a resource manager tells the scheduler
core, in its terms.

The daemon decodes a request off the wire (``reshape.joblink.protocol``), checks it at the edge and hands the
core one of these (:func:`scheduler.daemon.handlers.core_event`); the core answers a resize point with its
:class:`Advice`, which the daemon sends back as the protocol's. Each type holds only the fields the core
reads, under the protocol's names; a field the wire may omit keeps the protocol's default. Frozen and
plain: the simulator and the tests build them directly.

A resource manager (``scheduler.rm``) changes the nodes only by reporting :data:`NODE_EVENTS` (a node granted,
released, down or draining, an allocation's leases ended) to its port
(:meth:`scheduler.core.state.ManagerPort.report`, which hands them to ``ClusterState.handle``); the core applies
each to the pool and records it in the node history.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["EVENTS", "NODE_EVENTS", "Advice", "Event", "Finished", "Heartbeat", "Hello", "JobEnded", "LeaseEnded",
           "Lost", "NodeDown", "NodeDraining", "NodeEvent", "NodeGranted", "NodeRegister", "NodeReleased",
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


# ---------------------------------------------------------------------- what a resource manager reports
@dataclass(frozen=True, slots=True)
class NodeGranted:
    """The manager gave ``host`` to the pool (``lease``: only jobs of that allocation may use it)."""

    host: str
    detail: str
    lease: str | None = None


@dataclass(frozen=True, slots=True)
class NodeReleased:
    """``host`` goes back to the manager; only a node no job uses (nor expands onto) can: the result says."""

    host: str
    detail: str


@dataclass(frozen=True, slots=True)
class NodeDown:
    """``host`` is gone (the manager took it while jobs used it): they fail, as for a silent node."""

    host: str
    why: str


@dataclass(frozen=True, slots=True)
class NodeDraining:
    """``host`` stays up for the jobs on it, but nothing new is placed there (``on=False``: offered again).
    Ignored for a node that is down or not in the pool; the result: whether it changed."""

    host: str
    why: str
    on: bool = True


@dataclass(frozen=True, slots=True)
class LeaseEnded:
    """``allocation`` ended: its leased nodes go back to the manager, or, where a job still uses one, are
    offered to every job until it is released."""

    allocation: str
    why: str


NodeEvent = NodeGranted | NodeReleased | NodeDown | NodeDraining | LeaseEnded
NODE_EVENTS: tuple[type, ...] = (NodeGranted, NodeReleased, NodeDown, NodeDraining, LeaseEnded)
