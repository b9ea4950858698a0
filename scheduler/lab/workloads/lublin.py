"""Lublin and Feitelson's model of rigid parallel jobs, as a seeded generator of SWF traces.

U. Lublin, D. G. Feitelson, "The workload on parallel supercomputers:
modeling the characteristics of rigid jobs", JPDC 63(11), 2003. The shared
trace ``lublin_256.swf`` (10,000 jobs, 256 nodes) was generated from this
model with its "whole sample" parameters (no batch/interactive split: every
job is of type 0, as in the file); :func:`generate` draws traces of any
length from the same model, so the simulator can be run on a year of a large
machine (the million-job runs of ``benchmarks.scale``). The parameters are the model's published fit
(:data:`PARAMS`); the system size enters through ``UHI = log2(nodes)`` and
``UMED = UHI - 2.5`` (the model's rule, "2.5 could be between 1.5 and 3.5").

* **Size.** Serial (1 node) with probability ``serial``; otherwise ``x`` is
  drawn from a two-stage uniform, on ``[ULOW, UMED]`` with probability
  ``uprob`` and on ``[UMED, UHI]`` otherwise, rounded to an integer with
  probability ``pow2`` (a power-of-two job), and the size is ``round(2**x)``.
* **Run time.** ``exp(h)`` seconds, ``h`` hyper-gamma: ``gamma(a1, b1)`` with
  probability ``p = pa * size + pb`` (clamped to ``[0, 1]``; larger jobs run
  longer), else ``gamma(a2, b2)``; ``h > 12`` (about two days) is drawn again.
* **Arrivals.** ``exp(g)`` seconds of "rush-hour" inter-arrival time, ``g``
  from ``gamma(aarr * arar, barr)`` (``g > 13`` drawn again; ``arar`` = 1, as
  in the shared file, see :data:`PARAMS`), spent across the
  day's 48 half-hour buckets in proportion to each bucket's share of the
  daily arrivals (the ``gamma(anum, bnum)`` density over the hours, the day
  starting at 11:00 and shifted cyclically); the trace starts at midnight.

Vectorised over NumPy's generator (``numpy.random.default_rng(seed)``): the
same seed gives the same trace, a million jobs take a few seconds. The
streams differ from the reference C program's ``drand48``, so a seed here
does not reproduce ``lublin_256.swf`` job by job; the distributions are the
same (``tests/test_lublin.py`` compares the shares of serial and
power-of-two jobs, the run-time median and the arrival rate with the file).

``load``: scale the arrival times so that the offered load (node-seconds of
work over ``nodes`` x the trace's span) is ``load``; the model's own arrival
process offers about 1.06 on 256 nodes (as the shared file does), more on
larger machines, since it does not depend on the machine's size.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import gammainc

from scheduler.lab.swf import SwfJob, SwfTrace

__all__ = ["PARAMS", "generate", "offered_load"]

PARAMS = {
    "serial": 0.244, "pow2": 0.576, "ulow": 0.8, "uprob": 0.86, "umed_below_uhi": 2.5,  # size
    "a1": 4.2, "b1": 0.94, "a2": 312.0, "b2": 0.03, "pa": -0.0054, "pb": 0.78,  # run time
    "aarr": 10.2303, "barr": 0.4871, "anum": 8.1737, "bnum": 3.9631, "arar": 1.0,  # arrivals
}  # arar: the model's rush-to-all-hours correction is 1.0225; the shared lublin_256.swf was drawn without it
#    (mean gap 771 s; 1.0 gives 786-851 s over seeds 0-3, 1.0225 gives 861-941 s)
MAX_LOG_RUN = 12.0  # exp(12) s, about two days
MAX_LOG_GAP = 13.0  # exp(13) s, about five days
BUCKETS = 48  # half hours
BUCKET_S = 86400 / BUCKETS
DAY_START = 11  # the model's day runs over buckets 11 .. 58, folded back onto 0 .. 47


def _gamma(rng: np.random.Generator, shape: np.ndarray | float, scale: np.ndarray | float, n: int,
           limit: float) -> np.ndarray:
    """``n`` draws of ``gamma(shape, scale)`` (arrays broadcast per draw), each above ``limit`` drawn again."""
    shape = np.broadcast_to(np.asarray(shape, dtype=float), (n,))
    scale = np.broadcast_to(np.asarray(scale, dtype=float), (n,))
    out = rng.gamma(shape, scale)
    bad = np.flatnonzero(out > limit)
    while bad.size:
        out[bad] = rng.gamma(shape[bad], scale[bad])
        bad = bad[out[bad] > limit]
    return out


def _bucket_weights(anum: float, bnum: float) -> np.ndarray:
    """Each half hour's share of a day's arrivals, normalised to a mean of 1."""
    w = np.zeros(BUCKETS)
    for i in range(DAY_START, BUCKETS + DAY_START):
        w[(i - 1) % BUCKETS] = gammainc(anum, (i + 0.5) / bnum) - gammainc(anum, (i - 0.5) / bnum)
    return w / w.mean()


def _arrivals(rng: np.random.Generator, n: int, p: dict) -> np.ndarray:
    """Arrival times: the cumulative rush-hour seconds mapped through the day's bucket weights."""
    gaps = np.exp(_gamma(rng, p["aarr"] * p["arar"], p["barr"], n, MAX_LOG_GAP))
    points = np.cumsum(gaps / BUCKET_S)  # bucket-widths at weight 1; the first job after one gap
    w = _bucket_weights(p["anum"], p["bnum"])
    cw = np.concatenate(([0.0], np.cumsum(w)))  # weight spent at the start of each bucket
    day = cw[-1]  # = BUCKETS
    days = np.floor(points / day)
    r = points - days * day
    b = np.clip(np.searchsorted(cw, r, side="right") - 1, 0, BUCKETS - 1)
    return days * 86400.0 + b * BUCKET_S + (r - cw[b]) / w[b] * BUCKET_S


