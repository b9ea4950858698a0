"""Nakazawa 2005 ch. 3: the I/O-aware gang-scheduling simulator and its experiments.

Machine: ``n_sys`` nodes (128, a mesh; the topology only matters to the
communication the thesis simulates, which we leave out, see below) and a
trace matrix (:mod:`scheduler.lab.gang_policies`). Time advances in global slices
of ``T^s`` = 20 STU; the scheduler visits the non-empty rows round-robin and
compacts the matrix (drops empty rows) at every slice event.

Job model (Eqs. 3.1-3.3): on ``N_p`` processors a process computes
``((100 − P) + P/N_p)/100 · T_s`` STU and does ``N_IO`` I/O events of
``T_w^β`` = 2 STU that block its processor (no context switch inside a slice),
where ``N_IO = 1`` when ``N_p ≥ CN`` and ``ceil(CN · N_iters / N_p)``
otherwise. SPMD processes of a gang run together, so a job needs
``work + N_IO · T_w^β`` STU of slice time plus overheads, and ends inside a
slice; the rest of that slice is idle (slices have a fixed length).

Choices where the thesis leaves values unspecified (parameters):

* ``T_s`` = 200 STU (the prose; Table 3.2 says 400). With 200, giving all
  processors to every job ends the 100-job batch at ≈ 5,700 STU against the
  thesis's 5,912; with 400 it would be ≈ 10,000.
* context switch: ``ctx`` = 1 STU charged to a job in a slice when one of its
  processors ran another job in the slice before (state and working set
  reloaded); migration: ``mig`` = 2 STU (one I/O event's worth) when its
  processors differ from those of its previous slice.
* communication (nearest-neighbour / gather / scatter in the thesis) is not
  simulated: a gang's processes are always co-scheduled, so it would add
  the same cost under every placement for a given processor count.
* CN ~ Uniform{1..hi} rounded up to a power of two, hi = ``cn_factor · n_sys``;
  P ~ Uniform(65, 90); all jobs arrive at t = 0; placement in job order.

Metrics: average turnaround time (ATT, all jobs submitted at 0) and end
time (the last completion).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
from dataclasses import dataclass

from scheduler.core.policy import make
from scheduler.lab.gang_policies import MODES, TCMS, GangJob, amdahl_time, io_events, place, task_count

__all__ = [
    "SCENARIOS",
    "GangParams",
    "GangResult",
    "add_command",
    "gang_workload",
    "run_table",
    "simulate_gang",
]

# (mode, tcm) rows of Tables 3.3-3.5; a-based is the same in both modes (one full row per job)
CONFIGS = [("schark", "p"), ("schark", "a"), ("schark", "cP"), ("schark", "c"),
           ("enhanced", "p"), ("enhanced", "cP"), ("enhanced", "c")]

# scenario -> (cn_factor, iters): Table 3.3 baseline, 3.4 CN range, 3.5 I/O frequency
SCENARIOS = {
    "baseline": (1.0, 100),
    "cn-half": (0.5, 100),
    "cn-twice": (2.0, 100),
    "io-half": (1.0, 50),
    "io-double": (1.0, 200),
}


@dataclass(frozen=True)
class GangParams:
    n_sys: int = 128
    slice_len: float = 20.0
    io_time: float = 2.0
    ctx: float = 1.0
    mig: float = 2.0
    max_time: float = 10_000_000.0


@dataclass(frozen=True)
class GangResult:
    mode: str
    tcm: str
    finish: dict[int, float]
    max_rows: int

    @property
    def att(self) -> float:
        return statistics.fmean(self.finish.values())

    @property
    def end(self) -> float:
        return max(self.finish.values())


def gang_workload(n_jobs: int = 100, seed: int = 0, *, n_sys: int = 128, cn_factor: float = 1.0,
                  iters: int = 100, seq_time: float = 200.0,
                  pct_range: tuple[float, float] = (65.0, 90.0)) -> list[GangJob]:
    """Table 3.2's workload: CN uniform in 1..cn_factor·n_sys rounded up to a power of two."""
    if n_jobs < 1 or cn_factor <= 0 or iters < 1 or seq_time <= 0:
        raise ValueError("need n_jobs >= 1, cn_factor > 0, iters >= 1 and seq_time > 0")
    rng = random.Random(f"gang:{seed}")
    hi = max(1, round(cn_factor * n_sys))
    jobs = []
    for i in range(n_jobs):
        cn = 1 << (rng.randint(1, hi) - 1).bit_length()
        jobs.append(GangJob(i, seq_time, rng.uniform(*pct_range), cn, iters))
    return jobs


class _Job:
    __slots__ = ("job", "last_procs", "n_p", "rem", "rows")

    def __init__(self, job: GangJob, n_p: int, io_time: float):
        self.job = job
        self.n_p = n_p
        self.rem = amdahl_time(job, n_p) + io_events(job, n_p) * io_time
        self.rows = 0
        self.last_procs: tuple[int, ...] | None = None


