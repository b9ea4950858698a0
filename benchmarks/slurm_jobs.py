"""The workloads of ``benchmarks.slurm_workload``: a JSON format, the shipped files, and Lublin-Feitelson ones.

A workload file (``benchmarks/data/slurm_*.json``)::

    {"name": "w1", "nodes": 16, "cpus_per_node": 2, "source": "how it was made",
     "jobs": [{"name": "lu-1", "arrival": 0, "nodes": 3, "seconds": 240, "malleable": true,
               "app": "LU", "min_nodes": 1, "max_nodes": 16}, ...]}

per job: ``arrival`` (seconds after the run starts), ``nodes`` (requested, whole nodes),
``seconds`` (its run time at that size: a rigid job's ``sleep``, a malleable job's emulated
application at its requested size), ``malleable`` (true: submitted through the reshape
controller in the controller's run; false: a plain ``sbatch`` in both runs), ``app`` (the
calibrated application, ``benchmarks/data/apps_calibration.json``: ``LU``, ``MM``, ``Jacobi``,
``FFT``, ``Master-worker``; required for a malleable job; a rigid job without one sleeps), and
``min_nodes``/``max_nodes`` (a malleable job's bounds; default 1 and the cluster). Every job
asks Slurm for a time limit of its run time plus half, in whole minutes (:func:`limit_minutes`).

Shipped: ``slurm_w1.json`` (the default: W1's shape on 16 nodes, 14 jobs, load 1.53) and two
drawn from the Lublin-Feitelson model (``python -m benchmarks.slurm_jobs --seed S --jobs N
--load L --out FILE``, :func:`lublin`): sizes from the model on the cluster's CPUs, run times
mapped from the model's range onto 20-300 s (log scale, order kept), arrivals scaled to the
offered load, every second job malleable (``--malleable F``: that fraction) with a calibrated application
drawn by the seed.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from dataclasses import asdict, dataclass

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
DEFAULT = os.path.join(DATA, "slurm_w1.json")
APPS = ("LU", "MM", "Jacobi", "FFT", "Master-worker")
RUN_RANGE = (20.0, 300.0)  # seconds: the generated workloads' run times at the requested size
MODEL_RUN = (1.0, math.exp(12.0))  # the Lublin-Feitelson model's run-time range (scheduler.lab.workloads.lublin)


@dataclass(frozen=True)
class Job:
    name: str
    arrival: float
    nodes: int
    seconds: float
    malleable: bool = False
    app: str | None = None
    min_nodes: int = 1
    max_nodes: int | None = None  # None: the whole cluster


@dataclass(frozen=True)
class Workload:
    name: str
    nodes: int
    cpus_per_node: int
    jobs: tuple[Job, ...]
    source: str = ""

    def max_nodes(self, j: Job) -> int:
        return j.max_nodes or self.nodes

    def offered_load(self) -> float:
        """Node-seconds asked at the requested sizes over the nodes and the arrival window."""
        t = [j.arrival for j in self.jobs]
        return sum(j.nodes * j.seconds for j in self.jobs) / (self.nodes * max(1.0, max(t) - min(t)))


def limit_minutes(j: Job) -> int:
    """The time limit asked of Slurm: the run time plus half, in whole minutes."""
    return math.ceil(1.5 * j.seconds / 60)


ITERATIONS = 100  # an emulated application's iterations per run: a resize point every 1% of it
SIZES = (1, 2, 3, 4, 6, 8, 12, 16)  # node counts a malleable job may take (and its requested one)


def sizes(w: Workload, j: Job) -> list[int]:
    """A malleable job's legal sizes in CPUs: whole nodes, :data:`SIZES` and its own, within its bounds."""
    hi = w.max_nodes(j)
    return sorted({n * w.cpus_per_node for n in (*SIZES, j.nodes, hi) if j.min_nodes <= n <= hi})


def app_times(w: Workload, j: Job, cal: dict) -> dict[int, float]:
    """Seconds per iteration at each size in CPUs: the application's calibrated curve, scaled so its
    :data:`ITERATIONS` take ``seconds`` at its requested size."""
    from benchmarks import calibrate_apps

    c = calibrate_apps.curve(cal, j.app)
    k = j.seconds / ITERATIONS / c[j.nodes * w.cpus_per_node]
    return {p: k * c[p] for p in sorted(c) if p <= w.nodes * w.cpus_per_node}