def _sizes(rng: np.random.Generator, n: int, nodes: int, p: dict) -> np.ndarray:
    uhi = math.log2(nodes)
    umed = max(p["ulow"], uhi - p["umed_below_uhi"])
    u = rng.random(n)
    first = rng.random(n) <= p["uprob"]
    lo = np.where(first, p["ulow"], umed)
    hi = np.where(first, umed, uhi)
    x = lo + rng.random(n) * (hi - lo)
    x = np.where(u <= p["serial"] + p["pow2"], np.floor(x + 0.5), x)
    size = np.floor(2.0 ** x + 0.5)
    size[u <= p["serial"]] = 1
    return np.clip(size, 1, nodes).astype(np.int64)


def _run_times(rng: np.random.Generator, size: np.ndarray, p: dict) -> np.ndarray:
    prob = np.clip(p["pa"] * size + p["pb"], 0.0, 1.0)
    first = rng.random(size.size) <= prob
    h = _gamma(rng, np.where(first, p["a1"], p["a2"]), np.where(first, p["b1"], p["b2"]), size.size,
               MAX_LOG_RUN)
    return np.floor(np.exp(h))


def offered_load(submit: np.ndarray, run: np.ndarray, size: np.ndarray, nodes: int) -> float:
    """Node-seconds of work over ``nodes`` x the span of the arrivals."""
    span = float(submit[-1] - submit[0]) if submit.size > 1 else 0.0
    return float(np.dot(run, size)) / (nodes * span) if span > 0 else math.inf


def generate(n: int, nodes: int = 256, seed: int = 0, load: float | None = None,
             params: dict | None = None) -> SwfTrace:
    """A trace of ``n`` jobs on ``nodes`` nodes from the model (seeded), as an :class:`SwfTrace`
    (no user estimates, as in Lublin's file: ``scheduler.lab.jobmodel.from_trace`` models them)."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be a positive number of jobs, got {n!r}")
    if isinstance(nodes, bool) or not isinstance(nodes, int) or nodes < 2:
        raise ValueError(f"nodes must be an integer >= 2, got {nodes!r}")
    if load is not None and not (isinstance(load, int | float) and math.isfinite(load) and load > 0):
        raise ValueError(f"load must be a positive number or None (the model's arrivals), got {load!r}")
    p = {**PARAMS, **(params or {})}
    unknown = set(p) - set(PARAMS)
    if unknown:
        raise ValueError(f"unknown Lublin-Feitelson parameters {sorted(unknown)}; known: {sorted(PARAMS)}")
    rng = np.random.default_rng(seed)
    submit = _arrivals(rng, n, p)
    size = _sizes(rng, n, nodes, p)
    run = _run_times(rng, size, p)
    if load is not None:
        submit = submit * (offered_load(submit, run, size, nodes) / load)
    submit = np.floor(submit)
    jobs = tuple(SwfJob(i + 1, float(t), -1.0, float(r), int(s), None, 1, -1, i + 8)
                 for i, (t, r, s) in enumerate(zip(submit.tolist(), run.tolist(), size.tolist(), strict=True)))
    header = {"Version": "2", "Acknowledge": "Uri Lublin, Hebrew University (model); generated",
              "MaxJobs": str(n), "MaxRecords": str(n), "MaxNodes": str(nodes),
              "MaxRuntime": str(int(math.exp(MAX_LOG_RUN))), "Seed": str(seed)}
    return SwfTrace(f"lublin-feitelson:n={n},nodes={nodes},seed={seed},load={load}", jobs, header, nodes)
