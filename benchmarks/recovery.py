"""Benchmark: what a lost process costs a job with checkpoints, under a real daemon, and what checkpoints cost.

``python -m benchmarks.recovery [--runs 3] [--quick]``

For LU, Jacobi (``apps.lu``, ``apps.jacobi``) and ``examples/heat.py``, each failure kind is run
``--runs`` times on a fresh daemon (4 slots, the default policies, so jobs also resize):

* ``rank``: ``kill -9`` of one rank of the job between resizes, once its second checkpoint is committed;
* ``mpiexec``: ``kill -9`` of the job's ``mpiexec`` at the same point;
* ``new-rank``: a rank spawned by an expansion kills itself in the middle of the redistribution
  (``RESHAPE_FAULT=transfer:spawned:kill``, once per job: ``RESHAPE_FAULT_ONCE``).

The job file asks for a checkpoint every :data:`EVERY` iterations; the daemon restarts the job from its
last complete checkpoint. Per run: whether it ended ``done`` (``recovered``), whether its result is
bit-identical to a run that never failed (the apps' ``--out`` array, heat's sha256 line), the iterations
lost (``history``'s ``iterations_lost``) and the seconds from the failure to the new attempt's start.
``checkpoint_overhead``: each app run directly (``mpiexec``, no daemon) with a checkpoint every 10
iterations against without, order rotating, the median and the worst of the pairs (time with / without -
1); beside it, from runs with checkpoints on but never due, the fixed part (h5py's import, the directory
check) and the seconds per checkpoint. The runs have 120 iterations of 10-100 ms (12 checkpoints; for
Jacobi ten a second), still short enough that the fixed part weighs more than in a job of minutes.
Writes ``benchmarks/results/recovery.json``.

``python -m benchmarks.recovery --mpi openmpi --inplace [--runs 3]``: in-place recovery instead
(``RESHAPE_INPLACE=1``, :mod:`reshape.runtime.inplace`, Open MPI's ULFM), LU n = 2560 on 4 ranks
started by ``mpirun`` (no daemon): per run, ``kill -9`` of rank 2 at a different point of an early
iteration; whether the job ended on 3 ranks with exit status 0 (``recovered``), whether its factors are
bit-identical to a run that never failed, the seconds from the kill to the survivors iterating again
(the time rank 0 of the survivors prints with its ``lost rank`` line), the iterations run again.
``buddy_overhead``: the run with buddy copies every 10 iterations (``RESHAPE_BUDDY=every:10``)
against the same run without in-place recovery, order rotating, median of the pairs (time with /
without - 1); beside it the same from the CPU time of the runs (``buddy_overhead_cpu``), and the
share of the run the copies took on the slowest rank by the runtime's own count
(``buddy_copy_share``): on a shared, loaded machine the wall-clock pairs vary by tens of percent.
The figures go into the same JSON file beside the MPICH ones, under ``inplace`` and as
``inplace_*`` / ``buddy_*`` keys of ``summary`` (the other keys are kept).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import resource
import signal
import statistics
import sys
import tempfile
import time

import numpy as np
import psutil

from benchmarks import _common
from reshape.joblink import jobenv as E
from reshape.joblink.launch import mpirun, tagged_pids
from reshape.runtime.checkpoint import latest
from scheduler.service.startup import job_tag
from scheduler.service.workload import run_workload

EVERY = 5  # checkpoint interval of the failure runs (iterations)
OVERHEAD_EVERY = 10  # of the overhead runs
CKPT_OVERHEAD_ITERS = 120  # of a checkpoint overhead run: 12 checkpoints, seconds of work beside start-up noise
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: app -> (argv after python, iterations flag, iterations)
APPS = {
    "lu": (["-m", "apps.lu", "--n", "384", "--nb", "32", "--no-check", "--quiet"], "--iters", 30),
    "jacobi": (["-m", "apps.jacobi", "--n", "480", "--no-check", "--quiet"], "--iters", 30),
    "heat": ([os.path.join(ROOT, "examples", "heat.py"), "--n", "256", "--work", "3"], "--steps", 30),
}
KINDS = ("rank", "mpiexec", "new-rank")


def _argv(app: str, out: str | None, iters: int | None = None) -> list[str]:
    argv, flag, n = APPS[app]
    return [*argv, flag, str(iters or n), *(["--out", out] if out and app != "heat" else [])]


def _result(app: str, out: str, log: str) -> str | None:
    """The run's final result: the digest of the apps' ``--out`` array, heat's sha256 line."""
    if app == "heat":
        m = re.search(r"sha256 (\w+)", log)
        return m.group(1) if m else None
    try:
        return hashlib.sha256(np.load(out).tobytes()).hexdigest()[:16]
    except OSError:
        return None


