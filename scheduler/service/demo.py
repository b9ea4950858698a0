"""``reshape demo``: a local daemon running a small mixed workload of the bundled apps (seed 001 §4.2).

A scaled-down W1 (seed 001 §4.2.1, Table 4) with the real, resizable
applications of ``apps/`` run by ``mpiexec`` under a daemon on localhost:
LU and MM start at once on two processes each; master-worker, Jacobi and FFT
arrive later. With idle slots the jobs expand (``MPI_Comm_spawn``, real
redistribution of their data); an expansion that does not pay returns to the
previous size (sweet spot: on a two-core machine more ranks rarely pay); a
queued job that does not fit makes running jobs shrink at their next resize
point. Prints per-job turnaround, the sizes each job ran at and the
utilization, and draws processors per job and busy processors over time
(Fig. 4a/4b style).

While it runs, a live view (:mod:`scheduler.service.live`) shows the jobs and their sizes, the
queue and the scheduler's decisions with their reasons; ``--dashboard PORT`` also serves the
daemon's web dashboard. Jobs carry walltime estimates of about twice their run time here:
EASY backfilling lets a later job pass a waiting one only when its estimate ends before the
waiting job's reservation, so uniform, loose estimates (an earlier version gave every job
120 s) left FFT (2 processes) queued behind Jacobi (4) while 2 slots sat idle for 20 s.

Our choices (the paper's W1 runs hours on 36 processors): 8 virtual slots on
this machine, problem sizes and iteration counts so that an iteration takes
about a second with two jobs sharing the cores, arrivals scaled from W1's
450 s / 465 s (a tenth of LU's run) to 3 s / 4 s, while LU and MM are still
expanded (about a minute in all). ``--quick`` runs
three jobs with fewer iterations (about 15 s, for the end-to-end test). Every app checks its data
after every resize (``--check``); the demo reports each job's verdict.
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from scheduler.service.live import LiveView
from scheduler.service.report import plot_history
from scheduler.service.workload import run_workload

__all__ = ["DemoApp", "demo_jobs", "resizes", "run_demo", "shrink_reasons"]

SLOTS = 8


@dataclass(frozen=True)
class DemoApp:
    name: str
    args: tuple[str, ...]  # after ``python -m apps.<module>``
    module: str
    nprocs: int
    arrival: float  # seconds after the start
    iters: int
    topology: str = "1d"
    divides: int | None = None
    max_procs: int = 6
    walltime: float = 120.0  # estimate for EASY backfill (a job is killed 30 s past it: generous)

    def job(self, iters: int | None = None) -> dict[str, Any]:
        cmd = ["python", "-m", f"apps.{self.module}", *self.args, "--iters", str(iters or self.iters),
               "--check"]
        return {"name": self.name, "command": cmd, "nprocs": self.nprocs, "max_procs": self.max_procs,
                "topology": self.topology, "divides": self.divides, "walltime": self.walltime,
                "arrival_delay": self.arrival}


# W1's mix and order: LU and MM at t=0; master-worker, then Jacobi and FFT arrive later
# (W1: 450 s and 465 s into a 4,500 s LU run; here 3 s and 4 s into a ~30 s one).
# Walltimes: about twice the run time measured here (LU 54 s, MM 35 s, master-worker 36 s,
# Jacobi 25 s, FFT 23 s), so that EASY can prove a backfill safe.
W1_DEMO = (
    DemoApp("LU", ("--n", "1024", "--nb", "32"), "lu", 2, 0.0, 70, topology="2d", walltime=120.0),
    DemoApp("MM", ("--n", "1024", "--nb", "64"), "mm", 2, 0.0, 90, topology="2d", walltime=90.0),
    DemoApp("Master-worker", ("--units", "4000", "--unit-us", "150"), "master_worker", 2, 3.0, 10,
            walltime=90.0),
    DemoApp("Jacobi", ("--n", "960", "--sweeps", "100"), "jacobi", 4, 4.0, 16, divides=960, walltime=60.0),
    DemoApp("FFT", ("--n", "2048"), "fft2d", 2, 4.0, 5, divides=2048, walltime=50.0),
)
# --quick: LU and MM expand into the idle slots, then a 4-process Jacobi arrives and
# waits until running jobs shrink (back from an expansion that did not pay, or to admit it).
QUICK_DEMO = (
    DemoApp("LU", ("--n", "1024", "--nb", "32"), "lu", 2, 0.0, 20, topology="2d"),
    DemoApp("MM", ("--n", "1024", "--nb", "64"), "mm", 2, 0.0, 20, topology="2d"),
    DemoApp("Jacobi", ("--n", "960", "--sweeps", "100"), "jacobi", 4, 5.0, 5, divides=960),
)


def demo_jobs(quick: bool = False) -> list[dict[str, Any]]:
    """Job descriptions (``submit`` bodies) of the demo workload."""
    return [a.job() for a in (QUICK_DEMO if quick else W1_DEMO)]


def shrink_reasons(events: list[dict[str, Any]]) -> dict[str, int]:
    """Advised shrinks by reason: ``admit`` (a queued job), ``sweet spot``, ``requested``, ``other``."""
    out = {"admit": 0, "sweet spot": 0, "requested": 0, "other": 0}
    for e in events:
        if e["kind"] == "advise" and e["detail"].startswith("shrink"):
            why = e["detail"].partition(": ")[2]
            key = ("admit" if "admit" in why else "sweet spot" if "sweet spot" in why
                   else "requested" if "requested" in why else "other")
            out[key] += 1
    return out


def resizes(sizes: list[int]) -> tuple[int, int]:
    """``(expansions, shrinks)`` in a job's size history."""
    ups = sum(b > a for a, b in pairwise(sizes))
    downs = sum(b < a for a, b in pairwise(sizes))
    return ups, downs


