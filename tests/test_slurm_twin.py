"""The simulator's twin of the Slurm experiment (``scheduler.lab.slurm_twin``): its Slurm backfills as the
real one plans, and its controller is the real one, growing and shrinking the emulated jobs."""

from __future__ import annotations

from scheduler.core.jobfile import validate_job
from scheduler.lab.slurm_sim import SimSlurm
from scheduler.lab.slurm_twin import TwinJob, run

TIMES = ((2, 4.0), (4, 2.1), (8, 1.1), (16, 0.6), (32, 0.35))  # seconds per iteration by CPUs


def malleable(name: str, arrival: float, nodes: int) -> TwinJob:
    desc = validate_job({"name": name, "command": ["python", "-m", "apps.emujob"], "nprocs": 2 * nodes,
                         "sizes": [2, 4, 8, 16, 32], "launch": "single", "iterations": 100,
                         "walltime": 600.0}, 32)
    return TwinJob(name, arrival, nodes, 400.0, 10, True, TIMES, 100, 0.02, desc)


def test_its_slurm_backfills_a_short_job_and_ends_one_past_its_limit():
    s = SimSlurm([f"n{i}" for i in range(1, 9)])
    a = s.submit("a", 6, 2, 0.0, kind="rigid")
    b = s.submit("b", 8, 1, 0.0, kind="rigid")
    c = s.submit("c", 2, 1, 0.0, kind="rigid")
    assert [j.id for j in s.schedule(0.0)] == [a, c]  # c fits in before b's start at a's end
    assert s.jobs[b].predicted == 120.0
    view, idle = s.view(1.0)
    assert idle == 0 and {j.id: j.reason for j in view if j.state == "PENDING"} == {b: "Resources"}
    s.finish(c, 50.0)
    s.schedule(50.0)
    assert s.jobs[a].state == "RUNNING"
    s.schedule(160.0)  # a ran past its limit (120 s): ended at the next 30 s check plus KillWait
    assert s.jobs[a].state == "TIMEOUT" and s.jobs[b].state == "RUNNING"
    assert not s.keep(b, ["n2"]) or s.jobs[b].hosts[0] == "n2"  # never without its first node


def test_the_controller_grows_a_lone_job_and_shrinks_it_for_a_rigid_one_that_would_wait():
    jobs = [malleable("m", 0.0, 2), TwinJob("r", 30.0, 8, 20.0, 1)]
    static = run(jobs, 16, 2, False)
    site = run(jobs, 16, 2, True)
    assert all(j["state"] == "COMPLETED" for r in (static, site) for j in r["jobs"].values())
    m_static, m_site = (r["jobs"]["m"]["end"] - r["jobs"]["m"]["start"] for r in (static, site))
    assert m_site < 0.7 * m_static  # it grew into the idle nodes
    sizes = [e["nprocs"] for e in site["history"]["events"] if e["kind"] in ("start", "expand", "shrink")]
    assert max(sizes) > 4 and sizes[-1] < max(sizes)  # and gave some back
    assert site["jobs"]["r"]["start"] - site["jobs"]["r"]["submit"] < 10.0
    assert not site["late_starts"]


def test_the_twin_runs_its_controller_under_the_preset_the_controller_options_name():
    """``--controller-args "--policy NAME"`` reaches the real daemon and the twin alike: under rigid EASY's
    preset the lone job of the test above never grows."""
    from benchmarks.slurm_workload import twin_policy

    assert twin_policy(["--max-stretch", "2", "--policy", "easy"]) == "easy"
    assert twin_policy(["--max-stretch", "2"]) == "reshape"
    site = run([malleable("m", 0.0, 2)], 16, 2, True, policy="easy")
    assert site["jobs"]["m"]["state"] == "COMPLETED"
    assert not [e for e in site["history"]["events"] if e["kind"] == "expand"]


def test_add_summarizes_the_earlier_workloads_with_the_new_ones(tmp_path, monkeypatch):
    import json

    import benchmarks.slurm_workload as S
    monkeypatch.setattr(S, "RESULTS", str(tmp_path))
    old = {"workloads": ["a.json", "b.json"], "runs": {"a": [1], "b": [2]},
           "summary": {"per_workload": {"a": {"turnaround_static_over_reshape": 1.0, "jobs_lost": 1},
                                        "b": {"turnaround_static_over_reshape": 1.2, "jobs_lost": 0}}}}
    (tmp_path / "out.json").write_text(json.dumps(old))
    new = {"b": {"turnaround_static_over_reshape": 1.6, "jobs_lost": 0, "runs": [3]}}
    per, runs, paths = S.with_earlier("out", new, {"b": [3]}, ["b.json", "c.json"])
    assert runs == {"a": [1], "b": [3]} and paths == ["a.json", "b.json", "c.json"]
    s = S.overall(per)
    assert s["workloads"] == 2 and abs(s["turnaround_static_over_reshape"] - 1.3) < 1e-9 and s["jobs_lost"] == 1
    assert S.with_earlier("missing", {}, {}, ["x"]) == ({}, {}, ["x"])


def test_a_jittered_twin_varies_with_its_seed_and_repeats_with_the_same_one():
    from scheduler.lab.slurm_twin import Latencies

    jobs = [malleable("m", 0.0, 2), TwinJob("r", 30.0, 8, 20.0, 1), malleable("n", 40.0, 4)]
    ends = lambda lat: [j["end"] for j in run(jobs, 16, 2, True, lat=lat)["jobs"].values()]  # noqa: E731
    point = ends(Latencies())
    draws = [ends(Latencies(jitter=0.5, iter_jitter=0.03, seed=s)) for s in (1, 2)]
    assert draws[0] != point and draws[0] != draws[1]
    assert ends(Latencies(jitter=0.5, iter_jitter=0.03, seed=1)) == draws[0]