def reference(app: str, tmp: str) -> str:
    out = os.path.join(tmp, f"{app}-ref.npy")
    res = mpirun(2, _argv(app, out), timeout=600, cwd=ROOT)
    return _result(app, out, res.stdout)


def _ranks(state_dir: str, jid: int, attempt: int) -> list[int]:
    return tagged_pids(job_tag(state_dir, jid, attempt), E.JOB_TAG)


def failure_run(app: str, kind: str, tmp: str) -> dict:
    """One run of ``app`` under a daemon with failure ``kind``; what it cost."""
    state = tempfile.mkdtemp(prefix=f"{app}-{kind}-", dir=tmp)
    out = os.path.join(state, "out.npy")
    env = {}
    if kind == "new-rank":
        env = {E.FAULT: "transfer:spawned:kill", E.FAULT_ONCE: os.path.join(state, "fault-fired")}
    job = {"name": f"{app}-{kind}", "command": ["python", *_argv(app, out)], "nprocs": 2, "max_procs": 4,
           "checkpoint": f"every:{EVERY}", "max_restarts": 2, "resize_timeout": 20, "env": env,
           **({"divides": 480} if app == "jacobi" else {})}
    failed_at: list[float] = []

    def watch(st: dict, events: list[dict]) -> None:
        if kind == "new-rank" or failed_at:
            return
        ck = latest(os.path.join(state, "checkpoints", "job-1"))
        if ck is None or int(ck[-8:]) < 2 * EVERY:
            return
        want = "python" if kind == "rank" else "mpiexec"  # a rank, or Hydra's mpiexec
        victims = [p for p in _ranks(state, 1, 0) if want in _name(p)]
        if victims:
            failed_at.append(time.time())
            os.kill(victims[-1], signal.SIGKILL)

    res = run_workload([job], 4, "reshape", state_dir=state, logs=True, watch=watch, timeout=600)
    (j,) = res["history"]["jobs"]
    log = res["logs"].get(1, "")
    if kind == "new-rank":
        m = re.search(r"fault injected: \S+ at ([\d.]+)", _full_log(state))
        failed_at = [float(m.group(1))] if m else []
    starts = [e["t"] for e in res["history"]["events"] if e["kind"] == "start"]
    relaunch = next((t for t in starts if failed_at and t > failed_at[0]), None)
    return {"app": app, "kind": kind, "state": j["state"], "restarts": j["restarts"], "failed": bool(failed_at),
            "iterations_lost": j["iterations_lost"], "resumed_at": j["resumed_at"],
            "failure_to_running_s": relaunch - failed_at[0] if relaunch and failed_at else None,
            "result": _result(app, out, _full_log(state) or log), "error": j["error"]}


def _name(pid: int) -> str:
    """The process's executable name ("python3.11", "mpiexec.hydra"; "" if gone)."""
    try:
        return psutil.Process(pid).name()
    except psutil.Error:
        return ""