_VERDICT = re.compile(r"result (OK|WRONG|unchecked)")


def run_demo(plot: str | None = "reshape-demo.png", quick: bool = False, json_out: bool = False,
             slots: int = SLOTS, state_dir: str | None = None, timeout: float = 600.0,
             dashboard: str | None = None, live: bool | None = None) -> int:
    """Run the demo; exit code 0 if every job finished with its data verified, else 1.

    ``live``: the live view as a ``rich`` display (None: when stdout is a terminal; False: plain
    lines). ``dashboard``: ``[HOST:]PORT`` for the daemon's web dashboard."""
    jobs = demo_jobs(quick)
    extra = ("--dashboard", dashboard) if dashboard else ()
    if json_out:  # the result on stdout, the progress as plain lines on stderr
        with LiveView(out=sys.stderr, terminal=False) as view:
            res = run_workload(jobs, slots, remap="reshape", timeout=timeout, state_dir=state_dir, logs=True,
                               watch=view, daemon_args=extra)
    else:
        names = ", ".join(f"{j['name']} ({j['nprocs']}p, +{j['arrival_delay']:g}s)" for j in jobs)
        print(f"starting a daemon on localhost with {slots} slots; jobs: {names}", flush=True)
        if dashboard:
            print(f"dashboard: http://{dashboard if ':' in dashboard else '127.0.0.1:' + dashboard}/", flush=True)
        with LiveView(terminal=live) as view:
            res = run_workload(jobs, slots, remap="reshape", timeout=timeout, state_dir=state_dir, logs=True,
                               watch=view, daemon_args=extra)
    s = res["summary"]
    rows = []
    for r in s["jobs"]:
        ups, downs = resizes(r["sizes"])
        found = _VERDICT.findall(res["logs"].get(r["job_id"], ""))
        rows.append({**r, "expansions": ups, "shrinks": downs, "check": found[-1] if found else "-"})
    why = shrink_reasons(res["history"]["events"])
    out = {"slots": slots, "quick": quick, "utilization": s["utilization"], "makespan": s["makespan"],
           "jobs": rows, "shrink_reasons": why, "clean_stop": res["clean_stop"]}
    if plot:
        plot_history(res["history"], plot, title=f"reshape demo: {len(jobs)} resizable apps on {slots} slots")
        out["plot"] = plot
    ok = all(r["state"] == "done" and r["check"] == "OK" for r in rows)
    if json_out:
        print(json.dumps(out, indent=1))
        return 0 if ok else 1
    print(f"{'job':<14}{'state':>7}{'init':>5}{'wait (s)':>10}{'turnaround (s)':>16}  {'check':<6} sizes")
    for r in rows:
        wait = "-" if r["wait"] is None else f"{r['wait']:.1f}"
        ta = "-" if r["turnaround"] is None else f"{r['turnaround']:.1f}"
        print(f"{r['name']:<14}{r['state']:>7}{r['initial']:>5}{wait:>10}{ta:>16}  {r['check']:<6} "
              f"{'->'.join(map(str, r['sizes']))}")
    ups = sum(r["expansions"] for r in rows)
    downs = sum(r["shrinks"] for r in rows)
    reasons = ", ".join(f"{n} {k}" for k, n in why.items() if n)
    print(f"{ups} expansions, {downs} shrinks{' (advised: ' + reasons + ')' if reasons else ''}; "
          f"utilization {100 * s['utilization']:.1f}% of {slots} slots over {s['makespan']:.1f}s")
    if plot:
        print(f"wrote {plot}")
    return 0 if ok else 1
