"""The baselines resizing is measured against: moldable EASY, the costs beside the gains, SP(K) on rigid jobs."""

from __future__ import annotations

import argparse
import json
import os

import pytest

from scheduler.core.policy import JobSpec, app_policy, preset
from scheduler.lab import JobModel, SimInput, simulate, simulate_cli
from scheduler.lab.runner import against_baselines, run_policies, with_baselines

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRACE = os.path.join(ROOT, "examples", "traces", "lublin_64.swf")


def job(jid, t, n, run, resizable=False, walltime=None, A=64.0):
    spec = JobSpec(jid, f"j{jid}", t, n, min_procs=1 if resizable else n, max_procs=None if resizable else n,
                   resizable=resizable, walltime=walltime or run, iterations=10)
    return SimInput(spec, JobModel(work=run / 10 * n, A=A, sigma=0.0, iterations=10), run)


def workload():
    # a rigid 6-slot job runs 100 s; a malleable 8-slot job (A = 64: scales) arrives and fits on 2 of 8 slots;
    # a second rigid job arrives later: moldable EASY squeezes the malleable job, the resizing presets also grow it
    return [job(0, 0.0, 6, 100.0), job(1, 1.0, 8, 200.0, resizable=True, walltime=400.0),
            job(2, 150.0, 2, 50.0)]


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="reshape")
    simulate_cli.add_commands(ap.add_subparsers())
    return ap


def test_moldable_easy_squeezes_as_the_resizing_presets_do_and_never_resizes():
    assert preset("moldable-easy").remap == "static"
    res = run_policies(workload(), 8, ["moldable-easy", "reshape-squeeze"], record=True)
    mold, squeeze = (res[n]["result"].decisions for n in ("moldable-easy", "reshape-squeeze"))
    first = next((d.kind, d.job_id, d.nprocs) for d in mold if d.job_id == 1)
    assert first == ("start", 1, 2) == next((d.kind, d.job_id, d.nprocs) for d in squeeze if d.job_id == 1)
    assert {d.kind for d in mold} == {"start"} and res["moldable-easy"]["resizes"] == 0
    assert any(d.kind == "expand" for d in squeeze)
    rigid = simulate(workload(), 8, app_policy("easy"), record=True)
    assert [(d.job_id, d.nprocs) for d in rigid.decisions if d.job_id == 1] == [(1, 8)]  # rigid EASY waits


def test_every_resizing_preset_is_compared_with_rigid_easy_and_the_best_non_resizing_one():
    assert with_baselines(["reshape-plus"]) == ["easy", "moldable-easy", "reshape-plus"]
    assert with_baselines(["easy", "fcfs"]) == ["easy", "fcfs"]  # nothing resizes: nothing to add
    res = {"easy": {"mean_turnaround": 300.0}, "moldable-easy": {"mean_turnaround": 200.0},
           "fcfs": {"mean_turnaround": 400.0}, "reshape-plus": {"mean_turnaround": 250.0}}
    vs = against_baselines(res)
    assert vs == {"reshape-plus": {"best_nonresizing": "moldable-easy", "turnaround_easy_over": 1.2,
                                   "turnaround_best_nonresizing_over": 0.8}}  # loses to moldable starts


def test_costs_are_reported_beside_the_gains():
    m = simulate(workload(), 8, app_policy("easy")).metrics()
    # the 8-slot job (more than a quarter of 8 slots) waits for job 0: 99 s; job 0 is big too (6 slots)
    assert m["big_jobs"] == 2 and m["big_jobs_worst_wait"] == pytest.approx(99.0)
    assert m["big_jobs_mean_wait"] == pytest.approx(49.5) and m["resizes_per_job"] == 0.0
    assert m["max_wait"] == pytest.approx(150.0)  # job 2 (2 slots: not big) waits for the 8-slot job
    for k in ("mean_bounded_slowdown", "walltime_kills", "past_request", "big_jobs_mean_turnaround"):
        assert k in m


def test_simulate_adds_the_baselines_and_prints_the_costs(capsys):
    args = _parser().parse_args(["simulate", TRACE, "--policy", "reshape-plus", "--max-jobs", "80", "--quiet"])
    assert args.func(args) == 0
    out = capsys.readouterr().out
    assert "baselines added: easy, moldable-easy" in out
    for col in ("bsld", "big wait (s)", "big worst (s)", "resizes/job", "killed", "longer limit"):
        assert col in out
    assert "reshape-plus: mean turnaround vs EASY x" in out and "vs best non-resizing (" in out
    args = _parser().parse_args(["simulate", TRACE, "--policy", "reshape-plus", "--max-jobs", "80", "--json",
                                 "--limits", "stretched"])
    assert args.func(args) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["limits"] == "stretched" and set(doc["results"]) == {"easy", "moldable-easy", "reshape-plus"}
    assert set(doc["against_baselines"]["reshape-plus"]) == {"best_nonresizing", "turnaround_easy_over",
                                                             "turnaround_best_nonresizing_over"}


def test_static_partitioning_runs_rigid_jobs_at_their_size_in_the_partitions_they_cover():
    # SP(2) on 8 slots: partitions of 4. A rigid 6-slot job covers both; rigid 1-slot jobs take one each
    jobs = [job(0, 0.0, 1, 100.0), job(1, 1.0, 6, 10.0), job(2, 2.0, 1, 10.0),
            job(3, 3.0, 8, 50.0, resizable=True)]
    res = simulate(jobs, 8, app_policy("sp", k=2), record=True, check=True)
    starts = {d.job_id: (d.time, d.nprocs) for d in res.decisions}
    assert starts[0] == (0.0, 1)
    assert starts[1] == (100.0, 6)  # waits for both partitions
    assert starts[2] == (110.0, 1) and starts[3] == (110.0, 4)  # FCFS behind it; the malleable job at S = 4
    assert {r.job_id for r in res.records if r.killed} == set()  # started at 4 < 8 with the longer limit


def test_sp_runs_on_the_shipped_trace_and_refuses_a_bad_k_in_one_line(capsys):
    args = _parser().parse_args(["simulate", TRACE, "--policy", "sp:4", "--max-jobs", "60", "--quiet"])
    assert args.func(args) == 0
    assert "sp:4" in capsys.readouterr().out
    args = _parser().parse_args(["simulate", TRACE, "--policy", "sp:0"])
    assert args.func(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["reshape simulate: error: bad policy 'sp:0': sp:K needs a positive integer K"]
