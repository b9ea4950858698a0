"""Expansion cost as a job gets bigger: 2 -> 4 -> 8 -> 16 -> 32, split into its phases, per new rank.

A small array job (``--job``, below) starts on 2 ranks under ``mpiexec`` and
doubles at every resize point along ``RESHAPE_PLAN=2,4,8,16,32`` through the
runtime's real expansion path: ``MPI_Comm_spawn_multiple``
(:func:`reshape.runtime.spawning.spawn`), the merge of the intercommunicator,
the hand-over of the job's state and the circulant redistribution. It holds
one 2-D block-cyclic array of a fixed total size (``--n``, square, blocks of
32x32), so the steps move comparable amounts of data; after each resize
every rank checks its blocks bit for bit against the values they must hold.
The job's iterations take no time, so before the first resize it finishes
importing the assignment solver that a real job imports during its first
iterations (:func:`reshape.redistribution.placement.prefetch`); otherwise
the first step would pay for it (0.4 s here).

For every step the table gives, from rank 0's clock
(:data:`reshape.runtime.EXPAND_PARTS`): the spawn call, the merge (waiting for
the new ranks' imports, joining and ``MPI_Intercomm_merge``), the hand-over of
the state and the redistribution (without the hand-over), each in seconds and
per new rank, and their total. The headline,
``expand_cost_per_new_rank_ratio``, is the total per new rank of the largest
step (16 -> 32) over that of 2 -> 4: 1.0 when the cost is linear in the ranks
added, below 1 when a step's fixed costs (one spawn, one merge, one
hand-over whatever the count) outweigh what grows with the ranks. It is the
median over ``--repeat`` runs, beside the worst run's ratio;
``spawn_per_new_rank_ratio`` is the same ratio for rank 0's spawn call alone.

All ratios compare steps of the same run on the same machine. On 2 cores the
32 ranks of the last step are 16 to a core (idle ranks sleep while they wait,
:mod:`reshape.mpiutil`), and a new rank's start-up (interpreter, imports,
``MPI_Init``) is CPU time: the bigger steps wait for the cores their new ranks
share, which inflates every phase at 32 ranks, and more so when other work
loads the machine; hence the spawn-only ratio beside the headline, and the
1-minute load average sampled every second during the runs.

Run: ``python -m benchmarks.expansion`` (3 runs, about a minute) or
``--quick`` (one run, a smaller array). Writes
``benchmarks/results/expansion.json`` (``expansion-quick.json`` with ``--quick``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time

import numpy as np

from benchmarks._common import ROOT, table, write_result
from reshape.joblink import jobenv as E

PLAN = (2, 4, 8, 16, 32)
N = (1536, 768)  # (full, quick) side of the square array: 18.9 MB and 4.7 MB of float64
BLOCK = 32
TARGET_RATIO = 1.5
PHASES = (("spawn", "spawn call"), ("merge", "merge"), ("handover", "hand-over"), ("redist", "redistribution"))


def value(i: np.ndarray, j: np.ndarray) -> np.ndarray:
    """The array's initial values (exact in float64)."""
    return ((i * 131 + j * 17) % 1009).astype(np.float64)


def job(n: int, out: str | None) -> int:
    """The MPI program: one array, one cheap iteration per size, expanding along ``RESHAPE_PLAN``."""
    from mpi4py import MPI

    from reshape import runtime

    rt = runtime.init()
    A = rt.register_array("A", (n, n), layout="2d", block=(BLOCK, BLOCK), init=value)
    steps = []

    def intact(done: int) -> bool:
        gi, gj = A.layout.global_indices(rt.rank)
        return bool(np.array_equal(A.local, value(gi[:, None], gj[None, :]) + done))

    ok = intact(rt.iteration)
    if not rt.joined:  # a one-time cost, not the expansion's: the import placement.prefetch() started at init()
        from reshape.redistribution import relabel

        relabel.solver()
    for _ in rt.iterations(len(PLAN)):  # one resize point per size of RESHAPE_PLAN (set by one_run)
        A.local[...] += 1.0
        rt.log(0.0)
        res = rt.resize()
        ok &= intact(rt.iteration + 1)
        if res.action == "expand" and rt.rank == 0:
            steps.append({"old": res.old, "new": res.new, "spawn": res.spawn_call_seconds, "merge": res.merge_seconds,
                          "handover": res.handover_seconds, "redist": res.seconds - res.handover_seconds,
                          "launch": res.launch_seconds, "startup": res.startup_seconds, "ready": res.ready_seconds})
        elif res.action not in ("continue", "expand") and rt.rank == 0:
            print(f"expansion: unexpected resize {res}", file=sys.stderr, flush=True)
            ok = False
    ok = bool(rt.comm.allreduce(int(ok), op=MPI.MIN))
    if rt.rank == 0:
        print(f"expansion job: sizes {rt.history} data {'OK' if ok else 'WRONG'}", flush=True)
        if out:
            with open(out, "w") as fh:
                json.dump({"ok": ok, "sizes": rt.history, "steps": steps}, fh)
    rt.finish("done" if ok else "failed")
    return 0 if ok else 1


