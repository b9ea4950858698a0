"""Benchmark: a node lost under a malleable job of the Slurm site controller, on the compose cluster's real Slurm.

``python -m benchmarks.recovery --slurm [--runs 2]`` (this module does the work): the Slurm overlay of the
compose cluster (``docker/slurm-compose.yml``: slurmctld and 16 slurmd nodes of 2 CPUs) is built and
brought up once, and a site controller (``reshape daemon --slurm-site``, its defaults) started afresh for
each run. Each run submits a malleable job with checkpoints every 10 iterations (``reshape submit --slurm``:
``examples/heat.py``, 4 ranks over two nodes, 300 steps) and, once its first checkpoint is on the shared
volume, ``docker kill``-s one of its nodes (:func:`scheduler.testing.slurm_site.node_loss`):

* ``node``: the node that is not its batch host; the controller restarts the job inside its allocation,
  on the node left, from its last checkpoint;
* ``batch-host``: its batch host, whose batch script and ``mpiexec`` go with it; the controller requeues the
  Slurm job (``scontrol requeue``) and its next batch attempt resumes from the checkpoint.

Per run: whether the job ended ``done`` (``recovered``), whether its field's digest is the one a run that
never failed gives (``mpiexec -n 2`` on the head: ``bit_identical``), the iterations lost (the controller's
``history``), and the seconds from the kill to the job running again: its next attempt launched in its
allocation (the controller's ``restart`` event) or its requeued attempt registered (``start``). The
baseline a user would otherwise have is Slurm's own: the job is killed with its node, or requeued from its
first iteration (``--requeue``), every iteration lost. The cluster is taken down afterwards, failed or not.

The figures go into ``benchmarks/results/recovery.json`` beside the others, under ``slurm`` and as
``slurm_*`` keys of ``summary`` (the other keys are kept).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

from benchmarks import _common
from benchmarks.recovery import _update
from scheduler.testing.compose import ComposeCluster, benchmark_cluster
from scheduler.testing.slurm_site import CASES, FILES, STEPS, node_loss, reference

_DROP = ("log_tail", "notes")  # kept in a row only where the run went wrong


def run(c: ComposeCluster, case: str, ref: str | None) -> dict:
    """One run of ``case``; a run whose job never ran again is a row too (not recovered, with the evidence)."""
    try:
        r = node_loss(c, case, ref)
    except AssertionError as e:
        return {"case": case, "how": "kill", "state": None, "recovered": False, "bit_identical": False,
                "restarts": None, "iterations_lost": None, "failure_to_running_s": None, "error": str(e)[-6000:]}
    r["recovered"] = r["state"] == "done" and r["same_job"]
    # what the job had done when its node went: all lost to a plain Slurm requeue, which starts it over
    r["done_at_failure"] = (r["resumed_at"] or 0) + (r["iterations_lost"] or 0) if r["restarts"] == 1 else None
    if r["recovered"] and r["bit_identical"]:
        r = {k: v for k, v in r.items() if k not in _DROP}
    return r


def summarize(rows: list[dict], host: str) -> dict:
    """The ``slurm_*`` summary keys: counts per case, the median and the worst time back to running."""
    def times(rs: list[dict]) -> dict:
        t = [r["failure_to_running_s"] for r in rs if r["failure_to_running_s"] is not None]
        return {"median": statistics.median(t) if t else None, "max": max(t, default=None)}

    cases = {}
    for case in CASES:
        rs = [r for r in rows if r["case"] == case]
        cases[case] = {"runs": len(rs), "recovered": sum(r["recovered"] for r in rs),
                       "bit_identical": sum(r["bit_identical"] for r in rs),
                       "max_iterations_lost": max((r["iterations_lost"] or 0 for r in rs), default=0),
                       "max_done_at_failure": max((r.get("done_at_failure") or 0 for r in rs), default=0),
                       "failure_to_running_s": times(rs)}
    return {"slurm_runs": len(rows), "slurm_recovered": sum(r["recovered"] for r in rows),
            "slurm_bit_identical": bool(rows) and all(r["bit_identical"] for r in rows),
            "slurm_cases": cases, "slurm_failure_to_running_s": times(rows),
            "slurm_max_iterations_lost": max((r["iterations_lost"] or 0 for r in rows), default=0),
            "slurm_app": f"examples/heat.py n 256, {STEPS} steps, 4 ranks on 2 nodes, checkpoint every:10",
            "slurm_host": host}


def main(a: argparse.Namespace) -> int:
    """``--slurm``: bring the cluster up, measure, take it down; add the figures to recovery.json."""
    c = benchmark_cluster("reshaperec", FILES)
    if isinstance(c, str):
        print(f"recovery --slurm: {c}", file=sys.stderr)
        return 2
    rows: list[dict] = []
    try:
        c.down()
        build_s, up_s = c.build(), c.up()
        ref = reference(c)
        for case in CASES:
            for k in range(a.runs):
                r = run(c, case, ref)
                rows.append(r)
                print(f"slurm {case:10} run {k}: {r['state']} restarts {r['restarts']} lost {r['iterations_lost']} "
                      f"kill->running {r['failure_to_running_s'] or float('nan'):.2f} s "
                      f"bit-identical {r['bit_identical']}", flush=True)
    finally:
        c.down()
    host = (f"{os.uname().nodename}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} "
            f"(16 slurmd containers on it)")
    print(f"host: {host}; cluster build {build_s:.0f} s, up {up_s:.0f} s")
    print(_common.table(rows, [("case", "node killed", ""), ("state", "end", ""), ("restarts", "restarts", "d"),
                               ("iterations_lost", "lost", "d"), ("done_at_failure", "plain requeue loses", "d"),
                               ("failure_to_running_s", "kill -> running (s)", ".2f"),
                               ("bit_identical", "identical", "")]))
    part = {"when": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "rows": rows, "reference": ref}
    return _update({"slurm": part}, summarize(rows, host))
