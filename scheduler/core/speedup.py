"""Downey's speedup model, and the prior a policy predicts an unmeasured size with.

:func:`downey_speedup` is A. Downey's speedup ``S(n)`` for a program of
average parallelism ``A`` and variance parameter ``sigma`` ("A model for
speedup of parallel programs", UCB/CSD-97-933, 1997). The simulator's job
model draws both per job (:mod:`scheduler.lab.jobmodel`); a policy never sees
them.

A policy that must decide whether an expansion to a size ``q`` it has not
measured is worth a redistribution predicts the iteration time there from
the size it has measured, ``t_q = t_p * S(p) / S(q)``, under a **prior**
curve: :data:`PRIOR_SIGMA` and ``A = `` the job's requested size. That is the
literature's reading of a job's size (Downey 1997 fitted the log-uniform
distribution of average parallelism to the processor counts jobs used; the
Parallel Workloads Archive's summary of his model: "This is interpreted as
the average parallelism in the job"), not a measurement: once the job has run
at ``q`` its measured time replaces the prediction. The prior knows nothing
of a particular program, so a job whose ``A`` is far below its size is
predicted to gain where it does not; the remap policy's sweet-spot rule then
returns it, at the price of two redistributions. The walltime check
(:mod:`scheduler.core.walltime`) must not charge a hope: it charges
:func:`safe_iter_time`, the least gain any Downey curve whose ``A`` is at least
half the requested size allows (none above ``A``), so an expansion that
gains less than predicted still ends within the job's limit, as long as the
program's parallelism is at least :data:`SAFE_FRACTION` of its size.
"""

from __future__ import annotations

__all__ = ["PRIOR_SIGMA", "SAFE_FRACTION", "downey_speedup", "predicted_iter_time", "safe_iter_time"]

#: Downey's sigma of the prior curve: 1, between a job with no variance in parallelism (0) and
#: the high-variance half of the distribution the simulator draws from (a choice, documented).
PRIOR_SIGMA = 1.0
#: :func:`safe_iter_time` assumes only that a program's average parallelism is at least this fraction
#: of its requested size (the low end of the size-linked job model's spread, a choice).
SAFE_FRACTION = 0.5
_SIGMAS = (0.0, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 10.0, 30.0, 1e9)


def downey_speedup(n: float, A: float, sigma: float) -> float:
    """Downey's speedup S(n) for average parallelism ``A`` and variance ``sigma``."""
    if n <= 0:
        raise ValueError("processor count must be positive")
    if A <= 1:
        return 1.0
    if sigma <= 1:
        if n <= A:
            return A * n / (A + sigma * (n - 1) / 2)
        if n <= 2 * A - 1:
            return A * n / (sigma * (A - 0.5) + n * (1 - sigma / 2))
        return A
    if n <= A + A * sigma - sigma:
        return n * A * (sigma + 1) / (sigma * (n + A - 1) + A)
    return A


def predicted_iter_time(t_p: float, p: int, q: int, size: int, sigma: float = PRIOR_SIGMA) -> float:
    """The iteration time at ``q`` predicted from ``t_p`` measured at ``p`` under the prior curve
    (Downey's model with ``A = size``, the job's requested size, and ``sigma``)."""
    A = float(max(size, 1))
    return t_p * downey_speedup(p, A, sigma) / downey_speedup(q, A, sigma)


def safe_iter_time(t_p: float, p: int, q: int, size: int) -> float:
    """The slowest iteration time at ``q`` (from ``t_p`` at ``p``) among Downey curves with
    ``A = SAFE_FRACTION * size`` and any ``sigma`` (a grid from 0 to 1e9; larger ``A`` only helps):
    what a walltime check should charge for an expansion not measured yet. Below ``A`` it is
    Amdahl's law with serial fraction ``1/A`` (Downey's ``sigma -> inf``), above it no gain (``sigma
    = 0``); a program whose parallelism is below ``SAFE_FRACTION`` of its size can do worse."""
    A = max(1.0, SAFE_FRACTION * size)
    return t_p * max(downey_speedup(p, A, s) / downey_speedup(q, A, s) for s in _SIGMAS)
