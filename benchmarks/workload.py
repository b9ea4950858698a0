"""Benchmark: seed 001 §4.2 workloads W1 and W2, static vs. ReSHAPE, on a real daemon.

``python -m benchmarks.workload [--quick]``

Both schedules run the same emulated job mix with the same (time-scaled)
arrival times, one after the other in this run: static = EASY backfill with
the ``static`` remap policy; dynamic = EASY backfill with ReSHAPE's Remap
Scheduler. Writes ``benchmarks/results/workload.json``; ``summary`` holds
W1's utilizations (the paper's 39.7% vs 70.7% are for W1) and the worst
dynamic/static turnaround ratio over all jobs of both workloads.
Targets: utilization_dynamic / utilization_static >= 1.5, worst ratio <= 1.05.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from scheduler.workload import W1, W2, jobs_for, run_workload

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "workload.json")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.workload")
    ap.add_argument("--quick", action="store_true", help="faster time scale (about 1.5 minutes)")
    ap.add_argument("--scale", type=float, help="seconds of emulation per paper second")
    a = ap.parse_args(argv)
    scale = a.scale or (0.004 if a.quick else 0.01)
    out: dict = {"scale": scale, "workloads": {}}
    ratios = []
    print(f"time scale {scale} (1 paper second = {scale * 1000:.0f} ms)")
    for name, wl in (("W1", W1), ("W2", W2)):
        slots = wl[0]
        runs = {}
        for mode in ("static", "reshape"):
            res = run_workload(jobs_for(wl, scale), slots, remap=mode)
            runs[mode] = res["summary"]
            if not res["clean_stop"]:
                print(f"warning: the {name}/{mode} daemon did not answer 'stop' in time:\n"
                      f"{res['stop_error']}", flush=True)
                out.setdefault("unclean_stops", []).append(f"{name}/{mode}")
        rows = []
        for s, d in zip(runs["static"]["jobs"], runs["reshape"]["jobs"], strict=True):
            r = d["turnaround"] / s["turnaround"]
            ratios.append(r)
            rows.append({"job": s["name"], "initial": s["initial"],
                         "static_s": s["turnaround"] / scale, "dynamic_s": d["turnaround"] / scale,
                         "ratio": r, "sizes": d["sizes"]})
        out["workloads"][name] = {
            "slots": slots, "jobs": rows,
            "utilization_static": runs["static"]["utilization"],
            "utilization_dynamic": runs["reshape"]["utilization"],
        }
        print(f"\n{name} ({slots} processors), turnaround in paper seconds:")
        print(f"{'job':<14}{'init':>5}{'static':>10}{'dynamic':>10}{'ratio':>7}  sizes (dynamic)")
        for r in rows:
            print(f"{r['job']:<14}{r['initial']:>5}{r['static_s']:>10.1f}{r['dynamic_s']:>10.1f}"
                  f"{r['ratio']:>7.3f}  {'->'.join(map(str, r['sizes']))}")
        w = out["workloads"][name]
        print(f"utilization static {100 * w['utilization_static']:.1f}%  "
              f"dynamic {100 * w['utilization_dynamic']:.1f}%")
    w1 = out["workloads"]["W1"]
    out["summary"] = {
        "utilization_static": w1["utilization_static"],
        "utilization_dynamic": w1["utilization_dynamic"],
        "utilization_ratio": w1["utilization_dynamic"] / w1["utilization_static"],
        "worst_turnaround_ratio": max(ratios),
        "targets": {"utilization_ratio": ">= 1.5", "worst_turnaround_ratio": "<= 1.05"},
    }
    s = out["summary"]
    print(f"\nsummary: W1 utilization {100 * s['utilization_static']:.1f}% -> "
          f"{100 * s['utilization_dynamic']:.1f}% (x{s['utilization_ratio']:.2f}, target >= 1.5); "
          f"worst turnaround ratio {s['worst_turnaround_ratio']:.3f} (target <= 1.05)")
    os.makedirs(os.path.dirname(RESULTS), exist_ok=True)
    with open(RESULTS, "w") as f:
        json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
