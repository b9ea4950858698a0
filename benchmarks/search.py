"""GBS / GBS-B / GS / GA / SA at 8 nodes with a 1 s budget (Nakazawa 2005 §6.3, Figs. 6.5-6.6).

For each emulated 8-node configuration (DC, IO, HY1, HY2, HY3 and random
hybrids), one ``mpiexec -n 8`` run of an out-of-core application: instrument one
BLOCK iteration, build MHETA, run each search for 1 s from a random start
(GA: 100 random members), sample its best-so-far predicted iteration time
every 50 ms, and compare with *Best*: the lowest predicted time found by any
search, by GBS run to completion and by a 5 s GA/SA run. Then really run the
chosen distributions, BLOCK and the sweep's anchors and report measured
times, predicted-vs-measured, and the best/worst measured spread.

GBS optimises the time without blocking (the thesis's GBS); GBS-B continues
from its split by descent on the predicted time with blocking
(``reshape.mheta.search.descend``), which is what every search is scored on.

``python -m benchmarks.search [--quick] [--app jacobi|cg|lanczos]`` writes ``benchmarks/results/search.json``
(``search_cg.json``, ``search_lanczos.json``: their small memories keep the in-core vectors as in
``benchmarks.mheta``; a configuration whose BLOCK split a node cannot hold is
skipped, saying why, and distributions beyond a node's limit are not run)
with ``summary.gbs_gap_at_1s`` (mean fractional distance of GBS from Best at
1 s) and ``summary.best_worst_spread``. The same-run baselines are GA and SA
(and BLOCK for the measured times).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
from pathlib import Path

from benchmarks.mheta import (
    APPS,
    BASE,
    BIG,
    FAST_DISK,
    RESULTS,
    ROOT,
    SLOW_DISK,
    _app_class,
    _structure,
    infeasible,
    small_memory,
)

SAMPLES = [0.05 * k for k in range(1, 21)]
SEARCHES = ("GBS", "GBS-B", "GS", "GA", "SA")


def _node(**kw) -> dict:
    return {**BASE, **kw}


def configurations(small: int, seed: int = 11) -> dict[str, list[dict]]:
    """Named 8-node clusters after Tables 6.1-6.2, plus random hybrids."""
    s = small
    cfg = {
        "DC": [_node(cpu=0.5), _node(cpu=0.6)] + [_node() for _ in range(4)]
        + [_node(cpu=1.6), _node(cpu=1.8)],
        "IO": [_node(memory=s, **SLOW_DISK) for _ in range(4)] + [_node() for _ in range(4)],
        "HY1": [_node(cpu=c) for c in (0.5, 0.8, 1.3, 1.8)]
        + [_node(memory=s, **FAST_DISK) for _ in range(4)],
        "HY2": [_node(cpu=c, memory=s) for c in (0.5, 0.8, 1.3, 1.8)]
        + [_node(memory=s, **SLOW_DISK) for _ in range(2)] + [_node(memory=BIG)] * 2,
        "HY3": [_node(cpu=0.5, memory=s, **SLOW_DISK), _node(cpu=0.7, memory=s),
                _node(cpu=1.4, memory=s, read_bw=8e6, write_bw=8e6, seek=4e-3),
                _node(cpu=1.8), _node(cpu=0.8), _node(cpu=1.2), _node(), _node()],
    }
    rng = random.Random(seed)
    for k in range(3):
        nodes = []
        for _ in range(8):
            kw: dict = {"cpu": rng.choice([0.5, 0.75, 1.0, 1.5, 2.0])}
            if rng.random() < 0.5:
                kw["memory"] = rng.choice([s // 2, s, 2 * s])
                kw.update(rng.choice([SLOW_DISK, {}, FAST_DISK]))
            nodes.append(_node(**kw))
        cfg[f"random-{k}"] = nodes
    return cfg


def _searches(model, p: int, s: int, budget: float, seed: int) -> dict[str, dict]:
    import functools

    from reshape.mheta.search import ga, gbs, gs, sa

    out = {}
    fns = {"GBS": gbs, "GBS-B": functools.partial(gbs, finish=True), "GS": gs, "GA": ga, "SA": sa}
    for name in SEARCHES:
        r = fns[name](model.node_cost, p, s, objective=model.predict, rng=random.Random(seed),
                      budget=budget, min_rows=1)
        out[name] = {"split": list(r.split), "value": r.value, "evaluations": r.evaluations,
                     "certified": r.certified,
                     "samples": [r.best_at(t) for t in SAMPLES]}
    return out


def worker(cfg_path: str, out_path: str) -> int:
    """Rank program: instrument, search (rank 0), then measure the chosen distributions."""
    from mpi4py import MPI

    from reshape.mheta.cluster import Cluster
    from reshape.mheta.distribute import (
        balanced_split,
        in_core_balanced_split,
        in_core_capacity,
        in_core_split,
    )
    from reshape.mheta.model import Mheta
    from reshape.mheta.ooc import remove_tree, scratch_dir
    from reshape.mheta.search import ga, gbs, sa
    from reshape.mheta.structure import max_resident_rows
    from reshape.mpiutil import barrier
    from reshape.redistribution.layout import even_counts
    from reshape.runtime.watchdog import fail_together

    cfg = json.loads(Path(cfg_path).read_text())
    comm = MPI.COMM_WORLD
    cluster = Cluster.from_dict(cfg["cluster"])
    rows, cols, iters = cfg["rows"], cfg["cols"], cfg["iters"]
    workdir = comm.bcast(scratch_dir() if comm.rank == 0 else None)
    res: dict = {}
    with fail_together(comm.rank, cleanup=lambda: remove_tree(workdir)):
        app = _app_class(cfg.get("app", "jacobi"))(comm, cluster, rows, cols, workdir)
        blk = even_counts(rows, comm.size)
        app.distribute(blk)
        prof = app.instrument()
        model = Mheta(app.app, prof)
        p = comm.size
        if comm.rank == 0:
            res["searches"] = _searches(model, p, rows, cfg["budget"], cfg["seed"])
            full = gbs(model.node_cost, p, rows, objective=model.predict, min_rows=1,
                       rng=random.Random(cfg["seed"]))
            long = [fn(model.node_cost, p, rows, objective=model.predict, min_rows=1,
                       rng=random.Random(cfg["seed"] + 1), budget=cfg["long"]) for fn in (ga, sa)]
            cands = [full, *long]
            best = min(cands, key=lambda r: r.value)
            best_val = min(best.value, *(v["value"] for v in res["searches"].values()))
            res["best"] = {"value": best_val, "split": list(best.split),
                           "gbs_complete": full.value, "gbs_complete_seconds": full.seconds}
            caps = [in_core_capacity(app.app, n.memory) for n in cluster.nodes]
            cpus = [n.cpu for n in cluster.nodes]
            named = {"BLOCK": blk, "I-C": in_core_split(rows, caps),
                     "I-C/Bal": in_core_balanced_split(rows, caps, cpus),
                     "Bal": balanced_split(rows, cpus),
                     **{k: v["split"] for k, v in res["searches"].items()}}
            hold = [max_resident_rows(app.app, n.memory) for n in cluster.nodes]
            dists = {}
            for k, v in named.items():
                if all(x <= h for x, h in zip(v, hold, strict=True)):  # a node cannot run more
                    dists.setdefault(tuple(v), k)
        else:
            dists = None
        dists = comm.bcast(dists)
        measured = {}
        for split, name in dists.items():
            app.distribute(list(split))
            t = statistics.median(app.timed(iters + 1)[1:])
            measured[name] = {"split": list(split), "measured": t,
                              "predicted": model.predict(list(split))}
    app.close()
    barrier(comm)
    if comm.rank == 0:
        remove_tree(workdir)
    if comm.rank == 0:
        res["measured"] = measured
        Path(out_path).write_text(json.dumps(res))
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.search", description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="3 configurations")
    ap.add_argument("--budget", type=float, default=1.0, help="search budget, seconds")
    ap.add_argument("--app", default="jacobi", choices=sorted(APPS))
    ap.add_argument("--worker", nargs=2, metavar=("CONFIG", "OUT"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        return worker(*args.worker)
    from reshape.joblink.launch import mpirun

    rows, cols = 512, 512
    app_structure = _structure(args.app)(rows, cols)
    # Jacobi: 24 rows of the grid; CG, Lanczos: their vectors of 1.5x BLOCK's rows and 12 matrix rows
    small = 24 * 2 * cols * 8 if args.app == "jacobi" else small_memory(app_structure, rows, 8)
    configs = configurations(small)
    skipped = {}
    names = ["DC", "IO", "HY1"] if args.quick else list(configs)
    results = {}
    hdr = (f"{'config':<10}" + "".join(f"{a + '@' + t:>11}" for a in SEARCHES
                                       for t in ("50ms", "1s"))
           + f"{'spread':>8}{'GBS/BLK':>9}")
    print("gap from Best (predicted), measured best/worst spread, measured BLOCK/GBS\n" + hdr)
    with tempfile.TemporaryDirectory(prefix="bench-search-") as tmp:
        for k, name in enumerate(names):
            why = infeasible(app_structure, configs[name], rows)
            if why:
                skipped[name] = why
                print(f"{name:<10} skipped: {why}", flush=True)
                continue
            cfg = {"app": args.app, "rows": rows, "cols": cols, "iters": 3, "budget": args.budget, "seed": 100 + k,
                   "long": 2.0 if args.quick else 5.0,
                   "cluster": {"name": name, "element_time": 3e-6, "nodes": configs[name]}}
            cpath, opath = os.path.join(tmp, f"{name}.json"), os.path.join(tmp, f"{name}.out")
            Path(cpath).write_text(json.dumps(cfg))
            mpirun(8, ["-m", "benchmarks.search", "--worker", cpath, opath], timeout=900, cwd=ROOT)
            r = json.loads(Path(opath).read_text())
            best = r["best"]["value"]
            for v in r["searches"].values():
                v["gap"] = [s / best - 1.0 for s in v["samples"]]
            meas = [m["measured"] for m in r["measured"].values()]
            r["spread"] = max(meas) / min(meas)
            gbs_split = tuple(r["searches"]["GBS"]["split"])
            gbs_meas = next((m["measured"] for m in r["measured"].values()
                             if tuple(m["split"]) == gbs_split), None)
            r["block_over_gbs_measured"] = r["measured"]["BLOCK"]["measured"] / gbs_meas if gbs_meas else None
            results[name] = r
            row = f"{name:<10}"
            for a in SEARCHES:
                g = r["searches"][a]["gap"]
                row += f"{g[0]:>11.3f}{g[-1]:>11.3f}"
            ratio = r["block_over_gbs_measured"]
            print(row + f"{r['spread']:>8.2f}{'-' if ratio is None else format(ratio, '.2f'):>9}", flush=True)
    gap1 = {a: statistics.mean(r["searches"][a]["gap"][-1] for r in results.values()) for a in SEARCHES}
    acc = [1 - abs(m["predicted"] - m["measured"]) / min(m["predicted"], m["measured"])
           for r in results.values() for m in r["measured"].values()]
    summary = {
        "configurations": len(results),
        "nodes": 8,
        "budget_s": args.budget,
        "gbs_gap_at_1s": gap1["GBS"],
        "gbs_gap_at_1s_max": max(r["searches"]["GBS"]["gap"][-1] for r in results.values()),
        "gbs_b_gap_at_1s": gap1["GBS-B"],
        "gbs_b_gap_at_1s_max": max(r["searches"]["GBS-B"]["gap"][-1] for r in results.values()),
        "gs_gap_at_1s": gap1["GS"],
        "ga_gap_at_1s": gap1["GA"],
        "sa_gap_at_1s": gap1["SA"],
        "gap_at_50ms": {a: statistics.mean(r["searches"][a]["gap"][0] for r in results.values())
                        for a in SEARCHES},
        "best_worst_spread": max(r["spread"] for r in results.values()),
        "best_worst_spread_mean": statistics.mean(r["spread"] for r in results.values()),
        "block_over_gbs_measured_mean": statistics.mean(
            [r["block_over_gbs_measured"] for r in results.values() if r["block_over_gbs_measured"]] or [0.0]),
        "prediction_accuracy_of_measured_avg": statistics.mean(acc),
        "prediction_accuracy_of_measured_min": min(acc),
        "quick": args.quick,
        "app": args.app,
        "skipped": skipped,
    }
    print(json.dumps(summary, indent=1))
    os.makedirs(RESULTS, exist_ok=True)
    with open(os.path.join(RESULTS, "search.json" if args.app == "jacobi" else f"search_{args.app}.json"),
              "w") as f:
        json.dump({"summary": summary, "sample_times_s": SAMPLES, "configurations": results}, f,
                  indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
