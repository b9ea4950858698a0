"""Simulator job and redistribution models that time jobs exactly as ``apps.emujob`` does.

The emulated job (``python -m apps.emujob``) sleeps
``work * (serial + (1 - serial) / p) + overhead * p`` seconds per iteration
(Amdahl's law plus a per-process overhead, sweet spot at
``sqrt(work * (1 - serial) / overhead)``) and ``redist * (1 + min(p, q) /
max(p, q))`` seconds per resize ``p -> q``, the times of
:mod:`reshape.joblink.emulated`, which both sides use. :class:`AmdahlOverheadModel`
and :class:`EmuRedistModel` have the interfaces of
:class:`scheduler.lab.JobModel` and :class:`scheduler.lab.RedistModel`, so
the same workload can run through the live daemon and through the simulator
(and both must make the same scheduling decisions: tests/test_sim_vs_live_daemon.py).
:class:`TableModel` is the same for a
job run with ``--times`` (an iteration time per size).

:func:`app_iter_time` is the model behind those tables for the five real
applications (Sudarsan & Ribbens 2007 Table 1; ``benchmarks.calibrate_apps`` fits it): one
iteration at ``p`` ranks costs the 1-rank time divided among the ranks that
compute, plus ``alpha`` per communication step and ``beta`` per byte on the
critical path, the steps and bytes counted from each application's algorithm
(:func:`comm_counts`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from reshape.joblink.emulated import iteration_time, resize_time, table_time
from reshape.redistribution.layout import nearly_square_grid

__all__ = ["APPS", "AmdahlOverheadModel", "EmuRedistModel", "TableModel", "app_iter_time", "comm_counts"]

APPS = ("lu", "mm", "jacobi", "fft2d", "master_worker")


def _lg(k: int) -> int:
    """Steps of a binomial-tree broadcast (or recursive-doubling gather) over ``k`` ranks."""
    return math.ceil(math.log2(k)) if k > 1 else 0


def comm_counts(app: str, n: int, p: int, *, nb: int = 64, sweeps: int = 20, chunk: int = 50) -> tuple[float, float]:
    """``(steps, bytes)`` of one iteration of ``apps.<app>`` at ``p`` ranks, on the critical path.

    ``n`` is the matrix order (image side; work units for master-worker). The
    counts follow each application's algorithm (its module docstring):

    * ``lu`` (PDGETRF on a ``pr x pc`` grid): per column one pivot allgather
      and one row swap down the process column; per panel the panel broadcast
      along the process row and ``U12`` down the process column. Bytes: the
      panels (``n^2 / 2`` words in all, ``1 / pr`` of them per process row) and
      the ``U12`` pieces (``1 / pc``), each times its broadcast's tree depth.
    * ``mm`` (SUMMA): per block column one broadcast of ``A``'s piece along
      the row and one of ``B``'s down the column: ``n^2 / pr`` and ``n^2 / pc``
      words per rank, times the tree depths.
    * ``jacobi``: per sweep one allgather of ``x`` (``n (p - 1) / p`` words in,
      ``log2 p`` steps).
    * ``fft2d``: two transposes (rows -> columns -> rows), each a circulant
      all-to-all of ``p - 1`` steps moving ``16 n^2 (p - 1) / p^2`` bytes per rank.
    * ``master_worker``: the master answers every chunk request in turn:
      ``2 n / chunk`` steps (request and reply), nothing else moves.
    """
    if p < 1 or n < 1:
        raise ValueError(f"need n >= 1 and p >= 1, got n={n}, p={p}")
    if p == 1:
        return 0.0, 0.0
    if app == "lu":
        pr, pc = nearly_square_grid(p)
        panels = math.ceil(n / nb)
        steps = n * (_lg(pr) + (pr > 1)) + panels * (_lg(pc) + _lg(pr))
        words = n * n / 2 * (_lg(pc) / pr + _lg(pr) / pc) + (n * n / pc if pr > 1 else 0)
        return float(steps), 8.0 * words
    if app == "mm":
        pr, pc = nearly_square_grid(p)
        steps = math.ceil(n / nb) * (_lg(pc) + _lg(pr))
        return float(steps), 8.0 * n * n * (_lg(pc) / pr + _lg(pr) / pc)
    if app == "jacobi":
        return float(sweeps * _lg(p)), 8.0 * sweeps * n * (p - 1) / p
    if app == "fft2d":
        return 2.0 * (p - 1), 2 * 16.0 * n * n * (p - 1) / p**2
    if app == "master_worker":
        return 2.0 * math.ceil(n / chunk), 0.0
    raise ValueError(f"unknown application {app!r}; known: {', '.join(APPS)}")


def app_iter_time(app: str, n: int, p: int, t1: float, alpha: float, beta: float, **opts: int) -> float:
    """Modelled seconds of one iteration of ``apps.<app>`` at ``p`` dedicated cores.

    ``t1``: measured seconds at 1 rank (all of it counted as divisible work);
    ``alpha``: seconds per communication step; ``beta``: seconds per byte.
    Master-worker's master hands out work and computes none, so ``p - 1``
    ranks share it (``p >= 2``).
    """
    if not t1 > 0 or alpha < 0 or beta < 0:
        raise ValueError(f"need t1 > 0, alpha >= 0, beta >= 0: t1={t1}, alpha={alpha}, beta={beta}")
    steps, nbytes = comm_counts(app, n, p, **opts)
    workers = p - 1 if app == "master_worker" and p > 1 else p
    return t1 / workers + alpha * steps + beta * nbytes


@dataclass(frozen=True)
class AmdahlOverheadModel:
    """``iter_time(p)`` of ``apps.emujob`` with the same ``--work/--serial/--overhead``."""

    work: float  # seconds per iteration on 1 process
    serial: float
    overhead: float  # seconds per process per iteration
    iterations: int

    def __post_init__(self) -> None:
        if not self.work > 0 or self.overhead < 0 or not 0 <= self.serial <= 1:
            raise ValueError(f"need work > 0, overhead >= 0, 0 <= serial <= 1: {self!r}")
        if self.iterations < 1:
            raise ValueError(f"iterations must be >= 1, got {self.iterations!r}")

    def iter_time(self, p: int) -> float:
        if p < 1:
            raise ValueError("processor count must be positive")
        return iteration_time(p, self.work, self.serial, self.overhead)

    def run_time(self, p: int) -> float:
        return self.iterations * self.iter_time(p)

    def argv(self, redist: float) -> list[str]:
        """The ``apps.emujob`` command line of this job (with ``--redist redist``)."""
        return ["python", "-m", "apps.emujob", "--work", repr(self.work),
                "--serial", repr(self.serial), "--overhead", repr(self.overhead),
                "--iterations", str(self.iterations), "--redist", repr(redist)]


@dataclass(frozen=True)
class TableModel:
    """``iter_time(p)`` of ``apps.emujob --times``: seconds per size, linear between sizes, flat outside."""

    times: tuple[tuple[int, float], ...]  # ((size, seconds), ...) sorted by size
    iterations: int

    def __post_init__(self) -> None:
        sizes = [p for p, _ in self.times]
        if not sizes or sizes != sorted(set(sizes)) or sizes[0] < 1 or any(not t > 0 for _, t in self.times):
            raise ValueError(f"times must be ((size >= 1, seconds > 0), ...) by increasing size: {self.times!r}")
        if self.iterations < 1:
            raise ValueError(f"iterations must be >= 1, got {self.iterations!r}")

    @property
    def work(self) -> float:
        """Sequential seconds per iteration (the simulator's useful work): ``p * t(p)`` at the smallest size."""
        p0, t0 = self.times[0]
        return p0 * t0

    def iter_time(self, p: int) -> float:
        if p < 1:
            raise ValueError("processor count must be positive")
        return table_time(p, self.times)

    def run_time(self, p: int) -> float:
        return self.iterations * self.iter_time(p)

    def argv(self, redist: float) -> list[str]:
        """The ``apps.emujob`` command line of this job (with ``--redist redist``)."""
        return ["python", "-m", "apps.emujob", "--times", ",".join(f"{p}:{t:.6g}" for p, t in self.times),
                "--iterations", str(self.iterations), "--redist", repr(redist)]


@dataclass(frozen=True)
class EmuRedistModel:
    """``cost(size, p, q) = redist * (1 + min(p, q) / max(p, q))``, as ``apps.emujob``.

    ``size`` (the job's starting size, used by :class:`scheduler.lab.RedistModel`)
    is ignored: the emulated job's cost depends only on ``p`` and ``q``.
    """

    redist: float = 0.0

    def __post_init__(self) -> None:
        if self.redist < 0:
            raise ValueError(f"redist must be >= 0, got {self.redist!r}")

    def cost(self, size: int, p: int, q: int) -> float:
        if p < 1 or q < 1:
            raise ValueError("processor counts must be positive")
        return resize_time(self.redist, p, q)
