"""Lynch's (1999) workload generator (Lynch 1999, Appendices B and C).

Job sizes, runtimes and repetitions follow the Feitelson (1996) model as ported
in Appendix B, *as printed*:

* sizes 1..128: harmonic envelope of order 1.5 with extra weight on powers of
  two, squares and multiples of ten, sizes 1, 2, 4 reduced and 3, 5, 6, 7
  raised (the code's ``d[j-1]`` for multiples of ten is read as ``d[i-1]``);
* runtimes: 3-stage hyperexponential with means 50 / 900 / 20000 s whose branch
  probabilities depend on the 0-based size index, doubled when that *index* is
  a power of two, rejected above 64800 s. This is the variant that gives the
  thesis's corr(size, runtime) = 0.187 (the 1-based reading gives ≈ 0.21);
* repetitions: P(rep = k) ∝ k^-2.5, k = 1..1000. A job with ``rep``
  repetitions is one arrival whose per-thread work is ``runtime × rep``
  (notes §3.2, reconstructed).

Inter-arrival times are 2-branch hyperexponential with balanced means and
CV = 8 (Appendix C). Work is in capacity-seconds: a runtime is seconds on a
speed-100 processor, so a thread's work is ``100 · runtime · rep``. The offered
load is ``ρ = λ · E[t · runtime] · E[rep] · 100 / K(S)``, with the analytic
means (the sample mean of ``rep`` is too noisy: its variance is infinite).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from functools import cache

__all__ = [
    "MAX_SIZE",
    "RUNTIME_CAP",
    "HeteroJob",
    "generate",
    "hyperexp_interarrivals",
    "job_size_pmf",
    "mean_interarrival",
    "mean_rep",
    "mean_size_runtime",
    "runtime_sample",
    "size_sample",
]

MAX_SIZE = 128
RUNTIME_CAP = 64800.0
MAX_REP = 1000
_POW2_INDEX = {2, 4, 8, 16, 32, 64, 128}


@dataclass(frozen=True)
class HeteroJob:
    """One arrival: ``threads`` SPMD threads, each with ``work`` capacity-seconds."""

    job_id: int
    arrival: float
    threads: int
    work: float  # per thread, capacity-seconds (100 · runtime · rep)
    runtime: float = 0.0  # Feitelson runtime (s on a speed-100 processor)
    rep: int = 1


@cache
def job_size_pmf() -> tuple[float, ...]:
    """P(size = i + 1) for i = 0..127 (Appendix B as printed)."""
    d = [0.0] * MAX_SIZE
    d[0] = 1.0
    for i in range(1, MAX_SIZE):
        d[i] = 1.0 / math.sqrt(i)
    i = 1
    while i <= MAX_SIZE:
        d[i - 1] += 35 + 1.5 * i
        i *= 2
    i = 2
    while i * i <= MAX_SIZE:
        d[i * i - 1] += 5
        i += 1
    for i in range(10, MAX_SIZE + 1, 10):
        d[i - 1] += 5
    d[0] /= 4
    d[1] /= 4
    d[3] /= 3
    d[2] += 5
    d[4] += 7
    d[5] += 5
    d[6] += 3
    for i in range(1, MAX_SIZE):
        d[i] /= i
    s = sum(d)
    return tuple(x / s for x in d)


@cache
def _size_cdf() -> tuple[float, ...]:
    out, acc = [], 0.0
    for p in job_size_pmf():
        acc += p
        out.append(acc)
    out[-1] = 1.0
    return tuple(out)


@cache
def _rep_cdf() -> tuple[float, ...]:
    w = [k**-2.5 for k in range(1, MAX_REP + 1)]
    s = sum(w)
    out, acc = [], 0.0
    for x in w:
        acc += x / s
        out.append(acc)
    out[-1] = 1.0
    return tuple(out)


def _inverse(cdf: tuple[float, ...], u: float) -> int:
    import bisect

    return min(bisect.bisect_left(cdf, u), len(cdf) - 1)


def size_sample(rng: random.Random) -> int:
    """A job size (thread count) in 1..128."""
    return _inverse(_size_cdf(), rng.random()) + 1


def runtime_sample(rng: random.Random, size: int) -> float:
    """A runtime in seconds for a job of ``size`` threads (3-stage hyperexponential, capped)."""
    i = size - 1  # the printed code indexes by the 0-based size index
    x = math.sqrt(i / MAX_SIZE)
    while True:
        p = rng.random()
        if p < 0.90 - 0.65 * x:
            m = 50.0
        elif p < 0.97 - 0.37 * x:
            m = 900.0
        else:
            m = 20000.0
        if i in _POW2_INDEX:
            m *= 2
        r = -m * math.log(1.0 - rng.random())
        if r < RUNTIME_CAP:
            return r


def rep_sample(rng: random.Random) -> int:
    """Repetitions: P(k) ∝ k^-2.5, k = 1..1000."""
    return _inverse(_rep_cdf(), rng.random()) + 1


@cache
def mean_rep() -> float:
    w = [k**-2.5 for k in range(1, MAX_REP + 1)]
    return sum(k * x for k, x in zip(range(1, MAX_REP + 1), w, strict=True)) / sum(w)


def _mean_runtime(size: int) -> float:
    """E[runtime | size], exact for the capped hyperexponential."""
    i = size - 1
    x = math.sqrt(i / MAX_SIZE)
    p1 = max(0.0, 0.90 - 0.65 * x)
    p2 = max(0.0, 0.97 - 0.37 * x - p1)
    p3 = 1.0 - p1 - p2
    mult = 2.0 if i in _POW2_INDEX else 1.0
    num = den = 0.0
    c = RUNTIME_CAP
    for p, m in ((p1, 50.0), (p2, 900.0), (p3, 20000.0)):
        m *= mult
        keep = 1.0 - math.exp(-c / m)  # P(X < cap)
        mean_trunc = m - c * math.exp(-c / m) / keep  # E[X | X < cap]
        num += p * keep * mean_trunc
        den += p * keep
    return num / den


@cache
def mean_size_runtime() -> float:
    """E[size · runtime] under the model (≈ 69,800)."""
    return sum(p * (i + 1) * _mean_runtime(i + 1) for i, p in enumerate(job_size_pmf()))


def mean_interarrival(load: float, capacity: float = 12800.0, speed_unit: float = 100.0) -> float:
    """Mean inter-arrival time giving offered ``load`` on a network of total ``capacity``."""
    if not load > 0:
        raise ValueError(f"load must be positive, got {load}")
    return mean_size_runtime() * mean_rep() * speed_unit / (capacity * load)


def hyperexp_interarrivals(rng: random.Random, n: int, mean: float, cv: float = 8.0) -> list[float]:
    """``n`` 2-branch hyperexponential gaps, balanced means (Appendix C)."""
    if cv < 1:
        raise ValueError(f"hyperexponential needs CV >= 1, got {cv}")
    c2 = cv * cv
    a = 0.5 * (1.0 - math.sqrt((c2 - 1.0) / (c2 + 1.0)))
    r = mean / (2.0 * a) if a > 0 else mean
    s = mean / (2.0 * (1.0 - a))
    out = []
    for _ in range(n):
        m = r if rng.random() < a else s
        out.append(-m * math.log(1.0 - rng.random()))
    return out


def generate(
    n: int,
    load: float,
    seed: int = 0,
    *,
    capacity: float = 12800.0,
    cv: float = 8.0,
    max_size: int = MAX_SIZE,
) -> list[HeteroJob]:
    """``n`` jobs at offered ``load`` for a network of ``capacity``; same seed, same jobs.

    Arrivals and job parameters use separate streams, so the jobs (sizes,
    runtimes, repetitions) are identical at every load for one seed (common
    random numbers across loads, policies and networks). ``max_size`` caps the
    thread count (sizes above it are clipped) for networks with fewer processors.
    """
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    gaps = hyperexp_interarrivals(random.Random(f"{seed}:arrivals"), n,
                                  mean_interarrival(load, capacity), cv)
    rng = random.Random(f"{seed}:jobs")
    jobs, t = [], 0.0
    for k in range(n):
        t += gaps[k]
        size = size_sample(rng)
        rt = runtime_sample(rng, size)
        rep = rep_sample(rng)
        jobs.append(HeteroJob(k, t, min(size, max_size), 100.0 * rt * rep, rt, rep))
    return jobs
