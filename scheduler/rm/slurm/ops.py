"""The Slurm broker's operations: what one look at Slurm asks of the core and of Slurm (plain data).

:class:`scheduler.rm.slurm.broker.Broker` returns them; :class:`scheduler.rm.slurm.manager.SlurmManager`
applies them to the core (node events, shrink requests) and queues the Slurm commands (``sbatch`` an
expander, ``scancel``, ``scontrol update``).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["AskShrink", "Cancel", "Drain", "Ended", "Fail", "Forget", "Grant", "Lost", "Release", "Submit", "Update"]


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
