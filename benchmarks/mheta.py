"""MHETA accuracy: predicted vs measured per-iteration time of real out-of-core runs.

For each emulated configuration (CPU-only, memory-only, disk-only and mixed,
like the thesis's DC / IO / HY1 / HY2, Nakazawa 2005 §6.2), one ``mpiexec`` run:
instrument one BLOCK iteration, build MHETA, then for every distribution of
the sweep Blk -> I-C -> I-C/Bal -> Bal -> Blk place the data, time real
iterations (median, first one dropped) and compare with the prediction.
Accuracy = 1 - |pred - meas| / min(pred, meas) (Fig. 6.2).

``python -m benchmarks.mheta [--quick] [--app jacobi|cg|lanczos|wavefront] [--prefetch]``
prints a table and writes ``benchmarks/results/mheta.json`` (``mheta_APP.json``,
``mheta_prefetch.json`` for the prefetch set) (``summary.accuracy_avg``,
``accuracy_min``, ``configurations``, ``eval_ms`` at 8 nodes). The baseline
in the same run is the prediction of BLOCK's time vs the chosen distributions
(``summary.block_over_best_measured``).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from benchmarks._common import RESULTS

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

BIG = 1 << 24  # ample memory
BASE = {"cpu": 1.0, "memory": BIG, "read_bw": 20e6, "write_bw": 20e6, "seek": 2e-3}
SLOW_DISK = {"read_bw": 5e6, "write_bw": 5e6, "seek": 6e-3}
FAST_DISK = {"read_bw": 60e6, "write_bw": 60e6, "seek": 1e-3}


def _node(**kw) -> dict:
    return {**BASE, **kw}


def configurations(small: int, p: int = 4, seed: int = 5) -> dict[str, list[dict]]:
    """Named emulated clusters of ``p`` nodes; ``small`` is a small memory in bytes."""
    assert p == 4, "the configurations are written for 4 nodes"
    s = small
    c: dict[str, list[dict]] = {
        # the thesis's named ones (Table 6.1), scaled to 4 nodes
        "DC": [_node(cpu=0.5), _node(cpu=0.7), _node(cpu=1.6), _node(cpu=1.3)],
        "IO": [_node(memory=s, **SLOW_DISK), _node(memory=s, **SLOW_DISK), _node(), _node()],
        "HY1": [_node(cpu=0.5), _node(cpu=1.5), _node(memory=s, **FAST_DISK),
                _node(memory=s, **FAST_DISK)],
        "HY2": [_node(cpu=0.6, memory=s), _node(cpu=1.4, memory=s),
                _node(memory=s, **SLOW_DISK), _node(memory=BIG)],
        # CPU only
        "cpu-one-slow": [_node(), _node(), _node(), _node(cpu=0.5)],
        "cpu-spread": [_node(cpu=0.4), _node(), _node(), _node(cpu=2.0)],
        "cpu-graded": [_node(cpu=0.6), _node(cpu=0.8), _node(cpu=1.2), _node(cpu=1.6)],
        # memory only
        "mem-one-small": [_node(memory=s), _node(), _node(), _node()],
        "mem-two-small": [_node(memory=s), _node(memory=s), _node(), _node()],
        "mem-graded": [_node(memory=s // 2), _node(memory=s), _node(memory=2 * s), _node()],
        "mem-all-small": [_node(memory=s) for _ in range(4)],
        # disk only (all out of core under BLOCK so the disk matters)
        "disk-one-slow": [_node(memory=s, **SLOW_DISK), _node(memory=s), _node(memory=s),
                          _node(memory=s)],
        "disk-two-two": [_node(memory=s, **SLOW_DISK), _node(memory=s, **SLOW_DISK),
                         _node(memory=s, **FAST_DISK), _node(memory=s, **FAST_DISK)],
        "disk-graded": [_node(memory=s, **SLOW_DISK), _node(memory=s),
                        _node(memory=s, **FAST_DISK), _node(memory=s, read_bw=100e6,
                                                            write_bw=100e6, seek=5e-4)],
    }
    rng = random.Random(seed)
    for k in range(4):  # random hybrids: slow CPUs and small memories on random subsets
        nodes = []
        for _ in range(p):
            kw: dict = {"cpu": rng.choice([0.5, 0.75, 1.0, 1.0, 1.5])}
            if rng.random() < 0.5:
                kw["memory"] = rng.choice([s // 2, s, 2 * s])
                kw.update(rng.choice([SLOW_DISK, {}, FAST_DISK]))
            nodes.append(_node(**kw))
        c[f"random-{k}"] = nodes
    return c


QUICK = ("DC", "IO", "HY1", "HY2")


APPS = {"jacobi": ("apps.ooc_jacobi", "OOCJacobi"), "cg": ("apps.ooc_cg", "OOCCG"),
        "lanczos": ("apps.ooc_lanczos", "OOCLanczos"), "wavefront": ("apps.ooc_wavefront", "OOCWavefront")}


def _module(name: str):
    import importlib

    if name not in APPS:
        raise SystemExit(f"unknown application {name!r}; use one of {sorted(APPS)}")
    return importlib.import_module(APPS[name][0])


def _app_class(name: str):
    return getattr(_module(name), APPS[name][1])


def _structure(name: str):
    return _module(name).structure


def small_memory(app, rows: int, p: int) -> int:
    """The small memory of the configurations, in bytes, for ``app``'s structure on ``p`` nodes.

    Without in-core (``resident``) arrays: 20 rows of everything (BLOCK goes out of
    core). With them (CG, Lanczos keep their vectors in core, as the thesis's do): the
    resident arrays of 1.5x BLOCK's rows plus 12 rows of the out-of-core arrays, so the
    matrix is out of core under BLOCK while the vectors stay (20 rows of everything
    cannot even keep BLOCK's vectors).
    """
    dist = [a for a in app.arrays if a.distributed]
    keep = sum(a.row_bytes for a in dist if a.resident)
    ooc = sum(a.row_bytes for a in dist if not a.resident)
    if not keep:
        return 20 * ooc
    return keep * (3 * rows // (2 * p)) + 12 * ooc


def infeasible(app, nodes: list[dict], rows: int) -> str:
    """Why BLOCK cannot run on ``nodes`` (a true capacity limit), or "".

    The instrumented run is BLOCK's: if a node's memory cannot keep the
    application's in-core (``resident``) arrays for BLOCK's rows, the
    configuration cannot be measured at all.
    """
    from reshape.mheta.structure import max_resident_rows
    from reshape.redistribution.layout import even_counts

    for i, (n, r) in enumerate(zip(nodes, even_counts(rows, len(nodes)), strict=True)):
        hold = max_resident_rows(app, n["memory"])
        if hold < r:
            return (f"node {i}'s {n['memory']} bytes keep {app.name}'s in-core arrays for {hold} rows, "
                    f"BLOCK gives it {r}")
    return ""


def worker(cfg_path: str, out_path: str) -> int:
    """Rank program: instrument, predict and measure the sweep of one configuration."""
    from mpi4py import MPI

    from reshape.mheta.cluster import Cluster
    from reshape.mheta.distribute import (
        balanced_split,
        in_core_balanced_split,
        in_core_capacity,
        in_core_split,
        round_split,
        sweep,
    )
    from reshape.mheta.model import Mheta
    from reshape.mheta.ooc import remove_tree, scratch_dir
    from reshape.mheta.structure import max_resident_rows
    from reshape.mpiutil import barrier
    from reshape.redistribution.layout import even_counts
    from reshape.runtime.watchdog import fail_together

    cfg = json.loads(Path(cfg_path).read_text())
    comm = MPI.COMM_WORLD
    cluster = Cluster.from_dict(cfg["cluster"])
    rows, cols, iters = cfg["rows"], cfg["cols"], cfg["iters"]
    workdir = comm.bcast(scratch_dir() if comm.rank == 0 else None)
    out = []
    with fail_together(comm.rank, cleanup=lambda: remove_tree(workdir)):
        app = _app_class(cfg["app"])(comm, cluster, rows, cols, workdir, cfg.get("prefetch", False))
        blk = even_counts(rows, comm.size)
        app.distribute(blk)
        prof = app.instrument()
        model = Mheta(app.app, prof)
        caps = [in_core_capacity(app.app, n.memory) for n in cluster.nodes]
        cpus = [n.cpu for n in cluster.nodes]
        # Bal-IO: balance by each node's emulated per-row cost, disk included when out of
        # core under BLOCK (the thesis's sweep ignores disk speed, so disk-only
        # configurations would collapse to BLOCK alone)
        row_io = [
            (cols * 8 / n.read_bw + cols * 8 / n.write_bw) if blk[i] > caps[i] else 0.0
            for i, n in enumerate(cluster.nodes)
        ]
        per_row = [cols * cluster.element_time / n.cpu + row_io[i]
                   for i, n in enumerate(cluster.nodes)]
        bal_io = round_split([1 / c for c in per_row], rows)
        anchors = [blk, in_core_split(rows, caps), in_core_balanced_split(rows, caps, cpus),
                   balanced_split(rows, cpus), bal_io, blk]
        dists = sweep(anchors, cfg["steps"])
        if len(dists) < 3:  # identical nodes: test the model off BLOCK on a skewed split too
            dists = sweep([blk, round_split([2.0, 1.0, 1.0, 0.5], rows), blk], cfg["steps"])
        hold = [max_resident_rows(app.app, n.memory) for n in cluster.nodes]
        skipped = [c for c in dists if any(c[i] > hold[i] for i in range(len(c)))]
        for counts in dists:
            if counts in skipped:  # a node cannot keep the in-core arrays for its rows
                continue
            app.distribute(counts)
            times = app.timed(iters + 1)[1:]
            pred = model.evaluate(counts)
            out.append({"counts": counts, "measured": statistics.median(times),
                        "measured_all": times, "predicted": pred.time,
                        "lower_bound": max(pred.unblocked)})
        overruns = comm.gather(app.emu.overruns)
    app.close()
    barrier(comm)
    if comm.rank == 0:
        remove_tree(workdir)
    if comm.rank == 0:
        Path(out_path).write_text(
            json.dumps({"points": out, "profile": prof.to_dict(), "overruns": overruns,
                        "skipped_points": skipped}))
    return 0


def _accuracy(pred: float, meas: float) -> float:
    return 1.0 - abs(pred - meas) / min(pred, meas)


def eval_ms(app_name: str, nodes: int = 8, reps: int = 2000) -> float:
    """Time per MHETA evaluation of a random split at ``nodes`` nodes (fresh model)."""
    from reshape.mheta.model import CommProfile, Mheta, NodeProfile, Profile
    from reshape.mheta.search import random_split

    app = _structure(app_name)(2048, 512)
    rng = random.Random(1)
    stages = app.stage_names()
    keep = sum(a.rows * a.row_bytes for a in app.arrays if a.resident)  # in-core arrays, any split
    prof = Profile(tuple(
        NodeProfile(rows=256, memory=keep + rng.choice([1 << 20, 1 << 22, BIG]),
                    compute={s: rng.uniform(0.01, 0.1) for s in stages},
                    read_seek=2e-3, write_seek=2e-3,
                    read_row={a.name: 2e-4 for a in app.arrays},
                    write_row={a.name: 2e-4 for a in app.arrays})
        for _ in range(nodes)), CommProfile(1e-5, 1e-5, 1e-4, 0.0, 0.0))
    model = Mheta(app, prof)
    splits = [random_split(nodes, 2048, rng, 1) for _ in range(reps)]
    t0 = time.perf_counter()
    for x in splits:
        model.evaluate(x)
    return (time.perf_counter() - t0) / reps * 1e3


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.mheta", description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="4 configurations, short sweep")
    ap.add_argument("--app", default="jacobi", choices=sorted(APPS))
    ap.add_argument("--prefetch", action="store_true",
                    help="the prefetch set: reads overlap computation, on the 12 configurations with "
                         "out-of-core nodes (Nakazawa 2005 §6.2: Jacobi with prefetching, 12 architectures)")
    ap.add_argument("--only", help="comma-separated configuration names")
    ap.add_argument("--worker", nargs=2, metavar=("CONFIG", "OUT"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        return worker(*args.worker)

    from reshape.joblink.launch import mpirun

    rows, cols = 256, 1024
    iters = 3 if args.quick else 4
    steps = 1 if args.quick else 2
    app_structure = _structure(args.app)(rows, cols)
    small = small_memory(app_structure, rows, 4)
    configs = configurations(small)
    if all(a.resident for a in app_structure.arrays if a.distributed):
        # no out-of-core path (the wavefront): only the CPU speeds differ; one configuration per pattern
        seen: dict[tuple, str] = {}
        for n, nodes in configs.items():
            seen.setdefault(tuple(nd["cpu"] for nd in nodes), n)
        configs = {n: [{**nd, "memory": BIG} for nd in configs[n]] for n in seen.values()}
    names = list(configs)
    if args.prefetch:  # prefetching changes nothing where every node is in core
        names = [n for n in names if any(nd["memory"] < BIG for nd in configs[n])][:12]
    if args.quick:
        names = [n for n in names if n in QUICK]
    if args.only:
        names = args.only.split(",")
    results, skipped = {}, {}
    print(f"{'configuration':<16}{'points':>7}{'acc min':>9}{'acc avg':>9}{'acc max':>9}"
          f"{'best/worst':>11}")
    with tempfile.TemporaryDirectory(prefix="bench-mheta-") as tmp:
        for name in names:
            why = infeasible(app_structure, configs[name], rows)
            if why:
                skipped[name] = why
                print(f"{name:<16} skipped: {why}", flush=True)
                continue
            cfg = {"app": args.app, "rows": rows, "cols": cols, "iters": iters, "steps": steps,
                   "prefetch": args.prefetch,
                   "cluster": {"name": name, "element_time": 1.5e-6, "nodes": configs[name]}}
            cpath, opath = os.path.join(tmp, f"{name}.json"), os.path.join(tmp, f"{name}.out")
            Path(cpath).write_text(json.dumps(cfg))
            mpirun(4, ["-m", "benchmarks.mheta", "--worker", cpath, opath], timeout=600, cwd=ROOT)
            res = json.loads(Path(opath).read_text())
            accs = [_accuracy(p["predicted"], p["measured"]) for p in res["points"]]
            meas = [p["measured"] for p in res["points"]]
            res.update(accuracy_min=min(accs), accuracy_avg=statistics.mean(accs),
                       accuracy_max=max(accs), spread=max(meas) / min(meas), cluster=cfg["cluster"])
            results[name] = res
            print(f"{name:<16}{len(accs):>7}{min(accs):>9.3f}{statistics.mean(accs):>9.3f}"
                  f"{max(accs):>9.3f}{max(meas) / min(meas):>11.2f}", flush=True)
    allacc = [_accuracy(p["predicted"], p["measured"]) for r in results.values() for p in r["points"]]
    # same-run baseline: BLOCK (first sweep point) vs the best measured point
    blk_over_best = statistics.mean(
        r["points"][0]["measured"] / min(p["measured"] for p in r["points"]) for r in results.values())
    argmin_ok = sum(
        min(r["points"], key=lambda p: p["predicted"])["measured"]
        <= 1.05 * min(p["measured"] for p in r["points"]) for r in results.values())
    summary = {
        "app": args.app,
        "prefetch": args.prefetch,
        "configurations": len(results),
        "points": len(allacc),
        "accuracy_min": min(allacc),
        "accuracy_avg": statistics.mean(allacc),
        "accuracy_max": max(allacc),
        "eval_ms": eval_ms(args.app),
        "block_over_best_measured": blk_over_best,
        "predicted_argmin_within_5pct_of_measured_best": argmin_ok,
        "quick": args.quick,
        "skipped": skipped,
    }
    print(f"all: {summary['points']} points on {summary['configurations']} configurations: "
          f"accuracy min {summary['accuracy_min']:.3f} avg {summary['accuracy_avg']:.3f} "
          f"max {summary['accuracy_max']:.3f}; MHETA evaluation {summary['eval_ms']:.3f} ms at 8 nodes;"
          f" BLOCK/best measured {blk_over_best:.2f}x; predicted argmin within 5% of the measured"
          f" best on {argmin_ok}/{len(results)}")
    os.makedirs(RESULTS, exist_ok=True)
    name = "mheta" + ("" if args.app == "jacobi" else f"_{args.app}") + ("_prefetch" if args.prefetch else "")
    with open(os.path.join(RESULTS, f"{name}.json"), "w") as f:
        json.dump({"summary": summary, "configurations": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
