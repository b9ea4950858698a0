"""Starting a waiting Slurm job earlier (pure): what it costs, what it saves, whom it would delay.

The controller can start a job that waits in Slurm's queue sooner in two ways: give it nodes
that running malleable jobs release by shrinking (*shrink to start*), and, for a malleable job
not yet started, start it on fewer nodes than it asked for and let it grow later (*moldable
start*: ``scontrol update NumNodes=K`` of the pending job). Both follow SD-Policy (D'Amico,
Jokanovic & Corbalán, ICPP 2019, §3: apply malleability to running jobs so a queued job
starts with fewer resources, *only when the estimated slowdown improves over the static
schedule*), each job's seconds weighed by :func:`loss_weight`:

    start W now at K nodes  iff  sum_i c_i * E_i(q_i) + O_W(K)  <  S_W - now

with ``c_i = L_W / T_i`` under the ``slowdown`` criterion (the default: both sides divided by
``L_W``, each job's seconds are divided by its own run time, SD-Policy's slowdowns; ``T_i`` the
run of job *i* at its requested size) and ``c_i = 1`` under ``turnaround``;

* ``S_W``: the start Slurm's backfill predicts for W at its requested size ``N`` (``squeue %S``):
  the wait saved;
* ``E_i(q) = R_i * (t_i(q) / t_i(p_i) - 1)``: the time running job *i* loses by running its
  remaining ``R_i = left_i * t_i(p_i)`` seconds (iterations left times its measured iteration
  time) at ``q`` instead of ``p_i`` (measured times where it ran at ``q``, else linear speedup,
  the most a shrink can cost an application whose efficiency falls with its size);
* ``O_W(K) = L_W * (N / K - 1)``: what W loses by running at ``K < N`` nodes, with its time
  limit ``L_W`` as its run time and linear speedup (an upper bound: its efficiency is higher at
  ``K``, and it grows when nodes free up); with ``regrow``, at most ``(S_W - now) * (1 - K / N)``,
  what it loses if it grows to ``N`` when Slurm would have started it.

Under ``turnaround`` the sum is the change in the total turnaround of the jobs involved; under
``slowdown`` the change in their slowdowns (turnaround over run time), which weighs short jobs
more. No shrink may stretch a job's run past ``max_stretch`` times its run at its requested size (the
broker's bound, so that no job pays much for others' starts).

**Never delaying another waiting job** (:func:`delays`): with the shrunk jobs' new ends (a job
below its requested size runs longer: its Slurm limit is extended, ``scheduler.rm.slurm.limits``)
and W started now, Slurm's backfill plan (:func:`scheduler.rm.slurm.plan.plan`) must start no
other pending job later than both its start without the change and the first start Slurm
predicted for it (the reservation conservative backfilling keeps, Mu'alem & Feitelson 2001).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from scheduler.rm.slurm.plan import Pending, plan
from scheduler.rm.slurm.view import SlurmJob

__all__ = ["CRITERIA", "LIVE", "Tenant", "delays", "loss_weight", "moldable_limit", "own_cost", "shrink_cost",
           "shrink_off"]

CRITERIA = ("turnaround", "slowdown")

LIVE = ("RUNNING", "COMPLETING", "CONFIGURING", "SUSPENDED")
UNKNOWN_REMAINING = 300.0  # seconds left assumed for a job that did not say how many iterations it runs


def shrink_cost(nprocs: int, times: Mapping[int, float], left: int | None, q: int) -> float:
    """``E(q)``: seconds a job at ``nprocs`` loses running the rest of its work at ``q`` (module docstring)."""
    if q >= nprocs:
        return 0.0
    t_p = times.get(nprocs)
    if t_p is None or t_p <= 0:
        return (nprocs / q - 1) * UNKNOWN_REMAINING
    t_q = times.get(q) or t_p * nprocs / q
    remaining = left * t_p if left is not None else UNKNOWN_REMAINING
    return max(0.0, remaining * (t_q / t_p - 1))


def own_cost(limit: float | None, n: int, k: int, wait: float | None = None) -> float:
    """``O(K)``: what a job asking for ``n`` nodes loses by starting on ``k`` (its limit as its run time);
    with ``wait`` (the seconds until Slurm would start it at ``n``), at most ``wait * (1 - k/n)``: the
    run it loses if it grows to ``n`` when those nodes would have been its own (module docstring)."""
    if k >= n:
        return 0.0
    bound = (limit or 0.0) * (n / k - 1)
    return bound if wait is None else min(bound, max(0.0, wait) * (1 - k / n))


def loss_weight(criterion: str, limit: float | None, run: float | None) -> float:
    """What one second lost by a running job whose run at its requested size is ``run`` seconds weighs
    against one second of wait saved by a waiting job with time limit ``limit``: 1 under the
    ``turnaround`` criterion; ``limit / run`` under ``slowdown`` (SD-Policy's own test, D'Amico et al.
    2019 §3: both sides divided by their job's run time, so a second matters more to a short job).
    1 where either run time is unknown."""
    if criterion != "slowdown" or not limit or not run or run <= 0:
        return 1.0
    return limit / run


def moldable_limit(limit: float | None, n: int, k: int) -> int | None:
    """The time limit, in whole minutes, of a job asking ``n`` nodes for ``limit`` seconds that starts
    on ``k``: the walltime charging rule (``scheduler.core.walltime``: below its size a job is charged in
    proportion), so ``limit * n / k``."""
    return None if limit is None else math.ceil(limit * n / max(1, k) / 60.0)


@dataclass(frozen=True)
class Tenant:
    """A malleable job as the broker sees it."""

    job_id: int
    main: str  # the group (Slurm job) it runs in
    nprocs: int
    hosts: tuple[str, ...]  # one per rank, in rank order
    min_procs: int = 1
    busy: bool = False  # a resize under way: ask nothing of it now
    points: tuple[int, ...] = ()  # sizes it may shrink to, ascending
    times: Mapping[int, float] = field(default_factory=dict)  # best iteration time measured per size
    left: int | None = None  # iterations left, if it said how many it runs
    ends: Mapping[int, float] = field(default_factory=dict)  # size -> the end Slurm should see at that size
    latest: float | None = None  # the latest end a shrink may push it to (max_stretch times its run at its size)
    run: float | None = None  # seconds its whole run takes at its requested size (measured, else scaled)
    requested: int | None = None  # its requested size (processes)
    total: int | None = None  # iterations its whole run has, if it said

    def within(self, q: int, now: float, max_stretch: float) -> bool:
        """Whether running the rest at ``q`` keeps its run within ``max_stretch`` times its run at its requested
        size: by its measured times where it has them (``latest``), else, with linear speedup from the part
        of its iterations left (``f``), ``(1 - f) + f * requested / q <= max_stretch`` (a job that has not
        measured a size yet is not exempt); True where it said neither its size nor how many it runs."""
        end = self.end_at(q, now) if self.latest is not None else None
        if end is not None:
            return end <= self.latest
        if self.left is None or not self.total or not self.requested:
            return True
        f = min(1.0, self.left / self.total)
        return (1 - f) + f * self.requested / max(q, 1) <= max_stretch + 1e-9

    def gain(self) -> float:
        """Relative speed gained per processor added at its last measured step up (unmeasured: linear)."""
        sizes = sorted(p for p in self.times if p <= self.nprocs)
        if len(sizes) >= 2:
            p0, p1 = sizes[-2], sizes[-1]
            return (self.times[p0] / self.times[p1] - 1) / (p1 - p0)
        return 1.0 / self.nprocs

    def end_at(self, q: int, now: float) -> float | None:
        """When it would end running the rest at ``q`` from ``now`` (measured time, else linear); None: unknown."""
        t_p = self.times.get(self.nprocs)
        if self.left is None or not t_p:
            return None
        return now + self.left * (self.times.get(q) or t_p * self.nprocs / q)

    def loss(self, q: int) -> float:
        """Seconds lost running the rest at ``q`` instead of its size now (``admit.shrink_cost``)."""
        return shrink_cost(self.nprocs, self.times, self.left, q)


def shrink_off(t: Tenant, drop: set[str]) -> int | None:
    """The size ``t`` shrinks to so that no rank is left on ``drop`` (retired ranks are the last):
    the largest shrink point at or below the first rank on a dropped host; None if below ``min_procs``."""
    k = next((i for i, h in enumerate(t.hosts) if h in drop), t.nprocs)
    fits = [q for q in t.points if t.min_procs <= q <= k and q < t.nprocs]
    return max(fits) if fits else None


def _inputs(jobs: Sequence[SlurmJob], now: float, skip: Sequence[str]) -> tuple[list, list[SlurmJob]]:
    running = [(j.nodes, j.end if j.end is not None else math.inf) for j in jobs if j.state in LIVE]
    pend = sorted((j for j in jobs if j.state == "PENDING" and j.id not in skip
                   and not j.name.startswith("reshape-expand-")),
                  key=lambda j: (-j.priority, j.submit or 0.0, j.id))
    return running, pend


def planned_start(now: float, nodes: Sequence[str], jobs: Sequence[SlurmJob], job: str) -> float | None:
    """When Slurm's backfill would start pending ``job`` as things stand (:func:`plan` from the same look), for
    a job Slurm has predicted no start for yet (``squeue %S`` N/A until its backfill reaches it); None if
    the plan does not start it either."""
    got = _as_is(now, nodes, jobs)[1].get(job)
    return None if got is None else got.start


def _as_is(now: float, nodes: Sequence[str], jobs: Sequence[SlurmJob]) -> tuple[list[SlurmJob], dict]:
    """The pending jobs in Slurm's priority order and Slurm's plan of them as things stand."""
    running, pend = _inputs(jobs, now, ())
    return pend, plan(now, nodes, running, [Pending(j.id, j.num_nodes, j.limit) for j in pend])


def delays(now: float, nodes: Sequence[str], jobs: Sequence[SlurmJob], start: str, k: int, limit: float | None,
           freed: set[str], ends: Mapping[str, float], tolerance: float = 1.0,
           promised: Mapping[str, float] | None = None) -> list[str]:
    """The pending jobs other than ``start`` that Slurm's plan would start later than now if ``start``
    ran now on ``k`` nodes for ``limit`` seconds, the nodes ``freed`` were given back, and the
    running Slurm jobs in ``ends`` (id -> new end) ended then; ``[start]`` if ``start`` itself could
    not start now that way. ``promised``: the first start Slurm predicted for a job (id -> time): a
    job planned later than now but not past that start is not delayed."""
    pend, base = _as_is(now, nodes, jobs)
    after = [(tuple(h for h in j.nodes if h not in freed), ends.get(j.id, j.end if j.end is not None else math.inf))
             for j in jobs if j.state in LIVE]
    new = plan(now, nodes, after, [Pending(j.id, k if j.id == start else j.num_nodes,
                                           limit if j.id == start else j.limit) for j in pend])
    if start not in new or new[start].start > now:
        return [start]
    promised = promised or {}
    return [j.id for j in pend if j.id != start and j.id in base
            and (j.id not in new or new[j.id].start > max(base[j.id].start + tolerance,
                                                          promised.get(j.id, -math.inf)))]
