"""Slurm's backfill plan over whole nodes (pure): when each waiting job starts, given the running jobs' limits.

With ``select/linear`` (whole nodes) and ``sched/backfill`` Slurm plans every pending job in
priority order at the earliest time its nodes are free for its whole time limit, given the
running jobs' ends (start plus limit: Slurm does not know a job will end sooner) and the
reservations of the jobs planned before it; a job whose earliest time is now starts (the
highest-priority ones by the main scheduler, the others by backfill: the same thing when every
job has a limit). That is conservative backfilling (Mu'alem & Feitelson 2001); ``squeue %S``
shows the planned start. :func:`plan` is that computation, used by the controller to ask "would
this change delay a waiting job past Slurm's prediction?" and by the simulator's twin of the
Slurm experiment (``scheduler.lab.slurm_twin``) as its Slurm.

A job with a node range (``-N MIN-MAX``) starts now on as many nodes as are free now up to MAX
(at least MIN); later, it is planned at MIN. A job with a ``--deadline`` (the controller's expander
jobs, each with a ``--time`` of the minutes left when asked for and ``--time-min=1``) runs with its
limit brought down to the whole minutes left before its deadline, and only if at least one is left
and its nodes are free that long. (Without a ``--time`` Slurm's backfill would test it as running the
partition's ``MaxTime``: :func:`scheduler.rm.slurm.view.submit_expander` always gives one.)
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = ["NO_LIMIT", "Pending", "Planned", "limit_for", "plan"]

NO_LIMIT = 365 * 86400.0  # Slurm plans a job without a time limit as ending in a year


@dataclass(frozen=True)
class Pending:
    """A pending job as the planner sees it (priority order is the order of the list)."""

    id: str
    nodes: int  # at least (MIN of a range)
    limit: float | None = None  # seconds (whole minutes in Slurm); None: no limit
    max_nodes: int | None = None  # MAX of a range (None: ``nodes``)
    deadline: float | None = None  # the limit is at most the whole minutes left before it


@dataclass(frozen=True)
class Planned:
    start: float
    nodes: tuple[str, ...]
    limit: float  # seconds, as it will run (a deadline job's whole minutes)


def limit_for(p: Pending, start: float) -> float | None:
    """The limit ``p`` runs with if it starts at ``start``; None: it cannot (a deadline less than a minute away)."""
    if p.deadline is None:
        return NO_LIMIT if p.limit is None else p.limit
    minutes = math.floor((p.deadline - start) / 60.0)
    if minutes < 1:
        return None
    return 60.0 * minutes if p.limit is None else min(p.limit, 60.0 * minutes)


def _free(busy: Mapping[str, list[tuple[float, float]]], nodes: Sequence[str], t0: float, t1: float) -> list[str]:
    """The nodes free over ``[t0, t1)``, tightest fit first: those busy until closest before ``t0``, then
    those busy again soonest after ``t1`` (a job placed there leaves the longest free stretches to others,
    as a backfill scheduler that starts jobs in holes must), then in the partition's order."""
    def fit(h: str) -> tuple[float, float]:
        before = max((b1 for b0, b1 in busy[h] if b1 <= t0), default=-math.inf)
        after = min((b0 for b0, b1 in busy[h] if b0 >= t1), default=math.inf)
        return t0 - before, after - t1
    return sorted((h for h in nodes if all(b1 <= t0 or b0 >= t1 for b0, b1 in busy[h])), key=fit)


def plan(now: float, nodes: Sequence[str], running: Sequence[tuple[Sequence[str], float]],
         pending: Sequence[Pending]) -> dict[str, Planned]:
    """Every pending job's planned start (those that start now have ``start == now``); a job that can
    never run here (more nodes than the partition, a deadline passed) is left out.

    ``running``: each running job's nodes and end (its start plus limit; ``math.inf`` or
    :data:`NO_LIMIT` for none). Nodes are taken in the order given."""
    busy: dict[str, list[tuple[float, float]]] = {h: [] for h in nodes}
    for hosts, end in running:
        for h in hosts:
            if h in busy:
                busy[h].append((now, max(now, min(end, now + NO_LIMIT))))
    out: dict[str, Planned] = {}
    for p in pending:
        if p.nodes > len(nodes) or p.nodes < 1:
            continue
        times = sorted({now, *(b1 for iv in busy.values() for _, b1 in iv if b1 > now)})
        for t in times:
            lim = limit_for(p, t)
            if lim is None:
                break  # a deadline job: later starts leave it even less time
            free = _free(busy, nodes, t, t + lim)
            if len(free) < p.nodes:
                continue
            take = free[:max(p.nodes, p.max_nodes or p.nodes)] if t == now else free[:p.nodes]
            for h in take:
                busy[h].append((t, t + lim))
            out[p.id] = Planned(t, tuple(take), lim)
            break
    return out
