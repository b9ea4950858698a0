"""Benchmark: how much any malleable scheduler could gain on the Slurm twin's workloads, beside the controller.

``python -m benchmarks.slurm_bound [--seeds N --first S] [--no-twin]``

The same jobs as ``python -m benchmarks.slurm_workload --twin-seeds N --twin-first S`` (Lublin-Feitelson
workloads, :func:`benchmarks.slurm_jobs.lublin` with 36 jobs at load 1.4; arrivals, sizes, run times,
the malleable/rigid split, legal sizes, bounds and calibrated iteration-time tables as
:func:`benchmarks.slurm_workload.twin_jobs` gives them to the twin) run through the trace simulator
(:mod:`scheduler.lab.simulator`) under every policy preset that resizes or molds
(:data:`PRESETS`), against the preset ``easy`` (rigid EASY backfilling) in the same simulator.
The simulator idealizes the mechanics the twin models: no minute-granular Slurm plan of the
controller's changes, no expander jobs and their grant latency, no registration or start-up
latency; a slot is a CPU, and since every size is a whole number of nodes (an even number of
CPUs) and Slurm's nodes are interchangeable (``select/linear``), 32 slots hold exactly the
allocations 16 whole nodes do.

Per workload and preset: the turnaround ratio (mean turnaround of ``easy`` over the preset's)
and the worst job's ratio; the *oracle choice* (the best preset of each workload, chosen after
the fact, among the runs that killed no job at its limit); the *relaxation bound*
(:func:`relaxation`: a mean turnaround no schedule of these jobs can beat, so ``easy``'s over it
is a ratio no scheduler can exceed); the twin's plain-Slurm and controller runs
(:func:`benchmarks.slurm_workload.twin_of`) for comparison.

Redistribution: the twin charges each job ``0.02 * seconds / ITERATIONS * (1 + min/max)`` per
resize; the simulator prices a resize by ``(size, p, q)`` only, not per job, so the headline
charges nothing (a looser bound) and ``redist_largest`` charges every job the workload's largest
per-job cost (a stricter one). Default sets: training seeds from 100 to 109 and held-out 200-229
(docs/slurm.md, "Choosing the rules on the twin"). Writes ``benchmarks/results/slurm_bound.json``.
"""

from __future__ import annotations

import argparse
import heapq
import statistics
import sys

from benchmarks import _common, calibrate_apps
from benchmarks.slurm_jobs import ITERATIONS, Workload, lublin
from benchmarks.slurm_workload import twin_jobs, twin_of
from scheduler.core.policy import JobSpec
from scheduler.lab import EmuRedistModel, SimInput
from scheduler.lab.emumodel import TableModel
from scheduler.lab.runner import run_policies

PRESETS = ("moldable-easy", "reshape", "reshape-paper", "reshape-squeeze", "reshape-fcfs", "reshape-plus",
           "dep", "dep-smooth", "fold")
BASELINE = "easy"
KEPT = ("resizes", "walltime_kills", "utilization", "idle_while_waiting")  # per preset, from its metrics
SETS = {"training": (100, 10), "held_out": (200, 30)}  # name -> (first seed, seeds)


def sim_inputs(w: Workload, cal: dict) -> tuple[list[SimInput], float]:
    """The twin's jobs as simulator inputs (CPU slots), and the largest per-job resize cost (seconds)."""
    out, largest = [], 0.0
    for i, t in enumerate(twin_jobs(w, cal)):
        if t.malleable:
            spec, model = t.desc.spec(i, t.arrival), TableModel(t.times, t.iterations)
            largest = max(largest, t.redist)
        else:
            n = t.nodes * w.cpus_per_node
            spec = JobSpec(i, t.name, t.arrival, n, n, n, resizable=False, walltime=60.0 * t.limit_min)
            model = TableModel(((n, t.seconds / ITERATIONS),), ITERATIONS)
        out.append(SimInput(spec, model, float(t.seconds)))
    return out, largest


