"""Islam, Prodromidis & Squillante §6 in small form: DEP vs the best static partitioning over load,
Poisson and hyperexponential.

``python -m benchmarks.dep_sweep [--jobs N] [--cv CV]`` sweeps the relative load
U = 0.1 ... 0.9 on P = 8 nodes for two job classes (speedup ``p**0.9``;
execution : repartition overhead 100 : 1, "large" jobs like W1's, and 6 : 1,
Islam, Prodromidis & Squillante's W3) and two arrival processes: Poisson (the CTMC and Erlang C of
:mod:`scheduler.lab.models.dep_sp`) and hyperexponential with coefficient of
variation ``cv`` (default 3: the paper matched its hyperexponential to HPC
traces without giving the CV; simulation of DEP and of every SP(K), K | 8).
Per point: DEP's mean response time, SP*'s (best K), the ratio T_SP* / T_DP
(> 1: DEP wins) and p_r, the fraction of time spent repartitioning.

Writes ``benchmarks/results/dep_sweep.json``; ``summary`` checks the paper's
statements (§6): hyperexponential arrivals raise DEP's response
time; Poisson arrivals give the higher p_r; DEP wins at heavy load for large
jobs and loses at every load for small ones; p_r falls toward saturation.
"""

from __future__ import annotations

import argparse
import sys

from benchmarks._common import table, write_result
from scheduler.lab.models.dep_sp import dep_ctmc, simulate_dep, simulate_sp, sp_star

N = 8
LOADS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
CLASSES = {"large (100:1)": (1000.0, 10.0), "small (6:1)": (60.0, 10.0)}


def rates(job_seconds: float, overhead: float, alpha: float = 0.9) -> tuple[list[float], list[float]]:
    """``mu[i]``: per-job rate with i jobs on P/i nodes each (speedup p**alpha); ``gamma[i] = 1/overhead``."""
    mu = [0.0] + [(N / i) ** alpha / (job_seconds * N**alpha) for i in range(1, N + 1)]
    return mu, [0.0] + [1.0 / overhead] * N


def point(job: float, overhead: float, U: float, cv: float, jobs: int, seed: int) -> dict:
    mu, gamma = rates(job, overhead)
    lam = U * N * mu[N]
    if cv == 1.0:
        d = dep_ctmc(lam, mu, gamma, N)
        t_sp, k = sp_star(lam, mu, N)
    else:
        d = simulate_dep(lam, mu, gamma, N, jobs=jobs, seed=seed, cv=cv)
        t_sp, k = min((simulate_sp(lam, mu[K], K, jobs=jobs, seed=seed, cv=cv), K) for K in (1, 2, 4, 8))
    return {"T_dp": d["T"], "T_sp": t_sp, "K": k, "ratio": t_sp / d["T"], "p_r": d["p_r"]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.dep_sweep", description=__doc__.split("\n")[0])
    ap.add_argument("--jobs", type=int, default=100_000, help="jobs per simulated point")
    ap.add_argument("--cv", type=float, default=3.0, help="CV of the hyperexponential interarrival times")
    a = ap.parse_args(argv)
    rows = []
    for cls, (job, ov) in CLASSES.items():
        for arr, cv in (("Poisson", 1.0), (f"H2 cv={a.cv:g}", a.cv)):
            for U in LOADS:
                rows.append({"class": cls, "arrivals": arr, "U": U, **point(job, ov, U, cv, a.jobs, 1)})
    print(table(rows, [("class", "jobs", ""), ("arrivals", "arrivals", ""), ("U", "U", ".1f"),
                       ("T_dp", "T_DP (s)", ".0f"), ("T_sp", "T_SP* (s)", ".0f"), ("K", "K*", "d"),
                       ("ratio", "SP*/DP", ".2f"), ("p_r", "p_r", ".3f")]))
    by = {(r["class"], r["arrivals"] == "Poisson", r["U"]): r for r in rows}
    large, small = CLASSES
    summary = {
        "hyper_raises_dep_T_at_every_load": all(by[(c, False, U)]["T_dp"] > by[(c, True, U)]["T_dp"]
                                                for c in CLASSES for U in LOADS),
        "poisson_p_r_higher_share": sum(by[(c, True, U)]["p_r"] > by[(c, False, U)]["p_r"]
                                        for c in CLASSES for U in LOADS) / (2 * len(LOADS)),
        "large_dep_wins_at_heavy_load": {arr: by[(large, p, 0.9)]["ratio"] for arr, p in
                                         (("poisson", True), ("hyper", False))},
        "small_dep_loses_everywhere": all(by[(small, p, U)]["ratio"] < 1 for p in (True, False) for U in LOADS),
        "p_r_poisson": {c: [round(by[(c, True, U)]["p_r"], 3) for U in LOADS] for c in CLASSES},
        "cv": a.cv, "jobs": a.jobs,
    }
    print(summary)
    print(f"wrote {write_result('dep_sweep', {'rows': rows, 'summary': summary})}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
