"""Standard Workload Format (SWF) traces: a reader robust to the variants in the wild.

SWF: one job per line, 18 whitespace-separated fields (job id, submit, wait,
run time, allocated procs, average CPU time, used memory, requested procs,
requested time, requested memory, status, user, group, executable, queue,
partition, preceding job, think time); ``;`` starts a header/comment line;
``-1`` means unknown. The reader accepts spaces or tabs, trailing blanks,
header lines of the form ``; Key: value`` and fewer than 18 fields (missing
trailing fields count as ``-1``). A line it cannot read raises
:class:`SwfError` naming the file and the line.

Choices (documented variants of the shared traces):

* size = allocated processors, else requested processors;
* jobs whose run time or size is unknown or not positive (cancelled before
  start) are skipped and counted in :attr:`SwfTrace.skipped`;
* user estimate = requested time; when it is unknown but the *average CPU
  time* field exceeds the run time (impossible for a CPU time per processor),
  that field holds the estimate (the Mira log puts it there);
* machine size = header ``MaxProcs``, else ``MaxNodes``, else the largest job.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field

__all__ = ["SwfError", "SwfJob", "SwfTrace", "read_swf", "trace_unit"]

N_FIELDS = 18


class SwfError(ValueError):
    """A trace file that cannot be read; the message names the file and line."""


@dataclass(frozen=True)
class SwfJob:
    job_id: int
    submit: float
    wait: float
    run_time: float
    procs: int
    req_time: float | None  # user estimate, seconds; None if unknown
    status: int
    user: int
    line: int  # line number in the file, for messages


@dataclass(frozen=True)
class SwfTrace:
    path: str
    jobs: tuple[SwfJob, ...]
    header: dict[str, str] = field(default_factory=dict)
    max_procs: int = 0
    skipped: int = 0


def _num(tok: str, path: str, lineno: int, col: int) -> float:
    try:
        v = float(tok)
    except ValueError:
        raise SwfError(f"{path}:{lineno}: field {col + 1} is not a number: {tok!r}") from None
    if not math.isfinite(v):
        raise SwfError(f"{path}:{lineno}: field {col + 1} is not finite: {tok!r}")
    return v


def read_swf(path: str | os.PathLike, max_jobs: int | None = None) -> SwfTrace:
    """Read an SWF trace; jobs sorted by submit time (stable), submit times kept as in the file."""
    path = os.fspath(path)
    try:
        fh = open(path, encoding="utf-8", errors="replace")  # noqa: SIM115 (closed below)
    except OSError as e:
        raise SwfError(f"{path}: cannot open trace: {e.strerror or e}") from None
    header: dict[str, str] = {}
    jobs: list[SwfJob] = []
    skipped = 0
    with fh:
        for lineno, raw in enumerate(fh, 1):
            s = raw.strip()
            if not s:
                continue
            if s.startswith(";"):
                key, sep, val = s[1:].partition(":")
                if sep:
                    header[key.strip()] = val.strip()
                continue
            toks = s.split()
            if len(toks) > N_FIELDS:
                raise SwfError(
                    f"{path}:{lineno}: {len(toks)} fields, SWF has at most {N_FIELDS}"
                )
            if len(toks) < 5:
                raise SwfError(
                    f"{path}:{lineno}: {len(toks)} fields, need at least 5 "
                    "(id, submit, wait, run time, processors)"
                )
            v = [_num(t, path, lineno, i) for i, t in enumerate(toks)]
            v += [-1.0] * (N_FIELDS - len(v))
            submit, run, alloc, avg_cpu, req_procs, req_time = v[1], v[3], v[4], v[5], v[7], v[8]
            if submit < 0:
                raise SwfError(f"{path}:{lineno}: negative submit time {toks[1]}")
            procs = int(alloc) if alloc > 0 else int(req_procs)
            if run <= 0 or procs <= 0:
                skipped += 1
                continue
            est: float | None = req_time if req_time > 0 else None
            if est is None and avg_cpu > run:
                est = avg_cpu
            jobs.append(
                SwfJob(
                    job_id=int(v[0]),
                    submit=submit,
                    wait=v[2],
                    run_time=run,
                    procs=procs,
                    req_time=est,
                    status=int(v[10]),
                    user=int(v[11]),
                    line=lineno,
                )
            )
            if max_jobs is not None and len(jobs) >= max_jobs:
                break
    if not jobs:
        raise SwfError(f"{path}: no runnable jobs in trace")
    jobs.sort(key=lambda j: j.submit)
    max_procs = 0
    for key in ("MaxProcs", "MaxNodes"):
        try:
            max_procs = int(header.get(key, "").split()[0])
        except (ValueError, IndexError):
            continue
        if max_procs > 0:
            break
    biggest = max(j.procs for j in jobs)
    if max_procs <= 0:
        max_procs = biggest
    if biggest > max_procs:
        j = max(jobs, key=lambda j: j.procs)
        raise SwfError(
            f"{path}:{j.line}: job {j.job_id} uses {j.procs} processors, "
            f"more than the machine's {max_procs}"
        )
    return SwfTrace(path, tuple(jobs), header, max_procs, skipped)


def trace_unit(trace: SwfTrace, share: float = 0.95) -> int:
    """Allocation unit: the largest power of two dividing ``share`` of the job sizes.

    Capped at ``max_procs / 64`` so a machine keeps at least 64 slots. Mira
    allocates in 512-node blocks (smaller requests occupy a whole block), so
    its 49,152 nodes become 96 slots and the few smaller jobs round up to one
    block; on Lublin's 256 nodes the unit is 1.
    """
    n = len(trace.jobs)
    u = 1
    while (
        u * 2 <= trace.max_procs // 64
        and trace.max_procs % (u * 2) == 0
        and sum(1 for j in trace.jobs if j.procs % (u * 2) == 0) >= share * n
    ):
        u *= 2
    return u
