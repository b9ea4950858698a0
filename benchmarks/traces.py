"""Trace benchmark: every policy preset on the shared SWF traces, with the audit's invariants.

``python -m benchmarks.traces [--quick] [--seed N] [--no-sensitivity]``: for
``lublin_256.swf`` and ``mira.swf``, half the jobs malleable (seeded), the job
model's defaults (:func:`scheduler.lab.jobmodel.from_trace`: parallelism
``size-linked``, the literature's model: Downey's average parallelism tied to
the job's size, sigma after Cirne and Berman; modelled walltime estimates
where the trace has none), walltimes enforced; one table per trace (utilization, useful
utilization, mean turnaround and wait, bounded slowdown, resizes, late
starts, walltime kills, simulation time), then a sensitivity table over the
job model's assumptions, then ``benchmarks/results/traces.json``
(``traces-quick.json`` with ``--quick``) whose ``summary.<trace>`` holds, from
the same run on the same jobs:

* ``job_model``: the default job model the summary is measured under;
* ``easy_guarantee_violations``: per preset, the queue heads that started
  later than the first reservation EASY made for them (target 0 everywhere);
* ``walltime_kills``: per preset, jobs killed at their walltime deadline;
* ``turnaround_easy_over_best`` (EASY ÷ the best preset's mean turnaround),
  ``best`` and ``big_jobs_best_over_easy`` (the best preset's jobs of more
  than a quarter of the machine, turnaround ÷ EASY's; target <= 1.05);
* ``resizes``: per preset;
* ``turnaround_easy_over_reshape``: EASY ÷ ``reshape-plus`` (the recommended
  preset), the headline; ``..._paper`` and ``..._squeeze`` for ``reshape`` and
  ``reshape-squeeze``;
* ``big_jobs_turnaround_<preset>_over_easy``: the same for jobs of more than a
  quarter of the machine (who pays for the gain; target <= 1);
* ``sensitivity``: one row per job-model variant (parallelism independent
  and relative, estimates exact, malleable fraction 25% and 100%): EASY ÷
  each resizing preset, big jobs' ratio, resizes, the best resizing preset,
  late starts and kills;
* ``sim_seconds``: wall time of the ``reshape-plus`` simulation.

``--quick`` simulates the first 2,000 jobs (by submit time) of each trace.
Targets (resizing must pay off with walltimes enforced and without breaking
EASY's guarantee), under the default job model: EASY ÷ best >= 1.25 on both
traces, the best preset's big jobs at most 1.05 times EASY's turnaround, 0
late starts and 0 walltime kills under every preset; with exact estimates
the best preset still resizes and gains.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time

from reshape.joblink import jobenv as E
from scheduler.lab.jobmodel import DEFAULT_PARALLELISM, from_trace
from scheduler.lab.runner import run_policies
from scheduler.lab.simulate_cli import format_table
from scheduler.lab.swf import read_swf

TRACES = os.environ.get(E.TRACES, os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "..", "shared", "data", "traces"))
RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
POLICIES = ["fcfs", "easy", "reshape", "reshape-squeeze", "reshape-fcfs", "reshape-plus", "dep", "dep-smooth"]
RESIZING = ["reshape", "reshape-squeeze", "reshape-plus"]
#: job-model variants of the sensitivity table: (label, from_trace keywords)
VARIANTS = [
    (f"default ({DEFAULT_PARALLELISM}, model estimates)", {}),
    ("parallelism independent (former default)", {"parallelism": "independent"}),
    ("parallelism relative:-1:1", {"parallelism": "relative:-1:1"}),
    ("parallelism relative:0:2 (older)", {"parallelism": "relative:0:2"}),
    ("estimates exact", {"estimates": "exact"}),
    ("older model (relative:0:2, exact)", {"parallelism": "relative:0:2", "estimates": "exact"}),
    ("25% malleable", {"malleable_fraction": 0.25}),
    ("100% malleable", {"malleable_fraction": 1.0}),
]


def by_class(result, malleable: set[int], big: set[int]) -> dict[str, float]:
    """Mean turnaround and wait of malleable and of rigid jobs; turnaround and worst wait of big ones."""
    rs = [r for r in result.records if r.job_id in big]
    out = {"big_turnaround": statistics.fmean(r.turnaround for r in rs) if rs else 0.0,
           "big_max_wait": max((r.wait for r in rs), default=0.0)}
    for name, want in (("malleable", True), ("rigid", False)):
        rs = [r for r in result.records if (r.job_id in malleable) == want]
        if rs:
            out[f"{name}_turnaround"] = statistics.fmean(r.turnaround for r in rs)
            out[f"{name}_wait"] = statistics.fmean(r.wait for r in rs)
            out[f"{name}_run"] = statistics.fmean(r.finish - r.start for r in rs)
    return out


def sensitivity(trace, seed: int) -> list[dict]:
    """EASY ÷ each resizing preset (and big jobs' ratio) for each job-model variant in :data:`VARIANTS`."""
    rows = []
    for label, kw in VARIANTS:
        kw = {"malleable_fraction": 0.5, **kw}
        jobs, slots = from_trace(trace, seed=seed, **kw)
        big = {j.spec.job_id for j in jobs if j.spec.nprocs > slots // 4}
        res = run_policies(jobs, slots, ["easy", *RESIZING], record=True)
        for m in res.values():
            m.update(by_class(m.pop("result"), set(), big))
        easy = res["easy"]
        row = {"variant": label, **kw}
        for p in RESIZING:
            row[f"easy_over_{p}"] = easy["mean_turnaround"] / res[p]["mean_turnaround"]
            row[f"big_{p}_over_easy"] = res[p]["big_turnaround"] / easy["big_turnaround"]
        for p in RESIZING:
            row[f"resizes_{p}"] = res[p]["resizes"]
        best = max(RESIZING, key=lambda p: row[f"easy_over_{p}"])
        row["best"] = best
        row["easy_over_best"] = row[f"easy_over_{best}"]
        row["big_best_over_easy"] = row[f"big_{best}_over_easy"]
        row["late_starts"] = sum(m["late_starts"] for m in res.values())
        row["walltime_kills"] = sum(m["walltime_kills"] for m in res.values())
        rows.append(row)
        print(f"  {label:<42} " + "  ".join(
            f"{row[f'easy_over_{p}']:6.3f} ({row[f'big_{p}_over_easy']:.2f}) {row[f'resizes_{p}']:6d}"
            for p in RESIZING) + f"  {row['late_starts']:5d} {row['walltime_kills']:5d}", flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.traces", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="first 2,000 jobs of each trace")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--traces", default=TRACES, help="directory holding the SWF traces")
    ap.add_argument("--no-sensitivity", action="store_true", help="skip the job-model sensitivity table")
    a = ap.parse_args(argv)
    max_jobs = 2000 if a.quick else None
    summary, detail = {}, {}
    for name in ("lublin_256", "mira"):
        path = os.path.join(a.traces, f"{name}.swf")
        trace = read_swf(path, max_jobs=max_jobs)
        jobs, slots = from_trace(trace, malleable_fraction=0.5, seed=a.seed)  # the job model's defaults
        malleable = {j.spec.job_id for j in jobs if j.spec.resizable}
        big = {j.spec.job_id for j in jobs if j.spec.nprocs > slots // 4}
        res = run_policies(jobs, slots, POLICIES, record=True)
        for m in res.values():
            m.update(by_class(m.pop("result"), malleable, big))
        print(format_table(list(res.values()),
                           f"\n{name}: {len(jobs)} jobs on {slots} slots, 50% malleable"))
        print("mean turnaround (s)  malleable / rigid: " + "; ".join(
            f"{p} {res[p]['malleable_turnaround']:.0f} / {res[p]['rigid_turnaround']:.0f}"
            for p in POLICIES))
        print(f"jobs of more than {slots // 4} slots: mean turnaround (s) / worst wait (s): " + "; ".join(
            f"{p} {res[p]['big_turnaround']:.0f} / {res[p]['big_max_wait']:.0f}" for p in POLICIES))
        easy = res["easy"]["mean_turnaround"]
        best = min((p for p in POLICIES if p != "easy"), key=lambda p: res[p]["mean_turnaround"])
        summary[name] = {
            "job_model": {"parallelism": DEFAULT_PARALLELISM, "estimates": "model", "malleable_fraction": 0.5},
            "easy_guarantee_violations": {p: res[p]["late_starts"] for p in POLICIES},
            "walltime_kills": {p: res[p]["walltime_kills"] for p in POLICIES},
            "turnaround_easy_over_best": easy / res[best]["mean_turnaround"],
            "best": best,
            "big_jobs_best_over_easy": res[best]["big_turnaround"] / res["easy"]["big_turnaround"],
            "resizes": {p: res[p]["resizes"] for p in POLICIES},
            "turnaround_easy_over_reshape": easy / res["reshape-plus"]["mean_turnaround"],
            "turnaround_easy_over_reshape_paper": easy / res["reshape"]["mean_turnaround"],
            "turnaround_easy_over_reshape_squeeze": easy / res["reshape-squeeze"]["mean_turnaround"],
            "turnaround_easy_over_reshape_plus": easy / res["reshape-plus"]["mean_turnaround"],
            **{f"big_jobs_turnaround_{p.replace('-', '_')}_over_easy":
               res[p]["big_turnaround"] / res["easy"]["big_turnaround"] for p in RESIZING},
            "utilization_reshape_plus_over_easy": res["reshape-plus"]["utilization"]
            / res["easy"]["utilization"],
            "useful_utilization": {p: res[p]["useful_utilization"] for p in POLICIES},
            "idle_while_waiting_easy": res["easy"]["idle_while_waiting"],
            "sim_seconds": res["reshape-plus"]["sim_seconds"],
            "sim_seconds_paper": res["reshape"]["sim_seconds"],
            "jobs": len(jobs),
        }
        detail[name] = res
        s = summary[name]
        print(f"EASY/ReSHAPE mean turnaround: paper {s['turnaround_easy_over_reshape_paper']:.3f}, "
              f"squeeze {s['turnaround_easy_over_reshape_squeeze']:.3f}, "
              f"plus {s['turnaround_easy_over_reshape_plus']:.3f}; best {best} "
              f"{s['turnaround_easy_over_best']:.3f} (target >= 1.25), its big jobs "
              f"{s['big_jobs_best_over_easy']:.3f} of EASY's (target <= 1.05); late starts (target 0): "
              f"{sum(s['easy_guarantee_violations'].values())}; walltime kills: "
              f"{sum(s['walltime_kills'].values())}")
        if not a.no_sensitivity:
            print(f"\n{name}: EASY ÷ preset mean turnaround (big jobs' turnaround ÷ EASY's) resizes, per job "
                  "model; late starts, kills over the four presets")
            print(f"  {'job model':<42} " + "  ".join(f"{p:>22}" for p in RESIZING) + "   late kills")
            s["sensitivity"] = sensitivity(trace, a.seed)
    os.makedirs(RESULTS, exist_ok=True)
    out = os.path.join(RESULTS, "traces-quick.json" if a.quick else "traces.json")
    with open(out, "w") as f:
        json.dump({"benchmark": "traces", "quick": a.quick, "seed": a.seed,
                   "when": time.strftime("%Y-%m-%dT%H:%M:%S"),
                   "host": {"cpus": os.cpu_count(), "python": platform.python_version()},
                   "summary": summary, "results": detail}, f, indent=1)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
