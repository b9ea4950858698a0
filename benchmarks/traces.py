"""Trace benchmark: FCFS, EASY, ReSHAPE (paper), ReSHAPE-squeeze and ReSHAPE-plus on SWF traces.

``python -m benchmarks.traces [--quick] [--seed N]``: for ``lublin_256.swf``
and ``mira.swf``, half the jobs malleable (seeded), one table per trace
(utilization, mean turnaround and wait, bounded slowdown, resizes, idle
slots while jobs wait, wall time of each simulation) and the mean
turnaround of malleable and rigid jobs, then
``benchmarks/results/traces.json`` (``traces-quick.json`` with ``--quick``)
whose ``summary.<trace>`` holds, from the same run on the same jobs:

* ``turnaround_easy_over_reshape`` and ``sim_seconds``: the baseline EASY
  against ReSHAPE-malleable as this project recommends it, the presets
  ``easy-plus`` + ``reshape-plus`` (the same figures as ``..._plus``);
* ``turnaround_easy_over_reshape_paper``: EASY against the paper's Remap
  Scheduler as stated (``reshape``: expand only when nobody waits, shrink
  only to sizes run at);
* ``turnaround_easy_over_reshape_squeeze``: EASY against ``reshape-squeeze``
  (paper remap; EASY starts a resizable head on the free slots);
* ``turnaround_easy_over_reshape_plus``: EASY against ``reshape-plus``
  (``easy-plus``: squeeze, reservations in the give-back view;
  ``reshape-plus``: borrowing of reserved idle slots until the head's shadow
  time, and a reserve for arrivals; see ``scheduler/core/policies/easy.py`` and
  ``reshape_remap.py``);
* ``big_jobs_turnaround_<policy>_over_easy``: the same for jobs of more than
  a quarter of the machine (who pays for the gain);
* ``sim_seconds`` / ``sim_seconds_paper``: wall time of the plus and paper simulations.

``--quick`` simulates the first 2,000 jobs of each trace.

Targets (issue 6): EASY/ReSHAPE mean turnaround >= 1.25 on both traces; the
full Mira trace simulated in under 60 s.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time

from reshape import jobenv as E
from scheduler.lab.jobmodel import from_trace
from scheduler.lab.runner import run_policies
from scheduler.lab.simulate_cli import format_table
from scheduler.lab.swf import read_swf

TRACES = os.environ.get(E.TRACES, os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "..", "shared", "data", "traces"))
RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
POLICIES = ["fcfs", "easy", "reshape", "reshape-squeeze", "reshape-plus"]


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
        summary[name] = {
            "turnaround_easy_over_reshape": easy / res["reshape-plus"]["mean_turnaround"],
            "turnaround_easy_over_reshape_paper": easy / res["reshape"]["mean_turnaround"],
            "turnaround_easy_over_reshape_squeeze": easy / res["reshape-squeeze"]["mean_turnaround"],
            "turnaround_easy_over_reshape_plus": easy / res["reshape-plus"]["mean_turnaround"],
            **{f"big_jobs_turnaround_{p.replace('-', '_')}_over_easy":
               res[p]["big_turnaround"] / res["easy"]["big_turnaround"]
               for p in ("reshape", "reshape-squeeze", "reshape-plus")},
            "utilization_reshape_over_easy": res["reshape"]["utilization"]
            / res["easy"]["utilization"],
            "utilization_reshape_plus_over_easy": res["reshape-plus"]["utilization"]
            / res["easy"]["utilization"],
            "idle_while_waiting_easy": res["easy"]["idle_while_waiting"],
            "sim_seconds": res["reshape-plus"]["sim_seconds"],
            "sim_seconds_paper": res["reshape"]["sim_seconds"],
            "jobs": len(jobs),
        }
        detail[name] = res
        s = summary[name]
        print(f"EASY/ReSHAPE mean turnaround: paper {s['turnaround_easy_over_reshape_paper']:.3f}, "
              f"squeeze {s['turnaround_easy_over_reshape_squeeze']:.3f}, "
              f"plus {s['turnaround_easy_over_reshape_plus']:.3f} (target >= 1.25); "
              f"simulation paper {s['sim_seconds_paper']:.2f} s, plus {s['sim_seconds']:.2f} s")
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