def run_presets(jobs: list[SimInput], slots: int, names: list[str], redist: float = 0.0) -> dict[str, dict]:
    """Each preset's metrics on ``jobs`` (:func:`scheduler.lab.runner.run_policies`), with ``turnaround``:
    each job's, by job id; a resize costs ``redist * (1 + min/max)`` (``apps.emujob``'s cost)."""
    out = run_policies(jobs, slots, names, redist=EmuRedistModel(redist), record=True)
    for n, m in out.items():
        records = m.pop("result").records
        if len(records) != len(jobs):
            raise RuntimeError(f"{n}: {len(records)} of {len(jobs)} jobs ended")
        m["turnaround"] = {r.job_id: r.turnaround for r in records}
    return out


def srpt_completions(jobs: list[tuple[float, float]]) -> list[float]:
    """Completion times of ``(release, length)`` jobs on one machine under shortest remaining time first,
    the schedule of least total completion time with preemption (Schrage 1968), in release order."""
    order = sorted(range(len(jobs)), key=lambda k: jobs[k][0])
    done = [0.0] * len(jobs)
    heap: list[tuple[float, int]] = []
    t, i = 0.0, 0
    while i < len(order) or heap:
        if not heap:
            t = max(t, jobs[order[i]][0])
        while i < len(order) and jobs[order[i]][0] <= t:
            heapq.heappush(heap, (jobs[order[i]][1], order[i]))
            i += 1
        rem, k = heapq.heappop(heap)
        nxt = jobs[order[i]][0] if i < len(order) else float("inf")
        if t + rem <= nxt:
            t += rem
            done[k] = t
        else:
            heapq.heappush(heap, (rem - (nxt - t), k))
            t = nxt
    return done


def relaxation(jobs: list[SimInput], slots: int) -> dict:
    """Lower bounds of the mean turnaround of any schedule of ``jobs`` on ``slots`` (resizes free).

    ``alone``: each job at its fastest legal size from its arrival, nothing else running. ``area``:
    each job's least slot-seconds (its most efficient legal size throughout) processed by one
    machine as fast as the whole pool, under SRPT: a schedule on the pool is such a machine shared
    among jobs, and SRPT has completed the most jobs at every instant there (Schrage 1968), hence
    the least total completion time. ``bound``: so the k-th earliest end of any schedule is no
    earlier than the k-th earliest of either, and the sum of the larger of the two, over k, less
    the arrivals, bounds the sum of turnarounds."""
    fast, area = [], []
    for j in jobs:
        s = j.spec
        sizes = s.sizes if s.resizable and s.sizes else (s.nprocs,)
        fast.append(s.submit_time + min(j.model.run_time(p) for p in sizes))
        area.append((s.submit_time, min(p * j.model.run_time(p) for p in sizes) / slots))
    srpt = srpt_completions(area)
    arrivals = sum(r for r, _ in area)
    both = sum(max(x, y) for x, y in zip(sorted(fast), sorted(srpt), strict=True))
    n = len(jobs)
    return {"alone": (sum(fast) - arrivals) / n, "area": (sum(srpt) - arrivals) / n, "bound": (both - arrivals) / n}


