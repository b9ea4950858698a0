"""Nakazawa 2005 ch. 3: I/O-aware gang scheduling: task-count methods and trace-matrix placement.

Nakazawa (2005), ch. 3. A gang scheduler keeps a *trace
matrix*: rows are time slices, columns processors; entry (r, p) is the job
whose process runs on processor p while the scheduler is at row r. These
are the pure decisions the simulator (:mod:`scheduler.lab.gang`) asks for:

* **task-count methods** (TCM, §6.5): how many processors a job gets —
  ``c`` its *critical number* CN, the fewest processors that hold its data in
  core (Eq. 3.5, capped at the machine); ``p`` doubling from 1 while Eq. 3.1's
  speedup of the doubling is at least 1.2 (users choosing by speedup,
  blind to I/O); ``a`` every processor; ``cP`` the ``p`` count, or every
  processor when that is below CN.
* **placements**: ``schark`` first-fit of one row (the base simulator);
  ``enhanced`` the multi-row placement of §6.4: the job takes
  ``N_s = ceil(N_sys / N_p)`` rows (Eq. 3.4 for c-based counts; we apply
  the same rule to every TCM, so each job is offered about one row's worth of
  processor time per matrix period) chosen to maximise the system fitness
  ``T_ρ^C = Σ_i T_ρ^i / N_M^r`` with ``T_ρ^i = N_s T^s − (T_c + T_m + T_w)``.

Simplifications of the pruned multi-row search (documented choices):
``T_c`` and ``T_w`` do not depend on where the job goes, so the fitness
compares candidates by migration cost ``T_m`` and row count only. For each
useful row (≥ N_p free processors) as target row R_t, the job's processors
there are the N_p free ones free in the most useful rows (ties: lower index;
the thesis's ranking by ``A^r``); every other useful row is scored by how many
of those processors it has free; exact rows first, then the best
alternatives, whose unmatched processes migrate. When fewer than N_s useful
rows exist, new rows are appended holding the job on the target processors.
Free sets are bitmasks, so a candidate costs one AND + popcount per row.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from scheduler.core.policy import make, register

__all__ = [
    "MODES",
    "TCMS",
    "GangJob",
    "amdahl_time",
    "io_events",
    "place",
    "place_enhanced",
    "place_first_fit",
    "rows_for",
    "task_count",
]

TCMS = ("p", "a", "cP", "c")
MODES = ("schark", "enhanced")
Tcm = Literal["p", "a", "cP", "c"]


@dataclass(frozen=True)
class GangJob:
    """One job of the gang workload (Table 3.2 fields)."""

    job_id: int
    seq_time: float  # T_s: total sequential computation (STU)
    pct_parallel: float  # P_i in percent
    cn: int  # critical number: fewest processors holding the data in core
    iters: int = 100  # N_iters


def amdahl_time(job: GangJob, n: int) -> float:
    """Computation per process on ``n`` processors, Eq. 3.1: ``((100 − P) + P/n)/100 · T_s``."""
    return ((100.0 - job.pct_parallel) + job.pct_parallel / n) / 100.0 * job.seq_time


def io_events(job: GangJob, n: int) -> int:
    """I/O events per process on ``n`` processors, Eq. 3.2 (1 when the data fit in core)."""
    return 1 if n >= job.cn else math.ceil(job.cn * job.iters / n)


def task_count(method: str, job: GangJob, n_sys: int, threshold: float = 1.2) -> int:
    """Processors given to ``job`` on an ``n_sys``-processor machine by TCM ``method``."""
    if method == "a":
        return n_sys
    if method == "c":
        return min(job.cn, n_sys)
    if method in ("p", "cP"):
        n = 1
        while 2 * n <= n_sys and amdahl_time(job, n) / amdahl_time(job, 2 * n) >= threshold:
            n *= 2
        if method == "cP" and n < job.cn:
            return n_sys
        return n
    raise ValueError(f"unknown task-count method {method!r}; known: {', '.join(TCMS)}")


def rows_for(n_p: int, n_sys: int) -> int:
    """Rows a job takes in enhanced mode: ``ceil(N_sys / N_p)`` (Eq. 3.4)."""
    return max(1, math.ceil(n_sys / n_p))


def _bits(mask: int) -> list[int]:
    out = []
    while mask:
        low = mask & -mask
        out.append(low.bit_length() - 1)
        mask ^= low
    return out


def _mask(procs) -> int:
    m = 0
    for p in procs:
        m |= 1 << p
    return m


Placement = list[tuple[int, tuple[int, ...]]]  # (row index; len(rows) + k = k-th new row, processors)


def place_first_fit(free_rows: list[int], n_sys: int, n_p: int) -> Placement:
    """Schark mode: the first row with ``n_p`` free processors (lowest ones), else a new row.

    ``free_rows[r]`` is row r's free-processor bitmask.
    """
    if not 1 <= n_p <= n_sys:
        raise ValueError(f"need 1 <= n_p <= {n_sys}, got {n_p}")
    for r, free in enumerate(free_rows):
        if free.bit_count() >= n_p:
            return [(r, tuple(_bits(free)[:n_p]))]
    return [(len(free_rows), tuple(range(n_p)))]


def place_enhanced(
    free_rows: list[int],
    n_sys: int,
    n_p: int,
    n_s: int,
    *,
    slice_len: float = 20.0,
    migration: float = 2.0,
    other_progress: float = 0.0,
) -> Placement:
    """Enhanced mode: ``n_s`` rows of ``n_p`` processors maximising ``T_ρ^C`` (module docstring).

    ``other_progress`` is the other jobs' progress per matrix period (it only
    scales the comparison). Returns one ``(row, processors)`` per row taken.
    """
    if not 1 <= n_p <= n_sys or n_s < 1:
        raise ValueError(f"need 1 <= n_p <= {n_sys} and n_s >= 1, got {n_p}, {n_s}")
    useful = [r for r, f in enumerate(free_rows) if f.bit_count() >= n_p]
    if not useful:
        return [(len(free_rows) + k, tuple(range(n_p))) for k in range(n_s)]
    count = [0] * n_sys  # A^r: in how many useful rows each processor is free
    for r in useful:
        for p in _bits(free_rows[r]):
            count[p] += 1
    best = None
    seen: set[int] = set()
    for rt in useful:
        procs = sorted(_bits(free_rows[rt]), key=lambda p: (-count[p], p))[:n_p]
        target = _mask(procs)
        if target in seen:
            continue  # the same processor set from another row scores the same
        seen.add(target)
        scored = []
        for r in useful:
            if r == rt:
                continue
            m = (free_rows[r] & target).bit_count()
            scored.append((-m, r))
        scored.sort()
        chosen = [(rt, n_p)] + [(r, -negm) for negm, r in scored[: n_s - 1]]
        new_rows = max(0, n_s - len(chosen))
        t_m = migration * sum((n_p - m) / n_p for _, m in chosen)
        fitness = (other_progress + n_s * slice_len - t_m) / (len(free_rows) + new_rows)
        key = (fitness, -rt)
        if best is None or key > best[0]:
            best = (key, target, chosen, new_rows)
    _, target, chosen, new_rows = best
    tprocs = _bits(target)
    out: Placement = []
    for r, m in chosen:
        if m == n_p:
            out.append((r, tuple(tprocs)))
        else:
            keep = free_rows[r] & target
            others = sorted(_bits(free_rows[r] & ~target), key=lambda p: (-count[p], p))
            out.append((r, tuple(sorted(_bits(keep) + others[: n_p - m]))))
    out.extend((len(free_rows) + k, tuple(tprocs)) for k in range(new_rows))
    return out


@register("gang", "schark")
def _schark():
    return lambda free_rows, n_sys, n_p, **kw: place_first_fit(free_rows, n_sys, n_p)


@register("gang", "enhanced")
def _enhanced():
    return lambda free_rows, n_sys, n_p, **kw: place_enhanced(free_rows, n_sys, n_p, rows_for(n_p, n_sys), **kw)


def place(mode: str, free_rows: list[int], n_sys: int, n_p: int, **kw) -> Placement:
    """Placement by mode name (``schark`` or ``enhanced``, registered as ``gang`` policies)."""
    return make("gang", mode)(free_rows, n_sys, n_p, **kw)