class LoadSampler(threading.Thread):
    """The 1-minute load average, sampled every second while the benchmark runs."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.samples: list[float] = []
        self.halt = threading.Event()

    def run(self) -> None:
        while not self.halt.is_set():
            self.samples.append(os.getloadavg()[0])
            self.halt.wait(1.0)


def one_run(n: int, env: dict[str, str]) -> list[dict]:
    """One job 2 -> ... -> 32; its steps (rank 0's parts). A failed run ends the benchmark."""
    from reshape.joblink.launch import MPIRunError, mpirun

    with tempfile.TemporaryDirectory(prefix="expansion-") as tmp:
        out = os.path.join(tmp, "run.json")
        run_env = {E.PLAN: ",".join(map(str, PLAN)), "TMPDIR": tmp, **env}
        try:
            mpirun(PLAN[0], ["-m", "benchmarks.expansion", "--job", "--n", str(n), "--out", out], timeout=600,
                   env=run_env, cwd=ROOT)
        except MPIRunError as e:
            raise SystemExit(f"expansion: the run failed:\n{e}") from e
        with open(out) as fh:
            got = json.load(fh)
    if not got["ok"] or got["sizes"] != list(PLAN):
        raise SystemExit(f"expansion: the run went {got['sizes']} with data {'OK' if got['ok'] else 'WRONG'}")
    for s in got["steps"]:
        s["total"] = sum(s[k] for k, _ in PHASES)
    return got["steps"]


def ratio(steps: list[dict], key: str, k: int = -1) -> float:
    """Per-new-rank ``key`` of step ``k`` (default the largest) over that of the first (2 -> 4)."""
    first, last = steps[0], steps[k]
    return (last[key] / (last["new"] - last["old"])) / (first[key] / (first["new"] - first["old"]))


def summarize(runs: list[list[dict]]) -> tuple[list[dict], dict]:
    """Per-step medians over the runs, and the summary (ratios: median and worst run)."""
    rows = []
    for k in range(len(runs[0])):
        at = [r[k] for r in runs]
        added = at[0]["new"] - at[0]["old"]
        row = {"step": f"{at[0]['old']}->{at[0]['new']}", "new_ranks": added}
        for key in (*(p for p, _ in PHASES), "total", "launch", "startup", "ready"):
            row[key] = statistics.median(s[key] for s in at)
            row[f"{key}_per_new_rank"] = row[key] / added
        rows.append(row)
    totals = [ratio(r, "total") for r in runs]
    spawns = [ratio(r, "spawn") for r in runs]
    summary = {
        "expand_cost_per_new_rank_ratio": statistics.median(totals),
        "expand_cost_per_new_rank_ratio_worst": max(totals),
        "spawn_per_new_rank_ratio": statistics.median(spawns),
        "spawn_per_new_rank_ratio_worst": max(spawns),
        "ratios_per_run": {"total": totals, "spawn": spawns},
        "per_new_rank_ratio_per_step": {  # every step over 2 -> 4, median over the runs (the headline is the last)
            r["step"]: {key: statistics.median(ratio(run, key, k) for run in runs) for key in ("total", "spawn")}
            for k, r in enumerate(rows)},
        "largest_step": rows[-1]["step"],
        "target_ratio": TARGET_RATIO,
        "met": statistics.median(totals) <= TARGET_RATIO,
        "per_step_median_s": {r["step"]: {k: r[k] for k in (*(p for p, _ in PHASES), "total")} for r in rows},
        "per_step_per_new_rank_median_s": {r["step"]: {k: r[f"{k}_per_new_rank"] for k in
                                                       (*(p for p, _ in PHASES), "total")} for r in rows},
    }
    return rows, summary


def show(rows: list[dict], title: str) -> None:
    cols = [("step", "step", ""), ("new_ranks", "new", "d")]
    for key, head in (*PHASES, ("total", "total")):
        cols += [(key, f"{head} s", ".3f"), (f"{key}_per_new_rank", "/new rank", ".4f")]
    print(title)
    print(table(rows, cols))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.expansion", description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help=f"one run of a {N[1]}x{N[1]} array (about 20 s)")
    ap.add_argument("--repeat", type=int, default=None, help="runs of the whole plan (default 3, quick 1)")
    ap.add_argument("--n", type=int, default=None, help=f"side of the square array (default {N[0]}, quick {N[1]})")
    ap.add_argument("--job", action="store_true", help="(internal) be the MPI program of one run")
    ap.add_argument("--out", default=None, help="(internal, with --job) where rank 0 writes the run's steps")
    args = ap.parse_args(argv)
    n = args.n or N[1 if args.quick else 0]
    if args.job:
        return job(n, args.out)
    repeat = args.repeat or (1 if args.quick else 3)
    if repeat < 1 or n < BLOCK * 8:
        ap.error(f"--repeat must be >= 1 and --n >= {BLOCK * 8} (a 4x8 grid of {BLOCK}x{BLOCK} blocks)")
    t0 = time.perf_counter()
    sampler = LoadSampler()
    sampler.start()
    runs = []
    for k in range(repeat):
        runs.append(one_run(n, {}))
        print(f"run {k + 1}/{repeat}: total per new rank " + ", ".join(
            f"{s['old']}->{s['new']} {s['total'] / (s['new'] - s['old']):.3f}" for s in runs[-1])
            + " s", flush=True)
    sampler.halt.set()
    sampler.join()
    rows, summary = summarize(runs)
    loads = sampler.samples or [os.getloadavg()[0]]
    summary["load_average_1min"] = {"start": loads[0], "end": loads[-1], "max": max(loads),
                                    "mean": statistics.fmean(loads)}
    summary["notes"] = (f"{os.cpu_count()} CPUs: at 32 ranks the job has {PLAN[-1] / (os.cpu_count() or 1):.0f} "
                        "ranks per core (idle ranks sleep), which inflates every phase of the larger steps (the new "
                        "ranks' start-up is CPU time); spawn_per_new_rank_ratio is the spawn call alone. Ratios "
                        "compare steps of the same run, never fixed numbers.")
    show(rows, f"Expansion {' -> '.join(map(str, PLAN))}, {n}x{n} float64 array "
               f"({n * n * 8 / 1e6:.1f} MB, 2-D block-cyclic {BLOCK}x{BLOCK}), median of {repeat} run(s)")
    path = write_result("expansion-quick" if args.quick else "expansion", {
        "quick": args.quick, "repeat": repeat, "n": n, "block": BLOCK, "plan": list(PLAN),
        "seconds": time.perf_counter() - t0, "phases": dict(PHASES), "rows": rows, "runs": runs, "summary": summary})
    print(f"expand_cost_per_new_rank_ratio ({summary['largest_step']} over 2->4): "
          f"{summary['expand_cost_per_new_rank_ratio']:.2f} (worst run "
          f"{summary['expand_cost_per_new_rank_ratio_worst']:.2f}; target <= {TARGET_RATIO}); spawn call alone "
          f"{summary['spawn_per_new_rank_ratio']:.2f} (worst {summary['spawn_per_new_rank_ratio_worst']:.2f})")
    ld = summary["load_average_1min"]
    print(f"wrote {path} in {time.perf_counter() - t0:.0f} s (1-minute load average {ld['start']:.1f} at the "
          f"start, {ld['end']:.1f} at the end, {ld['max']:.1f} at most, on {os.cpu_count()} CPUs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
