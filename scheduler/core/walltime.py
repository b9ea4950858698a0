"""Walltime limits of resizable jobs: one rule for the daemon, the simulator and the policies.

A job file's ``walltime`` (an SWF trace's requested time) is the user's
limit for the job **at its requested size** ``n``. A resource manager kills a
job that outlives its limit; a resizable job, though, may run below ``n``
(squeezed at start, shrunk to admit others) and then needs longer. The rule
(a choice: Sudarsan & Ribbens 2007 does not treat limits):

* the limit is a *budget* of ``walltime`` seconds, consumed at rate
  ``min(1, p / n)`` while the job runs at ``p`` processes: below its size a
  job is charged in proportion (linear speedup is the worst case of a
  speedup curve whose efficiency falls with ``p``, so a job that fits its
  limit at ``n`` fits its budget at any ``p``); at or above its size, in full;
* time spent redistributing is charged in full (rate 1): a resize is the
  job's own cost, and a policy that resizes a job with no slack left can
  make it overrun, so policies check :func:`fits` first;
* the job's **deadline** (kill time) is ``now + budget / rate``: fixed
  between size changes (so a reservation computed from it does not drift
  with the clock), recomputed when a resize starts and when it ends.

While a resize ``p -> q`` is under way the deadline is the bound
``t_s + B / min(rate(p), rate(q))`` (``B`` the budget left at its start
``t_s``); when it completes at ``t_d`` it becomes ``t_d + (B - (t_d - t_s)) /
rate(q)``, never later than the bound. So a deadline only moves later when a
policy decides a shrink below the requested size, and the policy sees by how
much before it decides (:func:`deadline_after`).

The daemon kills a job past its deadline plus its ``--overtime`` grace
(Slurm's ``OverTimeLimit``); the simulator at its deadline.

**Wall-clock limits** (:data:`LIMITS`, the core's ``limits``; default
``"wall-clock"``). A resource manager gives a job the time limit it asked
for whatever size it starts at (Slurm starts a ``--nodes=MIN-MAX`` job with
its ``--time``): a job started at ``p < n`` is killed ``walltime`` seconds
after its start unless the policy that started it set a longer limit, as a
manager does with ``scontrol update TimeLimit`` (:class:`scheduler.core.policy.Start`'s
``limit``). The longest limit the rule allows is :func:`moldable_limit`,
``walltime * n / p``: the budget above, the slot-seconds the user asked for,
so the user is charged no more than for the requested size; a job whose
efficiency falls with ``p`` ends within it at any ``p`` (linear speedup is the
worst case), which is why the policies that start jobs below their size set
it (:func:`moldable_start`). Resizes move the deadline by the budget in both
modes, as the site controller updates a resized job's limit. ``"stretched"``:
every start below the requested size gets :func:`moldable_limit` whether or
not the policy set it (the rule before wall-clock limits).
"""

from __future__ import annotations

import math
import time

from scheduler.core.policy import JobSpec, RunningJob, Start

__all__ = ["LIMITS", "REDIST_PRIOR", "budget_left", "clock_time", "deadline_after", "expected_redist", "fits",
           "job_fits", "kill_time", "limit_allowed", "moldable_limit", "moldable_start", "rate", "start_deadline",
           "start_limit"]

#: How a job's time limit is set at its start (module docstring): the limit it asked for unless the
#: policy sets another (``wall-clock``, the default), or stretched below the requested size by the rule.
LIMITS = ("wall-clock", "stretched")


def kill_time(deadline: float, grace: float = 0.0) -> float:
    """When a job with this deadline is killed: ``grace`` later, plus a rounding tolerance
    (1 us + 1e-9 relative) so a job whose iterations add up to exactly its limit is not."""
    return deadline + grace + 1e-6 + 1e-9 * abs(deadline)


def rate(n: int, p: int) -> float:
    """Budget seconds consumed per second at ``p`` processes by a job sized ``n``."""
    return min(1.0, p / n) if n > 0 else 1.0


def start_deadline(walltime: float | None, n: int, p: int, now: float) -> float | None:
    """Deadline of a job started at ``p`` with ``walltime`` for ``n`` (None: no limit)."""
    if walltime is None:
        return None
    return now + walltime / rate(n, p)


def moldable_limit(walltime: float | None, n: int, p: int) -> float | None:
    """The longest time limit a job sized ``n`` with ``walltime`` may get when started at ``p``:
    ``walltime / rate(n, p)`` (the budget charged as the rule says); None without a walltime."""
    if walltime is None:
        return None
    return walltime / rate(n, p)


def moldable_start(spec: JobSpec, p: int) -> Start:
    """Start ``spec`` at ``p`` slots; below its requested size with the limit the rule allows
    (:func:`moldable_limit`), so that it can end in time, as a manager extends a squeezed job's limit."""
    if p >= spec.nprocs or spec.walltime is None:
        return Start(spec.job_id, p)
    return Start(spec.job_id, p, moldable_limit(spec.walltime, spec.nprocs, p))


