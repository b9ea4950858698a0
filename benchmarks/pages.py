"""Pages in real resizes: the applications' redistributions by default, without kept blocks, and in huge pages.

Each application (``--apps``, default LU and Jacobi at ``--n`` 6000, a
288 MB matrix) runs the resize plan ``2,4,2,3`` under ``mpiexec``
(:func:`benchmarks._common.run_app`), once with the default
(``RESHAPE_PAGES`` unset: :mod:`reshape.redistribution.pages` faults each
fresh block in at allocation, in huge pages until a chunk comes in slow,
then 4 KiB pages, and keeps the blocks a resize frees for the next of
their size), once with ``RESHAPE_KEEP_BLOCKS=0`` (every block fresh) and
once with ``RESHAPE_PAGES=huge`` (numpy's transparent huge pages, faulted
in on first touch: the behaviour before ``pages.py``), rotating which goes
first, ``--runs`` times. The table gives each resize's redistribution
seconds (median over the runs) with each setting. In the plan, 4 -> 2
returns to a size the job has run at: the staying ranks' new blocks are the
size of the ones they freed at 2 -> 4.

The two applications bracket what the pages meet. LU updates its matrix in
place and frees little between resizes, so a resize's fresh blocks come
from memory the host has taken back (this VM reports free pages to its
host); Jacobi frees full-size temporaries every iteration, so a resize
right after finds memory that is still the process's.

Summary (``benchmarks/results/pages.json``): per application
``huge_over_auto`` (total redistribution seconds of a run with huge pages
over the default's, median over the runs) and ``unkept_over_auto`` (the
same without kept blocks), each with its worst run (the smallest ratio),
and ``fresh_memory_GBps`` (:func:`reshape.redistribution.pages.probe`,
256 MiB, before the runs).

Run: ``python -m benchmarks.pages`` (about 12 minutes) or ``--quick`` (one
run each, n = 3000).
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import sys

from benchmarks._common import table, write_result
from reshape.joblink import jobenv as E

PLAN = "2,4,2,3"
SETTINGS = {"auto": {}, "unkept": {E.KEEP_BLOCKS: "0"}, "huge": {E.PAGES: "huge"}}


def one_run(app: str, n: int, setting: str) -> list[float]:
    """Redistribution seconds of each resize of one run."""
    from benchmarks._common import run_app

    rows = run_app(app, int(PLAN.split(",")[0]), PLAN, len(PLAN.split(",")) + 1, ["--n", str(n)], "circulant",
                   env=SETTINGS[setting])["rows"]
    return [r["redist_seconds"] for r in rows if r.get("action") in ("expand", "shrink")]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.pages", description=__doc__.split("\n\n")[0])
    ap.add_argument("--apps", nargs="+", default=["lu", "jacobi"], help="applications (default lu jacobi)")
    ap.add_argument("--n", type=int, default=None, help="matrix order (default 6000; quick 3000)")
    ap.add_argument("--runs", type=int, default=None, help="runs per setting (default 3; quick 1)")
    ap.add_argument("--quick", action="store_true", help="n = 3000, one run per setting")
    args = ap.parse_args(argv)
    n = args.n or (3000 if args.quick else 6000)
    runs = args.runs or (1 if args.quick else 3)
    for var in (E.PAGES, E.KEEP_BLOCKS):
        if os.environ.get(var):
            print(f"{var}={os.environ[var]} is set: the default runs would not be the default", file=sys.stderr)
            return 2
    from reshape.redistribution import pages

    fresh = pages.probe(256 << 20)
    got: dict[str, dict[str, list[list[float]]]] = {}
    for app in args.apps:
        got[app] = {s: [] for s in SETTINGS}
        for r in range(runs):
            k = r % len(SETTINGS)
            for setting in list(SETTINGS)[k:] + list(SETTINGS)[:k]:
                got[app][setting].append(one_run(app, n, setting))
    rows, summary = [], {"n": n, "plan": PLAN, "runs": runs, "fresh_memory_GBps": fresh}
    for app, res in got.items():
        steps = PLAN.split(",")
        for k, (a, b) in enumerate(itertools.pairwise(steps)):
            med = {s: statistics.median(run[k] for run in res[s]) for s in SETTINGS}
            rows.append({"app": app, "resize": f"{a}->{b}", **{f"{s}_s": v for s, v in med.items()},
                         "unkept_ratio": med["unkept"] / med["auto"], "huge_ratio": med["huge"] / med["auto"]})
        summary[app] = {"runs_s": res, **{f"{s}_total_s": statistics.median(sum(x) for x in res[s]) for s in SETTINGS}}
        for other in ("huge", "unkept"):
            ratios = [sum(o) / sum(a) for a, o in zip(res["auto"], res[other], strict=True)]
            summary[app][f"{other}_over_auto"] = statistics.median(ratios)
            summary[app][f"{other}_over_auto_worst_run"] = min(ratios)
    print(table(rows, [("app", "app", "s"), ("resize", "resize", "s"), ("auto_s", "default s", ".3f"),
                       ("unkept_s", "no kept blocks s", ".3f"), ("huge_s", "huge pages s", ".3f"),
                       ("unkept_ratio", "unkept/default", ".2f"), ("huge_ratio", "huge/default", ".2f")]))
    for app in got:
        s = summary[app]
        print(f"{app}: huge pages / default {s['huge_over_auto']:.2f} (worst run {s['huge_over_auto_worst_run']:.2f}), "
              f"no kept blocks / default {s['unkept_over_auto']:.2f} (worst run {s['unkept_over_auto_worst_run']:.2f})")
    print("fresh memory (256 MiB) GB/s: " + ", ".join(f"{k} {v:.2f}" for k, v in fresh.items()))
    path = write_result("pages-quick" if args.quick else "pages", {"rows": rows, "summary": summary})
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
