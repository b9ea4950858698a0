"""Malleable-job model of the simulator: speedup curve, iterations, redistribution cost.

A simulated job is an iterative program with ``iterations`` equal iterations
whose sequential work is fixed by its trace run time at its trace size. Its
iteration time at ``p`` processors follows Downey's speedup model (A. Downey,
"A model for speedup of parallel programs", UCB/CSD-97-933, 1997) with
average parallelism ``A`` and variance parameter ``sigma``; both are drawn per
job, reproducibly from a seed. Beyond ``A``-ish processors the curve is flat,
so a job has a sweet spot (Sudarsan & Ribbens 2007 §4.1.1).

The traces carry no speedup information, and what :func:`from_trace` assumes
in their place decides how much resizing can gain; the assumptions are its
parameters, with defaults taken from the literature where it has one (the
speedup model) and chosen not to favour resizing where it does not
(estimates):

* ``parallelism`` (:data:`DEFAULT_PARALLELISM`, ``"size-linked"``): the
  literature's model. Downey fitted his log-uniform distribution of average
  parallelism to the processor counts jobs used (the Parallel Workloads
  Archive's summary of "The Downey 1997 Model": the log-uniform degree of
  parallelism "is interpreted as the average parallelism in the job"), so a
  job's ``A`` is tied to its own size: ``A = size * 2**U(-1, 1)``, log-uniform
  between half and twice the size, median the size. ``sigma`` follows Cirne
  and Berman ("A model for moldable supercomputer jobs", IPDPS 2001), who
  proposed distributions for Downey's parameters (the Archive's summary:
  "Distributions from which the parameters can be selected were later
  proposed by Cirne and Berman"): a normal distribution, here with mean
  :data:`SIGMA_MEAN` (1.209) and standard deviation :data:`SIGMA_SD` (1.132),
  truncated to ``sigma >= 0`` (Downey's model needs it; inverse transform of
  one uniform draw). **The distributions are not verified against the
  source** (the speedup function is: docs/simulator.md says against what):
  the paper's text was not reachable; the normal law and its two numbers are
  as recalled from it, and the spread of ``A`` around the size (a factor 2 each
  way) is this module's choice, not a fitted value. Both are constants here,
  to be corrected if the paper says otherwise. Sensitivity rows:
  ``"independent"`` (``A`` log-uniform on ``[1, total slots]`` whatever the
  job's size, the former default; ``sigma = U(0, 2)``) and ``"relative:LO:HI"``
  (``A = size * 2**U(LO, HI)``, ``sigma = U(0, 2)``; ``"relative:0:2"`` is the
  model before that, in which every job scales past its size). All three use
  the same uniform draw per job for ``A``, so they differ only in the mapping.
* ``estimates``: the walltime backfilling sees, for jobs whose trace has no
  requested time (none in Lublin's model, 4,262 of Mira's jobs). The default
  ``"model"`` imitates real users (D. Tsafrir, Y. Etsion, D. G. Feitelson,
  "Modeling User Runtime Estimates", JSSPP 2005, LNCS 3834; A. Mu'alem, D.
  Feitelson, IEEE TPDS 12(6), 2001): estimates are overestimates by a broad
  factor, users pick a few round values, and the site's limit is itself a
  popular value. Here: a share :data:`EXACT_SHARE` (10%) of jobs get the
  smallest round limit covering their run time (users who know their job,
  and jobs killed at their limit); the others ``run * 2**U(0, 3)`` (an
  overestimate of 1 to 8 times, mean accuracy ``run/estimate`` about 0.4 before
  rounding) rounded up to the next of :data:`ROUND_LIMITS` (5 min ... 72 h,
  then whole days), capped at the site's limit, taken as the smallest round
  limit covering the trace's longest job (and its header's ``MaxRuntime``).
  An estimate is never below the run time. Short jobs thus get a 5-minute
  estimate, which makes them look very inaccurate, as in real logs. On
  Lublin's trace the median estimate is 6 times the run time (mean accuracy
  0.25), on Mira's estimate-less jobs 3 times (mean accuracy 0.39).
  ``"exact"``: the run time itself (perfect estimates, the former
  behaviour, which flatters backfilling).
* ``step``: resizable jobs' legal sizes are multiples of ``step`` slots (and
  their own size).

Each concern draws from its own random stream (seeded with the strings
``"SEED:malleable"``, ``"SEED:speedup"``, ``"SEED:estimates"``), so changing
one assumption changes only that: the malleable set is the same whatever the
speedup or estimate model, and a job malleable at one ``malleable_fraction``
is malleable at every larger one. The former single stream is gone, so
``parallelism="relative:0:2", estimates="exact"`` is the former model, not
the former numbers of a given seed.

Redistribution cost (Sudarsan & Ribbens 2007 Fig. 2b: grows with data size, falls with the
processor count) is ``latency + data / (bandwidth * min(p, q))``: the data a
job holds is proportional to its requested size (jobs are sized for memory),
and the slowest side of the move, the smaller configuration, limits it.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from statistics import NormalDist
from typing import Protocol

from scheduler.core.policy import JobSpec
from scheduler.core.speedup import downey_speedup

__all__ = [
    "DEFAULT_PARALLELISM",
    "ROUND_LIMITS",
    "JobModel",
    "RedistModel",
    "SimInput",
    "downey_speedup",
    "from_trace",
    "parse_parallelism",
    "round_limit",
    "sigma_cirne_berman",
    "user_estimate",
]

DEFAULT_PARALLELISM = "size-linked"  # the literature's model (module docstring)
SIZE_SPREAD = 1.0  # size-linked: log2(A / size) ~ U(-SIZE_SPREAD, SIZE_SPREAD) (a choice)
SIGMA_MEAN, SIGMA_SD = 1.209, 1.132  # size-linked: sigma ~ N(mean, sd) truncated to >= 0 (Cirne & Berman, as recalled)
EXACT_SHARE = 0.1  # estimates="model": share of jobs whose estimate is their run time rounded up
MAX_FACTOR_LOG2 = 3.0  # the others overestimate by 2**U(0, 3)
MAX_SECONDS = 1e9  # the longest walltime a job file accepts
_M, _H = 60.0, 3600.0
ROUND_LIMITS = (
    5 * _M, 10 * _M, 15 * _M, 20 * _M, 30 * _M, 45 * _M,
    1 * _H, 1.5 * _H, 2 * _H, 3 * _H, 4 * _H, 6 * _H, 8 * _H, 12 * _H, 18 * _H,
    24 * _H, 36 * _H, 48 * _H, 72 * _H,
)  # the usual walltime limits users pick; beyond 72 h, whole days


class RedistCost(Protocol):
    """Anything that prices a resize: ``cost(size, p, q)`` seconds to move ``size`` from ``p`` to ``q``."""

    def cost(self, size: int, p: int, q: int) -> float: ...


@dataclass(frozen=True, slots=True)
class RedistModel:
    """``cost(p, q) = latency + seconds_per_slot * size / min(p, q)``.

    With the defaults a job moving between its own size and anything larger
    pays 0.5 s + 2 s: the order of Sudarsan & Ribbens 2007 Table 1's measured costs, small
    against hour-long trace jobs.
    """

    latency: float = 0.5
    seconds_per_slot: float = 2.0

    def cost(self, size: int, p: int, q: int) -> float:
        return self.latency + self.seconds_per_slot * size / min(p, q)


@dataclass(frozen=True, slots=True)
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


@dataclass(frozen=True, slots=True)
class SimInput:
    """One job of a simulated workload: what the scheduler sees, and the hidden truth."""

    spec: JobSpec
    model: JobModel
    run_time: float  # at spec.nprocs, as in the trace


def round_limit(t: float) -> float:
    """The smallest usual walltime limit >= ``t``: one of :data:`ROUND_LIMITS`, beyond them whole days."""
    for r in ROUND_LIMITS:
        if r >= t:
            return r
    return math.ceil(t / 86400.0) * 86400.0


def user_estimate(run_time: float, rng: random.Random, limit: float = math.inf) -> float:
    """A user's walltime estimate for a job running ``run_time`` s (``estimates="model"``).

    Draws two numbers from ``rng``. ``limit``: the site's maximum walltime; the
    estimate is at most ``limit`` and ``1e9`` s (the longest walltime a job
    file accepts), but never below ``run_time``.
    """
    exact = rng.random() < EXACT_SHARE
    factor = 2 ** rng.uniform(0.0, MAX_FACTOR_LOG2)
    est = round_limit(run_time if exact else run_time * factor)
    return max(run_time, min(est, limit, MAX_SECONDS))


def parse_parallelism(value: str) -> tuple[float, float] | str:
    """``"size-linked"`` or ``"independent"`` as such, ``(LO, HI)`` for ``"relative:LO:HI"``; else ValueError."""
    if value in ("size-linked", "independent"):
        return value
    kind, _, rest = value.partition(":") if isinstance(value, str) else ("", "", "")
    if kind == "relative":
        try:
            lo, hi = (float(x) for x in rest.split(":"))
        except ValueError:
            pass
        else:
            if math.isfinite(lo) and math.isfinite(hi) and lo <= hi:
                return lo, hi
    raise ValueError(
        f"parallelism must be 'size-linked' (the default: A = size * 2**U(-1, 1), sigma after Cirne and "
        f"Berman), 'independent' (A log-uniform on [1, slots]) or 'relative:LO:HI' "
        f"(A = size * 2**U(LO, HI), LO <= HI, e.g. 'relative:0:2'), got {value!r}"
    )


_NORMAL = NormalDist(SIGMA_MEAN, SIGMA_SD)
_BELOW_ZERO = _NORMAL.cdf(0.0)


def sigma_cirne_berman(u: float) -> float:
    """Downey's ``sigma`` for a uniform draw ``u`` in [0, 1): ``N(SIGMA_MEAN, SIGMA_SD)`` truncated to
    ``>= 0`` by inverse transform (one draw, so the random streams stay aligned)."""
    v = _BELOW_ZERO + u * (1.0 - _BELOW_ZERO)
    return max(0.0, _NORMAL.inv_cdf(min(max(v, 1e-12), 1.0 - 1e-12)))


def make_model(size: int, run_time: float, A: float, sigma: float, iterations: int) -> JobModel:
    """The job whose ``iterations`` iterations take ``run_time`` in all at ``size`` processors."""
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
    parallelism: str = DEFAULT_PARALLELISM,
    estimates: str = "model",
    step: int | None = None,
) -> tuple[list[SimInput], int]:
    """``(jobs, total_slots)`` from an :class:`scheduler.lab.swf.SwfTrace`.

    ``load`` scales offered load by compressing inter-arrival times
    (``submit' = (submit - t0) / load``). A reproducible ``malleable_fraction``
    of jobs become resizable (``min_procs = ceil(min_fraction * size)``, no
    upper bound); the rest are rigid at their trace size. Sizes are in units
    of ``unit`` processors (default :func:`scheduler.lab.swf.trace_unit`), rounded up.

    The model's assumptions (module docstring), defaults first:

    * ``parallelism="size-linked"``: each job's Downey average parallelism
      ``A = size * 2**U(-1, 1)`` and ``sigma`` from a normal law truncated at
      0 (:func:`sigma_cirne_berman`), the literature's model (module
      docstring, with what is not verified). ``"independent"``: ``A``
      log-uniform on ``[1, total_slots]``, independent of its trace size.
      ``"relative:LO:HI"``: ``A = size * 2**U(LO, HI)``; ``"relative:0:2"``
      is the model before that, where every job scales past its size. The
      last two draw ``sigma = U(0, 2)``. All use the same uniform draw per job
      for ``A``, so they differ only in the mapping.
    * ``estimates="model"``: jobs without a requested time in the trace get a
      modelled user estimate (:func:`user_estimate`: overestimated by a broad
      factor, rounded up to a usual limit, capped by the site's limit, never
      below the run time), since perfect estimates flatter backfilling.
      ``"exact"``: the run time (the former behaviour). Jobs with a trace
      estimate keep it either way.
    * ``step=None``: resizable jobs' legal sizes are multiples of ``step``
      slots (plus their own trace size; ``min_procs`` rounded up to a
      multiple, or the size itself when no multiple is below it). The default
      is 1 slot, since a slot is already the machine's allocation unit (a
      node on Lublin's trace, a 512-node block on Mira's), except when the
      header gives ``MaxProcs = k * MaxNodes`` with ``k > 1`` processors per
      node and ``unit < k``: then ``k // unit``, so an expansion adds whole
      nodes.

    Malleability, speedup curves and estimates each draw from their own
    random stream of ``seed``: changing one assumption leaves the others'
    draws unchanged.
    """
    from scheduler.lab.swf import procs_per_node, trace_unit

    relative = _check_options(load, malleable_fraction, min_fraction, iterations, parallelism, estimates, step)
    u = unit or trace_unit(trace)
    total = trace.max_procs // u
    if step is None:
        k = procs_per_node(trace)
        step = k // u if k > 1 and u < k else 1
    jobs = trace.jobs[:max_jobs]
    limit = _site_limit(trace)
    r_mall = random.Random(f"{seed}:malleable")
    r_speed = random.Random(f"{seed}:speedup")
    r_est = random.Random(f"{seed}:estimates")
    log_total = math.log2(total)
    t0 = jobs[0].submit
    out = []
    for i, j in enumerate(jobs):
        malleable = r_mall.random() < malleable_fraction
        x, y = r_speed.random(), r_speed.random()
        guess = user_estimate(j.run_time, r_est, limit)  # drawn for every job: streams stay aligned
        shape = _parallelism(relative, min(total, max(1, math.ceil(j.procs / u))), x, y, log_total)
        out.append(_sim_input(i, j, malleable, shape, total, guess if estimates == "model" else j.run_time,
                              (t0, load), (min_fraction, step, iterations)))
    return out, total


def _site_limit(trace) -> float:
    """The site's run-time limit: it covers the header's longest run time and the trace's longest job."""
    try:
        longest = float(trace.header.get("MaxRuntime", "").split()[0])
    except (ValueError, IndexError):
        longest = 0.0
    return round_limit(max(longest if 0 < longest <= MAX_SECONDS else 0.0, *(j.run_time for j in trace.jobs)))


