"""Lynch 1999 §5.4: why the spanning factor matters here and hardly at all in the thesis.

``python -m benchmarks.spanning [--jobs N] [--seeds K]`` simulates SS and DSS on
Network 13 at load 0.3 for σ ∈ {0.1, 0.5, 0.9} under three readings of what
the thesis lost: the default (alternative capacity form B,
communication ratio c = 2), form A (a deduction linear in the job's node count)
and no communication cost (c = 0). It prints mean response time (MRT) and
partitions per job, and writes ``benchmarks/results/spanning.json`` whose
``summary`` gives, per variant and policy, MRT at σ = 0.9 over MRT at σ = 0.1
(the thesis: about 1, "little or no difference"). The direction of σ (§4.2.1
vs §5.4) only mirrors the σ axis, so it is not a variant here.
"""

from __future__ import annotations

import argparse
import statistics
import sys

from benchmarks._common import table, write_result
from scheduler.lab.hetero import generate, network, run_network_policies

SIGMAS = (0.1, 0.5, 0.9)
VARIANTS = {"form B, c=2 (default)": ({}, {}), "form A, c=2": ({"form": "A"}, {}),
            "form B, c=0": ({}, {"c": 0.0})}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.spanning", description=__doc__.split("\n")[0])
    ap.add_argument("--jobs", type=int, default=1500)
    ap.add_argument("--seeds", type=int, default=2)
    a = ap.parse_args(argv)
    nodes = network("13")
    cap = sum(n.capacity for n in nodes)
    workloads = [generate(a.jobs, 0.3, s, capacity=cap) for s in range(a.seeds)]
    rows = []
    for variant, (pol, sim) in VARIANTS.items():
        for sigma in SIGMAS:
            params = {n: {"sigma": sigma, **pol} for n in ("ss", "dss")}
            runs = [run_network_policies(nodes, jobs, ["ss", "dss"], params=params, warmup=100,
                                         max_queue=1500, **sim) for jobs in workloads]
            for p in ("ss", "dss"):
                rows.append({"variant": variant, "sigma": sigma, "policy": p,
                             "mrt": statistics.fmean(r[p]["mrt"] for r in runs),
                             "partitions": statistics.fmean(r[p]["mean_partitions"] for r in runs)})
    print(table(rows, [("variant", "variant", ""), ("policy", "policy", ""), ("sigma", "sigma", ".1f"),
                       ("mrt", "MRT (s)", ".0f"), ("partitions", "parts/job", ".2f")]))
    mrt = {(r["variant"], r["policy"], r["sigma"]): r["mrt"] for r in rows}
    summary = {f"{v} {p}": mrt[(v, p, SIGMAS[-1])] / mrt[(v, p, SIGMAS[0])] for v in VARIANTS for p in ("ss", "dss")}
    print("MRT(sigma 0.9) / MRT(sigma 0.1): " + ", ".join(f"{k} {x:.2f}" for k, x in summary.items()))
    print(f"wrote {write_result('spanning', {'jobs': a.jobs, 'seeds': a.seeds, 'rows': rows, 'summary': summary})}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
