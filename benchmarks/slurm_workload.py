"""Benchmark: workloads on a real 16-node Slurm cluster, plain Slurm against Slurm with the reshape controller.

``python -m benchmarks.slurm_workload [--workload FILE ... | --all-workloads] [--repeat N] [--ablation]``

The Slurm overlay of the compose cluster (``docker/slurm-compose.yml``: slurmctld and 16
slurmd nodes of 2 CPUs, backfill on) runs each workload (``benchmarks.slurm_jobs``: the
default ``benchmarks/data/slurm_w1.json``, W1's shape; ``--all-workloads``: every shipped
``benchmarks/data/slurm_*.json``) twice, one run after the other:

(a) **plain Slurm**, the baseline a site has: every job a plain ``sbatch`` at its requested
    size with its time limit, Slurm's backfill deciding (the malleable ones run the same
    emulated application, static);
(b) **Slurm + the reshape site controller** (``reshape daemon --slurm-site``, defaults): the
    rigid jobs are the same ``sbatch`` jobs, the malleable ones are submitted with ``reshape
    submit --slurm``; the controller is killed with ``kill -9`` once mid-run and restarted
    (``--no-restart``: left alone).

A malleable job is an emulated application (``apps.emujob``: one process standing for its
processors, sleeping its iteration time) whose iteration time per size is the real
application's calibrated curve (``benchmarks/data/apps_calibration.json``), 100 iterations at
its requested size taking its run time. Each run is driven from the cluster's head
(``benchmarks.slurm_driver``); times are Slurm's own records (``scontrol show job``).

Kept for every run, before the cluster goes: ``benchmarks/results/slurm_workload/<workload>/
<run>.tar.gz`` (every job's Slurm output, the controller's log, slurmctld's log and the driver's
record). A job that did not complete in either run is reported (``lost`` in the table), counted
in ``jobs_lost`` and left out of every ratio.

Summary (``benchmarks/results/slurm_workload.json``): ``workloads`` (how many), ``per_workload``
(each workload's keys, the mean over its repeats, and each run), and the mean over workloads of
``turnaround_static_over_reshape`` (mean turnaround, completed jobs), ``utilization_reshape_over_static``
(nodes doing a job's work over the makespan: a granted node the job has not expanded onto
counts as idle), ``rigid_wait_reshape_over_static``, ``malleable_wait_reshape_over_static`` (mean
waits in Slurm's queue), ``worst_job_turnaround_static_over_reshape``; the totals
``rigid_late_starts`` (rigid jobs started more than 5 s after the first start Slurm's backfill
predicted for them, from ``squeue``), ``jobs_lost``, ``controller_restarts_survived``; the
latencies ``start_latency_{static,reshape}_s`` (submit to application running, jobs Slurm started
at once), ``release_latency_s`` (a shrink asked for a waiting job to the node given back to
Slurm) and ``grow_latency_s`` (an expander's node granted to the job iterating on it); and
``twin_error_max`` (the largest relative difference of a headline ratio between the real runs
and the simulator's twin of them, ``scheduler.lab.slurm_twin``, printed beside every run).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shlex
import statistics
import subprocess
import sys
import tarfile
import time

from benchmarks import _common, calibrate_apps
from benchmarks.slurm_jobs import (
    DATA,
    DEFAULT,
    ITERATIONS,
    Workload,
    app_times,
    job_file,
    limit_minutes,
    load,
    lublin,
)
from benchmarks.slurm_metrics import (
    RATIOS,
    alone,
    combine,
    latencies,
    moved,
    summarize,
)
from scheduler.testing.compose import ComposeCluster, benchmark_cluster

FILES = ("docker-compose.yml", "docker/slurm-compose.yml")
RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
BENCH = "/cluster/bench"
ABLATION = {"no-moldable": ["--no-moldable"], "no-shrink-to-start": ["--no-shrink-to-start"],
            "no-time-limits": ["--time-limits", "off"], "measured-time-limits": ["--time-limits", "measured"]}


def run_once(c: ComposeCluster, w: Workload, mode: str, tag: str, args: list[str], restart_at: float | None,
             keep: str) -> dict:
    """One run through the driver on the head; its evidence copied to ``keep`` (a .tar.gz) first."""
    d = f"{BENCH}/{tag}"
    spec = {"mode": mode, "dir": d, "controller_args": args, "restart_at": restart_at,
            "workload": {"name": w.name, "nodes": w.nodes, "cpus_per_node": w.cpus_per_node,
                         "jobs": [j.__dict__ for j in w.jobs]}}
    c.exec("head", f"rm -rf {d}; mkdir -p {d}/out; cat > {d}/spec.json", input=json.dumps(spec))
    # slurmctld rebuilds its node records: a run inherits no node a run before shrank a job off (Slurm's
    # count of non-sharing jobs is not taken back then, docs/slurm.md "A Slurm bug the controller meets")
    c.exec("head", "scontrol reconfigure", check=False)
    t0 = time.monotonic()
    r = c.exec("head", f"python -m benchmarks.slurm_driver {d}/spec.json > {d}/driver.log 2>&1", timeout=7200,
               check=False)
    for i in range(1, w.nodes + 1):  # each node's slurmd side (SlurmdDebug=debug): a node's slow completion
        log = c.exec(f"node{i}", "tail -n 1500 /var/log/slurm/slurmd.log", check=False).stdout
        c.exec("head", f"mkdir -p {d}/slurmd; cat > {d}/slurmd/node{i}.log", input=log, check=False)
    c.exec("head", f"tar czf /tmp/{tag}.tar.gz -C {BENCH} {tag}", check=False)
    os.makedirs(os.path.dirname(keep), exist_ok=True)
    subprocess.run(["docker", "cp", f"{c.container('head')}:/tmp/{tag}.tar.gz", keep], check=False,
                   capture_output=True)
    if r.returncode:
        raise RuntimeError(f"run {tag} failed: {c.exec('head', f'tail -30 {d}/driver.log', check=False).stdout}")
    out = json.loads(c.exec("head", f"cat {d}/result.json").stdout)
    out["seconds"] = time.monotonic() - t0
    return out


def twin_jobs(w: Workload, cal: dict) -> list:
    """The workload's jobs as the twin takes them (``scheduler.lab.slurm_twin.TwinJob``)."""
    import tomllib

    from scheduler.core.jobfile import validate_job
    from scheduler.lab.slurm_twin import TwinJob

    out = []
    for j in w.jobs:
        if j.app is None:
            out.append(TwinJob(j.name, j.arrival, j.nodes, j.seconds, limit_minutes(j)))
            continue
        desc = validate_job(tomllib.loads(job_file(w, j, cal)), w.nodes * w.cpus_per_node) if j.malleable else None
        out.append(TwinJob(j.name, j.arrival, j.nodes, j.seconds, limit_minutes(j), j.malleable,
                           tuple(app_times(w, j, cal).items()), ITERATIONS, 0.02 * j.seconds / ITERATIONS, desc))
    return out


