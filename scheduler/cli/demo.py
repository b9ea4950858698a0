"""``reshape demo``: a local daemon running a small mixed workload of the bundled apps (Sudarsan & Ribbens 2007 §4.2).

A scaled-down W1 (Sudarsan & Ribbens 2007 §4.2.1, Table 4) with the real, resizable
applications of ``apps/`` run by ``mpiexec`` under a daemon on localhost:
LU and MM start at once on two processes each, with half the slots idle, and
expand into them; Jacobi (4 processes) is submitted once a job has expanded and
it does not fit (``hold``, see :func:`scheduler.cli.workload.run_workload`),
so it queues and a running job shrinks to admit it whatever the machine's load;
master-worker and FFT arrive later. An expansion that does not pay returns to
the previous size (sweet spot: on a two-core machine more ranks rarely pay).
Prints per-job turnaround, the sizes each job ran at, the utilization and the
times of the first expansion and the first shrink to admit a queued job, and
draws processors per job and busy processors over time (Fig. 4a/4b style).

While it runs, a live view (:mod:`scheduler.observe.live`) shows the jobs and their sizes, the
queue and the scheduler's decisions with their reasons; ``--dashboard PORT`` also serves the
daemon's web dashboard. Jobs carry walltime estimates of about twice their run time here:
EASY backfilling lets a later job pass a waiting one only when its estimate ends before the
waiting job's reservation, so uniform, loose estimates (an earlier version gave every job
120 s) left FFT (2 processes) queued behind Jacobi (4) while 2 slots sat idle for 20 s.

Our choices (the paper's W1 runs hours on 36 processors): 8 virtual slots on
this machine, problem sizes and iteration counts so that an iteration takes
about a second with two jobs sharing the cores, Jacobi held back until the
machine is full (at the latest 20 s), master-worker and FFT at 20 s and 25 s
(about 70 s in all). ``--quick`` runs the same opening with three jobs and
fewer iterations (about 30 s, for the end-to-end test). Every app checks its data
after every resize (``--check``); the demo reports each job's verdict.
"""

from __future__ import annotations

import json
import re
import sys
import time
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from scheduler.cli.workload import run_workload
from scheduler.observe.live import LiveView
from scheduler.observe.report import plot_history

__all__ = ["DemoApp", "demo_jobs", "resizes", "run_demo", "shrink_reasons", "story_times"]

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
    hold: float | None = None  # submitted once a running job has expanded and it does not fit, or at this time

    def job(self, iters: int | None = None) -> dict[str, Any]:
        cmd = ["python", "-m", f"apps.{self.module}", *self.args, "--iters", str(iters or self.iters),
               "--check"]
        out = {"name": self.name, "command": cmd, "nprocs": self.nprocs, "max_procs": self.max_procs,
               "topology": self.topology, "divides": self.divides, "walltime": self.walltime,
               "arrival_delay": self.arrival}
        if self.hold is not None:  # scheduler.cli.workload.run_workload submits it when the slots are full
            out["hold"] = {"after_expansions": 1, "latest": self.hold}
        return out


