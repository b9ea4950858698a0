"""Fresh pages in real resizes: the applications' redistributions with ``RESHAPE_PAGES=auto`` against ``huge``.

Each application (``--apps``, default LU and Jacobi at ``--n`` 6000, a
288 MB matrix) runs the resize plan ``2,4,2,3`` under ``mpiexec``
(:func:`benchmarks._common.run_app`), once with the default
(``RESHAPE_PAGES`` unset: :mod:`reshape.redistribution.pages` faults each
fresh block in at allocation, in huge pages until a chunk comes in slow,
then 4 KiB pages) and once with ``RESHAPE_PAGES=huge`` (numpy's transparent
huge pages, faulted in on first touch: the behaviour before ``pages.py``),
alternating which goes first, ``--runs`` times. The table gives each
resize's redistribution seconds (median over the runs) with each setting.

The two applications bracket what the pages meet. LU updates its matrix in
place and frees little between resizes, so a resize's fresh blocks come
from memory the host has taken back (this VM reports free pages to its
host); Jacobi frees full-size temporaries every iteration, so a resize
right after finds memory that is still the process's.

Summary (``benchmarks/results/pages.json``): per application
``huge_over_auto`` (total redistribution seconds of a run with huge pages
over the default's, median over the runs), its worst run (the smallest
ratio), and ``fresh_memory_GBps`` (:func:`reshape.redistribution.pages.probe`,
256 MiB, before the runs).

Run: ``python -m benchmarks.pages`` (about 8 minutes) or ``--quick`` (one
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
SETTINGS = {"auto": {}, "huge": {E.PAGES: "huge"}}


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
    if os.environ.get(E.PAGES):
        print(f"{E.PAGES}={os.environ[E.PAGES]} is set: the default runs would not be the default",
              file=sys.stderr)
        return 2
    from reshape.redistribution import pages

    fresh = pages.probe(256 << 20)
    got: dict[str, dict[str, list[list[float]]]] = {}
    for app in args.apps:
        got[app] = {s: [] for s in SETTINGS}
        for r in range(runs):
            for setting in list(SETTINGS)[r % 2 :] + list(SETTINGS)[: r % 2]:
                got[app][setting].append(one_run(app, n, setting))
    rows, summary = [], {"n": n, "plan": PLAN, "runs": runs, "fresh_memory_GBps": fresh}
    for app, res in got.items():
        steps = PLAN.split(",")
        for k, (a, b) in enumerate(itertools.pairwise(steps)):
            auto = statistics.median(run[k] for run in res["auto"])
            huge = statistics.median(run[k] for run in res["huge"])
            rows.append({"app": app, "resize": f"{a}->{b}", "auto_s": auto, "huge_s": huge, "ratio": huge / auto})
        ratios = [sum(h) / sum(a) for a, h in zip(res["auto"], res["huge"], strict=True)]
        summary[app] = {"huge_over_auto": statistics.median(ratios), "huge_over_auto_worst_run": min(ratios),
                        "auto_total_s": statistics.median(sum(a) for a in res["auto"]),
                        "huge_total_s": statistics.median(sum(h) for h in res["huge"]), "runs_s": res}
    print(table(rows, [("app", "app", "s"), ("resize", "resize", "s"), ("auto_s", "default s", ".3f"),
                       ("huge_s", "huge pages s", ".3f"), ("ratio", "huge/default", ".2f")]))
    for app in got:
        s = summary[app]
        print(f"{app}: huge pages / default {s['huge_over_auto']:.2f} (worst run {s['huge_over_auto_worst_run']:.2f})")
    print("fresh memory (256 MiB) GB/s: " + ", ".join(f"{k} {v:.2f}" for k, v in fresh.items()))
    path = write_result("pages-quick" if args.quick else "pages", {"rows": rows, "summary": summary})
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
