"""Benchmark: what a lost process costs a job with checkpoints, under a real daemon, and what checkpoints cost.

``python -m benchmarks.recovery [--runs 3] [--quick]``

For LU, Jacobi (``apps.lu``, ``apps.jacobi``), ``examples/heat.py`` and the 1-D heat program written as
users write them (``tests/mpi/heat1d_sendrecv.py``: blocking ``comm.Sendrecv`` halos), each failure kind
is run ``--runs`` times on a fresh daemon (4 slots, the default policies, so jobs also resize):

* ``rank``: ``kill -9`` of one rank of the job between resizes, once its second checkpoint is committed;
* ``mpiexec``: ``kill -9`` of the job's ``mpiexec`` at the same point;
* ``new-rank``: a rank spawned by an expansion kills itself in the middle of the redistribution
  (``RESHAPE_FAULT=transfer:spawned:kill``, once per job: ``RESHAPE_FAULT_ONCE``).

The job file asks for a checkpoint every :data:`EVERY` iterations; the daemon restarts the job from its
last complete checkpoint. Per run: whether it ended ``done`` (``recovered``), whether its result is
bit-identical to a run that never failed (the apps' ``--out`` array, the heat programs' sha256 line),
the iterations lost (``history``'s ``iterations_lost``) and the seconds from the failure to the new
attempt's start.

``checkpoint_overhead``: each app run directly (``mpiexec``, 2 ranks, no daemon) with checkpoints at the
default interval, ``RESHAPE_CHECKPOINT=auto`` (spaced by their measured cost: a checkpoint once the
iterations since the last one took 50 times what it cost, at least a second apart;
:mod:`reshape.runtime.checkpoint`), against without, order rotating: the median and the worst of the
pairs (time with / without - 1). Beside it, from runs with checkpoints on but never due
(``every:1000000``), the fixed part (h5py's import, the directory check), the checkpoints written
and what the last one cost, as the runtime reports them, and their product over the run's time
(``counted``: the share the runtime's own count gives, which the load of a shared machine moves less
than the wall-clock pairs). Each run iterates for about 5-15 s
(:data:`OVERHEAD`). ``--overhead`` measures only this (six pairs per app). Writes
``benchmarks/results/recovery.json``.

``python -m benchmarks.recovery --mpi openmpi --inplace [--runs 3]``: in-place recovery instead
(``RESHAPE_INPLACE=1``, Open MPI's ULFM): LU, the blocking-``Sendrecv`` program, a second loss during a
recovery and a loss during an expansion; :mod:`benchmarks.recovery_inplace`.

``python -m benchmarks.recovery --slurm [--runs 2]``: a node ``docker kill``-ed under a malleable job of the
Slurm site controller on the compose cluster's real Slurm (a node of it, and its batch host), restarted from
its checkpoint in its allocation or requeued through Slurm; :mod:`benchmarks.recovery_slurm`.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
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
from scheduler.cli.workload import run_workload
from scheduler.daemon.startup import job_tag

EVERY = 5  # checkpoint interval of the failure runs (iterations)
DEFAULT = "auto"  # the checkpoint interval a job file or RESHAPE_CHECKPOINT gets by measured cost
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: app -> (argv after python, iterations flag, iterations)
APPS = {
    "lu": (["-m", "apps.lu", "--n", "384", "--nb", "32", "--no-check", "--quiet"], "--iters", 30),
    "jacobi": (["-m", "apps.jacobi", "--n", "480", "--no-check", "--quiet"], "--iters", 30),
    "heat": ([os.path.join(ROOT, "examples", "heat.py"), "--n", "256", "--work", "3"], "--steps", 30),
    "heat1d": (["-m", "tests.mpi.heat1d_sendrecv", "--n", "2048", "--width", "16", "--work", "1.5"], "--steps", 30),
}
HASHED = ("heat", "heat1d")  # the programs that print a sha256 line instead of writing --out
#: app -> iterations of an overhead run (about 5-15 s of iterating on 2 ranks here)
OVERHEAD = {"lu": 120, "jacobi": 1200, "heat": 8, "heat1d": 8}
KINDS = ("rank", "mpiexec", "new-rank")


def _argv(app: str, out: str | None, iters: int | None = None) -> list[str]:
    argv, flag, n = APPS[app]
    return [*argv, flag, str(iters or n), *(["--out", out] if out and app not in HASHED else [])]


def _result(app: str, out: str, log: str) -> str | None:
    """The run's final result: the digest of the apps' ``--out`` array, the heat programs' sha256 line."""
    if app in HASHED:
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
    (j,) = res["history"].jobs
    log = res["logs"].get(1, "")
    if kind == "new-rank":
        m = re.search(r"fault injected: \S+ at ([\d.]+)", _full_log(state))
        failed_at = [float(m.group(1))] if m else []
    starts = [e["t"] for e in res["history"].events if e["kind"] == "start"]
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
    """Wall time with checkpoints at the default interval (``auto``) against without (rotating order), and
    with checkpoints on but never due (``every:1000000``): the fixed cost (h5py's import, the directory
    check) apart from what the checkpoints cost."""
    modes = {"without": None, "with": DEFAULT, "fixed": "every:1000000"}
    ratios, times, written = [], {m: [] for m in modes}, []
    for r in range(repeats):
        pair = {}
        order = list(modes)[r % 3:] + list(modes)[:r % 3]
        for mode in order:
            env = {E.CHECKPOINT: modes[mode], E.CHECKPOINT_DIR: os.path.join(tmp, f"ov-{app}-{mode}-{r}")} \
                if modes[mode] else {}
            t0 = time.perf_counter()
            res = mpirun(2, _argv(app, None, OVERHEAD[app]), timeout=600, env=env, cwd=ROOT)
            pair[mode] = time.perf_counter() - t0
            times[mode].append(pair[mode])
            m = re.search(r"\[reshape\] checkpoints: (\d+) written .* the last cost ([\d.]+) s", res.stderr)
            if mode == "with" and m:
                written.append((int(m.group(1)), float(m.group(2))))
        ratios.append(pair["with"] / pair["without"] - 1)
    med = {m: statistics.median(x) for m, x in times.items()}
    count = statistics.median(w[0] for w in written) if written else 0
    return {"app": app, "interval": DEFAULT, "median": statistics.median(ratios), "worst": max(ratios),
            "with_s": med["with"], "without_s": med["without"], "fixed_s": med["fixed"] - med["without"],
            "checkpoints": count, "cost_s": statistics.median(w[1] for w in written) if written else None,
            "counted": count * statistics.median(w[1] for w in written) / med["without"] if written else None,
            "iterations": OVERHEAD[app], "load_average": os.getloadavg()[0]}


