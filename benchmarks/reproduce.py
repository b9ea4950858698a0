"""Every published table and figure beside ours: the rows of ``docs/reproduction.md``.

``python -m benchmarks.reproduce`` prints the table from the committed results
(``benchmarks/results/*.json``) and the paper-exact tests, and writes
``benchmarks/results/reproduce.json``. ``--quick`` first runs every row in small
form (the tests, and each benchmark's quick variant writing into a temporary
directory through ``RESHAPE_RESULTS_DIR``, so the committed results stay), then
checks each row's verdict against those fresh numbers. It exits 1 if a row no
longer has the verdict the document gives it (a test failed, or a number left
its band). Rows whose numbers depend on timing at a compressed time scale
(Tables 4 and 5) are checked for having run completely; their verdict rests on
the committed full run. About five minutes on 2 cores; ``tests/test_reproduce.py`` runs it
in the slow tier.

A row is ``(paper, item, command, published, ours, verdict, why)``; ``ours``
reads the results of the row's run and returns ``(text, holds)``, ``holds``
meaning the verdict is still the documented one.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COMMITTED = os.path.join(ROOT, "benchmarks", "results")
PY = sys.executable

# the small forms: name -> argv (run from ROOT); "tests" runs the paper-exact tests
QUICK_RUNS: dict[str, list[str]] = {
    "tests": ["-m", "pytest", "-q", "-p", "no:cacheprovider", "--junitxml", "{out}/tests.xml",
              "tests/test_reshape_paper_repro.py", "tests/test_dep_islam.py", "tests/test_models_dep_sp.py",
              "tests/test_hetero_lynch.py", "tests/test_models_slowdown.py", "tests/test_gang_nakazawa.py",
              "tests/test_shared_search.py"],
    "slowdown": ["-m", "benchmarks.slowdown", "--quick"],
    "gang": ["-m", "scheduler.cli", "gang", "--json", "--scenario", "baseline", "--scenario", "cn-half",
             "--scenario", "cn-twice", "--scenario", "io-half", "--scenario", "io-double"],
    "hetero_sigma": ["-m", "scheduler.cli", "hetero", "--json", "--network", "13", "--policy", "ss",
                     "--policy", "dss", "--sigma", "{sigma}"],
    "dep_sweep": ["-m", "benchmarks.dep_sweep", "--jobs", "20000"],
    "mheta": ["-m", "benchmarks.mheta", "--quick", "--only", "DC,IO"],
    "mheta_cg": ["-m", "benchmarks.mheta", "--quick", "--app", "cg", "--only", "IO,HY2"],
    "mheta_lanczos": ["-m", "benchmarks.mheta", "--quick", "--app", "lanczos", "--only", "IO"],
    "mheta_prefetch": ["-m", "benchmarks.mheta", "--quick", "--prefetch", "--only", "IO,HY1"],
    "mheta_wavefront": ["-m", "benchmarks.mheta", "--quick", "--app", "wavefront", "--only", "DC,HY1"],
    "dep_variants": ["-m", "benchmarks.dep_variants", "--jobs", "500", "--seeds", "1"],
    "search": ["-m", "benchmarks.search", "--quick"],
    "search_cg": ["-m", "benchmarks.search", "--quick", "--app", "cg"],
    "redistribution": ["-m", "benchmarks.redistribution", "--quick", "--sizes", "1000", "--repeats", "2"],
    "resize_apps": ["-m", "benchmarks.resize_apps", "--quick", "--no-background"],
    "resize_apps_fig2": ["-m", "benchmarks.resize_apps", "--fig2", "--quick"],
    "workload": ["-m", "benchmarks.workload", "--quick"],
}
SIGMAS = (0.1, 0.5, 0.9)
SMALLER = {"hetero_sigma": ["--seeds", "1"]}  # in --quick only (the committed run uses the defaults)


@dataclass(frozen=True)
class Row:
    paper: str
    item: str
    command: str
    published: str
    ours: Callable[[Results], tuple[str, bool]]
    verdict: str  # "agrees", "agrees in shape", "differs", "not attempted"
    why: str = ""


class Results:
    """The outputs a row reads: JSON results in ``path`` and the test outcomes."""

    def __init__(self, path: str, tests: dict[str, bool] | None = None, left_out: tuple[str, ...] = ()):
        self.path, self.tests, self.left_out = path, tests, left_out

    def json(self, name: str) -> dict:
        with open(os.path.join(self.path, f"{name}.json")) as f:
            return json.load(f)

    def outcome(self, *names: str) -> bool | None:
        """Did every test whose id contains one of ``names`` pass? None: all of them skipped
        (e.g. the live contention tests on a busy machine); True when tests were not run."""
        if self.tests is None:
            return True
        if any(n.split("::")[0] in self.left_out for n in names):
            return None  # the caller runs those tests itself
        hit = [ok for tid, ok in self.tests.items() if any(n in tid for n in names)]
        if hit and all(ok is None for ok in hit):
            return None
        return bool(hit) and all(ok is not False for ok in hit)


def _tested(text: str, *names: str) -> Callable[[Results], tuple[str, bool]]:
    def f(r: Results) -> tuple[str, bool]:
        ok = r.outcome(*names)
        return (text + " (not checked in this run: the tests skipped)" if ok is None else text), ok is not False
    return f


def _f(x: float, d: int = 2) -> str:
    return f"{x:.{d}f}"


def _fig3b(r: Results) -> tuple[str, bool]:
    s = r.json("resize_apps")["summary"]["checkpoint_over_reshape"]
    apps = ("lu", "mm", "jacobi", "fft2d")
    # the shape: checkpointing is slower for every app (quick runs move little data: ratios are noisy)
    return (", ".join(f"{a} {_f(s[a], 1)}" for a in apps), all(s[a] > 1 for a in apps))


def _fig3a_measured(r: Results) -> tuple[str, bool]:
    rows = r.json("resize_apps")["fig3a"]["rows"]
    t = "->".join(_f(x["T"]) for x in rows)
    c = "->".join(_f(x["redist"]) for x in rows[1:])
    return f"T {t} s; redistribution {c} s", True


def _fig2(r: Results) -> tuple[str, bool]:
    d = r.json("resize_apps_fig2")
    s, ns = d["summary"], [c["n"] for c in d["curves"]]
    first = {int(n): v for n, v in s["redist_2_to_4_s"].items()}
    falls = sum(bool(v) for v in s["redist_falls_with_size"].values())
    text = (f"n {ns[0]}-{ns[-1]}: redistribution 2->4 " + " -> ".join(f"{1e3 * first[n]:.0f}" for n in ns)
            + f" ms, falls with the size for {falls} of {len(ns)} n; model (dedicated cores) T(2)/T(max) "
            + " -> ".join(_f(v) for v in s["model_T2_over_T_last"].values())
            + f", sweet spots {sorted(set(s['model_sweet_spot'].values()))}; measured on 2 cores T(max)/T(2) "
            + " -> ".join(_f(v) for v in s["measured_T_last_over_T2"].values()))
    # a small run on a shared machine is too noisy for the trends: the check is that every size of every n ran
    # and was timed; the verdict rests on the committed full run
    complete = all(len(c["points"]) == len(d["sizes"]) - 1 and all(p["redist_into"] > 0 for p in c["points"][1:])
                   for c in d["curves"])
    return text, complete


def _redistribution(r: Results) -> tuple[str, bool]:
    s = r.json("redistribution")["summary"]
    return (f"checkpoint/default path median {_f(s['checkpoint_over_default_median'], 1)}x "
            f"(min {_f(s['min_checkpoint_over_default'], 1)}x)", s["min_checkpoint_over_default"] > 1)


def _workload(name: str) -> Callable[[Results], tuple[str, bool]]:
    def f(r: Results) -> tuple[str, bool]:
        w = r.json("workload")["workloads"][name]
        jobs = ", ".join(f"{j['job']} {_f(j['ratio_paper'])}" for j in w["jobs"])
        util = (f"; utilization {100 * w['utilization_static']:.1f}% -> {100 * w['utilization_paper']:.1f}%"
                if name == "W1" else "")
        # timing-dependent at this time scale (a quick run may land near or far from the paper): the
        # check is that every job ran and has a ratio; the verdict rests on the committed full run
        names = {j["job"] for j in w["jobs"]}
        return jobs + util, names == set(PUBLISHED_45[name]) and all(0.2 < j["ratio_paper"] < 5 for j in w["jobs"])
    return f


PUBLISHED_45 = {"W1": ("LU", "MM", "Master-worker", "Jacobi", "FFT"), "W2": ("LU", "Jacobi", "Master-worker", "FFT")}


def _hetero(r: Results) -> tuple[str, bool]:
    out = {}
    for sigma in SIGMAS:
        for row in r.json(f"hetero_sigma_{sigma}")["rows"]:
            out[(row["policy"], sigma)] = row["mrt"]
    text = "; ".join(f"{p.upper()} " + " -> ".join(f"{out[(p, s)] / 1e3:.1f}k" for s in SIGMAS)
                     for p in ("ss", "dss"))
    return text + f" s (sigma {' -> '.join(map(str, SIGMAS))})", out[("ss", SIGMAS[-1])] > 1.5 * out[("ss", SIGMAS[0])]


def _gang(scenario: str) -> Callable[[Results], tuple[str, bool]]:
    def f(r: Results) -> tuple[str, bool]:
        rows = {(x["mode"], x["tcm"]): x for x in r.json("gang")[scenario]}
        att = {k: v["att"] for k, v in rows.items()}
        order = att[("enhanced", "c")] <= min(att.values()) and att[("schark", "p")] > att[("schark", "c")]
        sp, sc, ep, ec = att[("schark", "p")], att[("schark", "c")], att[("enhanced", "p")], att[("enhanced", "c")]
        return (f"ATT schark p {sp:.0f} / c {sc:.0f}, enhanced c {ec:.0f} (best); "
                f"c vs p {sp / sc:.1f}x / {ep / ec:.1f}x", order)
    return f


def _mheta(name: str, lo: float) -> Callable[[Results], tuple[str, bool]]:
    def f(r: Results) -> tuple[str, bool]:
        s = r.json(name)["summary"]
        return (f"avg {_f(s['accuracy_avg'], 3)}, min {_f(s['accuracy_min'], 3)} "
                f"({s['points']} splits, {s['configurations']} configurations)", s["accuracy_avg"] >= lo)
    return f


def _slowdown(r: Results) -> tuple[str, bool]:
    s = r.json("slowdown")["summary"]
    text = (f"best round per case within {100 * s['max_error_best_round']:.0f}% ({s['cases_within_15pct']} of "
            f"{s['cases']} cases within 15%), every round: median {100 * s['median_error']:.0f}%, worst "
            f"{100 * s['max_error']:.0f}%; measured order as predicted: {s['ordering_holds']}")
    if s.get("quick"):  # one round beside whatever else runs: a timing claim a test must not judge
        return text + " (not checked in a quick run: the timed order is the full run's claim)", True
    p = s["premises"]  # the model's premises on this host: independent CPUs, a fair share of a core
    if not (p["fair_share"] and p["independent_cpus"]):
        return (text + f" (not checked in this run: the host broke the model's premises, another CPU's load "
                f"slowed the job by {100 * p['other_cpu_slows_by']:.0f}%, fair share {p['fair_share']})"), True
    return text, s["ordering_holds"]  # the shape: measured slowdowns in the model's order


def _mheta_eval(r: Results) -> tuple[str, bool]:
    s = r.json("mheta")["summary"]
    return f"{s['eval_ms']:.2f} ms per evaluation at 8 nodes", s["eval_ms"] < 5.4


def _search(r: Results) -> tuple[str, bool]:
    s = r.json("search")["summary"]
    return (f"gap from best at 1 s: GBS {100 * s['gbs_gap_at_1s']:.1f}%, GS {100 * s['gs_gap_at_1s']:.0f}%, "
            f"SA {100 * s['sa_gap_at_1s']:.0f}%, GA {100 * s['ga_gap_at_1s']:.0f}%",
            s["gbs_gap_at_1s"] <= 0.05)  # GS's stall shows on the full set only (quick: 3 configurations)


def _dep_sweep(r: Results) -> tuple[str, bool]:
    d = r.json("dep_sweep")
    s, rows = d["summary"], d["rows"]
    big = {(x["arrivals"] == "Poisson", x["U"]): x["ratio"] for x in rows if x["class"].startswith("large")}
    small = [x["ratio"] for x in rows if x["class"].startswith("small") and x["arrivals"] == "Poisson"]
    text = (f"hyperexponential raises T_DP at every load: {s['hyper_raises_dep_T_at_every_load']}; "
            f"Poisson p_r higher at {100 * s['poisson_p_r_higher_share']:.0f}% of points; SP*/DP large jobs "
            f"(Poisson) {min(big[(True, u)] for u in (0.1, 0.2)):.2f} -> {big[(True, 0.8)]:.2f} at U=0.8, "
            f"small jobs {min(small):.2f}-{max(small):.2f}")
    return text, s["hyper_raises_dep_T_at_every_load"] and big[(True, 0.8)] > 1 and max(small) < 1


def _search_cg(r: Results) -> tuple[str, bool]:
    d = r.json("search_cg")
    s = d["summary"]
    worst = max(d["configurations"].items(), key=lambda kv: kv[1]["searches"]["GBS"]["gap"][-1])
    return (f"gap from best at 1 s: GBS {100 * s['gbs_gap_at_1s']:.0f}% (worst {worst[0]} "
            f"{100 * worst[1]['searches']['GBS']['gap'][-1]:.0f}%), GBS-B {100 * s.get('gbs_b_gap_at_1s', 0):.0f}%, "
            f"GS {100 * s['gs_gap_at_1s']:.0f}%, "
            f"SA {100 * s['sa_gap_at_1s']:.0f}%, GA {100 * s['ga_gap_at_1s']:.0f}% "
            f"({s['configurations']} configurations, {len(s['skipped'])} skipped)",
            s["sa_gap_at_1s"] < s["ga_gap_at_1s"])


def _dep_variants(r: Results) -> tuple[str, bool]:
    s = r.json("dep_variants")["summary"]
    o, t = s["order_by_mean_turnaround"], s["turnaround_over_dep"]
    text = (f"mean turnaround / DEP, costly reconfiguration: smoothing {_f(t['costly/smoothing'])}, folding "
            f"{_f(t['costly/folding'])}; cheap: folding {_f(t['cheap/folding'])}, "
            f"smoothing {_f(t['cheap/smoothing'])}; "
            f"folding reconfigures {_f(s['folding_resizes_over_dep'])}x DEP's; smoothing the smallest run-time "
            f"spread: {all(s['smoothing_smallest_run_time_sd'].values())}")
    holds = (o["costly"][0] == "smoothing" and o["cheap"].index("DEP") < o["cheap"].index("folding")
             and s["folding_resizes_over_dep"] < 1)
    return text, holds


def _none(r: Results) -> tuple[str, bool]:
    return "-", True


S1, S0, S2, S3, S4 = ("Sudarsan & Ribbens 2007", "Islam, Prodromidis & Squillante", "Lynch 1999", "Figueira & Berman",
                      "Nakazawa 2005")
ROWS = [
    Row(S1, "Fig. 3(a): resize sequence of LU 12000 under the Remap Scheduler",
        "pytest tests/test_reshape_paper_repro.py -k fig3a", "2->4->6->9->12->16->12",
        _tested("reshape-paper: 2->4->6->9->12->16->12; reshape (5% noise guard): 2->4->6->9->6", "fig3a"),
        "agrees", "the default preset's guard stops at 6 (6->9 gains 3.3%), by design"),
    Row(S1, "Table 2: processor configurations (10 rows)", "pytest tests/test_reshape_paper_repro.py -k table2",
        "10 rows", _tested("every row, walked by the policy", "table2"), "agrees",
        "7 rows follow the stated rule; LU 21000 (skips 4x4), Jacobi 8000 (skips 5, 25) and master-worker "
        "(even 4-22) list their sizes: the paper states no rule that gives them"),
    Row(S1, "Fig. 3(a): LU iteration time and redistribution cost per size", "python -m benchmarks.resize_apps",
        "T 129.6->112.5->82.3->79.6->69.9 s; redistribution 8.0->7.7->5.3->4.9 s", _fig3a_measured,
        "differs", "2 cores: more ranks share the same 2 cores, so T rises with the size; the redistribution "
        "cost is small (LU n=2560) and does not fall steadily"),
    Row(S1, "Fig. 3(b): checkpoint / ReSHAPE redistribution time per app", "python -m benchmarks.resize_apps",
        "LU 8.3, MM 4.5, Jacobi 14.5, FFT 7.9", _fig3b, "agrees in shape",
        "every ratio well above 1; sizes scaled to this machine, one host (shared memory, local disk)"),
    Row(S1, "Fig. 3(b): redistribution vs file checkpoint (library)", "python -m benchmarks.redistribution",
        "4.5-14.5x", _redistribution, "agrees in shape",
        "larger ratios: circulant moves run over shared memory, the checkpoint writes and fsyncs a file"),
    Row(S1, "Table 4 (W1): dynamic / static turnaround per job, utilization", "python -m benchmarks.workload",
        "LU 0.81, MM 0.60, Master-worker 1.00, Jacobi 0.68, FFT 0.76; utilization 39.7% -> 70.7%",
        _workload("W1"), "differs",
        "emulated jobs whose curves are the real apps' (benchmarks.calibrate_apps: 1-rank time and this machine's "
        "messaging through each app's communication model, sizes / 8), time-scaled; LU gains more than the paper's "
        "(our curve keeps falling to 20, System X's flattened on Gigabit Ethernet); FFT never finds the 4 idle "
        "processors its next size needs at its resize points; master-worker does not resize, its ratio is start-up "
        "noise of a 1.5 s job; the static utilization from Table 4's own times is 45.2%"),
    Row(S1, "Table 5 (W2): dynamic / static turnaround per job", "python -m benchmarks.workload",
        "LU 0.94, Jacobi 0.93, Master-worker 1.00, FFT 1.00", _workload("W2"), "differs",
        "LU and master-worker within 0.04, Jacobi gains more; FFT does not resize (static, as in the paper): its "
        "ratio, and master-worker's, is start-up and resize-point waiting of 3-4 s jobs, which moves by +-0.3 "
        "between runs"),
    Row(S1, "Fig. 2(a)/(b): LU time and redistribution cost per size, 8000-24000",
        "python -m benchmarks.resize_apps --fig2",
        "T falls with the size, more for larger matrices (24000: 16->20 -19.1%; 21000 sweet spot 30; 12000: "
        "2->12 -46%); redistribution cost rises with the matrix size and falls with the size", _fig2, "differs",
        "LU 1024-3072 (the paper's sizes / 8) on 2 cores: measured T rises with the size (the ranks share 2 cores) "
        "and the redistribution cost rises with it too (one host: the bytes moved do not shrink with p, more "
        "processes share the cores and the memory bus); the model on dedicated cores (calibrated constants) has "
        "the per-size structure, gains growing with n, but no sweet spot below 36: this machine's messaging is "
        "cheap beside its compute, unlike Gigabit Ethernet"),
    Row(S0, "Table 1: DEP partitions on arrivals and departures (P=8)",
        "pytest tests/test_dep_islam.py -k table1", "Table 1", _tested("every state and reconfiguration count",
                                                                            "test_table1"), "agrees"),
    Row(S0, "Figs. 11-13: DEP vs SP* by overhead and load (exponential case)",
        "pytest tests/test_models_dep_sp.py", "small overhead: DEP wins at heavy load; large: loses",
        _tested("same, from the CTMC, cross-checked by simulation", "test_models_dep_sp::"), "agrees in shape",
        "exponential arrivals and service only; the paper's equations are in its ref. [35]"),
    Row(S0, "Figs. 8-16: load sweep, Poisson and hyperexponential arrivals, ratio and p_r curves",
        "python -m benchmarks.dep_sweep", "hyperexponential raises DEP's T; Poisson gives the higher p_r; "
        "large jobs: DEP wins at heavy load; W3 (6:1): DEP loses at all loads; scalloped ratios",
        _dep_sweep, "agrees in shape",
        "model (CTMC / simulation), not the paper's testbed; class times and the hyperexponential CV (3) are our "
        "choice, the paper gives neither; at U = 0.9 the hyperexponential points are noisy"),
    Row(S0, "§2.6: folding and smoothing vs DEP (preliminary, W1)", "python -m benchmarks.dep_variants",
        "smoothing: lowest mean response and variance; DEP beats folding; folding reconfigures less",
        _dep_variants, "agrees in shape",
        "the order depends on the reconfiguration cost: costly (the paper's DS relaunched processes) gives "
        "smoothing < folding < DEP, cheap gives DEP < folding < smoothing; our simulator's malleable jobs, not W1"),
    Row(S2, "§5.1: Network 1 ordering", "pytest tests/test_hetero_lynch.py -k single_node",
        "DNS ~ DSS < SS < NS (mean response)", _tested("same ordering", "single_node_network_ordering"),
        "agrees"),
    Row(S2, "§5.2, ch. 6: never-span beats span on multi-node networks",
        "pytest tests/test_hetero_lynch.py -k never_span", "NS, DNS < SS, DSS on networks 11-13",
        _tested("same, loads 0.3-0.6", "never_span_beats_span", "spanning_more_is_worse"), "agrees"),
    Row(S2, "§5.4: spanning factor sigma 0.1 / 0.5 / 0.9 (network 13, load 0.3)",
        "reshape hetero --network 13 --policy ss --policy dss --sigma S", "little or no difference",
        _hetero, "differs", "see docs/reproduction.md, 'Spanning factor'"),
    Row(S3, "Tables 1-15, Figs. 1-3: aggregate slowdown", "pytest tests/test_models_slowdown.py",
        "15 published values", _tested("all 15 to the paper's rounding", "test_models_slowdown::"), "agrees"),
    Row(S3, "§5: model within 15% of real contended runs", "python -m benchmarks.slowdown",
        "within 15%", _slowdown, "agrees in shape",
        "2 MPI ranks on one host with real competitor processes, 3 rounds on an idle machine whose premises held "
        "(independent CPUs, a fair share): one competitor 5-19% off (uniform), 1-8% (load-dependent); with two "
        "on one core the job slowed 2.2-2.5x, not 3x (21-36% off), though a plain loop slowed 2.8x; the "
        "heterogeneous-node cases are not run live"),
    Row(S4, "Table 3.3: gang scheduling, baseline", "reshape gang --scenario baseline",
        "ATT schark p 15912 / c 3074, enhanced c 2597 (best); c vs p 5.2x / 5.4x", _gang("baseline"),
        "agrees in shape", "same ordering, ratios within 10%; the job model's constants are read from the thesis"),
    Row(S4, "Table 3.4: CN range half / twice", "reshape gang --scenario cn-half --scenario cn-twice",
        "half: enhanced c 1752 best; twice: all methods close", _gang("cn-twice"), "agrees in shape"),
    Row(S4, "Table 3.5: I/O frequency half / double", "reshape gang --scenario io-half --scenario io-double",
        "p degrades with I/O frequency; a, cP, c unchanged", _gang("io-double"), "agrees in shape"),
    Row(S4, "Fig. 6.2: MHETA accuracy, Jacobi", "python -m benchmarks.mheta", ">= 97% average",
        _mheta("mheta", 0.95), "agrees", "18 emulated 4-node configurations (thesis: 17 at 8 nodes)"),
    Row(S4, "Figs. 6.2-6.3: MHETA accuracy, CG", "python -m benchmarks.mheta --app cg",
        "CG the worst; on IO below 88% between Blk and I-C", _mheta("mheta_cg", 0.95), "differs",
        "better than the thesis: our CG is a stored 5-point operator (rows equal work) and the model and "
        "the run share one out-of-core plan; the thesis blames sparsity and its heuristic"),
    Row(S4, "§6.2: MHETA evaluation cost", "python -m benchmarks.mheta", "5.4 ms", _mheta_eval, "differs",
        "about 100x faster: a modern CPU, cached per-node plans"),
    Row(S4, "Figs. 6.5-6.6: search at 8 nodes, 1 s budget", "python -m benchmarks.search",
        "GBS, GS within 5% of best; SA, GA 7-19%", _search, "differs",
        "GBS agrees; GS stalls (the thesis's own u/a/d counterexample) on our configurations; Jacobi only"),
    Row(S4, "Fig. 6.6: search on CG at 8 nodes, 1 s budget", "python -m benchmarks.search --app cg",
        "GBS and GS at least 20% from Best (blocking); SA beats GA by at least 35%", _search_cg, "agrees in shape",
        "GBS reaches Best on most configurations and falls 26% short on HY3, where blocked time dominates; SA "
        "beats GA everywhere; GBS-B (GBS, then descent on the time with blocking) reaches Best on every one; "
        "configurations whose BLOCK split a node cannot hold are skipped"),
    Row(S4, "§4.2: GBS optimal", "pytest tests/test_shared_search.py",
        "optimal", _tested("equals the exhaustive optimum (property test)", "test_shared_search::"), "agrees"),
    Row(S4, "§6.2: MHETA accuracy, Lanczos", "python -m benchmarks.mheta --app lanczos", ">= 97% average",
        _mheta("mheta_lanczos", 0.95), "agrees",
        "our Lanczos: the CG operator (5-point, stored), 3 sections, 4 stages, in-core vectors (thesis: dense, "
        "15 sections); 4 emulated nodes"),
    Row(S4, "§6.2: MHETA accuracy with prefetching, Jacobi (12 configurations)",
        "python -m benchmarks.mheta --prefetch", "98% average", _mheta("mheta_prefetch", 0.93), "agrees in shape",
        "as accurate as the synchronous model under the same load (95.2% then); both below the thesis's on this "
        "loaded machine. The model follows the engine's prefetch (the next read overlaps computation and write-back)"),
    Row(S4, "§5.3: pipeline pattern (a wavefront: RNA's pipeline + reduction)",
        "python -m benchmarks.mheta --app wavefront", "RNA (pipeline + reduction) the best case on average",
        _mheta("mheta_wavefront", 0.93), "agrees in shape",
        "a pipelined wavefront in place of RNA; the pipeline's fill makes up much of its time and Eqs. 5.4/5.5 "
        "predict it; CPU heterogeneity only (its grid stays in core)"),
    Row(S4, "§6.2: RNA", "-", "the best case on average", _none, "not attempted",
        "the thesis describes RNA only as pseudoknot prediction with pipelined and reduction communication "
        "(no recurrence, sizes or tiles); its communication structure is the wavefront row's"),
]


def _run(name: str, argv: list[str], out: str, env: dict, log: list) -> None:
    t0 = time.perf_counter()
    res = subprocess.run([PY, *argv], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    log.append({"run": name, "seconds": round(time.perf_counter() - t0, 1), "exit": res.returncode})
    print(f"  {name}: exit {res.returncode} in {log[-1]['seconds']} s", flush=True)
    if name.startswith(("gang", "hetero")) and res.returncode == 0:
        with open(os.path.join(out, f"{name}.json"), "w") as f:
            f.write(res.stdout)
    elif res.returncode != 0 and name != "tests":
        print(res.stdout[-2000:] + res.stderr[-2000:], file=sys.stderr)


def _test_outcomes(path: str) -> dict[str, bool]:
    """``{"tests.module::test_name[...]": passed, or None if skipped}`` from pytest's JUnit XML."""
    import xml.etree.ElementTree as ET

    def ok(case) -> bool | None:
        tags = {x.tag for x in case}
        return None if "skipped" in tags else not tags & {"failure", "error"}

    return {f"{c.get('classname')}::{c.get('name')}": ok(c) for c in ET.parse(path).getroot().iter("testcase")}


