"""Benchmark: in-place recovery (``RESHAPE_INPLACE=1``, Open MPI's ULFM), what it recovers and what it costs.

``python -m benchmarks.recovery --mpi openmpi --inplace [--runs 3] [--quick]`` (this module does the work;
``--quick``: one run of each case and one overhead pair, into ``benchmarks/results/recovery-inplace-quick.json``):

* ``lu``: LU n = 2560 on 4 ranks started by ``mpirun`` (no daemon); per run, ``kill -9`` of rank 2 from
  outside at a different point of an early iteration (30%, 50%, 70% of the reference run's iterating
  time). Whether the job ended on 3 ranks with exit status 0 (``recovered``), whether its factors are
  bit-identical to a run that never failed, the seconds from the kill to the survivors iterating again
  (the time rank 0 of the survivors prints with its ``lost rank`` line), the iterations run again.
* ``heat1d``: the 1-D heat program written as users write them (``tests/mpi/heat1d_sendrecv.py``:
  blocking ``comm.Sendrecv`` of 2 MB halo rows, 4 ranks), rank 2 killed mid-step at iteration 12, 20
  and 28 of 40 (``RESHAPE_FAULT``); on the same terms, with the hash of an undisturbed run.
* ``heat1d-second``: the same, and rank 0 killed too while the survivors recover (it kept rank 2's
  copy: the recovery starts over and reads the checkpoint in-place recovery takes by default).
* ``expansion``: LU n = 768 submitted to a real daemon (4 slots, the default policies) on 3 ranks, up to
  4, with ``checkpoint = "every:2"``: the daemon grows it to 4 at its first resize point, and running
  rank 1 dies while the blocks move to the new rank (``transfer:rank1:kill``), ``--runs`` times. In
  place, the expansion is undone and the job goes on on 2 ranks; where Open MPI ends the whole run
  instead (its ``ob1`` abort, docs/mpi.md), the daemon restarts the job from its last checkpoint.
  Either way "recovered" is the job's ``done`` and ``from`` says which path (``buddy`` in place,
  ``checkpoint (restart)``), with the factors compared to a run that never failed.

``buddy_overhead``: the LU run with buddy copies every 10 iterations (``RESHAPE_BUDDY=every:10``)
against the same run without in-place recovery, order rotating, median of the pairs (time with /
without - 1); beside it the same from the CPU time of the runs (``buddy_overhead_cpu``), and the
share of the run the copies took on the slowest rank by the runtime's own count
(``buddy_copy_share``): on a shared, loaded machine the wall-clock pairs vary by tens of percent.
The figures go into ``benchmarks/results/recovery.json`` beside the MPICH ones, under ``inplace`` and
as ``inplace_*`` / ``buddy_*`` keys of ``summary`` (the other keys are kept).
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import signal
import statistics
import tempfile
import time

from benchmarks import _common
from benchmarks.recovery import ROOT, _result, _update
from reshape.joblink import jobenv as E
from reshape.joblink.launch import mpirun

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
    m = re.search(r"\[reshape\] lost rank 2 of 4; resumed at iteration (\d+) .*; (\d+) iterations? to run again\); "
                  r"continuing on \d+ processes at ([\d.]+)", res.stderr)
    size = re.search(r"final size (\d+)", res.stdout)
    return {"tag": tag, "returncode": res.returncode, "wall_s": wall, "cpu_s": cpu, "killed": killed_at is not None,
            "iterating_s": iterating,
            "buddy_copies": int(copies.group(1)) if copies else None,
            "buddy_seconds": float(copies.group(2)) if copies else None,
            "recovery_line": next((ln for ln in res.stderr.splitlines() if "[reshape] lost rank" in ln), None),
            "final_size": int(size.group(1)) if size else None,
            "resumed_at": int(m.group(1)) if m else None, "iterations_lost": int(m.group(2)) if m else None,
            "case": "lu", "source": "buddy" if m and "from buddy copies" in m.group(0) else "checkpoint" if m else None,
            "failure_to_iterating_s": float(m.group(3)) - killed_at if m and killed_at else None,
            "result": _result("lu", out, ""), "stderr_tail": None if res.returncode == 0 else res.stderr[-2000:]}



HEAT1D = ["-m", "tests.mpi.heat1d_sendrecv", "--n", "8", "--width", "262144", "--steps", "40"]
HEAT1D_KILL_AT = (12, 20, 28)
EXPANSION = ["-m", "apps.lu", "--n", "768", "--nb", "64", "--iters", "6", "--no-check", "--quiet"]
EXPANSION_CKPT = 2  # the expansion case's job file: a checkpoint every 2 iterations (the restart path's)
_LOST = re.compile(r"\[reshape\] (lost .*?); resumed at iteration (\d+) from (buddy copies|checkpoint \S+) "
                   r"\(.*?; (\d+) iterations? to run again\); continuing on (\d+) process(?:es)? at ([\d.]+)")


def _fault_run(tmp: str, case: str, tag: str, argv: list[str], procs: int, env: dict, want_size: int,
               ref: str | None) -> dict:
    """One run of ``argv`` on ``procs`` ranks whose faults ``env`` injects: what the recovery cost."""
    out = os.path.join(tmp, f"{tag}.npy")
    full = [*argv, "--out", out] if "apps." in " ".join(argv) else argv
    res = mpirun(procs, full, timeout=900, env=env, cwd=tmp, check=False)
    fired = [float(x) for x in re.findall(r"fault injected: \S+ at ([\d.]+)", res.stderr)]
    m = _LOST.search(res.stderr)
    result = _result("heat" if "heat1d" in " ".join(argv) else "lu", out, res.stdout)
    ended = re.search(r"final size (\d+)", res.stdout) or re.search(r"sizes \[[\d, ]*?(\d+)\] sha256", res.stdout)
    final = int(ended.group(1)) if ended else None
    row = {"case": case, "tag": tag, "returncode": res.returncode, "final_size": final,
           "lost": m.group(1) if m else None, "source": m.group(3).split()[0] if m else None,
           "resumed_at": int(m.group(2)) if m else None, "iterations_lost": int(m.group(4)) if m else None,
           "failure_to_iterating_s": float(m.group(6)) - fired[0] if m and fired else None,
           "result": result, "segfault": "Segmentation fault" in res.stderr}
    row["recovered"] = bool(m) and final == want_size and not row["segfault"]
    row["bit_identical"] = result is not None and result == ref
    if not row["recovered"]:
        row["stderr_tail"] = res.stderr[-2000:]
    return row


def fault_cases(tmp: str, mpi: str, runs: int = 1) -> list[dict]:
    """The ``heat1d``, ``heat1d-second`` and ``expansion`` (``runs`` times) cases (module docstring)."""
    base = {E.MPI: mpi, "PYTHONPATH": os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")]))}
    on = {**base, E.INPLACE: "1", E.BUDDY: "every:4"}  # the runs' working directory is tmp: their checkpoints go there
    rows = []
    ref = _result("heat", "", mpirun(4, HEAT1D, timeout=900, env=base, cwd=tmp).stdout)
    for k, it in enumerate(HEAT1D_KILL_AT):
        env = {**on, E.FAULT: f"iteration{it}:rank2:kill", E.FAULT_ONCE: os.path.join(tmp, f"h{k}.once")}
        rows.append(_fault_run(tmp, "heat1d", f"heat1d-{it}", HEAT1D, 4, env, 3, ref))
    env = {**on, E.FAULT: "iteration20:rank2:kill,recover:rank0:kill", E.FAULT_ONCE: os.path.join(tmp, "s.once")}
    rows.append(_fault_run(tmp, "heat1d-second", "heat1d-second", HEAT1D, 4, env, 2, ref))
    lu_ref = os.path.join(tmp, "expansion-ref.npy")
    mpirun(3, [*EXPANSION, "--out", lu_ref], timeout=900, env=base, cwd=tmp)
    rows += [expansion_run(tmp, k, _result("lu", lu_ref, "")) for k in range(runs)]
    for r in rows:
        print(f"{r['case']:14} {r['tag']:14} recovered {r['recovered']} from {r['source']} lost "
              f"{r['iterations_lost']} failure->iterating {r['failure_to_iterating_s'] or float('nan'):.2f} s "
              f"bit-identical {r['bit_identical']}", flush=True)
    return rows


def expansion_run(tmp: str, k: int, ref: str | None) -> dict:
    """The ``expansion`` case once, under a real daemon (module docstring): in place, or from the checkpoint
    when Open MPI ends the whole run."""
    from scheduler.cli.workload import run_workload

    state = tempfile.mkdtemp(prefix=f"expansion-{k}-", dir=tmp)
    out = os.path.join(state, "out.npy")
    env = {E.INPLACE: "1", E.BUDDY: "every:4", E.FAULT: "transfer:rank1:kill",
           E.FAULT_ONCE: os.path.join(state, "fault-fired"),
           "PYTHONPATH": os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")]))}
    job = {"name": "lu-expansion", "command": ["python", *EXPANSION, "--out", out], "nprocs": 3, "max_procs": 4,
           "mpi": "openmpi", "checkpoint": f"every:{EXPANSION_CKPT}", "max_restarts": 2, "resize_timeout": 60,
           "env": env}
    res = run_workload([job], 4, "reshape", state_dir=state, logs=True, timeout=900)
    (j,) = res["history"].jobs
    try:
        with open(os.path.join(state, "logs", "job-1.log"), errors="replace") as f:
            log = f.read()
    except OSError:
        log = res["logs"].get(1, "")
    fired = [float(x) for x in re.findall(r"fault injected: \S+ at ([\d.]+)", log)]
    m = _LOST.search(log)
    starts = [e["t"] for e in res["history"].events if e["kind"] == "start"]
    relaunch = next((t for t in starts if fired and t > fired[0]), None)
    source = ("checkpoint (restart)" if j["restarts"] else
              m.group(3).split()[0] if m else None) if fired else None
    lost = j["iterations_lost"] if j["restarts"] else int(m.group(4)) if m else None
    back = (relaunch - fired[0] if relaunch else None) if j["restarts"] else \
        (float(m.group(6)) - fired[0] if m and fired else None)
    result = _result("lu", out, "")
    row = {"case": "expansion", "tag": f"expansion-{k}", "state": j["state"], "restarts": j["restarts"],
           "source": source, "iterations_lost": lost, "failure_to_iterating_s": back, "result": result,
           "ob1_abort": "request freed" in log, "segfault": "Segmentation fault" in log,
           "recovered": j["state"] == "done" and bool(fired), "bit_identical": result is not None and result == ref}
    if not row["recovered"]:
        row["log_tail"] = log[-2000:]
    return row


def inplace_benchmark(runs: int, mpi: str, tmp: str, pairs_n: int = 3) -> dict:
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
    for r in range(max(pairs_n, runs)):
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
    rows += fault_cases(tmp, mpi, runs)
    times = [x["failure_to_iterating_s"] for x in rows if x["failure_to_iterating_s"] is not None]
    summary = {"inplace_runs": len(rows), "inplace_recovered": sum(x["recovered"] for x in rows),
               "inplace_bit_identical": bool(rows) and all(x["bit_identical"] for x in rows),
               "inplace_cases": {c: {"runs": sum(x["case"] == c for x in rows),
                                     "recovered": sum(x["recovered"] for x in rows if x["case"] == c),
                                     "bit_identical": sum(x["bit_identical"] for x in rows if x["case"] == c),
                                     "from_checkpoint_restart": sum(x["recovered"] and x["source"] == "checkpoint "
                                                                    "(restart)" for x in rows if x["case"] == c),
                                     "max_iterations_lost": max((x["iterations_lost"] or 0 for x in rows
                                                                 if x["case"] == c), default=0),
                                     "recovery_s_max": max((x["failure_to_iterating_s"] or 0 for x in rows
                                                            if x["case"] == c), default=None)}
                                 for c in ("lu", "heat1d", "heat1d-second", "expansion")},
               "inplace_recovery_s": {"median": statistics.median(times) if times else None,
                                      "max": max(times, default=None)},
               "buddy_overhead": statistics.median(p["ratio"] for p in pairs),
               "buddy_overhead_worst": max(p["ratio"] for p in pairs),
               "buddy_overhead_cpu": statistics.median(p["cpu_ratio"] for p in pairs),
               "buddy_copy_share": statistics.median(p["buddy_share"] for p in pairs),
               "load_average": os.getloadavg()[0], "inplace_mpi": mpi,
               "inplace_app": f"lu n 2560 nb 64 on {INPLACE_PROCS} ranks"}
    return {"rows": rows, "overhead_pairs": pairs, "reference": ref, "summary": summary}


def main(a: argparse.Namespace) -> int:
    """``--inplace``: measure, then add the figures to recovery.json keeping its other keys."""

    mpi = a.mpi or os.environ.get(E.MPI) or "openmpi"
    with tempfile.TemporaryDirectory(prefix="reshape-inplace-") as tmp:
        got = inplace_benchmark(1 if a.quick else a.runs, mpi, tmp, 1 if a.quick else 3)
    print(f"host: {os.uname().nodename}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    print(_common.table(got["rows"], [("case", "case", ""), ("tag", "run", ""), ("recovered", "recovered", ""),
                                      ("source", "from", ""), ("iterations_lost", "lost", "d"),
                                      ("failure_to_iterating_s", "kill -> iterating (s)", ".2f"),
                                      ("bit_identical", "identical", "")]))
    part = {"when": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "rows": got["rows"],
            "overhead_pairs": got["overhead_pairs"], "reference": got["reference"]}
    if a.quick:  # one run of each: its own file, recovery.json keeps the full figures
        print(got["summary"])
        print(f"wrote {_common.write_result('recovery-inplace-quick', {**part, 'summary': got['summary']})}")
        return 0
    return _update({"inplace": part}, got["summary"])


