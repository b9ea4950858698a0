"""Simulator job and redistribution models that time jobs exactly as ``apps.emujob`` does.

The emulated job (``python -m apps.emujob``) sleeps
``work * (serial + (1 - serial) / p) + overhead * p`` seconds per iteration
(Amdahl's law plus a per-process overhead, sweet spot at
``sqrt(work * (1 - serial) / overhead)``) and ``redist * (1 + min(p, q) /
max(p, q))`` seconds per resize ``p -> q``. :class:`AmdahlOverheadModel`
and :class:`EmuRedistModel` have the interfaces of
:class:`scheduler.lab.JobModel` and :class:`scheduler.lab.RedistModel`, so
the same workload can run through the live daemon and through the simulator
(issue 6: same scheduling decisions).
"""

from __future__ import annotations

from dataclasses import dataclass

from apps.emujob import iteration_time

__all__ = ["AmdahlOverheadModel", "EmuRedistModel"]


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
        return self.redist * (1 + min(p, q) / max(p, q))