CHEAP = ("gang", "hetero_sigma")  # seconds: run at every call, into the committed results too


def run_quick(out: str, only: tuple[str, ...] | None = None, leave_out: tuple[str, ...] = ()) -> Results | None:
    """Run the small forms (``only``: just those) with results into ``out``; ``leave_out``: test modules not run."""
    env = {**os.environ, "RESHAPE_RESULTS_DIR": out}
    log: list[dict] = []
    for name, argv in QUICK_RUNS.items():
        if only is not None and name not in only:
            continue
        if only is None:
            argv = [*argv, *SMALLER.get(name, [])]
        if name == "hetero_sigma":
            for s in SIGMAS:
                _run(f"hetero_sigma_{s}", [a.replace("{sigma}", str(s)) for a in argv], out, env, log)
            continue
        if name == "tests":
            argv = [a for a in argv if not any(a.endswith(f"/{m}.py") for m in leave_out)]
        _run(name, [a.replace("{out}", out) for a in argv], out, env, log)
    if only is not None:
        return None
    with open(os.path.join(out, "runs.json"), "w") as f:
        json.dump(log, f)
    return Results(out, _test_outcomes(os.path.join(out, "tests.xml")), leave_out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.reproduce", description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="run every row in small form first")
    ap.add_argument("--leave-out", action="append", default=[], metavar="MODULE",
                    help="a test module of the quick run (e.g. test_shared_search) that the caller runs "
                         "itself: not run again, its rows read 'not checked in this run'")
    a = ap.parse_args(argv)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="reshape-reproduce-") as tmp:
        if a.quick:
            res = run_quick(tmp, leave_out=tuple(a.leave_out))
        else:
            run_quick(COMMITTED, CHEAP)
            res = Results(COMMITTED)
        rows = []
        for row in ROWS:
            try:
                text, holds = row.ours(res)
            except (OSError, KeyError, ValueError) as e:
                text, holds = f"no result ({type(e).__name__}: {e})", False
            rows.append({"paper": row.paper, "item": row.item, "command": row.command, "published": row.published,
                         "ours": text, "verdict": row.verdict, "holds": holds, "why": row.why})
    bad = [r for r in rows if not r["holds"]]
    for r in rows:
        print(f"{'ok ' if r['holds'] else 'BAD'} {r['paper']:<17} {r['item'][:60]:<60} {r['verdict']:<15} {r['ours']}")
    counts = {v: sum(r["verdict"] == v for r in rows) for v in ("agrees", "agrees in shape", "differs",
                                                                 "not attempted")}
    summary = {**counts, "rows": len(rows), "verdicts_that_no_longer_hold": [r["item"] for r in bad],
               "quick": a.quick, "seconds": round(time.perf_counter() - t0, 1)}
    print(json.dumps(summary))
    if not a.quick:
        os.makedirs(COMMITTED, exist_ok=True)
        with open(os.path.join(COMMITTED, "reproduce.json"), "w") as f:
            json.dump({"rows": rows, "summary": summary}, f, indent=1)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
