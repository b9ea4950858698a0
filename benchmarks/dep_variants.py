"""Islam, Prodromidis & Squillante §2.6: DEP, folding and DEP with smoothing through the scheduler core's simulator.

The paper's preliminary W1 result: smoothing has the lowest mean response time
and the smallest variance of execution times, and DEP consistently beats
folding; folding reconfigures less. Here the three are the presets ``dep``,
``fold`` and ``dep`` with ``min_interval`` (smoothing), run by
:mod:`scheduler.lab` on P = 8 malleable jobs with linear speedup, Poisson
arrivals at load 0.6, exponential work (mean 1000 s at 8 nodes), a resize
point every 1/20 of a job, and two reconfiguration costs: cheap (the
simulator's default, ~2.5 s) and costly (300 s, ~30% of a mean job at full size:
the paper's DS killed and relaunched every process of a repartitioned job).

``python -m benchmarks.dep_variants [--jobs N] [--seeds K]`` prints the table
and writes ``benchmarks/results/dep_variants.json`` (``summary``: mean
turnaround of each variant over DEP's, per cost, and folding's
reconfigurations over DEP's). DEP is the same-run baseline.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys

from benchmarks._common import table, write_result
from scheduler.core.policy import JobSpec, app_policy, remap_policy
from scheduler.lab import JobModel, SimInput, simulate
from scheduler.lab.jobmodel import RedistModel

P = 8
VARIANTS = {"DEP": ("dep", {}), "folding": ("fold", {}), "smoothing": ("dep", {"min_interval": 2000.0})}
COSTS = {"cheap": RedistModel(), "costly": RedistModel(latency=300.0, seconds_per_slot=0.0)}


def workload(n: int, seed: int, load: float = 0.6) -> list[SimInput]:
    """``n`` malleable jobs: Poisson arrivals at ``load``, exponential work, linear speedup to 8."""
    rng = random.Random(seed)
    mean_work = 400.0  # per iteration, sequential; 20 iterations: 8000 s on 1 node, 1000 s on 8
    t, out = 0.0, []
    for i in range(n):
        t += rng.expovariate(load * P / (20 * mean_work))
        spec = JobSpec(i, f"j{i}", t, 1, min_procs=1, max_procs=None, resizable=True)
        model = JobModel(work=rng.expovariate(1 / mean_work) + 1, A=P, sigma=0.0, iterations=20)
        out.append(SimInput(spec, model, model.run_time(1)))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.dep_variants", description=__doc__.split("\n")[0])
    ap.add_argument("--jobs", type=int, default=2000, help="jobs per run")
    ap.add_argument("--seeds", type=int, default=3, help="workload seeds")
    a = ap.parse_args(argv)
    rows = []
    for cost, redist in COSTS.items():
        for name, (policy, params) in VARIANTS.items():
            turn, resizes, sd = [], [], []
            for seed in range(1, a.seeds + 1):
                res = simulate(workload(a.jobs, seed), P, app_policy(policy), remap_policy(policy, **params),
                               redist=redist)
                m = res.metrics()
                turn.append(m["mean_turnaround"])
                resizes.append(m["resizes"])
                sd.append(statistics.pstdev(r.finish - r.start for r in res.records))
            rows.append({"cost": cost, "variant": name, "mean_turnaround": statistics.mean(turn),
                         "resizes": statistics.mean(resizes), "run_time_sd": statistics.mean(sd)})
    for r in rows:
        base = next(x for x in rows if x["cost"] == r["cost"] and x["variant"] == "DEP")
        r["turnaround_over_dep"] = r["mean_turnaround"] / base["mean_turnaround"]
        r["resizes_over_dep"] = r["resizes"] / base["resizes"]
    print(table(rows, [("cost", "reconfiguration", ""), ("variant", "variant", ""),
                       ("mean_turnaround", "mean turnaround s", ".0f"), ("turnaround_over_dep", "/ DEP", ".3f"),
                       ("resizes", "resizes", ".0f"), ("resizes_over_dep", "/ DEP", ".2f"),
                       ("run_time_sd", "sd of run time s", ".0f")]))
    by = {(r["cost"], r["variant"]): r for r in rows}
    order = {c: sorted(VARIANTS, key=lambda v: by[(c, v)]["mean_turnaround"]) for c in COSTS}
    summary = {
        "jobs": a.jobs, "seeds": a.seeds,
        "order_by_mean_turnaround": order,
        "turnaround_over_dep": {f"{c}/{v}": by[(c, v)]["turnaround_over_dep"] for c in COSTS for v in VARIANTS},
        "folding_resizes_over_dep": statistics.mean(by[(c, "folding")]["resizes_over_dep"] for c in COSTS),
        "smoothing_resizes_over_dep": statistics.mean(by[(c, "smoothing")]["resizes_over_dep"] for c in COSTS),
        "smoothing_smallest_run_time_sd": {c: min(VARIANTS, key=lambda v: by[(c, v)]["run_time_sd"]) == "smoothing"
                                           for c in COSTS},
    }
    print(summary)
    write_result("dep_variants", {"summary": summary, "rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