def emu_argv(w: Workload, j: Job, cal: dict) -> list[str]:
    """The emulated application (``apps.emujob``): its times per size, a resize costing 2% of an iteration."""
    t = app_times(w, j, cal)
    return ["python", "-m", "apps.emujob", "--times", ",".join(f"{p}:{x:.4f}" for p, x in t.items()),
            "--iterations", str(ITERATIONS), "--redist", f"{0.02 * j.seconds / ITERATIONS:.4f}"]


def job_file(w: Workload, j: Job, cal: dict) -> str:
    """The job file of a malleable job (``reshape submit --slurm``)."""
    c = w.cpus_per_node
    return "\n".join([f'name = "{j.name}"', f"command = {json.dumps(emu_argv(w, j, cal))}",
                      f"nprocs = {j.nodes * c}", f"sizes = {sizes(w, j)}", f"min_procs = {j.min_nodes * c}",
                      f"max_procs = {w.max_nodes(j) * c}", 'launch = "single"', f"iterations = {ITERATIONS}",
                      f"walltime = {60 * limit_minutes(j)}", ""])


# ---------------------------------------------------------------------- the file format
def _bad(path: str, what: str) -> ValueError:
    return ValueError(f"{path}: {what}")


def job_from(path: str, i: int, d: object, nodes: int) -> Job:
    if not isinstance(d, dict):
        raise _bad(path, f"jobs[{i}] is {d!r}, not an object")
    unknown = set(d) - {f for f in Job.__dataclass_fields__}
    if unknown:
        raise _bad(path, f"jobs[{i}] has unknown keys {sorted(unknown)}; allowed: {list(Job.__dataclass_fields__)}")
    try:
        j = Job(**d)
    except TypeError as e:
        raise _bad(path, f"jobs[{i}]: {e}") from None
    where = f"jobs[{i}] ({j.name!r})"
    if not (isinstance(j.arrival, int | float) and j.arrival >= 0):
        raise _bad(path, f"{where}: arrival {j.arrival!r} is not a number of seconds >= 0")
    if not (isinstance(j.nodes, int) and 1 <= j.nodes <= nodes):
        raise _bad(path, f"{where}: nodes {j.nodes!r} is not a whole number of nodes in 1..{nodes}")
    if not (isinstance(j.seconds, int | float) and j.seconds > 0):
        raise _bad(path, f"{where}: seconds {j.seconds!r} is not a run time > 0")
    if j.app is not None and j.app not in APPS:
        raise _bad(path, f"{where}: app {j.app!r} is not a calibrated application ({', '.join(APPS)})")
    if j.malleable and j.app is None:
        raise _bad(path, f"{where}: a malleable job needs an app ({', '.join(APPS)})")
    hi = j.max_nodes or nodes
    if not (isinstance(j.min_nodes, int) and isinstance(hi, int) and 1 <= j.min_nodes <= j.nodes <= hi <= nodes):
        raise _bad(path, f"{where}: min_nodes {j.min_nodes!r} <= nodes {j.nodes} <= max_nodes {j.max_nodes!r} "
                         f"<= {nodes} does not hold")
    return j


def load(path: str = DEFAULT) -> Workload:
    """A workload file; ValueError naming the file, the job and the value that is wrong."""
    try:
        with open(path) as f:
            d = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        raise _bad(path, f"cannot read a workload: {e}") from None
    if not isinstance(d, dict) or not isinstance(d.get("jobs"), list) or not d["jobs"]:
        raise _bad(path, "not a workload: an object with a non-empty list 'jobs' is needed")
    nodes, cpus = d.get("nodes", 16), d.get("cpus_per_node", 2)
    if not (isinstance(nodes, int) and nodes >= 1 and isinstance(cpus, int) and cpus >= 1):
        raise _bad(path, f"nodes {nodes!r} and cpus_per_node {cpus!r} must be whole numbers >= 1")
    jobs = tuple(job_from(path, i, x, nodes) for i, x in enumerate(d["jobs"]))
    names = [j.name for j in jobs]
    if len(set(names)) != len(names) or not all(isinstance(n, str) and n.replace("-", "").isalnum() for n in names):
        raise _bad(path, "job names must be unique, of letters, digits and '-'")
    name = d.get("name") or os.path.splitext(os.path.basename(path))[0]
    return Workload(str(name), nodes, cpus, jobs, str(d.get("source", "")))