def one_workload(w: Workload, cal: dict, presets: tuple[str, ...] = PRESETS, twin: bool = True) -> dict:
    """Every preset on ``w`` against ``easy`` (module docstring): a row of ratios and means."""
    jobs, largest = sim_inputs(w, cal)
    slots = w.nodes * w.cpus_per_node
    runs = run_presets(jobs, slots, list(dict.fromkeys([BASELINE, *presets])))
    strict = run_presets(jobs, slots, list(presets), largest) if presets else {}
    base = runs[BASELINE]
    mean_base = base["mean_turnaround"]
    row: dict = {"workload": w.name, "jobs": len(jobs), "easy_mean_s": mean_base,
                 "easy_idle_while_waiting": base["idle_while_waiting"], "ratio": {}, "worst_job": {},
                 "ratio_redist_largest": {}, **{k: {} for k in KEPT}}
    for n in presets:
        m = runs[n]
        row["ratio"][n] = mean_base / m["mean_turnaround"]
        row["worst_job"][n] = min(base["turnaround"][k] / t for k, t in m["turnaround"].items())
        row["ratio_redist_largest"][n] = (mean_base / strict[n]["mean_turnaround"]
                                          if not strict[n]["walltime_kills"] else None)
        for k in KEPT:
            row[k][n] = m[k]
    if presets:
        ok = {n: row["ratio"][n] for n in presets if not row["walltime_kills"][n]} | {BASELINE: 1.0}
        row["oracle"] = max(ok, key=lambda n: ok[n])  # a run that killed a job at its limit does not count
        row["oracle_ratio"] = ok[row["oracle"]]
        row["oracle_worst_job"] = row["worst_job"].get(row["oracle"], 1.0)
        row["oracle_redist_largest"] = max([1.0, *(x for x in row["ratio_redist_largest"].values() if x)])
    rel = relaxation(jobs, slots)
    row["relaxation_mean_s"] = rel
    row["ceiling_ratio"] = mean_base / rel["bound"]
    if twin:
        s = twin_of(w, cal, [], True)
        row["twin"] = {k: s[k] for k in ("turnaround_static_mean_s", "turnaround_reshape_mean_s",
                                         "turnaround_static_over_reshape",
                                         "worst_job_turnaround_static_over_reshape", "jobs_lost")}
        row["easy_over_twin_static"] = mean_base / s["turnaround_static_mean_s"]
    return row


def spread(xs: list[float]) -> dict:
    return {"mean": statistics.fmean(xs), "min": min(xs), "max": max(xs)}


def summarize(rows: list[dict]) -> dict:
    """Mean, min and max over workloads of each preset's ratio and worst job, the oracle, the ceiling, the twin."""
    names = list(rows[0]["ratio"])
    out: dict = {"workloads": len(rows), "presets": {}}
    for n in names:
        out["presets"][n] = {"turnaround_easy_over": spread([r["ratio"][n] for r in rows]),
                             "worst_job": spread([r["worst_job"][n] for r in rows]),
                             "turnaround_easy_over_redist_largest": spread([x for r in rows if (
                                 x := r["ratio_redist_largest"][n]) is not None]),
                             "walltime_kills": sum(r["walltime_kills"][n] for r in rows),
                             "idle_while_waiting": statistics.fmean(r["idle_while_waiting"][n] for r in rows),
                             "utilization": statistics.fmean(r["utilization"][n] for r in rows)}
    if names:
        out["oracle"] = spread([r["oracle_ratio"] for r in rows])
        out["oracle_worst_job"] = spread([r["oracle_worst_job"] for r in rows])
        out["oracle_picks"] = {n: k for n in [BASELINE, *names] if (k := sum(r["oracle"] == n for r in rows))}
        out["oracle_redist_largest"] = spread([r["oracle_redist_largest"] for r in rows])
    out["ceiling"] = spread([r["ceiling_ratio"] for r in rows])
    out["easy_mean_s"] = statistics.fmean(r["easy_mean_s"] for r in rows)
    out["easy_idle_while_waiting"] = statistics.fmean(r["easy_idle_while_waiting"] for r in rows)
    if all("twin" in r for r in rows):
        tw = [r["twin"] for r in rows]
        out["twin_controller"] = spread([x["turnaround_static_over_reshape"] for x in tw])
        out["twin_controller_worst_job"] = spread([x["worst_job_turnaround_static_over_reshape"] for x in tw])
        out["twin_static_mean_s"] = statistics.fmean(x["turnaround_static_mean_s"] for x in tw)
        out["easy_over_twin_static"] = spread([r["easy_over_twin_static"] for r in rows])
        if "oracle" in out:  # the oracle against the twin's plain Slurm (two simulators: a cross-check)
            out["twin_static_over_oracle"] = spread([r["oracle_ratio"] / r["easy_over_twin_static"] for r in rows])
    return out


