"""``benchmarks.slurm_bound``: the Slurm workloads' jobs in the trace simulator, and the relaxation bound."""

from __future__ import annotations

import pytest

from benchmarks import calibrate_apps
from benchmarks.slurm_bound import one_workload, sim_inputs, srpt_completions
from benchmarks.slurm_jobs import Job, Workload, lublin

TINY = Workload("tiny", 4, 2, (Job("m01", 0.0, 2, 100, True, "LU"), Job("r02", 5.0, 4, 50),
                               Job("m03", 10.0, 1, 80, True, "FFT"), Job("r04", 12.0, 1, 30)))


def test_srpt_runs_the_shortest_remaining_job_first():
    # A runs 0-1, B (shorter than A's 3 left) 1-2, A 2-5, C 5-15
    assert srpt_completions([(0.0, 4.0), (1.0, 1.0), (2.0, 10.0)]) == [5.0, 2.0, 15.0]
    assert srpt_completions([(3.0, 1.0)]) == [4.0]


def test_the_jobs_keep_their_sizes_and_run_times():
    jobs, largest = sim_inputs(TINY, calibrate_apps.load())
    assert [j.spec.nprocs for j in jobs] == [4, 8, 2, 2]
    assert [j.spec.resizable for j in jobs] == [True, False, True, False]
    for j, w in zip(jobs, TINY.jobs, strict=True):
        assert j.model.run_time(j.spec.nprocs) == pytest.approx(w.seconds)
        assert all(p % 2 == 0 for p in j.spec.sizes or (j.spec.nprocs,))  # whole nodes
    assert jobs[1].spec.walltime == 120.0  # 1.5 x 50 s in whole minutes
    assert largest == pytest.approx(0.02 * 100 / 100)


def test_easy_against_itself_is_one_and_no_schedule_beats_the_relaxation():
    row = one_workload(TINY, calibrate_apps.load(), ("easy", "reshape", "reshape-plus", "dep"), twin=False)
    assert row["jobs"] == 4
    assert row["ratio"]["easy"] == 1.0 and row["worst_job"]["easy"] == 1.0
    assert row["resizes"]["easy"] == 0 and row["resizes"]["reshape"] > 0
    assert row["oracle_ratio"] == max(row["ratio"].values()) >= 1.0
    rel = row["relaxation_mean_s"]
    assert 0 < max(rel["alone"], rel["area"]) <= rel["bound"] <= row["easy_mean_s"]
    assert row["ceiling_ratio"] >= row["oracle_ratio"]


@pytest.mark.parametrize("share", [0.0, 0.25, 0.5, 0.75, 1.0])
def test_a_generated_workload_has_the_share_of_malleable_jobs_asked_for_and_the_same_jobs_otherwise(share):
    half, w = lublin(3, 36, 1.4), lublin(3, 36, 1.4, malleable=share)
    assert sum(j.malleable for j in w.jobs) == int(36 * share)
    assert all(j.app is not None for j in w.jobs if j.malleable)
    assert [(j.arrival, j.nodes, j.seconds) for j in w.jobs] == [(j.arrival, j.nodes, j.seconds) for j in half.jobs]
    assert w.offered_load() == pytest.approx(1.4, rel=0.01)
    assert (w.name == "lublin-s3") == (share == 0.5)
    if share >= 0.5:  # a larger share keeps the half's malleable jobs malleable (one permutation)
        assert all(a.malleable for a, b in zip(w.jobs, half.jobs, strict=True) if b.malleable)


def test_a_share_of_malleable_jobs_outside_zero_to_one_is_refused_naming_it():
    with pytest.raises(ValueError, match=r"1\.5"):
        lublin(3, 36, 1.4, malleable=1.5)
