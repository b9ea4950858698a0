"""Benchmark: seed 001 §4.2 workloads W1 and W2, static vs. ReSHAPE, on a real daemon.

``python -m benchmarks.workload [--quick]``

Three schedules run the same emulated job mix with the same (time-scaled)
arrival times, one after the other in this run:

* static: EASY backfill with the ``static`` remap policy;
* paper: EASY backfill with ReSHAPE's Remap Scheduler as the paper states it
  (``reshape-paper``: any gain counts, no noise guard);
* plus: the presets ``easy-plus`` + ``reshape-plus`` (squeezed starts, honest
  walltime estimates, idle slots held for announced arrivals: every job is
  submitted at the start with its arrival delay; see ``docs/simulator.md``,
  "Policies").

Each job is an emulated application (``apps.emujob --times``) whose iteration
time per size is the real application's, calibrated on this machine
(``benchmarks/data/apps_calibration.json``, written by ``python -m
benchmarks.calibrate_apps``: the real app's 1-rank time and this machine's
messaging, put through the application's communication model), scaled so
that one iteration at the job's initial size takes a tenth of its static
turnaround in Tables 4 and 5. ``--hand`` runs the earlier hand-chosen
Amdahl curves (:data:`scheduler.service.workload.MODELS`) instead.

Writes ``benchmarks/results/workload.json``. ``summary`` holds W1's
utilizations (the paper's 39.7% vs 70.7% are for W1) and the worst
dynamic/static turnaround ratio over all jobs of both workloads, for the plus
presets (the project's default recommendation), with the paper policy's
figures under ``summary.paper``.
Targets: utilization_dynamic / utilization_static >= 1.5, worst ratio <= 1.05.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from benchmarks import _common, calibrate_apps
from scheduler.lab.emumodel import TableModel
from scheduler.service.workload import W1, W2, EmuJob, jobs_for, run_workload

#: The published dynamic / static turnaround per job (Tables 4 and 5)
PUBLISHED = {"W1": {"LU": 3626.93 / 4482.60, "MM": 2212.72 / 3661.20, "Master-worker": 148.00 / 147.47,
                    "Jacobi": 2220.17 / 3266.40, "FFT": 637.94 / 840.00},
             "W2": {"LU": 1196.00 / 1265.87, "Jacobi": 809.25 / 867.00, "Master-worker": 353.33 / 355.00,
                    "FFT": 1.0}}

RESULTS = os.path.join(_common.RESULTS, "workload.json")
ITERATIONS = 10  # seed 001 §4: "a single job consisted of ten iterations"


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
                 "load_average_before": os.getloadavg()[0]}
    if cal is not None:
        out["calibration"] = {"when": cal["when"], "load_average": cal["load_average"],
                              "sweet_spots": {j: cal["apps"][app]["sweet_spot"]
                                              for j, app in calibrate_apps.JOB_APP.items()}}
    modes = {"static": ("easy", "static"), "paper": ("easy", "reshape-paper"), "plus": ("easy-plus", "reshape-plus")}
    ratios: dict[str, list[float]] = {"paper": [], "plus": []}
    print(f"time scale {scale} (1 paper second = {scale * 1000:.0f} ms), {out['curves']} curves, "
          f"load average {out['load_average_before']:.2f}")
    for name, wl in (("W1", W1), ("W2", W2)):
        slots = wl[0]
        runs = {}
        for mode, (app, remap) in modes.items():
            jobs = jobs_for(wl, scale, ITERATIONS) if cal is None else calibrated_jobs(wl, scale, cal)
            res = run_workload(jobs, slots, remap=remap, app=app)
            runs[mode] = res["summary"]
            if not res["clean_stop"]:
                print(f"warning: the {name}/{mode} daemon did not answer 'stop' in time:\n"
                      f"{res['stop_error']}", flush=True)
                out.setdefault("unclean_stops", []).append(f"{name}/{mode}")
        rows = []
        jobs = zip(runs["static"]["jobs"], runs["paper"]["jobs"], runs["plus"]["jobs"], strict=True)
        for s, pa, pl in jobs:
            rp, rq = pa["turnaround"] / s["turnaround"], pl["turnaround"] / s["turnaround"]
            ratios["paper"].append(rp)
            ratios["plus"].append(rq)
            rows.append({"job": s["name"], "initial": s["initial"], "static_s": s["turnaround"] / scale,
                         "paper_s": pa["turnaround"] / scale, "plus_s": pl["turnaround"] / scale,
                         "ratio_paper": rp, "ratio_plus": rq, "ratio_published": PUBLISHED[name][s["name"]],
                         "sizes_paper": pa["sizes"], "sizes_plus": pl["sizes"],
                         **{f"wait_{m}_s": (x["wait"] or 0.0) / scale for m, x in zip(modes, (s, pa, pl),
                                                                                    strict=True)}})
        out["workloads"][name] = {"slots": slots, "jobs": rows,
                                  **{f"utilization_{m}": runs[m]["utilization"] for m in modes}}
        print(f"\n{name} ({slots} processors), turnaround in paper seconds:")
        print(f"{'job':<14}{'init':>5}{'static':>9}{'paper':>9}{'ratio':>7}{'plus':>9}{'ratio':>7}{'pub.':>7}"
              " wait s/p/+  sizes (paper)")
        for r in rows:
            print(f"{r['job']:<14}{r['initial']:>5}{r['static_s']:>9.1f}{r['paper_s']:>9.1f}{r['ratio_paper']:>7.3f}"
                  f"{r['plus_s']:>9.1f}{r['ratio_plus']:>7.3f}{r['ratio_published']:>7.3f}"
                  f" {r['wait_static_s']:4.0f}/{r['wait_paper_s']:.0f}/{r['wait_plus_s']:.0f}"
                  f"  {'->'.join(map(str, r['sizes_paper']))}")
        w = out["workloads"][name]
        print("utilization " + "  ".join(f"{m} {100 * w[f'utilization_{m}']:.1f}%" for m in modes))
    w1 = out["workloads"]["W1"]

    def summary(mode: str) -> dict:
        return {"utilization_static": w1["utilization_static"], "utilization_dynamic": w1[f"utilization_{mode}"],
                "utilization_ratio": w1[f"utilization_{mode}"] / w1["utilization_static"],
                "worst_turnaround_ratio": max(ratios[mode])}

    out["summary"] = {**summary("plus"), "policies": "easy-plus + reshape-plus", "paper": summary("paper"),
                      "targets": {"utilization_ratio": ">= 1.5", "worst_turnaround_ratio": "<= 1.05"}}
    for mode, s in (("paper", out["summary"]["paper"]), ("plus", out["summary"])):
        print(f"\nsummary ({mode}): W1 utilization {100 * s['utilization_static']:.1f}% -> "
              f"{100 * s['utilization_dynamic']:.1f}% (x{s['utilization_ratio']:.2f}, target >= 1.5); "
              f"worst turnaround ratio {s['worst_turnaround_ratio']:.3f} (target <= 1.05)")
    out["load_average_after"] = os.getloadavg()[0]
    os.makedirs(os.path.dirname(RESULTS), exist_ok=True)
    with open(RESULTS, "w") as f:
        json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