def print_set(label: str, rows: list[dict], s: dict) -> None:
    names = list(s["presets"])
    cols = [("workload", "workload", ""), ("easy_mean_s", "easy s", ".0f")]
    cols += [(f"r:{n}", n, ".2f") for n in names]
    cols += [("oracle_ratio", "oracle", ".2f"), ("ceiling_ratio", "ceiling", ".2f"), ("twin_ratio", "twin ctl", ".2f"),
             ("twin_static", "twin slurm s", ".0f")]
    flat = [{"workload": r["workload"], "easy_mean_s": r["easy_mean_s"], "oracle_ratio": r.get("oracle_ratio"),
             "ceiling_ratio": r["ceiling_ratio"], **{f"r:{n}": r["ratio"][n] for n in names},
             "twin_ratio": (r.get("twin") or {}).get("turnaround_static_over_reshape"),
             "twin_static": (r.get("twin") or {}).get("turnaround_static_mean_s")} for r in rows]
    print(f"\n{label}: mean turnaround of easy over each preset's (trace simulator), per workload")
    print(_common.table(flat, cols))
    print(f"\n{label}: over {s['workloads']} workloads, mean [min, max]")
    fmt = lambda d: f"{d['mean']:.3f} [{d['min']:.2f}, {d['max']:.2f}]"  # noqa: E731
    summ = [{"what": n, "ratio": fmt(d["turnaround_easy_over"]), "worst": fmt(d["worst_job"]),
             "strict": fmt(d["turnaround_easy_over_redist_largest"]), "kills": d["walltime_kills"],
             "idle": 100 * d["idle_while_waiting"]} for n, d in s["presets"].items()]
    if "oracle" in s:
        summ.append({"what": "oracle choice", "ratio": fmt(s["oracle"]), "worst": fmt(s["oracle_worst_job"]),
                     "strict": fmt(s["oracle_redist_largest"])})
    summ.append({"what": "relaxation ceiling", "ratio": fmt(s["ceiling"])})
    if "twin_controller" in s:
        summ.append({"what": "twin: controller/plain Slurm", "ratio": fmt(s["twin_controller"]),
                     "worst": fmt(s["twin_controller_worst_job"])})
    print(_common.table(summ, [("what", "schedule", ""), ("ratio", "turnaround ratio", ""),
                               ("worst", "worst job", ""), ("strict", "with largest redist", ""),
                               ("kills", "jobs killed at limit", "d"), ("idle", "idle while waiting %", ".1f")]))
    if "easy_over_twin_static" in s:
        print(f"baselines: lab easy mean {s['easy_mean_s']:.1f} s, twin plain Slurm {s['twin_static_mean_s']:.1f} s "
              f"(easy / Slurm {fmt(s['easy_over_twin_static'])}); plain Slurm / oracle "
              f"{fmt(s['twin_static_over_oracle'])}; easy idle while waiting {100 * s['easy_idle_while_waiting']:.1f}%")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.slurm_bound", description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, metavar="N", help="workloads (with --first): one set of seeds instead of "
                    "the training (100-109) and held-out (200-229) sets")
    ap.add_argument("--first", type=int, default=200, metavar="S", help="the first generator seed (default 200)")
    ap.add_argument("--no-twin", action="store_true", help="skip the twin's runs (about 1.4 s a workload)")
    ap.add_argument("--out", default="slurm_bound", help="result name (default slurm_bound)")
    a = ap.parse_args(argv)
    if a.seeds is not None and not 1 <= a.seeds <= 1000:
        ap.error(f"--seeds {a.seeds} must be in 1..1000")
    sets = SETS if a.seeds is None else {f"seeds_{a.first}_{a.first + a.seeds - 1}": (a.first, a.seeds)}
    cal = calibrate_apps.load()
    summary, per = {}, {}
    for label, (first, n) in sets.items():
        rows = [one_workload(lublin(seed, 36, 1.4), cal, twin=not a.no_twin) for seed in range(first, first + n)]
        summary[label] = summarize(rows) | {"seeds": [first, first + n - 1]}
        per[label] = rows
        print_set(label, rows, summary[label])
    path = _common.write_result(a.out, {"presets": [BASELINE, *PRESETS], "redist": "zero (headline); "
                                        "ratio_redist_largest: the workload's largest per-job cost for every job",
                                        "summary": summary, "per_workload": per})
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