def simulate_gang(jobs: list[GangJob], mode: str, tcm: str, params: GangParams | None = None) -> GangResult:
    """Gang-schedule ``jobs`` (all at t = 0) with TCM ``tcm`` and placement ``mode``."""
    g = params or GangParams()
    if mode not in MODES:
        make("gang", mode)  # raises, naming the modes that exist
    if tcm not in TCMS:
        raise ValueError(f"unknown task-count method {tcm!r}; known: {', '.join(TCMS)}")
    full = (1 << g.n_sys) - 1
    rows: list[dict[int, tuple[int, ...]]] = []  # row -> {job_id: processors}
    free: list[int] = []
    state: dict[int, _Job] = {}
    for job in jobs:
        n_p = task_count(tcm, job, g.n_sys)
        st = state[job.job_id] = _Job(job, n_p, g.io_time)
        progress = sum(len(r) for r in rows) * g.slice_len  # others' slice time per period
        kw = {"slice_len": g.slice_len, "migration": g.mig, "other_progress": progress} if mode == "enhanced" else {}
        for r, procs in place(mode, free, g.n_sys, n_p, **kw):
            while r >= len(rows):
                rows.append({})
                free.append(full)
            m = 0
            for p in procs:
                m |= 1 << p
            if free[r] & m != m or job.job_id in rows[r]:
                raise RuntimeError(f"placement of job {job.job_id} overlaps row {r}")  # a placement bug
            free[r] &= ~m
            rows[r][job.job_id] = procs
            st.rows += 1
    max_rows = len(rows)
    finish: dict[int, float] = {}
    owner_prev: dict[int, int] = {}  # processor -> job that ran on it in the previous slice
    t = 0.0
    cur = 0
    while rows:
        if t > g.max_time:
            raise RuntimeError(f"gang simulation passed {g.max_time} STU")
        cur %= len(rows)
        row = rows[cur]
        done = []
        owner_now: dict[int, int] = {}
        for jid, procs in row.items():
            st = state[jid]
            over = 0.0
            if any(owner_prev.get(p, jid) != jid for p in procs):
                over += g.ctx
            if st.last_procs is not None and st.last_procs != procs:
                over += g.mig
            st.last_procs = procs
            for p in procs:
                owner_now[p] = jid
            avail = g.slice_len - over
            if st.rem <= avail:
                finish[jid] = t + over + st.rem
                done.append(jid)
            else:
                st.rem -= max(avail, 0.0)
        owner_prev = owner_now
        t += g.slice_len
        if done:
            gone = set(done)
            for r, rr in enumerate(rows):
                for jid in gone & rr.keys():
                    for p in rr.pop(jid):
                        free[r] |= 1 << p
        # compaction: drop empty rows, keep the rotation order
        nxt = cur + 1
        keep = [i for i, rr in enumerate(rows) if rr]
        after = [i for i in keep if i >= nxt]
        nxt_row = after[0] if after else (keep[0] if keep else 0)
        rows = [rows[i] for i in keep]
        free = [free[i] for i in keep]
        cur = keep.index(nxt_row) if keep else 0
    return GangResult(mode, tcm, finish, max_rows)


def run_table(scenario: str = "baseline", seeds: int = 1, n_jobs: int = 100,
              params: GangParams | None = None) -> list[dict]:
    """One of Tables 3.3-3.5: ATT and end time per (mode, TCM), averaged over ``seeds``."""
    if scenario not in SCENARIOS:
        raise ValueError(f"unknown scenario {scenario!r}; known: {', '.join(SCENARIOS)}")
    if seeds < 1:
        raise ValueError(f"seeds must be >= 1, got {seeds}")
    cn_factor, iters = SCENARIOS[scenario]
    g = params or GangParams()
    out = []
    for mode, tcm in CONFIGS:
        att, end, rows = [], [], []
        for seed in range(seeds):
            jobs = gang_workload(n_jobs, seed, n_sys=g.n_sys, cn_factor=cn_factor, iters=iters)
            res = simulate_gang(jobs, mode, tcm, g)
            att.append(res.att)
            end.append(res.end)
            rows.append(res.max_rows)
        out.append({"scenario": scenario, "mode": mode, "tcm": tcm, "att": statistics.fmean(att),
                    "end": statistics.fmean(end), "rows": statistics.fmean(rows)})
    return out


def _run_cli(args: argparse.Namespace) -> int:
    try:
        scen = args.scenario or ["baseline"]
        for s in scen:
            if s not in SCENARIOS:
                raise ValueError(f"unknown scenario {s!r}; known: {', '.join(SCENARIOS)}")
        if args.jobs < 1 or args.seeds < 1:
            raise ValueError("--jobs and --seeds must be >= 1")
        tables = {s: run_table(s, args.seeds, args.jobs) for s in scen}
    except ValueError as e:
        print(f"reshape gang: error: {e}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(tables, indent=1))
        return 0
    for s, rows in tables.items():
        best = min(rows, key=lambda r: r["att"])
        print(f"{s}: {args.jobs} jobs on 128 nodes, {args.seeds} seed(s); STU")
        print(f"{'mode':>9} {'TCM':>4} {'ATT':>8} {'End':>8} {'rows':>6}")
        for r in rows:
            mark = " *" if r is best else ""
            print(f"{r['mode']:>9} {r['tcm']:>4} {r['att']:>8.0f} {r['end']:>8.0f} {r['rows']:>6.0f}{mark}")
        print()
    return 0


def add_command(subparsers) -> None:
    """Register ``reshape gang``: Nakazawa's (2005) I/O-aware gang-scheduling tables."""
    p = subparsers.add_parser(
        "gang",
        help="Nakazawa 2005 ch. 3: I/O-aware gang scheduling (Tables 3.3-3.5)",
        description="Gang-schedule 100 jobs on 128 nodes with each task-count method "
        f"({', '.join(TCMS)}) and placement ({', '.join(MODES)}). Scenarios: {', '.join(SCENARIOS)}.",
    )
    p.add_argument("--scenario", action="append", metavar="NAME", help="scenario (repeatable; default baseline)")
    p.add_argument("--seeds", type=int, default=1, help="workloads averaged (default 1)")
    p.add_argument("--jobs", type=int, default=100, help="jobs (default 100)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=_run_cli)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(_run_cli(argparse.Namespace(scenario=list(SCENARIOS), seeds=1, jobs=100, json=False)))
