"""Resizing the five applications: Sudarsan & Ribbens 2007 Fig. 3(a) and Fig. 3(b) at this machine's scale.

Part (a): LU grows along the nearly-square grid sizes 2 -> 4 -> 6 -> 9 -> 12
(one step per iteration, as ReSHAPE's profiler does); the table gives each
size's iteration time ``T``, ``dT`` (improvement over the previous size) and
the cost of the redistribution into that size. On this 2-core machine more
ranks do not make an iteration faster (they share two cores), so ``dT`` is
negative past 2 ranks; what transfers from the paper is the redistribution
cost and its trend.

Part (b): each application runs the same resize plan twice, once with the
circulant redistribution (``RESHAPE_REDIST_METHOD=circulant``, ReSHAPE) and
once with checkpoint/restart through one node (``checkpoint``: gather, HDF5
write, fsync, read back, scatter), and the total redistribution seconds of
the two runs are compared: ``checkpoint_over_reshape`` per application (paper:
LU 8.3, MM 4.5, Jacobi 14.5, FFT 7.9). Master-worker has no distributed data,
so its ratio is undefined (``null``), as the paper's "no difference".

``expand_latency_s`` is spawn + merge + redistribution of the 2 -> 4
expansion of the largest LU run: the median of part (a)'s expansion and four
more runs that only expand 2 -> 4 (one in ``--quick``), since one spawn on a
shared 2-core machine varies by a factor of two; ``expand_latency_max_s`` is
the worst of them. The table beside it splits each expansion into its parts
(``reshape.runtime.EXPAND_PARTS``): the spawn call, the merge, the new
processes' start-up (interpreter, imports, ``MPI_Init``), the hand-over of the
job's state and the data motion. ``reexpand_latency_s`` is the second
2 -> 4 of a 2 -> 4 -> 2 -> 4 run with the ranks the shrink parked called back
(``RESHAPE_REUSE=1``, :mod:`reshape.runtime.parking`), beside the same expansion
spawned anew (``reexpand_spawn_over_reuse``); ``reexpand_two_pools_latency_s``
the 2 -> 4 of 2 -> 4 -> 3 -> 2 -> 4, calling back the ranks of both shrinks
(two pools, one call-back step each); ``standby_expand_latency_s``
the first 2 -> 4 of a run started with two standby ranks
(``RESHAPE_STANDBY=2``: a warm pool), and ``expand_spawn_over_standby`` the
spawning first expansion's median over it.

The background part runs Jacobi and LU resizing once after three
iterations, blocking and with ``RESHAPE_BACKGROUND=1``, and compares the
resize's overhead (the resizing iterations minus normal ones): expansions
1 -> 2 (the new rank has a free core) and 2 -> 4 (it has not), and the shrink
2 -> 1 (``background_shrink_overhead_ratio``). The 1-minute load average at the
start and the end says how busy the shared machine was.

Run: ``python -m benchmarks.resize_apps`` (about 5 minutes) or ``--quick``
(under 2). Writes ``benchmarks/results/resize_apps.json``.

``--fig2`` runs only Sudarsan & Ribbens 2007 Fig. 2(a)/(b) instead (:func:`fig2`, about 3
minutes; ``--quick`` under 1) and writes ``resize_apps_fig2.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

from benchmarks._common import run_app, table, write_result
from reshape.joblink import jobenv as E

PAPER = {"lu": 8.3, "mm": 4.5, "jacobi": 14.5, "fft2d": 7.9}
TARGET_RATIO = 4.5
TARGET_LATENCY = 0.5

# (full, quick) problem options per application; every size divides n where the app requires it
SIZES = {
    "lu": (["--n", "2560", "--nb", "64"], ["--n", "768", "--nb", "64"]),
    "mm": (["--n", "2048", "--nb", "64"], ["--n", "768", "--nb", "64"]),
    "jacobi": (["--n", "2400", "--sweeps", "5"], ["--n", "1200", "--sweeps", "5"]),
    "fft2d": (["--n", "1536"], ["--n", "768"]),
    "master_worker": (["--units", "2000", "--unit-us", "50"], ["--units", "500", "--unit-us", "50"]),
}
ARRAY_BYTES = {  # registered data moved at each resize
    "lu": lambda n: 2 * n * n * 8, "mm": lambda n: 3 * n * n * 8, "jacobi": lambda n: (n * n + 2 * n) * 8,
    "fft2d": lambda n: n * n * 16, "master_worker": lambda n: 0,
}


def fig3a(opts: list[str], sizes: list[int]) -> tuple[list[dict], dict]:
    plan = ",".join(map(str, sizes))
    res = run_app("lu", sizes[0], plan, len(sizes), opts, "circulant")
    rows, prev = [], None
    into = {0: 0.0}
    for k, r in enumerate(res["rows"]):
        into[k + 1] = r["redist_seconds"]
    for k, r in enumerate(res["rows"]):
        t = r["iter_time"]
        rows.append({"procs": r["procs"], "T": t, "dT": None if prev is None else prev - t,
                     "redist": into[k] if k else 0.0})
        prev = t
    return rows, res


def fig3b(quick: bool, plan: str, start: int, iters: int, repeat: int) -> list[dict]:
    out = []
    for app, (full, small) in SIZES.items():
        opts = small if quick else full
        n = int(opts[1])
        tot = {"circulant": [], "checkpoint": []}
        iter_time = {"circulant": [], "checkpoint": []}
        for _ in range(repeat):
            for method in ("circulant", "checkpoint"):
                res = run_app(app, start, plan, iters, opts, method)
                tot[method].append(res["redist_total"])
                iter_time[method].append(sum(r["iter_time"] for r in res["rows"]))
        c, k = statistics.median(tot["circulant"]), statistics.median(tot["checkpoint"])
        ratio = k / c if ARRAY_BYTES[app](n) and c > 0 else None
        out.append({"app": app, "n": n, "MB": ARRAY_BYTES[app](n) / 1e6, "compute_s": statistics.median(
            iter_time["circulant"]), "reshape_s": c, "checkpoint_s": k, "ratio": ratio,
            "paper": PAPER.get(app), "runs": tot})
    return out


# Background vs blocking resize: iterations long enough to hide a spawn behind (0.6-1 s)
BACKGROUND_APPS = {
    "jacobi": (["--n", "2400", "--sweeps", "200"], ["--n", "1200", "--sweeps", "600"]),
    "lu": (["--n", "2048", "--nb", "64"], ["--n", "1536", "--nb", "64"]),
}
# (plan, start): 1 -> 2 leaves the new rank a free core, as new ranks on other nodes have on a cluster;
# 2 -> 4 on this 2-core machine starts the new ranks on the cores the job computes on; 2 -> 1 is a shrink
# (RESHAPE_ALLOW_NEW_SIZES: the job never ran on 1): the retiring rank sends its blocks while both compute.
BACKGROUND_PLANS = {"free core": ("1,2", 1), "no free core": ("2,4", 2), "shrink": ("2,1", 2)}
TARGET_BACKGROUND = 1.2
RESIZES = ("expand", "expanding", "shrink", "shrinking")


def overhead(rows: list[dict]) -> tuple[float, float, int]:
    """``(overhead s, normal iteration s, resize iteration)`` of one run with one expansion or shrink.

    The normal iteration is the median of the iterations before the resize.
    A blocking resize's overhead is its iteration's time plus its resize()
    call minus a normal iteration; a background one spans two iterations (the
    one whose resize point starts it and the one it overlaps, whose resize
    point switches), so both are charged, each minus a normal iteration.
    """
    k = next(i for i, r in enumerate(rows) if r["action"] in RESIZES)
    normal = statistics.median(r["iter_time"] for r in rows[:k]) if k else rows[0]["iter_time"]
    span = rows[k : k + 2] if rows[k]["action"].endswith("ing") else rows[k : k + 1]
    return sum(r["iter_time"] + r["resize_seconds"] - normal for r in span), normal, k


def background_vs_blocking(quick: bool, repeat: int) -> tuple[list[dict], dict]:
    """Each app resizes once after three iterations, blocking and in the background (RESHAPE_BACKGROUND)."""
    out: list[dict] = []
    ratios: dict[str, dict[str, float]] = {}
    for where, (plan, start) in BACKGROUND_PLANS.items():
        for app, (full, small) in BACKGROUND_APPS.items():
            opts = small if quick else full
            got: dict[str, list[tuple[float, float]]] = {"blocking": [], "background": []}
            for _ in range(repeat):
                for mode in ("blocking", "background"):
                    env = {E.PLAN_EVERY: "3", E.BACKGROUND: "1" if mode == "background" else "0",
                           E.ALLOW_NEW_SIZES: "1"}
                    ov, normal, _ = overhead(run_app(app, start, plan, 6, opts, "circulant", env=env)["rows"])
                    got[mode].append((ov, normal))
            blk = statistics.median(o for o, _ in got["blocking"])
            bg = statistics.median(o for o, _ in got["background"])
            # an overhead below 2% of an iteration is within the noise: the ratio's denominator is floored there
            floor = 0.02 * statistics.median(n for _, n in got["background"])
            # and when blocking's own overhead is within it (or negative), there is nothing to hide: no ratio
            ratios.setdefault(where, {})[app] = blk / max(bg, floor) if blk > floor else None
            out.append({"resize": plan.replace(",", "->"), "cores": where, "app": app, "n": int(opts[1]),
                        "normal_s": statistics.median(n for _, n in got["blocking"]),
                        "blocking_s": blk, "blocking_max_s": max(o for o, _ in got["blocking"]),
                        "background_s": bg, "background_max_s": max(o for o, _ in got["background"]),
                        "ratio": ratios[where][app], "runs": got})
    return out, ratios


def _least(ratios: dict) -> float | None:
    """The smallest ratio, None when the part was skipped."""
    vals = [v for v in ratios.values() if v is not None]
    return min(vals) if vals else None


def reexpansion(opts: list[str], repeat: int, first_spawned: float) -> tuple[list[dict], dict]:
    """LU 2 -> 4 -> 2 -> 4: the second expansion spawned anew, or calling back the ranks parked by the shrink;
    LU 2 -> 4 -> 3 -> 2 -> 4: the last expansion calling back the ranks of two shrinks (two pools); and a
    first 2 -> 4 calling back two standby ranks started with the job (``RESHAPE_STANDBY=2``), against
    ``first_spawned``, the median first 2 -> 4 that spawns. Each call-back is checked to have spawned nothing."""
    got: dict[str, list[float]] = {"spawn": [], "reuse": [], "pools": [], "standby": []}
    runs = {"spawn": ("2,4,2,4", 4, {E.REUSE: "0"}, 1), "reuse": ("2,4,2,4", 4, {E.REUSE: "1"}, 1),
            "pools": ("2,4,3,2,4", 5, {E.REUSE: "1", E.ALLOW_NEW_SIZES: "1"}, 1),
            "standby": ("2,4", 1, {E.REUSE: "1", E.STANDBY: "2"}, 0)}
    for _ in range(repeat):
        for mode, (plan, iters, env, k) in runs.items():
            rows = run_app("lu", 2, plan, iters, opts, "circulant", env=env)["rows"]
            grow = [r for r in rows if r["action"] == "expand"][k]
            if grow["called_back"] != (0 if mode == "spawn" else 2):
                raise SystemExit(f"resize_apps: {mode} 2 -> 4 called back {grow['called_back']} ranks")
            got[mode].append(grow["spawn_seconds"] + grow["redist_seconds"])
    label = {"spawn": "second, spawned", "reuse": "second, parked ranks", "pools": "after 4 -> 3 -> 2, two pools",
             "standby": "first, standby ranks"}
    rows = [{"mode": label[m], "median_s": statistics.median(v), "max_s": max(v), "runs": v}
            for m, v in got.items()]
    return rows, {"reexpand_latency_s": statistics.median(got["reuse"]),
                  "reexpand_latency_max_s": max(got["reuse"]),
                  "reexpand_spawn_over_reuse": statistics.median(got["spawn"]) / statistics.median(got["reuse"]),
                  "reexpand_two_pools_latency_s": statistics.median(got["pools"]),
                  "reexpand_two_pools_latency_max_s": max(got["pools"]),
                  "standby_expand_latency_s": statistics.median(got["standby"]),
                  "standby_expand_latency_max_s": max(got["standby"]),
                  "expand_spawn_over_standby": first_spawned / statistics.median(got["standby"])}


# Fig. 2: LU at the paper's 8000-24000 divided by about 8; one iteration per size after a first (warm-up) at 2
FIG2_N = ((1024, 1536, 2048, 2560, 3072), (768, 1280, 1792))
FIG2_SIZES = ((2, 2, 4, 6, 9), (2, 2, 4, 6))
FIG2_MODEL_SIZES = (2, 4, 6, 9, 12, 16, 20, 25, 30, 36)  # the nearly-square grids up to W1's 36 processors
#: what the paper gives in numbers: Fig. 3(a) is Fig. 2's 12000 curve; the text (§4.1.1, §4.1.2) the rest
FIG2_PAPER = {"12000": {"procs": [2, 4, 6, 9, 12], "T": [129.63, 112.52, 82.31, 79.61, 69.85],
                        "redist": [8.00, 7.74, 5.25, 4.86]},
              "text": "24000: 16 -> 20 improves T by 19.1%; 21000's sweet spot is 30; small sizes gain little; "
                      "redistribution cost rises with the matrix size and falls with the processor count"}


def fig2(quick: bool) -> int:
    """Sudarsan & Ribbens 2007 Fig. 2(a)/(b): LU iteration time and redistribution cost per size, for several
    matrix sizes.

    Each ``n`` runs once growing 2 -> 2 -> 4 -> 6 -> 9 (``--quick``: to 6), one
    iteration per size (the first warms up). On 2 cores the measured ``T`` cannot
    fall past 2 ranks; beside it is the model of
    ``scheduler.lab.emumodel.app_iter_time``: the same LU on dedicated cores,
    from ``t1`` (a 1-rank run of 3 iterations, the fastest after the first) and
    the committed calibration's messaging constants. The redistribution cost into each size is measured as in the paper.
    Writes ``resize_apps_fig2.json`` (summary: per ``n`` the cost of the first
    expansion 2 -> 4, and whether it rises with ``n`` and falls with the size).
    """
    from itertools import pairwise

    from benchmarks.calibrate_apps import load
    from scheduler.lab.emumodel import app_iter_time

    t0 = time.perf_counter()
    cal = load()
    alpha, beta = cal["alpha_s"], cal["beta_s_per_byte"]
    ns, sizes = FIG2_N[quick], list(FIG2_SIZES[quick])
    load0 = os.getloadavg()[0]
    curves = []
    for n in ns:
        opts = ["--n", str(n), "--nb", "64"]
        t1 = min(r["iter_time"] for r in run_app("lu", 1, "", 3, opts, "circulant")["rows"][1:])
        rows = run_app("lu", sizes[0], ",".join(map(str, sizes)), len(sizes), opts, "circulant")["rows"]
        pts = [{"procs": r["procs"], "T": r["iter_time"], "redist_into": rows[k - 1]["redist_seconds"],
                "T_model": app_iter_time("lu", n, r["procs"], t1, alpha, beta, nb=64)}
               for k, r in enumerate(rows) if k >= 1]
        model = {p: app_iter_time("lu", n, p, t1, alpha, beta, nb=64) for p in FIG2_MODEL_SIZES}
        curves.append({"n": n, "t1": t1, "points": pts, "model": model, "model_sweet_spot": min(model, key=model.get)})
        print(f"n {n}: T " + " -> ".join(f"{p['procs']}:{p['T']:.2f}" for p in pts) + " s; redistribution into "
              + " -> ".join(f"{p['procs']}:{p['redist_into']:.3f}" for p in pts[1:]) + " s; model (dedicated) "
              + " -> ".join(f"{p['T_model']:.2f}" for p in pts) + " s", flush=True)
    first = {c["n"]: c["points"][1]["redist_into"] for c in curves}  # 2 -> 4
    rises = all(first[a] < first[b] for a, b in pairwise(ns))
    falls = {c["n"]: all(a["redist_into"] >= b["redist_into"] for a, b in pairwise(c["points"][1:]))
             for c in curves}
    slow = {c["n"]: c["points"][-1]["T"] / c["points"][0]["T"] for c in curves}  # T(max) / T(2) on 2 cores
    gain = {c["n"]: c["points"][0]["T_model"] / c["points"][-1]["T_model"] for c in curves}  # model T(2) / T(max)
    summary = {"model_sweet_spot": {c["n"]: c["model_sweet_spot"] for c in curves},
               "redist_2_to_4_s": first, "redist_rises_with_n": rises, "redist_falls_with_size": falls,
               "measured_T_last_over_T2": slow, "model_T2_over_T_last": gain,
               "load_average": [load0, os.getloadavg()[0]]}
    path = write_result("resize_apps_fig2", {"quick": quick, "seconds": time.perf_counter() - t0, "sizes": sizes,
                                            "nb": 64, "alpha_s": alpha, "beta_s_per_byte": beta,
                                            "paper": FIG2_PAPER, "curves": curves, "summary": summary})
    print(f"redistribution 2 -> 4 rises with n: {rises}; falls with the size per n: {falls}")
    print(f"measured T({sizes[-1]}) / T(2) on 2 cores: " + ", ".join(f"{n} {v:.2f}" for n, v in slow.items()))
    print(f"model T(2) / T({sizes[-1]}) on dedicated cores: " + ", ".join(f"{n} {v:.2f}" for n, v in gain.items()))
    print("model sweet spot (nearly-square sizes to 36): " + ", ".join(
        f"{n} {v}" for n, v in summary["model_sweet_spot"].items()))
    print(f"load average {load0:.2f} -> {summary['load_average'][1]:.2f}; wrote {path}")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.resize_apps", description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="small problem sizes (under 2 minutes)")
    ap.add_argument("--repeat", type=int, default=None, help="runs per method in part (b) (default 2, quick 1)")
    ap.add_argument("--no-background", action="store_true",
                    help="skip the background-vs-blocking part (benchmarks.reproduce --quick needs Fig. 3 only)")
    ap.add_argument("--fig2", action="store_true", help="only Sudarsan & Ribbens 2007 Fig. 2: LU per matrix size")
    args = ap.parse_args(argv)
    if args.fig2:
        return fig2(args.quick)
    repeat = args.repeat or (1 if args.quick else 2)
    t0 = time.perf_counter()
    load = [os.getloadavg()[0]]  # how busy the (shared) machine was: 1-minute load at the start and the end

    sizes_a = [2, 4, 6, 9] if args.quick else [2, 4, 6, 9, 12]
    lu_opts = SIZES["lu"][1 if args.quick else 0]
    rows_a, raw_a = fig3a(lu_opts, sizes_a)
    first = raw_a["rows"][0]
    parts = [first]
    for _ in range(1 if args.quick else 4):  # more 2 -> 4 expansions of the same LU: the median is robust
        parts.append(run_app("lu", 2, "2,4", 1, lu_opts, "circulant")["rows"][0])
    samples = [(r["spawn_seconds"], r["redist_seconds"]) for r in parts]
    spawn_s = statistics.median(a for a, _ in samples)
    redist_s = statistics.median(b for _, b in samples)
    latency = statistics.median(a + b for a, b in samples)
    latency_max = max(a + b for a, b in samples)
    latency_min = min(a + b for a, b in samples)
    part_cols = [("spawn_call_seconds", "spawn call"), ("merge_seconds", "merge"),
                 ("startup_seconds", "new rank start-up"), ("handover_seconds", "hand-over"),
                 ("redist_seconds", "redistribution")]
    part_rows = [{"run": k, **{c: r.get(c, 0.0) for c, _ in part_cols},
                  "total": r["spawn_seconds"] + r["redist_seconds"]} for k, r in enumerate(parts)]
    print(f"Fig. 3(a): LU n={lu_opts[1]} nb={lu_opts[3]}, growing {' -> '.join(map(str, sizes_a))} "
          f"(circulant redistribution; 2 cores, so more ranks share the same CPUs)")
    print(table(rows_a, [("procs", "procs", "d"), ("T", "T (s)", ".3f"), ("dT", "dT (s)", "+.3f"),
                         ("redist", "redistribution (s)", ".4f")]))
    print(f"expand latency 2 -> 4, median of {len(samples)} expansions: spawn + merge {spawn_s:.3f} s, "
          f"redistribution {redist_s:.3f} s, total {latency:.3f} s, best {latency_min:.3f} s, "
          f"worst {latency_max:.3f} s "
          f"(target < {TARGET_LATENCY})")
    print(table(part_rows, [("run", "run", "d"), *((c, h + " (s)", ".3f") for c, h in part_cols),
                            ("total", "total (s)", ".3f")]))
    print("(start-up overlaps the spawn call and the merge; hand-over is part of the redistribution)\n")

    rows_re, re_summary = reexpansion(lu_opts, 1 if args.quick else 3, latency)
    print("re-expansion 2 -> 4 after a shrink 4 -> 2 (LU): spawned anew vs the parked ranks called back "
          "(RESHAPE_REUSE=1); after 4 -> 3 -> 2, the ranks of both shrinks called back; "
          "a first 2 -> 4 calling back standby ranks started with the job "
          "(RESHAPE_STANDBY=2); spawn/call-back + merge + redistribution")
    print(table(rows_re, [("mode", "2 -> 4", "s"), ("median_s", "median (s)", ".3f"),
                          ("max_s", "worst (s)", ".3f")]))
    print(f"spawn / reuse: {re_summary['reexpand_spawn_over_reuse']:.1f}x; first expansion, spawn / standby: "
          f"{re_summary['expand_spawn_over_standby']:.1f}x\n")

    plan_b, start_b, iters_b = "2,4,6,4", 2, 4
    rows_b = fig3b(args.quick, plan_b, start_b, iters_b, repeat)
    print(f"Fig. 3(b): total redistribution time over the plan {plan_b.replace(',', ' -> ')}, "
          f"circulant (ReSHAPE) vs checkpoint/restart, median of {repeat} run(s) each")
    print(table(rows_b, [("app", "app", "s"), ("n", "n", "d"), ("MB", "data MB", ".1f"),
                         ("compute_s", "compute (s)", ".2f"), ("reshape_s", "ReSHAPE (s)", ".4f"),
                         ("checkpoint_s", "checkpoint (s)", ".4f"), ("ratio", "ckpt/ReSHAPE", ".1f"),
                         ("paper", "paper", ".1f")]))

    if args.no_background:
        rows_bg, bg_ratios = [], {w: {"-": None} for w in BACKGROUND_PLANS}
    else:
        rows_bg, bg_ratios = background_vs_blocking(args.quick, repeat + 1)
    print(f"\nBackground vs blocking resize after three iterations: overhead = the resizing "
          f"iteration(s) minus normal ones, median of {repeat + 1} runs (target blocking/background >= "
          f"{TARGET_BACKGROUND}; an overhead below 2% of an iteration counts as 2%: the noise; "
          f"no ratio where blocking's own overhead is below that)")
    print(table(rows_bg, [("resize", "resize", "s"), ("cores", "case", "s"), ("app", "app", "s"),
                          ("n", "n", "d"), ("normal_s", "iteration (s)", ".3f"),
                          ("blocking_s", "blocking (s)", ".3f"), ("blocking_max_s", "max", ".3f"),
                          ("background_s", "background (s)", ".3f"), ("background_max_s", "max", ".3f"),
                          ("ratio", "blocking/bg", ".2f")]))

    ratios = {r["app"]: r["ratio"] for r in rows_b}
    met = {a: (v is not None and v >= TARGET_RATIO) for a, v in ratios.items() if a in PAPER}
    summary = {
        "checkpoint_over_reshape": ratios,
        "expand_latency_s": latency,
        "expand_latency_max_s": latency_max,
        "expand_latency_min_s": latency_min,
        **re_summary,
        "expand_parts_median_s": {c: statistics.median(r[c] for r in part_rows) for c, _ in part_cols},
        "background_overhead_ratio": _least(bg_ratios["free core"]),
        "background_overhead_ratio_no_free_core": _least(bg_ratios["no free core"]),
        "background_shrink_overhead_ratio": _least(bg_ratios["shrink"]),
        "background_overhead_ratio_per_app": bg_ratios,
        "expand_latency_samples_s": [{"spawn_merge": a, "redistribute": b} for a, b in samples],
        "paper_checkpoint_over_reshape": PAPER,
        "targets": {"checkpoint_over_reshape": TARGET_RATIO, "expand_latency_s": TARGET_LATENCY,
                    "background_overhead_ratio": TARGET_BACKGROUND},
        "met": {"checkpoint_over_reshape": met, "expand_latency_s": latency < TARGET_LATENCY,
                "background_overhead_ratio": (_least(bg_ratios["free core"]) or 0) >= TARGET_BACKGROUND},
        "notes": "master_worker moves no arrays, so its ratio is undefined (null).",
    }
    load.append(os.getloadavg()[0])
    summary["load_average_1min"] = load
    path = write_result("resize_apps", {
        "quick": args.quick, "seconds": time.perf_counter() - t0,
        "fig3a": {"lu": lu_opts, "rows": rows_a, "raw": raw_a},
        "fig3b": {"plan": plan_b, "start": start_b, "iters": iters_b, "repeat": repeat, "rows": rows_b},
        "background": {"plans": BACKGROUND_PLANS, "every": 3, "rows": rows_bg},
        "reexpansion": rows_re,
        "summary": summary,
    })
    print(f"\nsummary: {json.dumps(summary['checkpoint_over_reshape'])}, expand_latency_s {latency:.3f}; "
          f"targets met: {summary['met']}")
    print(f"wrote {path} in {time.perf_counter() - t0:.0f} s (1-minute load average {load[0]:.1f} at the start, "
          f"{load[1]:.1f} at the end, on {os.cpu_count()} CPUs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