def twin_params(args: list[str]) -> dict:
    """The controller options the twin's controller takes (``reshape daemon``'s resource-manager options)."""
    from scheduler.rm import add_options
    from scheduler.rm.slurm import broker_params

    p = argparse.ArgumentParser(add_help=False)
    add_options(p)
    return broker_params(p.parse_known_args(args)[0])


def twin_policy(args: list[str]) -> str:
    """The daemon's ``--policy`` preset among the controller options (default ``reshape``)."""
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--policy", default="reshape")
    return p.parse_known_args(args)[0].policy


def twin_of(w: Workload, cal: dict, args: list[str], restart: bool, seed: int | None = None,
            jobs: list | None = None) -> dict:
    """The simulator's twin of the pair of runs: its summary (``benchmarks.slurm_metrics``); with ``seed``,
    one draw of the jittered twin (:data:`BAND_JITTER`), else the point twin. ``jobs``: ``twin_jobs(w, cal)``."""
    from scheduler.lab.slurm_twin import Latencies
    from scheduler.lab.slurm_twin import run as twin_run

    lat = Latencies() if seed is None else Latencies(**BAND_JITTER, seed=seed)
    jobs = twin_jobs(w, cal) if jobs is None else jobs
    static = twin_run(jobs, w.nodes, w.cpus_per_node, False, lat=lat)
    reshape = twin_run(jobs, w.nodes, w.cpus_per_node, True, twin_params(args), lat=lat, policy=twin_policy(args))
    return summarize(static, reshape, w)[1]


