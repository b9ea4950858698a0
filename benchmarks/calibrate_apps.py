"""Calibrate the emulated W1/W2 jobs from the real applications: ``benchmarks/data/apps_calibration.json``.

``python -m benchmarks.calibrate_apps [--out PATH]`` (about 2 minutes on 2 cores)

Sudarsan & Ribbens' (2007) workloads (§4.2) run LU, MM, master-worker, Jacobi and FFT on up to
36 processors; ``benchmarks.workload`` runs them as emulated jobs
(``apps.emujob --times``) whose iteration time per size comes from here. On a
2-core machine a real application cannot show its time at 36 ranks (more
ranks only share the two cores), so the curve is a model fitted to what this
machine can measure (:func:`scheduler.lab.emumodel.app_iter_time`):

* ``t1``: each real application (``apps.<app>``, the problem sizes of the
  paper's Table 3 divided by 8, as in the Fig. 2 sweep) on 1 rank, the fastest
  of its iterations after the first (the least disturbed by other work on a
  shared machine);
* ``alpha``: one communication step between two ranks, as the applications
  wait for one (a nonblocking 8-byte allreduce completed by
  :func:`reshape.mpiutil.wait`), the fastest of 200;
* ``beta``: seconds per byte of an 8 MB exchange between two ranks, the fastest of 10;
* steps and bytes per iteration at each size from each application's
  algorithm (:func:`scheduler.lab.emumodel.comm_counts`).

So the curve is "this application at this size on dedicated cores like this
machine's, with this machine's two-rank messaging". The 2-rank time measured
on this machine is stored beside the model's (``t2_measured``, ``t2_model``):
the one size where the two can be compared (on a machine shared with other
work the measured one is the larger). The file records the command, the time,
the load average before and after, and the constants.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT = os.path.join(ROOT, "benchmarks", "data", "apps_calibration.json")
MAX_PROCS = 36  # W1 and W2 run on 36 processors (§4.2)

# Table 3's problem sizes / 8 (LU 21000, MM 14000, Jacobi 8000, FFT 8192); master-worker: the app's default units
APPS = {
    "lu": {"n": 2625, "opts": ["--nb", "64"], "model": {"nb": 64}, "paper": "LU 21000"},
    "mm": {"n": 1750, "opts": ["--nb", "64"], "model": {"nb": 64}, "paper": "MM 14000"},
    "jacobi": {"n": 1000, "opts": ["--sweeps", "20"], "model": {"sweeps": 20}, "paper": "Jacobi 8000"},
    "fft2d": {"n": 1024, "opts": [], "model": {}, "paper": "FFT 8192"},
    "master_worker": {"n": 2000, "opts": ["--unit-us", "50", "--chunk", "50"], "model": {"chunk": 50},
                      "paper": "master-worker, 20000 units"},
}
#: the workload's job names (scheduler.cli.workload) -> application
JOB_APP = {"LU": "lu", "MM": "mm", "Jacobi": "jacobi", "FFT": "fft2d", "Master-worker": "master_worker"}


def _ranks() -> None:
    """Rank side of the messaging measurement (2 ranks): prints ``RESULT {alpha, beta}`` on rank 0."""
    import numpy as np
    from mpi4py import MPI

    from reshape.mpiutil import wait

    comm = MPI.COMM_WORLD
    one, out = np.ones(1), np.zeros(1)
    best_a = float("inf")
    for _ in range(200):
        t0 = time.perf_counter()
        wait(comm.Iallreduce(one, out, MPI.SUM))
        best_a = min(best_a, time.perf_counter() - t0)
    big = np.ones(1 << 20)  # 8 MB
    got = np.empty_like(big)
    best_b = float("inf")
    for _ in range(10):
        comm.Barrier()
        t0 = time.perf_counter()
        wait(comm.Isendrecv(big, 1 - comm.rank, recvbuf=got, source=1 - comm.rank))
        best_b = min(best_b, time.perf_counter() - t0)
    best_a = comm.allreduce(best_a, op=MPI.MAX)
    best_b = comm.allreduce(best_b, op=MPI.MAX)
    if comm.rank == 0:
        print("RESULT " + json.dumps({"alpha": best_a, "beta": best_b / big.nbytes}), flush=True)


def _load() -> float:
    return os.getloadavg()[0]


def measure(iters: int = 4) -> dict:
    """Run the measurements; returns the calibration document."""
    from benchmarks._common import run_app
    from reshape.joblink.launch import mpirun
    from scheduler.lab.emumodel import app_iter_time

    load0 = _load()
    res = mpirun(2, ["-m", "benchmarks.calibrate_apps", "--ranks"], timeout=120, cwd=ROOT)
    line = next(x for x in res.stdout.splitlines() if x.startswith("RESULT "))
    comm = json.loads(line[len("RESULT "):])
    apps = {}
    for app, spec in APPS.items():
        opts = ["--n", str(spec["n"]), *spec["opts"]]
        t = {p: min(r["iter_time"] for r in run_app(app, p, "", iters, opts, "circulant")["rows"][1:])
             for p in (1, 2)}
        curve = {p: app_iter_time(app, spec["n"], p, t[1], comm["alpha"], comm["beta"], **spec["model"])
                 for p in range(1, MAX_PROCS + 1)}
        apps[app] = {"n": spec["n"], "opts": opts, "stands_for": spec["paper"], "t1": t[1],
                     "t2_measured": t[2], "t2_model": curve[2], "sweet_spot": min(curve, key=curve.get),
                     "curve": {str(p): v for p, v in curve.items()}}
        print(f"{app:<14} n {spec['n']:>5}  t1 {t[1]:.3f} s  t2 measured {t[2]:.3f} s, model {curve[2]:.3f} s  "
              f"t36 {curve[MAX_PROCS]:.3f} s  sweet spot {apps[app]['sweet_spot']}", flush=True)
    return {"command": "python -m benchmarks.calibrate_apps", "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "load_average": [load0, _load()], "cpus": os.cpu_count(), "iterations": iters,
            "model": "scheduler.lab.emumodel.app_iter_time: t1 / p + alpha * steps(p) + beta * bytes(p)",
            "alpha_s": comm["alpha"], "beta_s_per_byte": comm["beta"], "apps": apps}


def load(path: str = DEFAULT) -> dict:
    """The committed calibration (regenerate it with ``python -m benchmarks.calibrate_apps``)."""
    with open(path) as f:
        return json.load(f)


def curve(cal: dict, job: str) -> dict[int, float]:
    """``{size: seconds}`` of the workload job ``job`` (``"LU"``, ..., ``"Master-worker"``)."""
    try:
        app = JOB_APP[job]
    except KeyError:
        raise ValueError(f"no calibrated application for job {job!r}; known: {', '.join(JOB_APP)}") from None
    return {int(p): t for p, t in cal["apps"][app]["curve"].items()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.calibrate_apps", description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=DEFAULT, help=f"where to write (default {os.path.relpath(DEFAULT, ROOT)})")
    ap.add_argument("--iters", type=int, default=4, help="iterations per run (the first is not used; >= 2)")
    ap.add_argument("--ranks", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.ranks:
        _ranks()
        return 0
    if a.iters < 2:
        ap.error(f"--iters must be >= 2 (the first iteration is not used), got {a.iters}")
    doc = measure(a.iters)
    print(f"alpha {1e6 * doc['alpha_s']:.1f} us per step, beta {doc['beta_s_per_byte'] * 1e9:.3f} ns per byte; "
          f"load average {doc['load_average'][0]:.2f} -> {doc['load_average'][1]:.2f}")
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump(doc, f, indent=1)
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
