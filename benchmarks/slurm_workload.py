"""Benchmark: one workload on a real 16-node Slurm cluster, plain Slurm against Slurm with the reshape controller.

``python -m benchmarks.slurm_workload [--keep] [--no-restart]``

The Slurm overlay of the compose cluster (``docker/slurm-compose.yml``: slurmctld
and 16 slurmd nodes of 2 CPUs, backfill on) runs the same arrival sequence
twice, one run after the other:

(a) **plain Slurm**: every job static at its requested size (the malleable
    ones are plain ``sbatch`` jobs running the same emulated application);
(b) **Slurm + the reshape site controller** (``reshape daemon --slurm-site``):
    the rigid jobs are the same ``sbatch`` jobs; the malleable ones are
    submitted with ``reshape submit --slurm`` and grow and shrink through the
    controller. The controller is killed with ``kill -9`` once mid-run and
    restarted (``--no-restart`` leaves it alone).

The workload (:data:`WORKLOAD`, W1's shape; fixed here, not tuned per run):
14 jobs arriving over 220 s at an offered load of 1.5, 6 rigid (``sleep``
jobs of 3-8 nodes with time limits; hatched in the plot) and 8 malleable
emulated applications (``apps.emujob
--times``: one process standing for its processors, sleeping its iteration
time) whose iteration time per size is the real application's calibrated
curve (``benchmarks/data/apps_calibration.json``, as ``benchmarks.workload``
uses), scaled so one iteration at the starting size takes a twentieth of
its static run. Sizes count CPUs (2 per node); malleable jobs take even sizes.

Measured from Slurm (``scontrol show job``: submit, start and end of every
job) and, for run (b), from the controller's history (each malleable job's
size over time). Per job: wait, run, turnaround, sizes. Summary (the issue's
keys): ``nodes``, ``jobs``, ``malleable_jobs``, ``rigid_jobs``,
``utilization_reshape_over_static`` (nodes doing a job's work, integrated
over the makespan: a granted node the job has not expanded onto yet counts
as idle), ``turnaround_static_over_reshape`` (mean over all jobs),
``rigid_wait_reshape_over_static`` (mean wait of the rigid jobs),
``rigid_late_starts`` (rigid jobs that started more than 5 s after the first
start Slurm's backfill predicted for them, counted here from ``squeue`` in
both runs; the controller's own count is ``controller_late_starts``),
``controller_restarts_survived``, ``jobs_lost``; plus the worst job's
turnaround ratio next to the mean. Writes ``benchmarks/results/slurm_workload.json``
and ``docs/figures/slurm_workload.png`` (nodes per job over time, both runs).
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import re
import shlex
import sys
import time
from dataclasses import dataclass

from benchmarks import _common, calibrate_apps
from scheduler.tools.compose import ComposeCluster, base_image, unavailable

NODES = 16
CPUS = 2  # per node (docker/slurm/slurm.conf)
ITERATIONS = 20
SITE = "tcp://head:5600"
SITE_STATE = "/var/lib/reshape/bench-site"
FILES = ("docker-compose.yml", "docker/slurm-compose.yml")
FIGURE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs", "figures",
                      "slurm_workload.png")
SIZES = (2, 4, 6, 8, 12, 16, 24, 32)  # even sizes: whole nodes of 2 CPUs
_KEY = re.compile(r" (?=[A-Za-z][A-Za-z0-9_:/]*=)")  # scontrol -o: values may hold '=' or be empty


@dataclass(frozen=True)
class Job:
    name: str
    arrival: float  # seconds after the run starts
    nprocs: int  # CPUs at the start (nodes = nprocs / 2)
    seconds: float  # run time at the starting size (static)
    app: str | None = None  # the calibrated application of a malleable job; None: rigid

    @property
    def nodes(self) -> int:
        return math.ceil(self.nprocs / CPUS)


#: W1's shape on 16 nodes: long malleable applications (the seed's LU, MM, Jacobi, FFT, master-worker)
#: starting small, and shorter rigid jobs of 3-8 nodes arriving throughout. The offered load (node-seconds
#: at the requested sizes over the 16 nodes and the 220 s arrival window) is 1.5: jobs queue in plain
#: Slurm, as on a busy production cluster. (A lighter sequence, offered load 0.85, left plain Slurm with
#: no queue at all: see docs/slurm.md, "The workload on real Slurm".)
WORKLOAD = (
    Job("lu-1", 0, 6, 240, "LU"), Job("mm-1", 0, 8, 200, "MM"), Job("rigid-1", 20, 8, 90),
    Job("jacobi-1", 40, 4, 180, "Jacobi"), Job("rigid-2", 50, 12, 60), Job("fft-1", 60, 4, 80, "FFT"),
    Job("rigid-3", 90, 16, 60), Job("mw-1", 100, 2, 60, "Master-worker"), Job("lu-2", 120, 6, 180, "LU"),
    Job("rigid-4", 130, 8, 120), Job("mm-2", 150, 4, 150, "MM"), Job("rigid-5", 170, 12, 45),
    Job("jacobi-2", 200, 4, 120, "Jacobi"), Job("rigid-6", 220, 6, 80),
)


def scaled(scale: float) -> tuple[Job, ...]:
    """The workload with every arrival and run time multiplied by ``scale`` (Slurm's time limits count
    whole minutes, so short jobs leave little room to borrow nodes until a waiting job's start)."""
    return tuple(Job(j.name, j.arrival * scale, j.nprocs, j.seconds * scale, j.app) for j in WORKLOAD)


def offered_load(jobs: tuple[Job, ...] = WORKLOAD) -> float:
    """Node-seconds asked at the requested sizes over the nodes and the arrival window."""
    window = max(j.arrival for j in jobs) - min(j.arrival for j in jobs)
    return sum(j.nodes * j.seconds for j in jobs) / (NODES * window)


def emu_argv(job: Job, cal: dict) -> list[str]:
    """The emulated application: its calibrated curve scaled to ``seconds`` at its starting size."""
    c = calibrate_apps.curve(cal, job.app)
    k = job.seconds / ITERATIONS / c[job.nprocs]
    times = ",".join(f"{p}:{k * c[p]:.4f}" for p in sorted(c) if p <= NODES * CPUS)
    return ["python", "-m", "apps.emujob", "--times", times, "--iterations", str(ITERATIONS),
            "--redist", f"{0.02 * job.seconds / ITERATIONS:.4f}"]


def limit_minutes(job: Job) -> int:
    """The time limit asked of Slurm: the static run plus half, in whole minutes."""
    return math.ceil(1.5 * job.seconds / 60)


def job_file(job: Job, cal: dict) -> str:
    return "\n".join([f'name = "{job.name}"', f"command = {json.dumps(emu_argv(job, cal))}",
                      f"nprocs = {job.nprocs}", f"sizes = {list(SIZES)}", f"max_procs = {NODES * CPUS}",
                      'launch = "single"', f"walltime = {60 * limit_minutes(job)}", ""])


# ---------------------------------------------------------------------- one run
class Run:
    """One run of the workload on the cluster; ``site``: through the reshape controller."""

    def __init__(self, c: ComposeCluster, cal: dict, jobs: tuple[Job, ...], site: bool, restart_at: float | None):
        self.c, self.cal, self.jobs, self.site, self.restart_at = c, cal, jobs, site, restart_at
        self.ids: dict[str, str] = {}  # job name -> Slurm job id
        self.predicted: dict[str, float] = {}  # Slurm id -> first predicted start
        self.restarts = 0
        self.t0 = 0.0
        self.records: dict[str, dict[str, str]] = {}  # Slurm id -> its record, read when it ended

    def sh(self, command: str, timeout: float = 60) -> str:
        return self.c.exec("head", command, timeout=timeout).stdout

    def submit(self, job: Job) -> None:
        if job.app is None:
            cmd = (f"sbatch --parsable -N {job.nodes} --time={limit_minutes(job)} -J {job.name} "
                   f"--output /dev/null --wrap 'sleep {job.seconds}'")
        elif not self.site:
            argv = [*emu_argv(job, self.cal), "--nprocs", str(job.nprocs)]
            cmd = (f"sbatch --parsable -N {job.nodes} --time={limit_minutes(job)} -J {job.name} "
                   f"--output /tmp/{job.name}.out --wrap {shlex.quote(shlex.join(argv))}")
        else:
            self.c.exec("head", f"cat > /tmp/{job.name}.toml", input=job_file(job, self.cal))
            out = self.sh(f"cd /tmp && reshape submit --slurm --json --controller {SITE} /tmp/{job.name}.toml")
            self.ids[job.name] = json.loads(out)["slurm_job_ids"][0]
            return
        self.ids[job.name] = self.sh(cmd).strip().split(";")[0]

    def record(self, jid: str) -> dict[str, str]:
        """``scontrol show job -o``'s fields (Slurm forgets a job MinJobAge after it ends: read it at once)."""
        if jid not in self.records:
            line = self.sh(f"SLURM_TIME_FORMAT=%s scontrol show job -o {jid}").strip()
            self.records[jid] = dict(x.split("=", 1) for x in _KEY.split(line) if "=" in x)
        return self.records[jid]

    def look(self) -> list[list[str]]:
        out = self.sh("SLURM_TIME_FORMAT=%s squeue -h -o '%i|%j|%T|%S'")
        return [line.split("|") for line in out.splitlines()]

    def watch(self) -> None:
        """First predicted start of every pending rigid job (the late-start count)."""
        for jid, name, state, start in self.look():
            if state == "PENDING" and name.startswith("rigid") and jid not in self.predicted and start.isdigit():
                self.predicted[jid] = float(start)

    def start_controller(self, fresh: bool) -> None:
        self.sh((f"rm -rf {SITE_STATE}; " if fresh else "") + f"mkdir -p {SITE_STATE}; nohup reshape daemon "
                f"--slurm-site --endpoint tcp://0.0.0.0:5600 --state-dir {SITE_STATE} --workdir /tmp "
                f">> {SITE_STATE}/controller.log 2>&1 &")
        end = time.monotonic() + 30
        while self.c.exec("head", f"reshape status --endpoint {SITE}", check=False).returncode != 0:
            if time.monotonic() > end:
                raise RuntimeError(self.sh(f"tail -20 {SITE_STATE}/controller.log"))
            time.sleep(0.3)

    def run(self) -> dict:
        if self.site:
            self.start_controller(fresh=True)
        pending = sorted(self.jobs, key=lambda j: j.arrival)
        self.t0 = time.time()
        while True:
            now = time.time() - self.t0
            while pending and pending[0].arrival <= now:
                self.submit(pending.pop(0))
            if self.site and self.restart_at is not None and not self.restarts and now >= self.restart_at:
                self.sh("pkill -9 -f '[d]aemon --slurm-site'")
                time.sleep(2.0)
                self.start_controller(fresh=False)
                self.restarts = 1
            self.watch()
            queued = {r[0] for r in self.look()}
            for jid in self.ids.values():
                if jid not in queued:
                    self.record(jid)
            if not pending and not queued & set(self.ids.values()):
                break
            time.sleep(1.0)
        return self.collect()

    def collect(self) -> dict:
        jobs = {}
        for job in self.jobs:
            f = self.record(self.ids[job.name])
            jobs[job.name] = {"slurm_id": self.ids[job.name], "state": f.get("JobState"), "exit": f.get("ExitCode"),
                              "submit": float(f["SubmitTime"]), "start": float(f["StartTime"]),
                              "end": float(f["EndTime"]), "nodes": job.nodes, "rigid": job.app is None}
        late = [{"job": jid, "predicted": p, "started": jobs[n]["start"]}
                for n, jid in self.ids.items() for p in [self.predicted.get(jid)]
                if p is not None and jobs[n]["start"] > p + 5.0]
        out = {"jobs": jobs, "late_starts": late, "restarts": self.restarts}
        if self.site:
            hist = json.loads(self.sh("python -c " + shlex.quote(
                f"import json; from reshape.joblink.client import request as r; "
                f"print(json.dumps(r('{SITE}', 'history', timeout=30)))")))
            st = json.loads(self.sh(f"reshape status --json --endpoint {SITE}"))
            out["controller"] = {"late_starts": st["daemon"]["rm"]["rigid_late_starts"],
                                 "notes": st["daemon"]["rm"]["notes"]}
            out["history"] = hist
            self.sh("pkill -f '[d]aemon --slurm-site'")
        return out


# ---------------------------------------------------------------------- what the runs mean
def timelines(run: dict, site: bool) -> dict[str, list[tuple[float, int]]]:
    """Nodes doing each job's work over time: ``[(t, nodes), ...]`` (the last entry 0 at its end)."""
    out = {}
    by_name = {j["name"]: j for j in run.get("history", {}).get("jobs", [])}
    for name, j in run["jobs"].items():
        if site and not j["rigid"] and name in by_name:
            rid = by_name[name]["job_id"]
            steps = [(e["t"], math.ceil(e["nprocs"] / CPUS)) for e in run["history"]["events"]
                     if e["job_id"] == rid and e["kind"] in ("start", "expand", "shrink")]
            out[name] = [*steps, (j["end"], 0)]
        else:
            out[name] = [(j["start"], j["nodes"]), (j["end"], 0)]
    return out


def utilization(lines: dict[str, list[tuple[float, int]]], t0: float, t1: float) -> float:
    busy = sum((b[0] - a[0]) * a[1] for steps in lines.values() for a, b in itertools.pairwise(steps))
    return busy / (NODES * (t1 - t0))


def summarize(static: dict, reshape: dict, jobs: tuple[Job, ...]) -> tuple[list[dict], dict]:
    rows = []
    for job in jobs:
        a, b = static["jobs"][job.name], reshape["jobs"][job.name]
        ta, tb = a["end"] - a["submit"], b["end"] - b["submit"]
        sizes = [e["nprocs"] for e in reshape.get("history", {}).get("events", []) if e["kind"] in (
            "start", "expand", "shrink") and e["job_id"] == next(
            (j["job_id"] for j in reshape["history"]["jobs"] if j["name"] == job.name), -1)]
        rows.append({"job": job.name, "kind": "rigid" if job.app is None else "malleable", "nodes": job.nodes,
                     "wait_static": a["start"] - a["submit"], "wait_reshape": b["start"] - b["submit"],
                     "run_static": a["end"] - a["start"], "run_reshape": b["end"] - b["start"],
                     "turnaround_static": ta, "turnaround_reshape": tb, "ratio": ta / tb,
                     "sizes": "->".join(map(str, sizes)) or str(job.nprocs),
                     "ok": a["state"] == "COMPLETED" and b["state"] == "COMPLETED"})
    def span(run):
        return min(j["submit"] for j in run["jobs"].values()), max(j["end"] for j in run["jobs"].values())
    ua = utilization(timelines(static, False), *span(static))
    ub = utilization(timelines(reshape, True), *span(reshape))
    rigid = [r for r in rows if r["kind"] == "rigid"]
    mean = lambda xs: sum(xs) / len(xs)  # noqa: E731
    summary = {
        "nodes": NODES, "offered_load": offered_load(jobs), "jobs": len(rows),
        "malleable_jobs": sum(r["kind"] == "malleable" for r in rows),
        "rigid_jobs": len(rigid), "utilization_static": ua, "utilization_reshape": ub,
        "utilization_reshape_over_static": ub / ua,
        "turnaround_static_over_reshape": mean([r["turnaround_static"] for r in rows])
        / mean([r["turnaround_reshape"] for r in rows]),
        "worst_job_turnaround_static_over_reshape": min(r["ratio"] for r in rows),
        "rigid_wait_static_mean_s": mean([r["wait_static"] for r in rigid]),
        "rigid_wait_reshape_mean_s": mean([r["wait_reshape"] for r in rigid]),
        "rigid_late_starts": len(reshape["late_starts"]), "rigid_late_starts_static": len(static["late_starts"]),
        "controller_late_starts": reshape.get("controller", {}).get("late_starts"),
        "controller_restarts_survived": reshape["restarts"] if all(r["ok"] for r in rows) else 0,
        "jobs_lost": sum(not r["ok"] for r in rows),
        "makespan_static_s": span(static)[1] - span(static)[0],
        "makespan_reshape_s": span(reshape)[1] - span(reshape)[0],
    }
    w = summary["rigid_wait_static_mean_s"]
    summary["rigid_wait_reshape_over_static"] = summary["rigid_wait_reshape_mean_s"] / w if w > 0 else None
    return rows, summary


def plot(static: dict, reshape: dict, jobs: tuple[Job, ...], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(13, 4.5), sharey=True)
    colors = plt.get_cmap("tab20")
    for ax, run, site, title in ((axes[0], static, False, "(a) plain Slurm"),
                                 (axes[1], reshape, True, "(b) Slurm + reshape controller")):
        lines = timelines(run, site)
        t0 = min(j["submit"] for j in run["jobs"].values())
        grid = sorted({t for steps in lines.values() for t, _ in steps})
        base = [0.0] * len(grid)
        for i, job in enumerate(jobs):
            steps = lines[job.name]
            ys = []
            for t in grid:
                n = 0
                for (a, k), (b, _) in itertools.pairwise(steps):
                    if a <= t < b:
                        n = k
                ys.append(n)
            top = [b + y for b, y in zip(base, ys, strict=True)]
            ax.fill_between([t - t0 for t in grid], base, top, step="post", facecolor=colors(i % 20),
                            edgecolor="0.3", hatch="//" if job.app is None else None, label=job.name,
                            linewidth=0)
            base = top
        ax.set_title(title)
        ax.set_xlabel("seconds")
        ax.set_ylim(0, NODES)
    axes[0].set_ylabel("nodes")
    axes[1].legend(fontsize=7, ncol=2, loc="upper right")
    fig.tight_layout()
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.slurm_workload", description=__doc__.split("\n")[0])
    ap.add_argument("--keep", action="store_true", help="leave the cluster up afterwards")
    ap.add_argument("--no-restart", action="store_true", help="do not kill -9 the controller in run (b)")
    ap.add_argument("--restart-at", type=float, default=120.0, help="seconds into run (b), times --scale (default 120)")
    ap.add_argument("--scale", type=float, default=1.0,
                    help="multiply every arrival and run time (default 1: 1-4 minute jobs, about 15 minutes in all)")
    a = ap.parse_args(argv)
    why = unavailable()
    base, how = base_image() if why is None else (None, why)
    if base is None:
        print(f"slurm_workload: {how}", file=sys.stderr)
        return 2
    cal = calibrate_apps.load()
    jobs = scaled(a.scale)
    c = ComposeCluster("reshapebench", base, FILES)
    try:
        c.down()
        c.build()
        c.up()
        print(f"cluster up: {NODES} nodes of {CPUS} CPUs; offered load {offered_load(jobs):.2f}; run (a) plain Slurm",
              flush=True)
        static = Run(c, cal, jobs, site=False, restart_at=None).run()
        print("run (b) Slurm + the reshape controller", flush=True)
        reshape = Run(c, cal, jobs, site=True, restart_at=None if a.no_restart else a.restart_at * a.scale).run()
    finally:
        if not a.keep:
            c.down()
    rows, summary = summarize(static, reshape, jobs)
    summary["scale"] = a.scale
    print(_common.table(rows, [("job", "job", ""), ("kind", "kind", ""), ("nodes", "nodes", "d"),
                               ("wait_static", "wait a", ".0f"), ("wait_reshape", "wait b", ".0f"),
                               ("run_static", "run a", ".0f"), ("run_reshape", "run b", ".0f"),
                               ("turnaround_static", "turn a", ".0f"), ("turnaround_reshape", "turn b", ".0f"),
                               ("ratio", "a/b", ".2f"), ("sizes", "sizes (b, CPUs)", "")]))
    print(json.dumps(summary, indent=1))
    name = "slurm_workload" if a.scale == 1 else f"slurm_workload-x{a.scale:g}"
    figure = FIGURE if a.scale == 1 else FIGURE.replace(".png", f"-x{a.scale:g}.png")
    plot(static, reshape, jobs, figure)
    path = _common.write_result(name, {
        "workload": [j.__dict__ for j in jobs], "iterations": ITERATIONS, "rows": rows,
        "static": {k: v for k, v in static.items() if k != "history"},
        "reshape": {k: v for k, v in reshape.items() if k != "history"},
        "reshape_events": [e for e in reshape.get("history", {}).get("events", [])],
        "summary": summary})
    print(f"wrote {path} and {figure}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