def twin_band(w: Workload, cal: dict, args: list[str]) -> dict[str, list[float]]:
    """Each ratio's range over :data:`BAND_SEEDS` draws of the jittered twin: where one real run may land
    (``scheduler.lab.slurm_twin``: one near tie decided the other way moves the rest of a run)."""
    jobs = twin_jobs(w, cal)
    draws = [twin_of(w, cal, args, True, seed, jobs) for seed in range(BAND_SEEDS)]
    return {k: [min(v), max(v)] for k in RATIOS if (v := [d[k] for d in draws if d.get(k) is not None])}


# the jittered twin: each latency within half its value either way (the real start latencies ranged from
# about half to twice their median), each iteration within 3% (a loaded 2-core host); ten draws
BAND_JITTER = {"jitter": 0.5, "iter_jitter": 0.03}
BAND_SEEDS = 10


def print_runs(name: str, rows: list[dict], s: dict, twin: dict | None, band: dict | None = None) -> None:
    print(_common.table(rows, [("job", "job", ""), ("kind", "kind", ""), ("nodes", "nodes", "d"),
                               ("wait_static", "wait a", ".0f"), ("wait_reshape", "wait b", ".0f"),
                               ("run_static", "run a", ".0f"), ("run_reshape", "run b", ".0f"),
                               ("turnaround_static", "turn a", ".0f"), ("turnaround_reshape", "turn b", ".0f"),
                               ("ratio", "a/b", ".2f"), ("sizes", "sizes (b, CPUs)", "")]))
    fmt = lambda v: "-" if v is None else f"{v:.2f}"  # noqa: E731
    rng = lambda k: f" [{band[k][0]:.2f}, {band[k][1]:.2f}]" if band and k in band else ""  # noqa: E731
    print(f"{name}: " + ", ".join(f"{k} {fmt(s.get(k))} (twin {fmt((twin or {}).get(k))}{rng(k)})" for k in RATIOS))
    print(f"{name}: jobs_lost {s['jobs_lost']}, rigid_late_starts {s['rigid_late_starts']}, restarts survived "
          f"{s['controller_restarts_survived']}, release_latency_s {s.get('release_latency_s')}, grow_latency_s "
          f"{s.get('grow_latency_s')}, start latency static/reshape {s.get('start_latency_static_s')}/"
          f"{s.get('start_latency_reshape_s')}", flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.slurm_workload", description=__doc__.split("\n")[0])
    ap.add_argument("--workload", action="append", metavar="FILE", help="a workload file (repeatable; default "
                    f"{os.path.relpath(DEFAULT)})")
    ap.add_argument("--all-workloads", action="store_true", help="every benchmarks/data/slurm_*.json")
    ap.add_argument("--repeat", type=int, default=1, help="runs of each workload (default 1)")
    ap.add_argument("--ablation", action="store_true",
                    help="also run the controller with each mechanism switched off (on the default workload, "
                         "else the first)")
    ap.add_argument("--controller-args", default="", help="extra 'reshape daemon --slurm-site' options")
    ap.add_argument("--controller-only", action="store_true",
                    help="skip the plain-Slurm runs: only jobs_lost, late starts, restarts survived, utilization "
                         "and latencies of the controller's runs (no ratios); for repeated loss checks")
    ap.add_argument("--no-restart", action="store_true", help="do not kill -9 the controller in run (b)")
    ap.add_argument("--restart-at", type=float, default=0.4,
                    help="when to kill -9 the controller, as a fraction of the arrival window (default 0.4)")
    ap.add_argument("--twin-only", action="store_true", help="only the simulator's twin (no cluster; seconds)")
    ap.add_argument("--twin-seeds", type=int, default=0, metavar="N",
                    help="only the twin, over N Lublin-Feitelson workloads (generator seeds from --twin-first "
                         "on, 36 jobs, --twin-load, --twin-malleable): "
                         "the mean and range of each ratio; writes <out>_twin.json")
    ap.add_argument("--twin-first", type=int, default=100, metavar="S",
                    help="the first generator seed of --twin-seeds (default 100; 100-109 chose the controller's "
                         "defaults, 200-209 are held out: docs/slurm.md)")
    ap.add_argument("--twin-malleable", type=float, default=0.5, metavar="F",
                    help="the fraction of malleable jobs in the --twin-seeds workloads (default 0.5)")
    ap.add_argument("--twin-load", type=float, default=1.4, metavar="L",
                    help="the offered load of the --twin-seeds workloads (default 1.4)")
    ap.add_argument("--out", default="slurm_workload", help="result name (default slurm_workload)")
    ap.add_argument("--retwin", action="store_true",
                    help="no cluster: compute the twin's figures (point and jittered band) of the result already "
                         "under --out again from its own workloads and controller options")
    ap.add_argument("--keep", action="store_true", help="leave the cluster up afterwards")
    ap.add_argument("--add", action="store_true",
                    help="add these workloads to the result already written under --out (a workload run again "
                         "replaces its entry) and summarize over all of them")
    a = ap.parse_args(argv)
    if a.repeat < 1:
        ap.error(f"--repeat {a.repeat} must be >= 1")
    if not 0 <= a.twin_malleable <= 1 or not 0 < a.twin_load <= 10:
        ap.error(f"--twin-malleable {a.twin_malleable} must be in [0, 1] and --twin-load {a.twin_load} in (0, 10]")
    paths = sorted(glob.glob(os.path.join(DATA, "slurm_*.json"))) if a.all_workloads else (a.workload or [DEFAULT])
    try:
        workloads = [load(p) for p in paths]
    except ValueError as e:
        ap.error(str(e))
    cal = calibrate_apps.load()
    if a.retwin:
        return retwin(a.out, cal)
    base_args = shlex.split(a.controller_args)
    variants = {"default": base_args}
    if a.ablation:
        variants |= {k: base_args + v for k, v in ABLATION.items()}
    if a.twin_seeds:
        workloads = [lublin(seed, 36, a.twin_load, malleable=a.twin_malleable)
                     for seed in range(a.twin_first, a.twin_first + a.twin_seeds)]
    if a.twin_only or a.twin_seeds:
        meta = {"jobs": 36, "offered_load": a.twin_load, "malleable_share": a.twin_malleable} if a.twin_seeds else None
        return twin_report(workloads, cal, variants, f"{a.out}_twin" if a.twin_seeds else None, meta)
    c = benchmark_cluster("reshapebench", FILES)
    if isinstance(c, str):
        print(f"slurm_workload: {c}", file=sys.stderr)
        return 2
    per: dict[str, dict] = {}
    try:
        c.down()
        c.build()
        c.up()
        ablated = next((w for p, w in zip(paths, workloads, strict=True) if os.path.samefile(p, DEFAULT)), workloads[0])
        for w in workloads:
            per |= series(c, w, variants if w is ablated else {"default": base_args}, cal, a)
    finally:
        if not a.keep:
            c.down()
    runs = {k: v["runs"] for k, v in per.items()}
    if a.add:
        per, runs, paths = with_earlier(a.out, per, runs, paths)
    summary = overall({k: v for k, v in per.items() if "/" not in k})
    summary["ablation"] = {k: {r: v.get(r) for r in RATIOS} for k, v in per.items() if "/" in k} or None
    print(json.dumps({k: v for k, v in summary.items() if k != "per_workload"}, indent=1))
    path = _common.write_result(a.out, {"workloads": [p for p in paths], "controller_args": base_args,
                                        "repeat": a.repeat, "summary": summary, "runs": runs})
    print(f"wrote {path}")
    return 0


def series(c: ComposeCluster, w: Workload, variants: dict[str, list[str]], cal: dict,
           a: argparse.Namespace) -> dict[str, dict]:
    """``--repeat`` runs of workload ``w``: each a plain-Slurm run and a run with the controller for each of
    ``variants`` (its options), compared with that plain run; per variant, the summary over the repeats."""
    restart_at = None if a.no_restart else a.restart_at * max(j.arrival for j in w.jobs)
    twins = {} if a.controller_only else {v: twin_of(w, cal, args, restart_at is not None)
                                          for v, args in variants.items()}  # no plain run to compare with
    bands = {} if a.controller_only else {v: twin_band(w, cal, args) for v, args in variants.items()}
    runs: dict[str, list[dict]] = {v: [] for v in variants}
    keep = os.path.join(RESULTS, a.out, w.name)
    for k in range(1, a.repeat + 1):
        print(f"{w.name} run {k}/{a.repeat}: {len(w.jobs)} jobs, offered load {w.offered_load():.2f}"
              + ("" if a.controller_only else "; (a) plain Slurm"), flush=True)
        static = None if a.controller_only else run_once(c, w, "static", f"{w.name}-static-r{k}", [], None,
                                                         os.path.join(keep, f"static-r{k}.tar.gz"))
        for v, args in variants.items():
            print(f"{w.name} run {k}/{a.repeat}: (b) Slurm + the reshape controller ({v}) {' '.join(args)}", flush=True)
            reshape = run_once(c, w, "reshape", f"{w.name}-{v}-r{k}", args, restart_at,
                               os.path.join(keep, f"{v}-r{k}.tar.gz"))
            rows, s = alone(reshape, w) if static is None else summarize(static, reshape, w)
            key = w.name if v == "default" else f"{w.name}/{v}"
            print_runs(key, rows, s, twins.get(v), bands.get(v))
            runs[v].append({"summary": s, "rows": rows, "events": (reshape.get("history") or {}).get("events")})
    return {(w.name if v == "default" else f"{w.name}/{v}"): combine([r["summary"] for r in rs], twins.get(v),
                                                                     bands.get(v))
            | {"runs": rs} for v, rs in runs.items()}


def retwin(out: str, cal: dict) -> int:
    """``--retwin``: the twin's figures (point and band) of the result under ``out`` computed again from its
    own workloads and controller options (each ablation variant's with its switch), with where the turnaround moved
    and the latencies as the metrics compute them now (from each run's kept evidence); measured times unchanged."""
    path = os.path.join(RESULTS, f"{out}.json")
    with open(path) as f:
        old = json.load(f)
    base = old.get("controller_args") or []
    workloads = {w.name: w for w in (load(p) for p in old["workloads"])}
    per = {}
    for key, rs in old["runs"].items():
        name, _, variant = key.partition("/")
        args = base + (ABLATION[variant] if variant else [])
        w = workloads[name]
        kept = [os.path.join(RESULTS, out, name, f"{variant or 'default'}-r{i}.tar.gz") for i in range(1, len(rs) + 1)]
        now = [r["summary"] | moved(r["rows"]) | evidence_latencies(t) for r, t in zip(rs, kept, strict=True)]
        per[key] = combine(now, twin_of(w, cal, args, True), twin_band(w, cal, args)) | {"runs": rs}
        print_twin(key, per[key])
    summary = overall({k: v for k, v in per.items() if "/" not in k})
    summary["ablation"] = {k: {r: v.get(r) for r in RATIOS} for k, v in per.items() if "/" in k} or None
    old["summary"], old["twin_recomputed"] = summary, time.strftime("%Y-%m-%dT%H:%M:%S%z")
    print(json.dumps({k: v for k, v in summary.items() if k != "per_workload"}, indent=1))
    print(f"wrote {_common.write_result(out, {k: v for k, v in old.items() if k not in ('benchmark',)})}")
    return 0


def evidence_latencies(path: str) -> dict:
    """The release and grow latencies of a controller run computed again from its kept evidence (the driver's
    record in ``path``), as the metrics compute them now; {} where it is not kept."""
    if not os.path.exists(path):
        return {}
    with tarfile.open(path) as t:
        member = next((m for m in t.getmembers() if m.name.endswith("/result.json")), None)
        if member is None:
            return {}
        hist = json.load(t.extractfile(member)).get("history") or {}
    return latencies(hist)


def print_twin(key: str, s: dict) -> None:
    """A workload's measured ratios beside the point twin's and the jittered twin's range."""
    band, twin = s.get("twin_band") or {}, s.get("twin") or {}
    for k in RATIOS:
        lo, hi = band.get(k, (None, None))
        if s.get(k) is not None and twin.get(k) is not None and lo is not None:
            print(f"{key}: {k} measured {s[k]:.2f}, twin {twin[k]:.2f} [{lo:.2f}, {hi:.2f}]")
    print(f"{key}: twin_error_max {s.get('twin_error_max')}, twin_band_error_max {s.get('twin_band_error_max')}")


def with_earlier(out: str, per: dict[str, dict], runs: dict, paths: list[str]) -> tuple[dict, dict, list[str]]:
    """``--add``: the per-workload entries, runs and workload files of the result already under ``out``,
    with this invocation's replacing those of the same workload."""
    try:
        with open(os.path.join(RESULTS, f"{out}.json")) as f:
            old = json.load(f)
    except FileNotFoundError:
        return per, runs, paths
    earlier = old["summary"].get("per_workload") or {}  # (an earlier ablation is not carried over)
    merged = {k: v for k, v in earlier.items() if k not in per} | per
    old_runs = {k: v for k, v in (old.get("runs") or {}).items() if k not in runs}
    return merged, old_runs | runs, list(dict.fromkeys([*old.get("workloads", []), *paths]))


def overall(per: dict[str, dict]) -> dict:
    """The mean over workloads of each ratio; totals of losses, late starts, restarts; the twin's worst error."""
    mean = lambda xs: statistics.fmean(xs) if xs else None  # noqa: E731
    out: dict = {"workloads": len(per)}
    for k in (*RATIOS, "turnaround_static_over_reshape_without_losses"):
        out[k] = mean([v[k] for v in per.values() if v.get(k) is not None])
    for k in ("jobs_lost", "rigid_late_starts", "controller_restarts_survived"):
        out[k] = sum(v.get(k) or 0 for v in per.values())
    for k in ("release_latency_s", "grow_latency_s", "start_latency_static_s", "start_latency_reshape_s"):
        vals = [v[k] for v in per.values() if v.get(k)]
        out[k] = {"median": statistics.median(x["median"] for x in vals),
                  "max": max(x["max"] for x in vals)} if vals else None
    for k in ("twin_error_max", "twin_band_error_max"):
        errs = [v[k] for v in per.values() if v.get(k) is not None]
        out[k] = max(errs) if errs else None
    out["per_workload"] = {k: {x: y for x, y in v.items() if x != "runs"} for k, v in per.items()}
    return out


def twin_report(workloads: list[Workload], cal: dict, variants: dict[str, list[str]], out: str | None,
                meta: dict | None = None) -> int:
    """The twin alone over ``workloads`` (seconds each): each variant's ratios per workload, and their mean,
    range and late starts over all (written as ``out`` when given)."""
    per: dict[str, list[dict]] = {v: [] for v in variants}
    for w in workloads:
        for variant, args in variants.items():
            s = twin_of(w, cal, args, True)
            per[variant].append(s)
            if len(workloads) <= 5:
                print(f"{w.name} {variant}: twin " + ", ".join(f"{k} {s[k]:.2f}" for k in RATIOS
                                                                if s.get(k) is not None)
                      + f", rigid_late_starts {s['rigid_late_starts']}")
    keys = (*RATIOS, "turnaround_static_over_reshape_without_losses")
    summary = {v: {k: {"mean": statistics.fmean(vals), "min": min(vals), "max": max(vals)}
                   for k in keys if (vals := [x[k] for x in xs if x.get(k) is not None])}
               | {"rigid_late_starts": sum(x["rigid_late_starts"] for x in xs), "workloads": len(xs)}
               for v, xs in per.items()}
    for v, d in summary.items():
        print(f"{v:20s} " + ", ".join(f"{k} {d[k]['mean']:.3f} [{d[k]['min']:.2f}, {d[k]['max']:.2f}]"
                                      for k in keys if k in d) + f", rigid_late_starts {d['rigid_late_starts']}")
    if out:
        payload = {'workloads': [w.name for w in workloads], **(meta or {}), 'summary': summary}
        print(f"wrote {_common.write_result(out, payload)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
