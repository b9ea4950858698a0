"""Benchmark: Sudarsan & Ribbens 2007 §4.2 workloads W1 and W2, static vs. ReSHAPE, on a real daemon.

``python -m benchmarks.workload [--quick]``

Four schedules run the same emulated job mix with the same (time-scaled)
arrival times, one after the other in this run. In the first three each job
is submitted when it arrives, as a user submitting work as it comes does (the
daemon sees a job only then):

* static: EASY backfill with the ``static`` remap policy (the baseline);
* paper: EASY backfill with ReSHAPE's Remap Scheduler as the paper states it
  (``reshape-paper``: any gain counts, no noise guard);
* plus: the presets ``easy-plus`` + ``reshape-plus`` (squeezed starts, honest
  walltime estimates; see ``docs/simulator.md``, "Policies"): the headline;
* plus_announced: the same presets with every job submitted at the start
  with its arrival delay (``reshape submit --delay``), so ``reshape-plus``
  holds idle slots for the arrivals it is told of. A user gets this only by
  announcing work ahead; it is reported beside the headline, not as it.

Each job is an emulated application (``apps.emujob --times``) whose iteration
time per size is the real application's, calibrated on this machine
(``benchmarks/data/apps_calibration.json``, written by ``python -m
benchmarks.calibrate_apps``: the real app's 1-rank time and this machine's
messaging, put through the application's communication model), scaled so
that one iteration at the job's initial size takes a tenth of its static
turnaround in Tables 4 and 5. ``--hand`` runs the earlier hand-chosen
Amdahl curves (:data:`scheduler.cli.workload.MODELS`) instead.

Writes ``benchmarks/results/workload.json``. ``summary`` holds, for ``plus``
(the project's default recommendation, jobs submitted as they arrive), W1's
utilizations (the paper's 39.7% vs 70.7% are for W1) and the median and worst
dynamic/static turnaround ratio over all jobs of both workloads (and which
job is the worst), with the same figures for ``plus_announced`` under
``summary.announced`` and for the paper policy under ``summary.paper``.
Targets: utilization_dynamic / utilization_static >= 1.5, worst ratio <= 1.05.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

from benchmarks import _common, calibrate_apps
from scheduler.cli.workload import W1, W2, EmuJob, jobs_for, run_workload
from scheduler.lab.emumodel import TableModel

#: The published dynamic / static turnaround per job (Tables 4 and 5)
PUBLISHED = {"W1": {"LU": 3626.93 / 4482.60, "MM": 2212.72 / 3661.20, "Master-worker": 148.00 / 147.47,
                    "Jacobi": 2220.17 / 3266.40, "FFT": 637.94 / 840.00},
             "W2": {"LU": 1196.00 / 1265.87, "Jacobi": 809.25 / 867.00, "Master-worker": 353.33 / 355.00,
                    "FFT": 1.0}}

RESULTS = os.path.join(_common.RESULTS, "workload.json")
ITERATIONS = 10  # Sudarsan & Ribbens 2007 §4: "a single job consisted of ten iterations"


def calibrated_jobs(workload: tuple[int, tuple[EmuJob, ...]], scale: float, cal: dict) -> list[dict]:
    """``jobs_for``'s jobs (arrivals, sizes, topology) with each iteration-time curve from the calibration.

    The curve is multiplied by the factor that makes the initial size's iteration last a tenth of the
    job's static turnaround (times ``scale``); the resize cost stays ``jobs_for``'s (2% of that iteration).
    """
    jobs = jobs_for(workload, scale, ITERATIONS)
    for job, ej in zip(jobs, workload[1], strict=True):
        c = calibrate_apps.curve(cal, ej.name)
        t0 = ej.static_turnaround / ITERATIONS * scale
        k = t0 / c[ej.nprocs]
        job["command"] = TableModel(tuple((p, k * c[p]) for p in sorted(c)), ITERATIONS).argv(0.02 * t0)
    return jobs


#: schedule -> (Application Scheduler, Remap Scheduler, jobs announced ahead of their arrival)
MODES = {"static": ("easy", "static", False), "paper": ("easy", "reshape-paper", False),
         "plus": ("easy-plus", "reshape-plus", False), "plus_announced": ("easy-plus", "reshape-plus", True)}
DYNAMIC = ("paper", "plus", "plus_announced")


def run_one(name: str, wl: tuple[int, tuple[EmuJob, ...]], scale: float, cal: dict | None, out: dict) -> dict:
    """Every schedule of :data:`MODES` on one workload; its rows go to ``out["workloads"][name]``."""
    slots = wl[0]
    runs = {}
    for mode, (app, remap, announce) in MODES.items():
        jobs = jobs_for(wl, scale, ITERATIONS) if cal is None else calibrated_jobs(wl, scale, cal)
        res = run_workload(jobs, slots, remap=remap, app=app, announce=announce)
        runs[mode] = {j["name"]: j for j in res["summary"]["jobs"]}
        runs[mode][""] = res["summary"]["utilization"]
        if not res["clean_stop"]:
            print(f"warning: the {name}/{mode} daemon did not answer 'stop' in time:\n"
                  f"{res['stop_error']}", flush=True)
            out.setdefault("unclean_stops", []).append(f"{name}/{mode}")
    rows = []
    for ej in wl[1]:
        s = runs["static"][ej.name]
        row = {"job": ej.name, "initial": s["initial"], "static_s": s["turnaround"] / scale,
               "ratio_published": PUBLISHED[name][ej.name], "wait_static_s": (s["wait"] or 0.0) / scale}
        for m in DYNAMIC:
            d = runs[m][ej.name]
            row.update({f"{m}_s": d["turnaround"] / scale, f"ratio_{m}": d["turnaround"] / s["turnaround"],
                        f"sizes_{m}": d["sizes"], f"wait_{m}_s": (d["wait"] or 0.0) / scale})
        rows.append(row)
    out["workloads"][name] = {"slots": slots, "jobs": rows, **{f"utilization_{m}": runs[m][""] for m in MODES}}
    print(f"\n{name} ({slots} processors), turnaround in paper seconds (+a: announced ahead):")
    print(f"{'job':<14}{'init':>5}{'static':>9}{'paper':>9}{'ratio':>7}{'plus':>9}{'ratio':>7}{'plus+a':>9}"
          f"{'ratio':>7}{'pub.':>7}  sizes plus | plus+a")
    for r in rows:
        print(f"{r['job']:<14}{r['initial']:>5}{r['static_s']:>9.1f}{r['paper_s']:>9.1f}{r['ratio_paper']:>7.3f}"
              f"{r['plus_s']:>9.1f}{r['ratio_plus']:>7.3f}{r['plus_announced_s']:>9.1f}"
              f"{r['ratio_plus_announced']:>7.3f}{r['ratio_published']:>7.3f}  "
              f"{'->'.join(map(str, r['sizes_plus']))} | {'->'.join(map(str, r['sizes_plus_announced']))}")
    w = out["workloads"][name]
    print("utilization " + "  ".join(f"{m} {100 * w[f'utilization_{m}']:.1f}%" for m in MODES))
    return w


def summary(out: dict, mode: str) -> dict:
    """W1's utilizations under ``mode`` and static, and the per-job ratios over both workloads."""
    w1 = out["workloads"]["W1"]
    ratios = sorted((j[f"ratio_{mode}"], f"{n}/{j['job']}") for n, w in out["workloads"].items() for j in w["jobs"])
    return {"utilization_static": w1["utilization_static"], "utilization_dynamic": w1[f"utilization_{mode}"],
            "utilization_ratio": w1[f"utilization_{mode}"] / w1["utilization_static"],
            "median_turnaround_ratio": statistics.median(r for r, _ in ratios),
            "worst_turnaround_ratio": ratios[-1][0], "worst_job": ratios[-1][1]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.workload")
    ap.add_argument("--quick", action="store_true", help="faster time scale (about 1.5 minutes)")
    ap.add_argument("--scale", type=float, help="seconds of emulation per paper second")
    ap.add_argument("--hand", action="store_true", help="the hand-chosen Amdahl curves, not the calibrated ones")
    ap.add_argument("--calibration", default=calibrate_apps.DEFAULT, help="calibration file (default: committed)")
    a = ap.parse_args(argv)
    scale = a.scale or (0.004 if a.quick else 0.01)
    try:
        cal = None if a.hand else calibrate_apps.load(a.calibration)
    except (OSError, ValueError) as e:
        ap.error(f"--calibration {a.calibration}: {e} (write one with python -m benchmarks.calibrate_apps)")
    out: dict = {"scale": scale, "curves": "hand" if a.hand else "calibrated", "workloads": {},
                 "host": {"cpus": os.cpu_count()}, "load_average_before": os.getloadavg()[0]}
    if cal is not None:
        out["calibration"] = {"when": cal["when"], "load_average": cal["load_average"],
                              "sweet_spots": {j: cal["apps"][app]["sweet_spot"]
                                              for j, app in calibrate_apps.JOB_APP.items()}}
    print(f"time scale {scale} (1 paper second = {scale * 1000:.0f} ms), {out['curves']} curves, "
          f"load average {out['load_average_before']:.2f}")
    for name, wl in (("W1", W1), ("W2", W2)):
        run_one(name, wl, scale, cal, out)
    out["summary"] = {**summary(out, "plus"), "policies": "easy-plus + reshape-plus",
                      "arrivals": "each job submitted when it arrives (the daemon sees it then)",
                      "announced": {**summary(out, "plus_announced"),
                                    "arrivals": "every job submitted at the start with its arrival delay"},
                      "paper": summary(out, "paper"),
                      "targets": {"utilization_ratio": ">= 1.5", "worst_turnaround_ratio": "<= 1.05"}}
    s = out["summary"]
    for label, x in (("reshape-paper", s["paper"]), ("reshape-plus", s), ("reshape-plus, announced", s["announced"])):
        print(f"\nsummary ({label}): W1 utilization {100 * x['utilization_static']:.1f}% -> "
              f"{100 * x['utilization_dynamic']:.1f}% (x{x['utilization_ratio']:.2f}, target >= 1.5); "
              f"per-job turnaround ratio median {x['median_turnaround_ratio']:.3f}, worst "
              f"{x['worst_turnaround_ratio']:.3f} ({x['worst_job']}; target <= 1.05)")
    out["load_average_after"] = os.getloadavg()[0]
    os.makedirs(os.path.dirname(RESULTS), exist_ok=True)
    with open(RESULTS, "w") as f:
        json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
