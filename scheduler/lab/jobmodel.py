"""Malleable-job model of the simulator: speedup curve, iterations, redistribution cost.

A simulated job is an iterative program with ``iterations`` equal iterations
whose sequential work is fixed by its trace run time at its trace size. Its
iteration time at ``p`` processors follows Downey's speedup model (A. Downey,
"A model for speedup of parallel programs", UCB/CSD-97-933, 1997) with
average parallelism ``A`` and variance parameter ``sigma``; both are drawn per
job, reproducibly from a seed (``A = size * 2**U(0, 2)``, ``sigma = U(0, 2)``:
a choice, since the traces carry no speedup information). Beyond ``A``-ish
processors the curve is flat, so a job has a sweet spot (seed 001 §4.1.1).

Redistribution cost (seed 001 Fig. 2b: grows with data size, falls with the
processor count) is ``latency + data / (bandwidth * min(p, q))``: the data a
job holds is proportional to its requested size (jobs are sized for memory),
and the slowest side of the move, the smaller configuration, limits it.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Protocol

from scheduler.core.policy import JobSpec

__all__ = ["JobModel", "RedistModel", "SimInput", "downey_speedup", "from_trace"]


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


class RedistCost(Protocol):
    """Anything that prices a resize: ``cost(size, p, q)`` seconds to move ``size`` from ``p`` to ``q``."""

    def cost(self, size: int, p: int, q: int) -> float: ...


@dataclass(frozen=True)
class RedistModel:
    """``cost(p, q) = latency + seconds_per_slot * size / min(p, q)``.

    With the defaults a job moving between its own size and anything larger
    pays 0.5 s + 2 s: the order of seed 001 Table 1's measured costs, small
    against hour-long trace jobs.
    """

    latency: float = 0.5
    seconds_per_slot: float = 2.0

    def cost(self, size: int, p: int, q: int) -> float:
        return self.latency + self.seconds_per_slot * size / min(p, q)


@dataclass(frozen=True)
class JobModel:
    """Timing of one job: ``iter_time(p)`` and the number of iterations."""

    work: float  # sequential seconds per iteration
    A: float
    sigma: float
    iterations: int

    def iter_time(self, p: int) -> float:
        return self.work / downey_speedup(p, self.A, self.sigma)

    def run_time(self, p: int) -> float:
        return self.iterations * self.iter_time(p)


@dataclass(frozen=True)
class SimInput:
    """One job of a simulated workload: what the scheduler sees, and the hidden truth."""

    spec: JobSpec
    model: JobModel
    run_time: float  # at spec.nprocs, as in the trace


def make_model(size: int, run_time: float, rng: random.Random, iterations: int) -> JobModel:
    A = max(1.0, size * 2 ** rng.uniform(0.0, 2.0))
    sigma = rng.uniform(0.0, 2.0)
    it = run_time / iterations
    return JobModel(work=it * downey_speedup(size, A, sigma), A=A, sigma=sigma,
                    iterations=iterations)


def from_trace(
    trace,
    *,
    load: float = 1.0,
    malleable_fraction: float = 0.0,
    seed: int = 0,
    unit: int | None = None,
    iterations: int = 10,
    min_fraction: float = 0.25,
    max_jobs: int | None = None,
) -> tuple[list[SimInput], int]:
    """``(jobs, total_slots)`` from an :class:`scheduler.lab.swf.SwfTrace`.

    ``load`` scales offered load by compressing inter-arrival times
    (``submit' = (submit - t0) / load``). A reproducible ``malleable_fraction``
    of jobs become resizable (``min_procs = ceil(min_fraction * size)``, no
    upper bound); the rest are rigid at their trace size. Sizes are in units
    of ``unit`` processors (default :func:`scheduler.lab.swf.trace_unit`), rounded up.
    """
    from scheduler.lab.swf import trace_unit

    if isinstance(load, bool) or not isinstance(load, int | float) or not math.isfinite(load) \
            or load <= 0:
        raise ValueError(f"load must be a positive number, got {load!r}")
    if not 0.0 <= malleable_fraction <= 1.0:
        raise ValueError(f"malleable fraction must be in [0, 1], got {malleable_fraction!r}")
    if not 0.0 < min_fraction <= 1.0:
        raise ValueError(f"min_fraction must be in (0, 1], got {min_fraction!r}")
    if iterations < 1:
        raise ValueError(f"iterations must be >= 1, got {iterations!r}")
    u = unit or trace_unit(trace)
    total = trace.max_procs // u
    rng = random.Random(seed)
    t0 = trace.jobs[0].submit
    out = []
    for i, j in enumerate(trace.jobs[:max_jobs]):
        size = min(total, max(1, math.ceil(j.procs / u)))
        malleable = rng.random() < malleable_fraction
        model = make_model(size, j.run_time, rng, iterations)
        spec = JobSpec(
            job_id=i,
            name=f"swf{j.job_id}",
            submit_time=(j.submit - t0) / load,
            nprocs=size,
            min_procs=max(1, math.ceil(min_fraction * size)) if malleable else size,
            max_procs=None if malleable else size,
            resizable=malleable,
            walltime=j.req_time if j.req_time is not None else j.run_time,
            iterations=iterations,
        )
        out.append(SimInput(spec, model, j.run_time))
    return out, total
