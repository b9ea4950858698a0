"""``reshape demo``: a local daemon running a time-scaled workload W1 (seed 001 §4.2.1).

Until the bundled applications (``apps/``) can be resized by the daemon the
jobs are emulated (``scheduler.emujob``), with W1's sizes, arrival times and
legal configurations; see ``scheduler.workload``.
"""

from __future__ import annotations

import json

from .report import plot_history
from .workload import W1, jobs_for, run_workload

__all__ = ["run_demo"]


def run_demo(plot: str = "reshape-demo.png", scale: float = 0.01, json_out: bool = False) -> int:
    slots = W1[0]
    if not json_out:
        print(f"starting a daemon on localhost ({slots} slots) and workload W1 at time scale {scale} ...",
              flush=True)
    res = run_workload(jobs_for(W1, scale), slots, remap="reshape")
    s = res["summary"]
    if plot:
        plot_history(res["history"], plot, title=f"W1 with ReSHAPE (time x{scale})")
    if json_out:
        print(json.dumps(s, indent=1))
        return 0
    print(f"{'job':<14}{'init':>5}{'turnaround (s)':>16}  sizes")
    for r in s["jobs"]:
        print(f"{r['name']:<14}{r['initial']:>5}{r['turnaround']:>16.1f}  {'->'.join(map(str, r['sizes']))}")
    print(f"utilization {100 * s['utilization']:.1f}% of {slots} processors over {s['makespan']:.1f}s")
    if plot:
        print(f"wrote {plot}")
    return 0
