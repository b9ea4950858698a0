"""The emulated job's timing model: what an iteration and a resize of ``python -m apps.emujob`` take.

The emulated job is one process standing for ``p`` ranks of an iterative
code; it sleeps instead of computing, so time-scaled workloads of many
"processors" can run against the real daemon on a small machine. Its times
come from here, and the scheduler's models of it (the simulator's
``scheduler.lab.emumodel``, the workloads of ``scheduler.cli.workload``)
compute theirs from the same functions, so a workload run live and simulated
sees the same times to the bit.

* :func:`iteration_time`: Amdahl's law plus a per-process overhead,
  ``work * (serial + (1 - serial) / p) + overhead * p`` (a sweet spot at
  ``p* = sqrt(work * (1 - serial) / overhead)``);
* :func:`table_time`: a measured or modelled curve, seconds per size, linear
  between the listed sizes and flat outside them; :func:`parse_times` reads
  its text form ``P:T,P:T,...`` (the job's ``--times``);
* :func:`resize_time`: a resize ``p -> q`` costs ``redist * (1 + min(p, q) / max(p, q))``.
"""

from __future__ import annotations

import itertools

__all__ = ["iteration_time", "parse_times", "resize_time", "table_time"]


def iteration_time(p: int, work: float, serial: float, overhead: float) -> float:
    """Seconds of one iteration at ``p`` processes: Amdahl's law plus ``overhead`` per process."""
    return work * (serial + (1 - serial) / p) + overhead * p


def table_time(p: int, times: tuple[tuple[int, float], ...]) -> float:
    """Iteration time at ``p`` from ``((size, seconds), ...)`` sorted by size: linear between sizes, flat outside."""
    if p <= times[0][0]:
        return times[0][1]
    for (p0, t0), (p1, t1) in itertools.pairwise(times):
        if p <= p1:
            return t0 + (t1 - t0) * (p - p0) / (p1 - p0)
    return times[-1][1]


def parse_times(text: str) -> tuple[tuple[int, float], ...]:
    """``"1:4.0,2:2.1"`` -> ``((1, 4.0), (2, 2.1))``; a clear ValueError naming the bad part otherwise."""
    out: dict[int, float] = {}
    for part in text.split(","):
        try:
            p, t = part.split(":")
            size, secs = int(p), float(t)
        except ValueError:
            raise ValueError(f"--times: {part!r} is not SIZE:SECONDS (e.g. 4:1.5)") from None
        if size < 1 or not secs > 0 or size in out:
            raise ValueError(f"--times: {part!r} needs a new size >= 1 and seconds > 0")
        out[size] = secs
    return tuple(sorted(out.items()))


def resize_time(redist: float, p: int, q: int) -> float:
    """Seconds of a resize ``p -> q`` of a job run with ``--redist redist``."""
    return redist * (1 + min(p, q) / max(p, q))
