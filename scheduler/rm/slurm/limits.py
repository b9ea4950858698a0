"""The end a malleable job's Slurm job should show at each size (pure): what its time limit is kept at.

A job submitted with ``reshape submit --slurm`` asks Slurm for its job file's ``walltime`` ``W``
at its requested size ``n``. Slurm plans with that limit and kills the job at it. The controller
keeps the limit at the end the job will have at the size it runs at, so that Slurm's backfill
plans with real ends and a job that shrank is not killed for it:

* ``charge`` (the default): the core's deadline, :mod:`scheduler.core.walltime`'s charging rule:
  ``W`` is a budget consumed at ``min(1, p / n)`` per second at ``p``, so a job below ``n``,
  shrunk or started small, gets proportionally longer, and one at or above ``n`` keeps its end;
* ``measured``: that bound, brought down to the end the job's measured progress gives, once it
  has measured its iteration time: ``now + left * t(q) * f``:
  the iterations it has left at ``t(q)`` (its best time measured at ``q``, else the time at its
  size now scaled linearly, the slowest a smaller size can be) times its user's own margin
  ``f = W / (iterations * t(n))`` (how much longer than the run at ``n`` the user asked for;
  ``t(n)`` measured, else scaled linearly from the size measured, which makes ``f`` larger).

So with ``measured`` a job that grew gets an earlier end, one that shrank a later one only as
far as its work needs, and the margin its user chose is kept. It is not the default: in the
twin of the benchmark (docs/slurm.md) real ends made Slurm's backfill reserve nodes for large
waiting jobs sooner and start fewer small ones before them, and turnaround fell. Slurm counts
limits in whole minutes from the job's start (the broker rounds up); only a Slurm operator
(root, ``SlurmUser``) may extend a limit, so the controller runs as one.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

from scheduler.core.job import Job
from scheduler.core.walltime import deadline_after
from scheduler.rm.slurm.admit import LIVE, Tenant
from scheduler.rm.slurm.ops import Release, Update
from scheduler.rm.slurm.view import SlurmJob

__all__ = ["LIMIT_SLACK", "kept_minutes", "limit_updates", "slurm_end", "slurm_ends", "with_limits"]

LIMIT_SLACK = 10.0  # seconds an end may pass its Slurm limit before the limit is extended (slurmctld checks every 30)


def _time_at(times: dict[int, float], q: int) -> float | None:
    """Iteration time at ``q``: measured, else from the nearest measured size above it scaled linearly
    (or below it: a larger size is at most linearly faster, so this is an upper bound both ways)."""
    if q in times:
        return times[q]
    above = [p for p in times if p > q]
    if above:
        p = min(above)
        return times[p] * p / q
    below = [p for p in times if p < q]
    return times[max(below)] if below else None


def slurm_end(j: Job, q: int, now: float, measured: bool = False) -> float | None:
    """The end job ``j``'s Slurm job should show if it ran at ``q`` from ``now`` on (module docstring);
    None without a walltime."""
    if j.deadline is None:
        return None
    n, p = j.spec.nprocs, j.nprocs
    bound = deadline_after(j.deadline, n, p, q, now) if q < p else j.deadline
    if not measured:
        return bound
    total = j.spec.iterations or j.total
    prof = j.profile.frozen()
    times = {s: t for s in prof.iter_time if (t := prof.best(s)) is not None}
    t_q, t_n = _time_at(times, q), _time_at(times, n)
    if not total or not t_q or not t_n or not j.spec.walltime:
        return bound
    f = max(1.0, j.spec.walltime / (total * t_n))
    return min(bound, now + max(0, total - j.iterations) * t_q * f)


def slurm_ends(j: Job, sizes: list[int], now: float, measured: bool = False) -> dict[int, float]:
    """:func:`slurm_end` at each of ``sizes`` (those with one)."""
    return {q: e for q in sizes if (e := slurm_end(j, q, now, measured)) is not None}


def kept_minutes(main: SlurmJob, end: float, have: int | None) -> int:
    """The time limit (minutes) running Slurm job ``main``, whose limit is ``have`` minutes now, is kept at
    for a job ending at ``end``: extended when the end is more than :data:`LIMIT_SLACK` past it (a job
    registers a second or two after Slurm starts it: not worth a minute more), brought down by whole
    minutes, else left as it is."""
    want = max(1, math.ceil((end - (main.start or 0.0)) / 60.0))
    if have is None or end > (main.start or 0.0) + 60 * have + LIMIT_SLACK or want < have:
        return want
    return have


def limit_updates(tenants: Sequence[Tenant], by_id: Mapping[str, SlurmJob], held: Mapping[str, str],
                  owner: Mapping[str, str], limits: dict[str, int], frozen: set[str],
                  have: Callable[[SlurmJob], int | None]) -> list[Update]:
    """Time limits that follow the jobs' sizes (module docstring): a job's own Slurm job gets the whole
    minutes to the end it will have at its size now, so Slurm's backfill plans with it; its expanders'
    (``held``: host -> Slurm job, ``owner``: Slurm job -> its main) are brought down to that end, never
    extended (they are vacated before). ``limits`` (Slurm job -> minutes last set) is updated with them;
    ``frozen`` jobs take no update."""
    ops: list[Update] = []
    for t in tenants:
        end, main = t.ends.get(t.nprocs), by_id.get(t.main)
        if end is None or main is None or main.state not in LIVE or main.start is None or t.main in frozen:
            continue
        want, now = kept_minutes(main, end, have(main)), have(main)
        if want != now:
            limits[t.main] = want
            ops.append(Update(t.main, minutes=want, why=f"its end at {t.nprocs} processes"))
        for jid in {j for j in held.values() if j != t.main and owner.get(j) == t.main}:
            x = by_id.get(jid)
            if x is None or x.start is None or x.limit is None or x.state not in LIVE:
                continue
            cut = max(1, math.ceil((end - x.start) / 60.0))
            if cut < limits.get(jid, round(x.limit / 60.0)):
                limits[jid] = cut
                ops.append(Update(jid, minutes=cut, why=f"its job {t.main} ends by then"))
    return ops


def with_limits(releases: list[Release], by_id: Mapping[str, SlurmJob], tenants: Sequence[Tenant],
                groups: set[str], charge: bool) -> tuple[list[Release], set[str]]:
    """``releases`` with, on each that shrinks a job's own Slurm job, its time limit at its new size (rule 5;
    none unless ``charge``); and the jobs so shrunk."""
    out, shrunk = [], set()
    for r in releases:
        t = next((t for t in tenants if t.main == r.job), None)
        j = by_id.get(r.job)
        if r.job in groups and t is not None and j is not None and j.start is not None:
            end = t.ends.get(t.nprocs) if charge else None
            r = Release(r.host, r.job, r.why, None if end is None else max(1, math.ceil((end - j.start) / 60)))
            shrunk.add(r.job)
        out.append(r)
    return out, shrunk