def _check_options(load, malleable_fraction, min_fraction, iterations, parallelism, estimates, step):
    """:func:`from_trace`'s options checked; returns the parsed ``parallelism``."""
    if isinstance(load, bool) or not isinstance(load, int | float) or not math.isfinite(load) \
            or load <= 0:
        raise ValueError(f"load must be a positive number, got {load!r}")
    if not 0.0 <= malleable_fraction <= 1.0:
        raise ValueError(f"malleable fraction must be in [0, 1], got {malleable_fraction!r}")
    if not 0.0 < min_fraction <= 1.0:
        raise ValueError(f"min_fraction must be in (0, 1], got {min_fraction!r}")
    if iterations < 1:
        raise ValueError(f"iterations must be >= 1, got {iterations!r}")
    relative = parse_parallelism(parallelism)
    if estimates not in ("model", "exact"):
        raise ValueError(f"estimates must be 'model' (modelled user estimates) or 'exact' "
                         f"(the run time), got {estimates!r}")
    if step is not None and (isinstance(step, bool) or not isinstance(step, int) or step < 1):
        raise ValueError(f"step must be a positive number of slots, got {step!r}")
    return relative


def _parallelism(relative, size: int, x: float, y: float, log_total: float) -> tuple[int, float, float]:
    """``(size, A, sigma)``: a job's Downey parameters from its two uniform draws (:func:`from_trace`)."""
    if relative == "size-linked":
        return size, max(1.0, size * 2 ** (SIZE_SPREAD * (2 * x - 1))), sigma_cirne_berman(y)
    if relative == "independent":
        return size, 2 ** (x * log_total), 2.0 * y
    lo, hi = relative
    return size, max(1.0, size * 2 ** (lo + (hi - lo) * x)), 2.0 * y


def _sim_input(i: int, j, malleable: bool, shape: tuple[int, float, float], total: int, estimate: float,
               clock: tuple[float, float], sizing: tuple[float, int, int]) -> SimInput:
    """Trace job ``j`` (the ``i``-th) as a simulator input; ``estimate``: its walltime when the trace has none."""
    size, A, sigma = shape
    min_fraction, step, iterations = sizing
    model = make_model(size, j.run_time, A, sigma, iterations)
    walltime = j.req_time if j.req_time is not None else estimate
    min_procs, sizes = size, None
    if malleable:
        min_procs = max(1, math.ceil(min_fraction * size))
        if step > 1:
            first = -(-min_procs // step) * step
            min_procs = min(first, size)
            sizes = tuple(sorted({size, *range(first, total + 1, step)}))
    t0, load = clock
    spec = JobSpec(job_id=i, name=f"swf{j.job_id}", submit_time=(j.submit - t0) / load, nprocs=size,
                   min_procs=min_procs, max_procs=None if malleable else size, sizes=sizes,
                   resizable=malleable, walltime=walltime, iterations=iterations)
    return SimInput(spec, model, j.run_time)
