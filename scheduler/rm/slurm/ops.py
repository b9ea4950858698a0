"""The Slurm broker's operations: what one look at Slurm asks of the core and of Slurm (plain data).

:class:`scheduler.rm.slurm.broker.Broker` returns them; :class:`scheduler.rm.slurm.manager.SlurmManager`
applies them to the core (node events, shrink requests) and queues the Slurm commands (``sbatch`` an
expander, ``scancel``, ``scontrol update``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from scheduler.rm.slurm.view import SlurmJob

__all__ = ["AskShrink", "Cancel", "Drain", "Ended", "Fail", "Forget", "Grant", "Lost", "Release", "Submit", "Update",
           "batch_last"]


@dataclass(frozen=True)
class Submit:
    """Ask Slurm for ``nodes`` more nodes for group ``main`` (one expander job ending by ``deadline``)."""

    main: str
    nodes: int
    deadline: float | None = None  # the main job's end (epoch seconds), if it has a time limit


@dataclass(frozen=True)
class Grant:
    host: str
    job: str  # the Slurm job holding it (the main job or an expander)
    main: str
    waited: float = 0.0  # seconds from the expander's submission to seeing it run


@dataclass(frozen=True)
class Release:
    """Give ``host`` back to Slurm: ``scontrol update`` of ``job`` to its other nodes, or ``scancel``;
    ``minutes``: the time limit set in the same update (a job's own allocation shrunk)."""

    host: str
    job: str
    why: str
    minutes: int | None = None


@dataclass(frozen=True)
class Lost:
    host: str
    main: str
    why: str


@dataclass(frozen=True)
class Drain:
    """Place nothing new on ``host`` (``on``), or offer it again (not ``on``)."""

    host: str
    on: bool = True


@dataclass(frozen=True)
class Cancel:
    job: str
    why: str


@dataclass(frozen=True)
class AskShrink:
    job_id: int
    nprocs: int
    why: str
    drop: tuple[str, ...] = ()


@dataclass(frozen=True)
class Update:
    """``scontrol update JobId=job``: ``nodes`` (NumNodes of a pending job: a moldable start) and/or
    ``minutes`` (its TimeLimit)."""

    job: str
    nodes: int | None = None
    minutes: int | None = None
    why: str = ""


@dataclass(frozen=True)
class Forget:
    """``host``, taken back by Slurm, is no longer used: out of the pool (no Slurm operation)."""

    host: str
    why: str


@dataclass(frozen=True)
class Fail:
    """``host`` was taken back by Slurm under a job that cannot shrink off it: that job fails."""

    host: str
    why: str


@dataclass(frozen=True)
class Ended:
    """Group ``main``'s Slurm job is gone (``state``: its last state seen, or ``GONE``)."""

    main: str
    state: str


def batch_last(releases: list[Release], by_id: Mapping[str, SlurmJob], kept: Callable[[str], list[str]]
               ) -> list[Release]:
    """Releases in an order Slurm accepts: a Slurm job keeps its batch host (its first node) while it holds
    others (``scontrol update NodeList=`` without it is refused), so that one goes last, and not at all while
    the job keeps other nodes of ours (``kept``: the hosts a Slurm job holds for us; it goes when they do:
    ``scancel``)."""
    going: dict[str, set[str]] = {}
    for r in releases:
        going.setdefault(r.job, set()).add(r.host)
    out = []
    for r in releases:
        j = by_id.get(r.job)
        first = j.nodes[0] if j is not None and j.nodes else None
        if r.host == first and any(h not in going[r.job] for h in kept(r.job) if h != r.host):
            continue
        out.append(r)
    return sorted(out, key=lambda r: (by_id.get(r.job) is not None and by_id[r.job].nodes[:1] == (r.host,)))
