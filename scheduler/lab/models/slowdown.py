"""Aggregate slowdown of a data-parallel job on shared, heterogeneous nodes (Figueira & Berman).

Figueira & Berman model the time of a loosely synchronous, CPU-bound job on
time-shared nodes as ``X = X_ded * sd`` (Eq. 1), with ``sd`` built from each
node's *local* slowdown ``sd_a`` and dedicated *weight* ``w_a``:

* local slowdown, round-robin CPU sharing: ``sd_a = p_a + 1`` for ``p_a``
  fully busy competitors (Eq. 8); ``sd_a = 1 + sum_i busy_ai`` for
  competitors busy only a fraction of the time (Eq. 9), with
  ``busy = min(1, cpu_share * (p_a + 1))`` from an observed CPU share (Eq. 10).
  This is pessimistic (an upper bound) by construction;
* load-dependent partitioning (work proportional to available capacity):
  ``sd = sum(w) / sum(w / sd_a)`` (Eq. 2);
* constraint-based partitioning with fractions ``f_a`` (``ew_a = n f_a - 1``):
  ``sd = max((1 + ew_a) sd_a / w_a) / max((1 + ew'_a) / w_a)`` (Eqs. 4-6),
  ``f'`` being the dedicated run's fractions (default: the same as ``f``).
  The paper's Eq. 7 drops the denominator assuming the slowest node (w = 1)
  is in the set; we always keep it (Eq. 6), which equals Eq. 7 in that case
  and stays right when the set's weights are normalised elsewhere.

Weights ``w_a = t_s / t_a`` come from a dedicated serial benchmark (slowest
node ``w = 1``); :func:`weights` computes them. On multi-core nodes, each
core is a "node" here (the paper assumes one CPU per node).

Use for placement: :func:`predict_time` gives ``X`` for a candidate node set,
so a scheduler picks the set minimising it.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = [
    "aggregate_slowdown",
    "busy_from_cpu_share",
    "constraint_slowdown",
    "load_dependent_slowdown",
    "local_slowdown",
    "predict_time",
    "weights",
]


def busy_from_cpu_share(cpu_share: float, p: int) -> float:
    """Eq. 10: busy fraction of a competitor using ``cpu_share`` of a CPU shared by ``p + 1``."""
    if cpu_share < 0 or p < 0:
        raise ValueError("cpu share and competitor count must be non-negative")
    return min(1.0, cpu_share * (p + 1))


def local_slowdown(competitors: int | Sequence[float] = 0) -> float:
    """``sd_a``: Eq. 8 for a count of fully busy competitors, Eq. 9 for busy fractions."""
    if isinstance(competitors, int):
        if competitors < 0:
            raise ValueError("competitor count must be non-negative")
        return competitors + 1.0
    fr = list(competitors)
    if any(not 0.0 <= b <= 1.0 for b in fr):
        raise ValueError(f"busy fractions must be in [0, 1], got {fr}")
    return 1.0 + sum(fr)


def weights(bench_times: Sequence[float]) -> list[float]:
    """``w_a = t_s / t_a`` with ``t_s`` the slowest node's dedicated benchmark time."""
    if not bench_times or any(t <= 0 for t in bench_times):
        raise ValueError("benchmark times must be positive")
    ts = max(bench_times)
    return [ts / t for t in bench_times]


def _check(sd: Sequence[float], w: Sequence[float] | None) -> list[float]:
    if not sd:
        raise ValueError("need at least one node")
    if any(s < 1.0 for s in sd):
        raise ValueError(f"local slowdowns must be >= 1, got {list(sd)}")
    w = [1.0] * len(sd) if w is None else list(w)
    if len(w) != len(sd) or any(x <= 0 for x in w):
        raise ValueError("weights must be positive, one per node")
    return w


def load_dependent_slowdown(sd: Sequence[float], w: Sequence[float] | None = None) -> float:
    """Eq. 2: ratio of dedicated to loaded aggregate capacity."""
    w = _check(sd, w)
    return sum(w) / sum(wa / sa for wa, sa in zip(w, sd, strict=True))


def constraint_slowdown(
    sd: Sequence[float],
    w: Sequence[float] | None = None,
    f: Sequence[float] | None = None,
    f_ded: Sequence[float] | None = None,
) -> float:
    """Eqs. 4-6: slowest node under contention over slowest node dedicated."""
    w = _check(sd, w)
    n = len(sd)
    f = [1.0 / n] * n if f is None else list(f)
    f_ded = f if f_ded is None else list(f_ded)
    for name, fr in (("f", f), ("f_ded", f_ded)):
        if len(fr) != n or any(x < 0 for x in fr) or abs(sum(fr) - 1.0) > 1e-6:
            raise ValueError(f"{name} must be {n} non-negative fractions summing to 1")
    num = max(n * fa * sa / wa for fa, sa, wa in zip(f, sd, w, strict=True))
    den = max(n * fa / wa for fa, wa in zip(f_ded, w, strict=True))
    return num / den


def aggregate_slowdown(
    sd: Sequence[float],
    w: Sequence[float] | None = None,
    *,
    partitioning: str = "uniform",
    f: Sequence[float] | None = None,
    f_ded: Sequence[float] | None = None,
) -> float:
    """``sd`` for ``partitioning`` in {"load-dependent", "constraint", "uniform"}."""
    if partitioning == "load-dependent":
        return load_dependent_slowdown(sd, w)
    if partitioning == "constraint":
        return constraint_slowdown(sd, w, f, f_ded)
    if partitioning == "uniform":
        return constraint_slowdown(sd, w)
    raise ValueError(
        f"unknown partitioning {partitioning!r}; use 'load-dependent', 'constraint' or 'uniform'"
    )


def predict_time(x_ded: float, sd: Sequence[float], w: Sequence[float] | None = None,
                 **kw) -> float:
    """Eq. 1: ``X = X_ded * sd``."""
    return x_ded * aggregate_slowdown(sd, w, **kw)
