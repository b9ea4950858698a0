"""Trace benchmark: every policy preset on SWF traces, against the baselines a user would pick.

``python -m benchmarks.traces [--quick] [--seed N | --seeds K] [--no-sensitivity] [--limits MODE]
[--trace FILE ...] [--lublin SEED ...] [--out NAME]``: for ``lublin_256.swf`` and ``mira.swf`` (or the
``--trace`` files, or Lublin-Feitelson traces drawn with ``--lublin``'s seeds: 10,000 jobs on 256 nodes), half the jobs
malleable (seeded), the job model's defaults
(:func:`scheduler.lab.jobmodel.from_trace`: parallelism ``size-linked``, the
literature's model: Downey's average parallelism tied to the job's size,
sigma after Cirne and Berman; modelled walltime estimates where the trace
has none), **wall-clock limits** (a job is killed at the walltime it asked
for unless the policy that started it below its size set the longer limit
the walltime rule allows: :mod:`scheduler.core.walltime`; ``--limits
stretched``: the rule stretches every such start). One table per trace
(utilization, useful utilization, mean turnaround and wait, bounded
slowdown, big jobs' mean and worst wait, resizes per job, kills, longer
limits, late starts, simulation time), each resizing preset's gain over
rigid EASY and over the best non-resizing preset (``moldable-easy``: the
same squeezed starts, never resizing), then a sensitivity table over the job
model, then ``benchmarks/results/traces.json`` (``traces-quick.json`` with
``--quick``) whose ``summary.<trace>`` holds, from the same run on the same
jobs:

* ``job_model`` and ``limits``: what the summary is measured under;
* ``best`` (the resizing preset of lowest mean turnaround) and
  ``best_nonresizing`` (likewise among ``fcfs``, ``easy``, ``moldable-easy``);
* ``turnaround_easy_over_best``: rigid EASY ÷ ``best``'s mean turnaround;
* ``turnaround_best_nonresizing_over_best``: ``best_nonresizing`` ÷
  ``best``: what resizing adds beyond moldable starts (the headline);
* ``against_baselines``: the same two ratios for every resizing preset;
* per preset: ``kills`` (jobs killed at their limit), ``limit_extensions``
  (jobs started below their size with a longer limit), ``past_request``
  (jobs that ran longer than the walltime they asked for),
  ``easy_guarantee_violations`` (queue heads started after the first
  reservation EASY made for them), ``bounded_slowdown`` (mean),
  ``big_jobs_mean_wait`` and ``big_jobs_worst_wait`` (jobs of more than a
  quarter of the machine), ``resizes`` and ``resizes_per_job``,
  ``useful_utilization``;
* ``big_jobs_best_over_easy``: ``best``'s big jobs' mean turnaround ÷ EASY's;
* ``turnaround_easy_over_reshape_plus`` (the recommended preset),
  ``..._paper`` and ``..._squeeze`` for ``reshape`` and ``reshape-squeeze``;
* ``sensitivity``: one row per job-model variant (parallelism independent
  and relative, estimates exact, malleable fraction 25% and 100%, stretched
  limits): EASY and ``moldable-easy`` ÷ each resizing preset, big jobs'
  ratio, resizes, the best resizing preset, late starts and kills;
* ``sim_seconds``: wall time of the ``reshape-plus`` simulation.

``--seeds K`` runs instead, per trace, rigid EASY, ``moldable-easy`` and the resizing presets for
seeds 0 to K-1 (the malleable set and the speedup draws; one seed is one sample of a quantity that
moves by several percent from seed to seed) and writes ``traces-seeds.json``: per seed and over the
seeds (mean, worst, best), rigid EASY ÷ ``moldable-easy`` and ``moldable-easy`` ÷ each resizing
preset (``summary.<trace>.over_seeds``).

``--quick`` simulates the first 2,000 jobs (by submit time) of each trace.
Targets: 0 late starts and 0 kills under every preset; resizing is reported
as it is (``turnaround_best_nonresizing_over_best`` below 1 means it loses to
moldable starts).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time

from reshape.joblink import jobenv as E
from scheduler.lab.jobmodel import DEFAULT_PARALLELISM, from_trace
from scheduler.lab.runner import against_baselines, run_policies
from scheduler.lab.simulate_cli import format_baselines, format_table
from scheduler.lab.swf import read_swf
from scheduler.lab.workloads.lublin import generate

TRACES = os.environ.get(E.TRACES, os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "..", "shared", "data", "traces"))
RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
POLICIES = ["fcfs", "easy", "moldable-easy", "reshape", "reshape-squeeze", "reshape-fcfs", "reshape-plus", "dep",
            "dep-smooth"]
RESIZING = ["reshape", "reshape-squeeze", "reshape-plus"]
#: job-model variants of the sensitivity table: (label, from_trace keywords, run_policies keywords)
VARIANTS = [
    (f"default ({DEFAULT_PARALLELISM}, model estimates)", {}, {}),
    ("parallelism independent (former default)", {"parallelism": "independent"}, {}),
    ("parallelism relative:-1:1", {"parallelism": "relative:-1:1"}, {}),
    ("parallelism relative:0:2 (older)", {"parallelism": "relative:0:2"}, {}),
    ("estimates exact", {"estimates": "exact"}, {}),
    ("older model (relative:0:2, exact)", {"parallelism": "relative:0:2", "estimates": "exact"}, {}),
    ("25% malleable", {"malleable_fraction": 0.25}, {}),
    ("100% malleable", {"malleable_fraction": 1.0}, {}),
    ("stretched limits", {}, {"limits": "stretched"}),
]
#: per-preset figures of the summary: summary key -> metrics key
PER_PRESET = {"kills": "walltime_kills", "limit_extensions": "limit_extensions", "past_request": "past_request",
              "easy_guarantee_violations": "late_starts", "bounded_slowdown": "mean_bounded_slowdown",
              "big_jobs_mean_wait": "big_jobs_mean_wait", "big_jobs_worst_wait": "big_jobs_worst_wait",
              "resizes": "resizes", "resizes_per_job": "resizes_per_job",
              "useful_utilization": "useful_utilization"}


def by_class(result, malleable: set[int]) -> dict[str, float]:
    """Mean turnaround, wait and run time of malleable and of rigid jobs."""
    out = {}
    for name, want in (("malleable", True), ("rigid", False)):
        rs = [r for r in result.records if (r.job_id in malleable) == want]
        if rs:
            out[f"{name}_turnaround"] = statistics.fmean(r.turnaround for r in rs)
            out[f"{name}_wait"] = statistics.fmean(r.wait for r in rs)
            out[f"{name}_run"] = statistics.fmean(r.finish - r.start for r in rs)
    return out


def sensitivity(trace, seed: int) -> list[dict]:
    """EASY and moldable EASY ÷ each resizing preset (and big jobs' ratio) for each variant of :data:`VARIANTS`."""
    rows = []
    for label, kw, run_kw in VARIANTS:
        kw = {"malleable_fraction": 0.5, **kw}
        jobs, slots = from_trace(trace, seed=seed, **kw)
        res = run_policies(jobs, slots, ["easy", "moldable-easy", *RESIZING], **run_kw)
        easy, mold = res["easy"], res["moldable-easy"]
        row = {"variant": label, **kw, **run_kw, "easy_over_moldable": easy["mean_turnaround"]
               / mold["mean_turnaround"]}
        for p in RESIZING:
            row[f"easy_over_{p}"] = easy["mean_turnaround"] / res[p]["mean_turnaround"]
            row[f"moldable_over_{p}"] = mold["mean_turnaround"] / res[p]["mean_turnaround"]
            row[f"big_{p}_over_easy"] = res[p]["big_jobs_mean_turnaround"] / easy["big_jobs_mean_turnaround"]
            row[f"resizes_{p}"] = res[p]["resizes"]
        best = max(RESIZING, key=lambda p: row[f"easy_over_{p}"])
        row["best"] = best
        row["easy_over_best"] = row[f"easy_over_{best}"]
        row["moldable_over_best"] = row[f"moldable_over_{best}"]
        row["big_best_over_easy"] = row[f"big_{best}_over_easy"]
        row["late_starts"] = sum(m["late_starts"] for m in res.values())
        row["kills"] = sum(m["walltime_kills"] for m in res.values())
        rows.append(row)
        print(f"  {label:<42} {row['easy_over_moldable']:6.3f}  " + "  ".join(
            f"{row[f'easy_over_{p}']:6.3f} {row[f'moldable_over_{p}']:6.3f} ({row[f'big_{p}_over_easy']:.2f}) "
            f"{row[f'resizes_{p}']:6d}" for p in RESIZING) + f"  {row['late_starts']:5d} {row['kills']:5d}",
              flush=True)
    return rows


def summarize(res: dict[str, dict], limits: str, jobs: int) -> dict:
    """The summary of one trace (module docstring) from ``run_policies``' results."""
    easy = res["easy"]
    vs = against_baselines(res)
    best = min(vs, key=lambda p: res[p]["mean_turnaround"])
    flat = vs[best]["best_nonresizing"]
    ratio = {p: easy["mean_turnaround"] / res[p]["mean_turnaround"] for p in RESIZING}
    return {
        "job_model": {"parallelism": DEFAULT_PARALLELISM, "estimates": "model", "malleable_fraction": 0.5},
        "limits": limits,
        "best": best,
        "best_nonresizing": flat,
        "turnaround_easy_over_best": vs[best]["turnaround_easy_over"],
        "turnaround_best_nonresizing_over_best": vs[best]["turnaround_best_nonresizing_over"],
        "turnaround_easy_over_best_nonresizing": easy["mean_turnaround"] / res[flat]["mean_turnaround"],
        "against_baselines": vs,
        **{k: {p: res[p][m] for p in res} for k, m in PER_PRESET.items()},
        "big_jobs_best_over_easy": res[best]["big_jobs_mean_turnaround"] / easy["big_jobs_mean_turnaround"],
        "turnaround_easy_over_reshape_plus": ratio["reshape-plus"],
        "turnaround_easy_over_reshape_paper": ratio["reshape"],
        "turnaround_easy_over_reshape_squeeze": ratio["reshape-squeeze"],
        **{f"big_jobs_turnaround_{p.replace('-', '_')}_over_easy":
           res[p]["big_jobs_mean_turnaround"] / easy["big_jobs_mean_turnaround"] for p in RESIZING},
        "idle_while_waiting_easy": easy["idle_while_waiting"],
        "sim_seconds": res["reshape-plus"]["sim_seconds"],
        "jobs": jobs,
    }


def one_trace(name: str, trace, seed: int, limits: str, with_sensitivity: bool) -> tuple[dict, dict]:
    """Every preset on one trace: ``(summary, detail)``, printing the tables."""
    jobs, slots = from_trace(trace, malleable_fraction=0.5, seed=seed)  # the job model's defaults
    malleable = {j.spec.job_id for j in jobs if j.spec.resizable}
    res = run_policies(jobs, slots, POLICIES, record=True, limits=limits)
    for m in res.values():
        m.update(by_class(m.pop("result"), malleable))
    print(format_table(list(res.values()),
                       f"\n{name}: {len(jobs)} jobs on {slots} slots, 50% malleable, {limits} limits"))
    print(format_baselines(res))
    print("mean turnaround (s)  malleable / rigid: " + "; ".join(
        f"{p} {res[p]['malleable_turnaround']:.0f} / {res[p]['rigid_turnaround']:.0f}" for p in POLICIES))
    s = summarize(res, limits, len(jobs))
    print(f"best resizing preset {s['best']}: EASY ÷ it {s['turnaround_easy_over_best']:.3f}, "
          f"{s['best_nonresizing']} ÷ it {s['turnaround_best_nonresizing_over_best']:.3f} (resizing's own gain); "
          f"its big jobs {s['big_jobs_best_over_easy']:.3f} of EASY's turnaround; late starts (target 0): "
          f"{sum(s['easy_guarantee_violations'].values())}; kills (target 0): {sum(s['kills'].values())}")
    if with_sensitivity:
        print(f"\n{name}: EASY ÷ moldable-easy; per resizing preset EASY ÷ it, moldable-easy ÷ it (big jobs' "
              "turnaround ÷ EASY's) resizes, per job model; late starts, kills over the five presets")
        print(f"  {'job model':<42} {'mold.':>6}  " + "  ".join(f"{p:>30}" for p in RESIZING) + "   late kills")
        s["sensitivity"] = sensitivity(trace, seed)
    return s, res


def over_seeds(name: str, trace, seeds: int, limits: str) -> dict:
    """Rigid EASY ÷ ``moldable-easy`` and ``moldable-easy`` ÷ each resizing preset for seeds 0 to ``seeds``-1:
    ``{"per_seed": [...], "<ratio>": {"mean", "worst", "best"}}``, printing one line per seed."""
    keys = ["easy_over_moldable", *(f"moldable_over_{p}" for p in RESIZING)]
    print(f"\n{name}: per seed, EASY ÷ moldable-easy, then moldable-easy ÷ " + ", ".join(RESIZING))
    rows = []
    for seed in range(seeds):
        jobs, slots = from_trace(trace, malleable_fraction=0.5, seed=seed)
        res = run_policies(jobs, slots, ["easy", "moldable-easy", *RESIZING], limits=limits)
        mold = res["moldable-easy"]["mean_turnaround"]
        row = {"seed": seed, "easy_over_moldable": res["easy"]["mean_turnaround"] / mold,
               **{f"moldable_over_{p}": mold / res[p]["mean_turnaround"] for p in RESIZING},
               "late_starts": sum(m["late_starts"] for m in res.values()),
               "kills": sum(m["walltime_kills"] for m in res.values())}
        rows.append(row)
        print(f"  seed {seed:3d}  " + "  ".join(f"{row[k]:.4f}" for k in keys), flush=True)
    out: dict = {"per_seed": rows}
    for k in keys:
        v = [r[k] for r in rows]
        out[k] = {"mean": statistics.fmean(v), "worst": min(v), "best": max(v)}
    print("  mean      " + "  ".join(f"{out[k]['mean']:.4f}" for k in keys))
    print("  worst     " + "  ".join(f"{out[k]['worst']:.4f}" for k in keys))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.traces", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="first 2,000 jobs of each trace")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--seeds", type=int, metavar="K", help="seeds 0..K-1 of the baselines and the resizing presets "
                    "instead of the tables (traces-seeds.json)")
    ap.add_argument("--traces", default=TRACES, help="directory holding lublin_256.swf and mira.swf")
    ap.add_argument("--trace", action="append", metavar="FILE",
                    help="an SWF trace to run instead of the two shared ones (repeatable)")
    ap.add_argument("--lublin", action="append", type=int, metavar="SEED",
                    help="a trace the project has not seen instead: 10,000 jobs on 256 nodes drawn from the "
                    "Lublin-Feitelson model with this seed, the model's own arrivals (as lublin_256.swf; "
                    "repeatable)")
    ap.add_argument("--limits", choices=("wall-clock", "stretched"), default="wall-clock",
                    help="time limits of jobs started below their size (scheduler.core.walltime)")
    ap.add_argument("--no-sensitivity", action="store_true", help="skip the job-model sensitivity table")
    ap.add_argument("--out", help="results file name under benchmarks/results (default traces.json, "
                    "traces-quick.json with --quick)")
    a = ap.parse_args(argv)
    max_jobs = 2000 if a.quick else None
    paths = a.trace or ([] if a.lublin else [os.path.join(a.traces, f"{n}.swf") for n in ("lublin_256", "mira")])
    traces = [(os.path.splitext(os.path.basename(p))[0], lambda p=p: read_swf(p, max_jobs=max_jobs)) for p in paths]
    traces += [(f"lublin_seed{k}", lambda k=k: generate(max_jobs or 10_000, 256, seed=k)) for k in a.lublin or ()]
    if a.seeds is not None and a.seeds < 1:
        ap.error(f"--seeds must be at least 1, got {a.seeds}")
    summary, detail = {}, {}
    for name, load in traces:
        if a.seeds:
            summary[name] = {"over_seeds": over_seeds(name, load(), a.seeds, a.limits)}
        else:
            summary[name], detail[name] = one_trace(name, load(), a.seed, a.limits, not a.no_sensitivity)
    os.makedirs(RESULTS, exist_ok=True)
    default = "traces-seeds.json" if a.seeds else "traces-quick.json" if a.quick else "traces.json"
    out = os.path.join(RESULTS, a.out or default)
    with open(out, "w") as f:
        json.dump({"benchmark": "traces", "quick": a.quick, "seed": a.seed, "seeds": a.seeds,
                   "traces": [n for n, _ in traces],
                   "when": time.strftime("%Y-%m-%dT%H:%M:%S"),
                   "host": {"cpus": os.cpu_count(), "python": platform.python_version()},
                   "summary": summary, "results": detail}, f, indent=1)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