# W1's applications, arriving so that the story shows in the first seconds whatever the load: LU
# and MM start on 2 processes each with 4 of the 8 slots idle and expand into them at their
# first resize points; Jacobi (4 processes) is submitted as soon as a job has expanded and the
# free slots cannot hold it (at the latest 20 s in), so it queues and a running job shrinks back
# to admit it; master-worker and FFT arrive later, when LU, MM and Jacobi hold the machine.
# Walltimes: about twice the run time measured here, so that EASY can prove a backfill safe.
W1_DEMO = (
    DemoApp("LU", ("--n", "1024", "--nb", "32"), "lu", 2, 0.0, 50, topology="2d", walltime=120.0),
    DemoApp("MM", ("--n", "1024", "--nb", "64"), "mm", 2, 0.0, 60, topology="2d", walltime=90.0),
    DemoApp("Jacobi", ("--n", "960", "--sweeps", "100"), "jacobi", 4, 0.0, 16, divides=960, walltime=60.0,
            hold=20.0),
    DemoApp("Master-worker", ("--units", "4000", "--unit-us", "150"), "master_worker", 2, 20.0, 10,
            walltime=90.0),
    DemoApp("FFT", ("--n", "2048"), "fft2d", 2, 25.0, 5, divides=2048, walltime=50.0),
)
# --quick: the same opening with three jobs: LU and MM expand into the idle slots, then the
# 4-process Jacobi is submitted, queues, and a running job shrinks to admit it.
QUICK_DEMO = (
    DemoApp("LU", ("--n", "1024", "--nb", "32"), "lu", 2, 0.0, 20, topology="2d"),
    DemoApp("MM", ("--n", "1024", "--nb", "64"), "mm", 2, 0.0, 20, topology="2d"),
    DemoApp("Jacobi", ("--n", "960", "--sweeps", "100"), "jacobi", 4, 0.0, 5, divides=960, hold=20.0),
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


def story_times(events: list[dict[str, Any]], t0: float) -> dict[str, float | None]:
    """Seconds from ``t0`` to the first expansion and to the first shrink that admitted a queued job
    (a ``shrink`` event of a job advised to shrink with "admit"), None when there was none."""
    first_up = min((e["t"] for e in events if e["kind"] == "expand"), default=None)
    admit_advised: set[int] = set()
    first_admit = None
    for e in sorted(events, key=lambda e: e["t"]):
        if e["kind"] == "advise" and e["detail"].startswith("shrink") and "admit" in e["detail"]:
            admit_advised.add(e["job_id"])
        elif e["kind"] == "shrink" and e["job_id"] in admit_advised:
            first_admit = e["t"]
            break
    return {"first_expansion_s": None if first_up is None else round(first_up - t0, 2),
            "first_admit_shrink_s": None if first_admit is None else round(first_admit - t0, 2)}


def _when(job: dict[str, Any]) -> str:
    """When a demo job is submitted, as the header says it."""
    hold = job.get("hold")
    if hold:  # scheduler.cli.workload.run_workload holds it back
        return f"once a job has grown, by +{hold['latest']:g}s"
    return f"+{job['arrival_delay']:g}s"


def run_demo(plot: str | None = None, quick: bool = False, json_out: bool = False,
             slots: int = SLOTS, state_dir: str | None = None, timeout: float = 600.0,
             dashboard: str | None = None, live: bool | None = None) -> int:
    """Run the demo; exit code 0 if every job finished with its data verified, else 1.

    ``live``: the live view as a ``rich`` display (None: when stdout is a terminal; False: plain
    lines). ``dashboard``: ``[HOST:]PORT`` for the daemon's web dashboard."""
    jobs = demo_jobs(quick)
    extra = ("--dashboard", dashboard) if dashboard else ()

    def ready(status: dict) -> None:  # the URL the daemon bound (the real port when asked for port 0)
        if dashboard:
            print(f"dashboard: {status['daemon'].get('dashboard')}", file=sys.stderr if json_out else sys.stdout,
                  flush=True)

    t0 = time.time()
    if json_out:  # the result on stdout, the progress as plain lines on stderr
        with LiveView(out=sys.stderr, terminal=False) as view:
            res = run_workload(jobs, slots, remap="reshape", timeout=timeout, state_dir=state_dir, logs=True,
                               watch=view, daemon_args=extra, ready=ready)
    else:
        names = ", ".join(f"{j['name']} ({j['nprocs']}p, {_when(j)})" for j in jobs)
        print(f"starting a daemon on localhost with {slots} slots; jobs: {names}", flush=True)
        with LiveView(terminal=live) as view:
            res = run_workload(jobs, slots, remap="reshape", timeout=timeout, state_dir=state_dir, logs=True,
                               watch=view, daemon_args=extra, ready=ready)
    s = res["summary"]
    rows = []
    for r in s["jobs"]:
        ups, downs = resizes(r["sizes"])
        found = _VERDICT.findall(res["logs"].get(r["job_id"], ""))
        rows.append({**r, "expansions": ups, "shrinks": downs, "check": found[-1] if found else "-"})
    why = shrink_reasons(res["history"].events)
    story = story_times(res["history"].events, t0)
    out = {"slots": slots, "quick": quick, "utilization": s["utilization"], "makespan": s["makespan"],
           "jobs": rows, "shrink_reasons": why, "clean_stop": res["clean_stop"], **story}
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
    when = {k: "none" if v is None else f"at {v:.1f} s" for k, v in story.items()}
    print(f"first expansion {when['first_expansion_s']}, first shrink to admit a queued job "
          f"{when['first_admit_shrink_s']}")
    if plot:
        print(f"wrote {plot}")
    return 0 if ok else 1
