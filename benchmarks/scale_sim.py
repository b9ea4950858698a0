"""The simulator part of ``python -m benchmarks.scale``: synthetic Lublin-Feitelson traces of 100k+ jobs.

Each (jobs, preset) runs in a fresh process (so its peak RSS is its own):
the trace is generated (:func:`scheduler.lab.workloads.lublin.generate`,
seed 0, ``slots`` nodes, arrivals scaled to offered load ``load``), made a
simulator workload (:func:`scheduler.lab.jobmodel.from_trace`: half the jobs
malleable, seed 0, the job model's defaults) and simulated; the process
reports the generation and simulation seconds, its CPU seconds, its peak
RSS (``getrusage``), the span of the trace's arrivals (``span_days``; a year
of arrivals on 1,024 nodes at load 0.9 holds about 30,000 jobs, so a million
jobs span about 33 years: ``jobs_per_year``), and the run's main metrics.

``python -m benchmarks.scale_sim JOBS [JOBS ...] [--policy NAME ...] [--json NAME]`` runs just this part
(each row also has the process CPU time, which other load on the machine inflates less than the wall
time, and the load average at its end).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import resource
import sys
import time

from benchmarks._common import table, write_result

SIM_SLOTS = 1024  # nodes of the simulated machine
SIM_LOAD = 0.9  # offered load the trace's arrivals are scaled to


def _one(n: int, policy: str, slots: int, load: float, q) -> None:
    from scheduler.lab.jobmodel import from_trace
    from scheduler.lab.runner import run_policies
    from scheduler.lab.workloads.lublin import generate

    t0 = time.perf_counter()
    trace = generate(n, slots, seed=0, load=load)
    jobs, total = from_trace(trace, malleable_fraction=0.5, seed=0, unit=1)
    span_days = trace.jobs[-1].submit / 86400
    del trace
    gen_s = time.perf_counter() - t0
    cpu0 = time.process_time()
    m = run_policies(jobs, total, [policy])[policy]
    cpu = time.process_time() - cpu0  # this process's CPU time: what a busy machine's load does not inflate
    q.put({"jobs": n, "policy": policy, "slots": total, "load": load, "span_days": span_days,
           "jobs_per_year": n / span_days * 365.0,
           "generate_s": gen_s, "seconds": m["sim_seconds"], "s_per_100k": m["sim_seconds"] * 1e5 / n,
           "cpu_seconds": cpu, "cpu_s_per_100k": cpu * 1e5 / n, "loadavg": os.getloadavg()[0],
           "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
           "utilization": m["utilization"], "mean_wait_h": m["mean_wait"] / 3600,
           "resizes": m["resizes"], "late_starts": m["late_starts"], "walltime_kills": m["walltime_kills"]})


def run_sims(sizes: tuple[int, ...], policies: tuple[str, ...], slots: int, load: float, log=print) -> list[dict]:
    """One fresh process per (size, policy), one after another (the CPUs are shared)."""
    ctx = mp.get_context("spawn")
    rows = []
    for n in sizes:
        for pol in policies:
            q = ctx.Queue()
            p = ctx.Process(target=_one, args=(n, pol, slots, load, q))
            p.start()
            r = q.get(timeout=7200)
            p.join(60)
            rows.append(r)
            log(f"sim {pol} {n} jobs ({r['span_days'] / 365:.1f} years of arrivals; a year holds "
                f"{r['jobs_per_year']:,.0f} jobs on {slots} nodes at load {load:g}): {r['seconds']:.1f} s "
                f"({r['s_per_100k']:.1f} s per 100k jobs, CPU {r['cpu_seconds']:.1f} s, +{r['generate_s']:.1f} s to "
                f"generate), peak RSS {r['peak_rss_mb']:.0f} MB, load {r['loadavg']:.1f}")
    print(table(rows, [("policy", "policy", ""), ("jobs", "jobs", "d"), ("span_days", "days", ".0f"),
                       ("generate_s", "generate s", ".1f"), ("seconds", "simulate s", ".1f"),
                       ("s_per_100k", "s / 100k jobs", ".1f"), ("cpu_s_per_100k", "CPU s / 100k", ".1f"),
                       ("peak_rss_mb", "peak RSS MB", ".0f"), ("loadavg", "load", ".1f"),
                       ("utilization", "util", ".3f"), ("mean_wait_h", "mean wait h", ".2f"),
                       ("resizes", "resizes", "d"), ("late_starts", "late", "d")]))
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.scale_sim", description=__doc__)
    ap.add_argument("jobs", type=int, nargs="+")
    ap.add_argument("--policy", action="append", help="preset (repeatable; default easy and reshape-plus)")
    ap.add_argument("--slots", type=int, default=SIM_SLOTS)
    ap.add_argument("--load", type=float, default=SIM_LOAD)
    ap.add_argument("--json", metavar="NAME", help="also write benchmarks/results/NAME.json (rows and a summary)")
    a = ap.parse_args(argv)
    rows = run_sims(tuple(a.jobs), tuple(a.policy or ("easy", "reshape-plus")), a.slots, a.load)
    if a.json:
        path = write_result(a.json, {"rows": rows, "summary": {
            f"{r['policy']}@{r['jobs']}": {k: r[k] for k in ("seconds", "cpu_seconds", "s_per_100k", "cpu_s_per_100k",
                                                              "peak_rss_mb", "loadavg", "span_days", "jobs_per_year")}
            for r in rows}})
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