def limit_allowed(spec: JobSpec, st: Start) -> bool:
    """Whether a policy's ``st.limit`` for starting ``spec`` is allowed: positive, and at most what the
    rule charges the user for (:func:`moldable_limit`)."""
    most = moldable_limit(spec.walltime, spec.nprocs, st.nprocs)
    return most is not None and isinstance(st.limit, int | float) and 0 < st.limit <= most * (1 + 1e-12)


def start_limit(spec: JobSpec, st: Start, limits: str = "wall-clock") -> float | None:
    """The time limit ``spec`` starts with by ``st``: its walltime, or the limit the policy set;
    ``limits="stretched"``: :func:`moldable_limit` at its size whatever the policy set (module docstring)."""
    w = spec.walltime
    if w is None:
        return None
    if limits == "stretched":
        return moldable_limit(w, spec.nprocs, st.nprocs)
    return w if st.limit is None else st.limit


def budget_left(deadline: float, n: int, p: int, now: float) -> float:
    """Budget seconds left at ``now`` for a job at ``p`` whose deadline is ``deadline``."""
    return max(0.0, (deadline - now) * rate(n, p))


def deadline_after(deadline: float | None, n: int, p: int, q: int, now: float) -> float | None:
    """The deadline bound while (and after) the job resizes from ``p`` to ``q`` starting ``now``: the
    deadline itself (not later than now) when ``q`` spends the budget no slower than ``p``."""
    if deadline is None:
        return None
    r_p, r_q = rate(n, p), rate(n, q)
    if r_q >= r_p:  # now + (deadline - now) * r_p / r_p, without its rounding
        return deadline if deadline >= now else now
    return now + budget_left(deadline, n, p, now) / r_q


def fits(deadline: float | None, n: int, p: int, q: int, now: float, iterations_left: int | None,
         iter_time_q: float, redist: float) -> bool:
    """Would the job still end before its deadline if it resized ``p -> q`` now?

    ``iterations_left`` at ``iter_time_q`` seconds each, after a redistribution
    of ``redist`` seconds. True when there is no limit or the iteration count
    is unknown (the budget rule alone bounds the job then).
    """
    if deadline is None or iterations_left is None or math.isinf(deadline):
        return True
    b = budget_left(deadline, n, p, now) - redist
    return b >= 0 and iterations_left * iter_time_q <= b / rate(n, q)


REDIST_PRIOR = 10.0  # seconds a first redistribution is assumed to take at the least


def expected_redist(r: RunningJob, q: int | None = None, floor: float = REDIST_PRIOR) -> float:
    """The cost a policy should expect of ``r`` redistributing from its size ``p`` to ``q``.

    Sudarsan & Ribbens 2007 Fig. 2(b): the cost falls with the processor count, the smaller
    side limiting it, so each measured ``(p0, q0)`` predicts ``c * min(p0, q0)
    / min(p, q)``; the largest prediction counts. Before any was measured:
    ``max(one iteration at p, floor) * p / min(p, q)``. The default ``floor``,
    :data:`REDIST_PRIOR` (10 s), errs long, for what must not be late: a
    walltime check (assuming 0 let jobs without slack overrun their walltime)
    and the give-back of borrowed slots; a first redistribution costlier
    than that can still make a job overrun, and is counted. Weighing what an
    expansion saves against what it costs, a policy passes ``floor=0``: one
    iteration, whatever the job's time scale (a fixed 10 s outweighed every
    gain of a job whose iterations take a few seconds, and such a job never
    grew).
    """
    p = r.nprocs
    lo = min(p, q) if q else p
    measured = r.profile.redist_time
    if measured:
        most = -math.inf
        for (a, b), c in measured.items():
            x = c * (a if a < b else b) / lo
            if x > most:
                most = x
        return most
    return max(r.profile.iter_time.get(p, 0.0), floor) * p / lo


def job_fits(r: RunningJob, q: int, now: float, redist: float | None = None,
             predicted: float | None = None) -> bool:
    """:func:`fits` for a running job going to ``q`` now: the time per iteration at ``q`` is the
    fastest measured there, else ``predicted`` if given (a policy's prediction for a size not
    measured, e.g. :func:`scheduler.core.speedup.predicted_iter_time`), else the current one
    (expansion: no gain assumed) or scaled by ``p / q`` (shrink); ``redist`` defaults to
    :func:`expected_redist`. True without a measurement or iteration count."""
    p, spec = r.nprocs, r.spec
    t_p = r.profile.iter_time.get(p)
    if t_p is None or not spec.iterations:
        return True
    t_q = r.profile.best(q) or predicted or (t_p if q >= p else t_p * p / q)
    return fits(r.deadline, spec.nprocs, p, q, now, spec.iterations - r.iterations_done, t_q,
                expected_redist(r, q) if redist is None else redist)


WALL_CLOCK_FROM = 1e9  # a time at least this large is a daemon's wall clock (2001 on); a smaller one a simulator's


def clock_time(t: float) -> str:
    """A deadline as a reader wants it: local date and time on a daemon's wall clock, ``t=N s`` on a
    simulator's virtual clock (which starts at 0)."""
    if t >= WALL_CLOCK_FROM:
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))
    return f"t={t:.0f} s"