def dump(w: Workload, path: str) -> None:
    d = {"name": w.name, "nodes": w.nodes, "cpus_per_node": w.cpus_per_node, "source": w.source,
         "offered_load": round(w.offered_load(), 3), "jobs": [asdict(j) for j in w.jobs]}
    with open(path, "w") as f:
        json.dump(d, f, indent=1)
        f.write("\n")


# ---------------------------------------------------------------------- Lublin-Feitelson workloads
def lublin(seed: int, jobs: int, load: float, nodes: int = 16, cpus: int = 2, malleable: float = 0.5) -> Workload:
    """A workload from the Lublin-Feitelson model (module docstring); ``malleable``: the fraction of its jobs
    that are malleable (rounded down; 0.5, every second job, unless asked otherwise)."""
    if not 0.0 <= malleable <= 1.0:
        raise ValueError(f"malleable fraction {malleable!r} must be in [0, 1]")
    import numpy as np

    from scheduler.lab.workloads.lublin import generate

    trace = generate(jobs, nodes=nodes * cpus, seed=seed)
    lo, hi = (math.log(x) for x in MODEL_RUN)
    a, b = (math.log(x) for x in RUN_RANGE)
    rng = np.random.default_rng(seed)
    chosen = set(rng.permutation(jobs)[: int(jobs * malleable)].tolist())
    apps = rng.choice(len(APPS), size=jobs)
    t0 = trace.jobs[0].submit
    out = []
    for i, s in enumerate(trace.jobs):
        run = math.exp(a + (math.log(max(s.run_time, 1.0)) - lo) / (hi - lo) * (b - a))
        n = max(1, math.ceil(s.procs / cpus))
        m = i in chosen
        out.append(Job(f"{'m' if m else 'r'}{i + 1:02d}", s.submit - t0, n, round(run), m,
                       APPS[apps[i]] if m else None))
    w = Workload("", nodes, cpus, tuple(out))
    k = w.offered_load() / load  # arrivals scaled so the offered load is ``load``
    scaled = tuple(Job(j.name, round(j.arrival * k, 1), j.nodes, j.seconds, j.malleable, j.app) for j in out)
    half = malleable == 0.5
    name = f"lublin-s{seed}" if half else f"lublin-s{seed}-m{round(100 * malleable)}"
    return Workload(name, nodes, cpus, scaled,
                    f"python -m benchmarks.slurm_jobs --seed {seed} --jobs {jobs} --load {load:g}"
                    f"{'' if half else f' --malleable {malleable:g}'}: the "
                    f"Lublin-Feitelson model on {nodes * cpus} CPUs, run times mapped onto "
                    f"{RUN_RANGE[0]:g}-{RUN_RANGE[1]:g} s, "
                    f"{'every second job' if half else f'{malleable:.0%} of the jobs'} malleable")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.slurm_jobs", description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--jobs", type=int, default=36)
    ap.add_argument("--load", type=float, default=1.4, help="offered load (default 1.4)")
    ap.add_argument("--malleable", type=float, default=0.5,
                    help="fraction of the jobs that are malleable, in [0, 1] (default 0.5: every second job)")
    ap.add_argument("--out", required=True, help="the workload file to write")
    a = ap.parse_args(argv)
    if not 1 <= a.jobs <= 1000 or not 0 < a.load <= 10 or not 0 <= a.malleable <= 1:
        ap.error(f"--jobs {a.jobs} must be in 1..1000, --load {a.load} in (0, 10] "
                 f"and --malleable {a.malleable} in [0, 1]")
    w = lublin(a.seed, a.jobs, a.load, malleable=a.malleable)
    dump(w, a.out)
    print(f"wrote {a.out}: {len(w.jobs)} jobs, {sum(j.malleable for j in w.jobs)} malleable, "
          f"offered load {w.offered_load():.2f}, arrivals over {max(j.arrival for j in w.jobs):.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
