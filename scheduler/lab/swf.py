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
  start) are skipped, counted in :attr:`SwfTrace.skipped` with the first such
  line in :attr:`SwfTrace.skipped_first_line`, and reported in
  :attr:`SwfTrace.warnings`;
* user estimate = requested time; when it is unknown but the *average CPU
  time* field exceeds the run time (impossible for a CPU time per processor),
  that field holds the estimate (the Mira log puts it there);
* machine size = header ``MaxProcs``, else ``MaxNodes``, else the largest job
  of the file (with a warning naming the size assumed);
* submit times may be relative to the log's start (the standard) or absolute
  (Unix time, as the Mira log): only their differences matter.

Absurd values are refused (:class:`SwfError` naming file, line, field and the
allowed range) rather than simulated: a run or requested time above
``1e9`` s (about 31 years), a trace whose submit times span more than that,
or more than ``1e8`` processors.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field

__all__ = ["SwfError", "SwfJob", "SwfTrace", "procs_per_node", "read_swf", "trace_unit"]

N_FIELDS = 18
MAX_SECONDS = 1e9  # about 31 years: run, requested times and the span of submit times
MAX_PROCS = 10**8


class SwfError(ValueError):
    """A trace file that cannot be read; the message names the file and line."""


@dataclass(frozen=True, slots=True)
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


@dataclass(frozen=True, slots=True)
class SwfTrace:
    path: str
    jobs: tuple[SwfJob, ...]
    header: dict[str, str] = field(default_factory=dict)
    max_procs: int = 0
    skipped: int = 0  # jobs skipped (run time or processors unknown or not positive)
    skipped_first_line: int | None = None  # line of the first of them, in file order
    warnings: tuple[str, ...] = ()  # human-readable, each naming the file


def _num(tok: str, path: str, lineno: int, col: int) -> float:
    try:
        v = float(tok)
    except ValueError:
        raise SwfError(f"{path}:{lineno}: field {col + 1} is not a number: {tok!r}") from None
    if not math.isfinite(v):
        raise SwfError(f"{path}:{lineno}: field {col + 1} is not finite: {tok!r}")
    return v


def _header_int(header: dict[str, str], key: str) -> int:
    """A positive integer header value, else 0."""
    try:
        v = int(header.get(key, "").split()[0])
    except (ValueError, IndexError):
        return 0
    return max(v, 0)


def read_swf(path: str | os.PathLike, max_jobs: int | None = None) -> SwfTrace:
    """Read an SWF trace; jobs sorted by submit time (stable), submit times kept as in the file.

    ``max_jobs``: only the first ``max_jobs`` jobs *by submit time* (the file
    need not be sorted). The whole file is still read and checked, and the
    machine size does not depend on ``max_jobs``; the skipped jobs reported
    are those submitted before the last job kept.
    """
    path = os.fspath(path)
    if max_jobs is not None and max_jobs < 1:
        raise SwfError(f"{path}: max_jobs must be at least 1, got {max_jobs}")
    try:
        fh = open(path, encoding="utf-8", errors="replace")  # noqa: SIM115 (closed below)
    except OSError as e:
        raise SwfError(f"{path}: cannot open trace: {e.strerror or e}") from None
    header: dict[str, str] = {}
    # (submit, line, job); job None for a skipped line
    entries: list[tuple[float, int, SwfJob | None]] = []
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
            entries.append(_job_line(s, path, lineno))
    return _trace(path, header, entries, max_jobs)


def _job_line(s: str, path: str, lineno: int) -> tuple[float, int, SwfJob | None]:
    """One job line checked: ``(submit, line, job)``, job None for a line skipped (run time or processors unknown)."""
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
    for col, what in ((3, "run time"), (8, "requested time")):
        if v[col] > MAX_SECONDS:
            raise SwfError(
                f"{path}:{lineno}: {what} (field {col + 1}) is {toks[col]} s; "
                f"allowed: at most {MAX_SECONDS:.0e} s (about 31 years), or -1 for unknown"
            )
    for col, what in ((4, "allocated processors"), (7, "requested processors")):
        if v[col] > MAX_PROCS:
            raise SwfError(
                f"{path}:{lineno}: {what} (field {col + 1}) is {toks[col]}; "
                f"allowed: at most {MAX_PROCS:.0e}, or -1 for unknown"
            )
    procs = int(alloc) if alloc > 0 else int(req_procs)
    if run <= 0 or procs <= 0:
        return submit, lineno, None
    est: float | None = req_time if req_time > 0 else None
    if est is None and avg_cpu > run:
        if avg_cpu > MAX_SECONDS:
            raise SwfError(
                f"{path}:{lineno}: requested time (read from field 6, average CPU time) "
                f"is {toks[5]} s; allowed: at most {MAX_SECONDS:.0e} s (about 31 years)"
            )
        est = avg_cpu
    return submit, lineno, SwfJob(
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


def _trace(path: str, header: dict[str, str], entries: list[tuple[float, int, SwfJob | None]],
           max_jobs: int | None) -> SwfTrace:
    """The trace of the lines read: sorted by submit time, cut at ``max_jobs``, the machine's size checked."""
    everyone = [e[2] for e in entries if e[2] is not None]
    if not everyone:
        raise SwfError(f"{path}: no runnable jobs in trace")
    first = min(entries, key=lambda e: (e[0], e[1]))
    last = max(entries, key=lambda e: (e[0], -e[1]))
    if last[0] - first[0] > MAX_SECONDS:
        raise SwfError(
            f"{path}:{last[1]}: submit time (field 2) is {last[0]:.0f}, {last[0] - first[0]:.3g} s "
            f"after the first job's (line {first[1]}); allowed: submit times spanning at most "
            f"{MAX_SECONDS:.0e} s (about 31 years)"
        )
    entries.sort(key=lambda e: (e[0], e[1]))  # by submit time, ties in file order
    jobs = [j for _, _, j in entries if j is not None]
    skipped_lines = [ln for _, ln, j in entries if j is None]
    if max_jobs is not None and len(jobs) > max_jobs:
        jobs = jobs[:max_jobs]
        cut = (jobs[-1].submit, jobs[-1].line)
        skipped_lines = [ln for s, ln, j in entries if j is None and (s, ln) < cut]
    warnings: list[str] = []
    skipped = len(skipped_lines)
    first_skipped = min(skipped_lines) if skipped_lines else None
    if skipped:
        warnings.append(
            f"{path}: {skipped} job{'s' if skipped > 1 else ''} skipped (run time or processors "
            f"unknown or not positive), first at line {first_skipped}"
        )
    max_procs = _header_int(header, "MaxProcs") or _header_int(header, "MaxNodes")
    biggest = max(everyone, key=lambda j: j.procs)
    if max_procs <= 0:
        max_procs = biggest.procs
        warnings.append(
            f"{path}: no MaxProcs/MaxNodes header: assuming a machine of {max_procs} processors, "
            "the largest job"
        )
    if biggest.procs > max_procs:
        raise SwfError(
            f"{path}:{biggest.line}: job {biggest.job_id} uses {biggest.procs} processors, "
            f"more than the machine's {max_procs}"
        )
    return SwfTrace(path, tuple(jobs), header, max_procs, skipped, first_skipped, tuple(warnings))


def procs_per_node(trace: SwfTrace) -> int:
    """Processors per node, ``MaxProcs / MaxNodes`` when the header gives both and it divides; else 1."""
    procs, nodes = _header_int(trace.header, "MaxProcs"), _header_int(trace.header, "MaxNodes")
    if procs and nodes and procs % nodes == 0:
        return procs // nodes
    return 1


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