_OVERHEAD_COLS = [("app", "app", ""), ("without_s", "without (s)", ".2f"), ("with_s", f"{DEFAULT} (s)", ".2f"),
                  ("median", "overhead", ".3f"), ("worst", "worst pair", ".3f"), ("fixed_s", "fixed (s)", ".3f"),
                  ("checkpoints", "checkpoints", ".0f"), ("cost_s", "each (s)", ".3f"),
                  ("counted", "counted share", ".3f")]


def _overhead_summary(over: list[dict]) -> dict:
    return {"checkpoint_interval_default": DEFAULT,
            "checkpoint_overhead": {o["app"]: {"median": o["median"], "worst": o["worst"]} for o in over},
            "checkpoint_overhead_max_median": max((o["median"] for o in over), default=None),
            "checkpoint_overhead_worst": max((o["worst"] for o in over), default=None)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.recovery", description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=None, help="runs per app and failure kind (default 3; --slurm: 2 "
                    "per case)")
    ap.add_argument("--quick", action="store_true", help="one run of each, heat only, one overhead pair")
    ap.add_argument("--inplace", action="store_true",
                    help="measure in-place recovery (RESHAPE_INPLACE=1) instead; needs --mpi openmpi")
    ap.add_argument("--slurm", action="store_true",
                    help="measure a node lost under the Slurm site controller instead (the compose cluster: Docker)")
    ap.add_argument("--mpi", default=None, help="the MPI of the --inplace runs (openmpi)")
    ap.add_argument("--overhead", action="store_true",
                    help="only the checkpoint overhead of every app at the default interval (6 pairs each), into "
                         "recovery.json's summary")
    a = ap.parse_args(argv)
    if a.runs is not None and a.runs < 1:
        ap.error(f"--runs {a.runs}: must be at least 1")
    a.runs = a.runs or (2 if a.slurm else 3)
    if a.slurm:
        from benchmarks import recovery_slurm

        return recovery_slurm.main(a)
    if a.inplace:
        from benchmarks import recovery_inplace

        return recovery_inplace.main(a)
    if a.overhead:
        with tempfile.TemporaryDirectory(prefix="reshape-recovery-") as tmp:
            over = [overhead(app, 6, tmp) for app in APPS]
        print(_common.table(over, _OVERHEAD_COLS))
        return _update({"overhead": over}, _overhead_summary(over))
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
            over.append(overhead(app, 1 if a.quick else 6, tmp))
    print(_common.table(rows, [("app", "app", ""), ("kind", "failure", ""), ("state", "end", ""),
                               ("restarts", "restarts", "d"), ("iterations_lost", "lost", "d"),
                               ("failure_to_running_s", "to running (s)", ".2f"),
                               ("bit_identical", "identical", "")]))
    print(_common.table(over, _OVERHEAD_COLS))
    times = [r["failure_to_running_s"] for r in rows if r["failure_to_running_s"] is not None]
    summary = {"runs": len(rows), "recovered": sum(r["state"] == "done" for r in rows),
               "failures_injected": sum(r["failed"] for r in rows),
               "bit_identical": all(r["bit_identical"] for r in rows),
               "max_iterations_lost": max((r["iterations_lost"] for r in rows), default=0),
               "checkpoint_interval": EVERY,
               "failure_to_running_s": {"median": statistics.median(times) if times else None,
                                        "max": max(times, default=None)},
               **_overhead_summary(over)}
    print(summary)
    path = _common.write_result("recovery" + ("-quick" if a.quick else ""),
                                {"rows": rows, "overhead": over, "summary": summary})
    print(f"wrote {path}")
    return 0


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