def _full_log(state: str) -> str:
    try:
        with open(os.path.join(state, "logs", "job-1.log"), errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def overhead(app: str, repeats: int, tmp: str) -> dict:
    """Wall time with a checkpoint every OVERHEAD_EVERY iterations against without (rotating order), and
    with checkpoints on but never due (``every:1000000``): the fixed cost (h5py's import, the directory
    check) apart from what each checkpoint costs."""
    modes = {"without": None, "with": f"every:{OVERHEAD_EVERY}", "fixed": "every:1000000"}
    ratios, times = [], {m: [] for m in modes}
    for r in range(repeats):
        pair = {}
        order = list(modes)[r % 3:] + list(modes)[:r % 3]
        for mode in order:
            env = {E.CHECKPOINT: modes[mode], E.CHECKPOINT_DIR: os.path.join(tmp, f"ov-{app}-{mode}-{r}")} \
                if modes[mode] else {}
            t0 = time.perf_counter()
            mpirun(2, _argv(app, None, CKPT_OVERHEAD_ITERS), timeout=600, env=env, cwd=ROOT)
            pair[mode] = time.perf_counter() - t0
            times[mode].append(pair[mode])
        ratios.append(pair["with"] / pair["without"] - 1)
    med = {m: statistics.median(x) for m, x in times.items()}
    checkpoints = CKPT_OVERHEAD_ITERS // OVERHEAD_EVERY
    return {"app": app, "median": statistics.median(ratios), "worst": max(ratios),
            "with_s": med["with"], "without_s": med["without"], "fixed_s": med["fixed"] - med["without"],
            "per_checkpoint_s": (med["with"] - med["fixed"]) / checkpoints, "checkpoints": checkpoints}


INPLACE_ARGV = ["-m", "apps.lu", "--n", "2560", "--nb", "64", "--no-check", "--quiet"]
INPLACE_PROCS = 4
INPLACE_ITERS = 6  # of a failure run (about 10 s each on the 2-core test machine)
OVERHEAD_ITERS = 10  # of an overhead run: one buddy copy in it (every:10)
INPLACE_KILL_AT = (0.3, 0.5, 0.7)  # when rank 2 is killed: this fraction of the reference run's iterating time


def _lu_inplace(tmp: str, tag: str, env: dict, iters: int, kill_after: float | None = None) -> dict:
    """One LU run under ``mpirun`` (Open MPI with ULFM when ``env`` turns in-place recovery on); with
    ``kill_after``, rank 2 is killed that many seconds after the ranks logged their start."""
    import threading

    out, pidlog = os.path.join(tmp, f"{tag}.npy"), os.path.join(tmp, f"{tag}.pids")
    argv = [*INPLACE_ARGV, "--iters", str(iters), "--out", out, "--pidlog", pidlog]
    box: list = []
    cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    th = threading.Thread(target=lambda: box.append(mpirun(INPLACE_PROCS, argv, timeout=1800, env=env, cwd=ROOT,
                                                           check=False)))
    th.start()
    killed_at = started = None
    while th.is_alive() and killed_at is None and (started is None or kill_after is not None):
        time.sleep(0.05)
        try:
            with open(pidlog) as f:
                lines = [ln.split() for ln in f if ln.strip()]
        except OSError:
            continue
        starts = {int(r): int(pid) for pid, _, r, tag_ in lines if tag_ == "start"}
        if len(starts) == INPLACE_PROCS and started is None:
            started = time.time()
        if kill_after is not None and started is not None and time.time() - started >= kill_after:
            killed_at = time.time()
            os.kill(starts[2], signal.SIGKILL)
    th.join()
    iterating = time.time() - started if started is not None else None
    wall = time.perf_counter() - t0
    cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    res = box[0]
    copies = re.search(r"\[reshape\] buddy copies: (\d+) made, ([\d.]+) s", res.stderr)
    m = re.search(r"\[reshape\] lost rank 2 of 4; resumed at iteration (\d+) .* continuing on (\d+) processes "
                  r"at ([\d.]+)", res.stderr)
    size = re.search(r"final size (\d+)", res.stdout)
    return {"tag": tag, "returncode": res.returncode, "wall_s": wall, "cpu_s": cpu, "killed": killed_at is not None,
            "iterating_s": iterating,
            "buddy_copies": int(copies.group(1)) if copies else None,
            "buddy_seconds": float(copies.group(2)) if copies else None,
            "recovery_line": next((ln for ln in res.stderr.splitlines() if "[reshape] lost rank" in ln), None),
            "final_size": int(size.group(1)) if size else None,
            "resumed_at": int(m.group(1)) if m else None,
            "failure_to_iterating_s": float(m.group(3)) - killed_at if m and killed_at else None,
            "result": _result("lu", out, ""), "stderr_tail": None if res.returncode == 0 else res.stderr[-2000:]}


def inplace_benchmark(runs: int, mpi: str, tmp: str) -> dict:
    """The in-place recovery figures (module docstring): failure runs and the buddy copies' overhead."""
    base = {E.MPI: mpi}
    on = {**base, E.INPLACE: "1", E.BUDDY: "every:10"}
    ref = _lu_inplace(tmp, "ref", base, INPLACE_ITERS)
    rows = []
    for r in range(runs):
        at = INPLACE_KILL_AT[r % len(INPLACE_KILL_AT)] * (ref["iterating_s"] or ref["wall_s"])
        row = _lu_inplace(tmp, f"lost-{r}", on, INPLACE_ITERS, at)
        row["recovered"] = row["returncode"] == 0 and row["final_size"] == INPLACE_PROCS - 1
        row["bit_identical"] = row["result"] is not None and row["result"] == ref["result"]
        rows.append(row)
        print(f"lu inplace run {r}: recovered {row['recovered']} resumed at {row['resumed_at']} "
              f"failure->iterating {row['failure_to_iterating_s'] or float('nan'):.2f} s "
              f"bit-identical {row['bit_identical']}", flush=True)
    pairs = []
    for r in range(max(3, runs)):
        order = [("without", base), ("with", on)][:: 1 if r % 2 == 0 else -1]
        got = {mode: _lu_inplace(tmp, f"ov-{mode}-{r}", env, OVERHEAD_ITERS) for mode, env in order}
        pair = {mode: got[mode]["wall_s"] for mode in got}
        pair.update({f"{mode}_cpu": got[mode]["cpu_s"] for mode in got})
        pair["ratio"] = pair["with"] / pair["without"] - 1
        pair["cpu_ratio"] = pair["with_cpu"] / pair["without_cpu"] - 1
        pair["buddy_seconds"] = got["with"]["buddy_seconds"]
        pair["buddy_share"] = (got["with"]["buddy_seconds"] or 0.0) / pair["with"]
        pairs.append(pair)
        print(f"buddy overhead pair {r}: without {pair['without']:.1f} s with {pair['with']:.1f} s "
              f"-> {pair['ratio']:+.3f} (cpu {pair['cpu_ratio']:+.3f}; copies {pair['buddy_seconds']} s "
              f"= {pair['buddy_share']:.3f} of the run)", flush=True)
    times = [x["failure_to_iterating_s"] for x in rows if x["failure_to_iterating_s"] is not None]
    summary = {"inplace_runs": len(rows), "inplace_recovered": sum(x["recovered"] for x in rows),
               "inplace_bit_identical": bool(rows) and all(x["bit_identical"] for x in rows),
               "inplace_recovery_s": {"median": statistics.median(times) if times else None,
                                      "max": max(times, default=None)},
               "buddy_overhead": statistics.median(p["ratio"] for p in pairs),
               "buddy_overhead_worst": max(p["ratio"] for p in pairs),
               "buddy_overhead_cpu": statistics.median(p["cpu_ratio"] for p in pairs),
               "buddy_copy_share": statistics.median(p["buddy_share"] for p in pairs),
               "load_average": os.getloadavg()[0], "inplace_mpi": mpi,
               "inplace_app": f"lu n 2560 nb 64 on {INPLACE_PROCS} ranks"}
    return {"rows": rows, "overhead_pairs": pairs, "reference": ref, "summary": summary}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.recovery", description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=3, help="runs per app and failure kind (default 3)")
    ap.add_argument("--quick", action="store_true", help="one run of each, heat only, one overhead pair")
    ap.add_argument("--inplace", action="store_true",
                    help="measure in-place recovery (RESHAPE_INPLACE=1) instead; needs --mpi openmpi")
    ap.add_argument("--mpi", default=None, help="the MPI of the --inplace runs (openmpi)")
    ap.add_argument("--overhead", action="store_true",
                    help="only the checkpoint overhead of LU and Jacobi (6 pairs each), into recovery.json's summary")
    a = ap.parse_args(argv)
    if a.inplace:
        return main_inplace(a)
    if a.overhead:
        with tempfile.TemporaryDirectory(prefix="reshape-recovery-") as tmp:
            over = [overhead(app, 6, tmp) for app in APPS if app != "heat"]
        return _update({"overhead": over},
                       {"checkpoint_overhead": {o["app"]: {"median": o["median"], "worst": o["worst"]} for o in over},
                        "checkpoint_overhead_worst": max(o["worst"] for o in over)})
    apps = ["heat"] if a.quick else list(APPS)
    runs = 1 if a.quick else a.runs
    rows, over = [], []
    with tempfile.TemporaryDirectory(prefix="reshape-recovery-") as tmp:
        for app in apps:
            ref = reference(app, tmp)
            for kind in KINDS:
                for _ in range(runs):
                    r = failure_run(app, kind, tmp)
                    r["bit_identical"] = r["result"] == ref
                    rows.append(r)
                    print(f"{app:7} {kind:9} {r['state']:7} restarts {r['restarts']} lost {r['iterations_lost']} "
                          f"failure->running {r['failure_to_running_s'] or float('nan'):.2f} s "
                          f"bit-identical {r['bit_identical']}", flush=True)
            if app != "heat" or a.quick:
                over.append(overhead(app, 1 if a.quick else 6, tmp))
    print(_common.table(rows, [("app", "app", ""), ("kind", "failure", ""), ("state", "end", ""),
                               ("restarts", "restarts", "d"), ("iterations_lost", "lost", "d"),
                               ("failure_to_running_s", "to running (s)", ".2f"),
                               ("bit_identical", "identical", "")]))
    print(_common.table(over, [("app", "app", ""), ("without_s", "without (s)", ".2f"),
                               ("with_s", f"every {OVERHEAD_EVERY} (s)", ".2f"), ("median", "overhead", ".3f"),
                               ("worst", "worst pair", ".3f"), ("fixed_s", "fixed (s)", ".3f"),
                               ("per_checkpoint_s", "per checkpoint (s)", ".3f")]))
    times = [r["failure_to_running_s"] for r in rows if r["failure_to_running_s"] is not None]
    summary = {"runs": len(rows), "recovered": sum(r["state"] == "done" for r in rows),
               "failures_injected": sum(r["failed"] for r in rows),
               "bit_identical": all(r["bit_identical"] for r in rows),
               "max_iterations_lost": max((r["iterations_lost"] for r in rows), default=0),
               "checkpoint_interval": EVERY,
               "failure_to_running_s": {"median": statistics.median(times) if times else None,
                                        "max": max(times, default=None)},
               "checkpoint_overhead": {o["app"]: {"median": o["median"], "worst": o["worst"]} for o in over},
               "checkpoint_overhead_worst": max((o["worst"] for o in over), default=None)}
    print(summary)
    path = _common.write_result("recovery" + ("-quick" if a.quick else ""),
                                {"rows": rows, "overhead": over, "summary": summary})
    print(f"wrote {path}")
    return 0


def main_inplace(a: argparse.Namespace) -> int:
    """``--inplace``: measure, then add the figures to recovery.json keeping its other keys."""

    mpi = a.mpi or os.environ.get(E.MPI) or "openmpi"
    with tempfile.TemporaryDirectory(prefix="reshape-inplace-") as tmp:
        got = inplace_benchmark(a.runs, mpi, tmp)
    return _update({"inplace": {"when": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "rows": got["rows"],
                                "overhead_pairs": got["overhead_pairs"], "reference": got["reference"]}},
                   got["summary"])


def _update(parts: dict, summary: dict) -> int:
    """Replace ``parts`` and these ``summary`` keys of recovery.json, keeping the others."""
    import json

    print(summary)
    path = os.path.join(_common.RESULTS, "recovery.json")
    try:
        with open(path) as f:
            old = json.load(f)
    except (OSError, ValueError):
        old = {"summary": {}}
    old.update(parts)
    old.setdefault("summary", {}).update(summary)
    os.makedirs(_common.RESULTS, exist_ok=True)
    with open(path, "w") as f:
        json.dump(old, f, indent=2, default=float)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
