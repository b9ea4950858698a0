"""Trace benchmark: FCFS, EASY and ReSHAPE-malleable on the shared SWF traces.

``python -m benchmarks.traces [--quick]``: for ``lublin_256.swf`` and
``mira.swf``, half the jobs malleable (seeded), one table per trace
(utilization, mean turnaround, bounded slowdown, resizes, wall time of each
simulation), and ``benchmarks/results/traces.json`` with
``summary.<trace>.turnaround_easy_over_reshape`` (the baseline EASY against
ReSHAPE, in the same run) and ``summary.<trace>.sim_seconds`` (wall time of
the ReSHAPE simulation of the whole trace). ``--quick`` simulates the first
2,000 jobs of each trace.

Targets (issue 6): EASY/ReSHAPE mean turnaround >= 1.25 on both traces; the
full Mira trace simulated in under 60 s.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time

from scheduler.sim.cli import format_table
from scheduler.sim.jobmodel import from_trace
from scheduler.sim.runner import run_policies
from scheduler.swf import read_swf

TRACES = os.environ.get("RESHAPE_TRACES", os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "..", "shared", "data", "traces"))
RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
POLICIES = ["fcfs", "easy", "reshape"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.traces", description=__doc__)
    ap.add_argument("--quick", action="store_true", help="first 2,000 jobs of each trace")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--traces", default=TRACES, help="directory holding the SWF traces")
    a = ap.parse_args(argv)
    max_jobs = 2000 if a.quick else None
    summary, detail = {}, {}
    for name in ("lublin_256", "mira"):
        path = os.path.join(a.traces, f"{name}.swf")
        trace = read_swf(path, max_jobs=max_jobs)
        jobs, slots = from_trace(trace, malleable_fraction=0.5, seed=a.seed)
        res = run_policies(jobs, slots, POLICIES)
        print(format_table(list(res.values()),
                           f"\n{name}: {len(jobs)} jobs on {slots} slots, 50% malleable"))
        ratio = res["easy"]["mean_turnaround"] / res["reshape"]["mean_turnaround"]
        summary[name] = {
            "turnaround_easy_over_reshape": ratio,
            "utilization_reshape_over_easy": res["reshape"]["utilization"]
            / res["easy"]["utilization"],
            "sim_seconds": res["reshape"]["sim_seconds"],
            "jobs": len(jobs),
        }
        detail[name] = res
        print(f"EASY/ReSHAPE mean turnaround: {ratio:.3f} (target >= 1.25); "
              f"ReSHAPE simulation {res['reshape']['sim_seconds']:.2f} s")
    os.makedirs(RESULTS, exist_ok=True)
    out = os.path.join(RESULTS, "traces.json")
    with open(out, "w") as f:
        json.dump({"benchmark": "traces", "quick": a.quick, "seed": a.seed,
                   "when": time.strftime("%Y-%m-%dT%H:%M:%S"),
                   "host": {"cpus": os.cpu_count(), "python": platform.python_version()},
                   "summary": summary, "results": detail}, f, indent=1)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
