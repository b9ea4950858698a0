"""The Slurm benchmark's latency metrics (``benchmarks.slurm_metrics``) read from a controller's history."""

from __future__ import annotations

from benchmarks.slurm_metrics import grow_latencies, moved, release_latencies


def _history() -> dict:
    """Job 1 (Slurm job 111, on node1 and, through expander 112, node2) is asked at t=52 to shrink for
    waiting Slurm job 125; 125 starts at t=54 on nodes that were free by then, the node job 1 gives back
    at t=55 goes to the next waiting job (126), and 125 ends at t=84."""
    return {
        "jobs": [{"job_id": 1, "allocation": "111"}, {"job_id": 5, "allocation": "125"}],
        "events": [
            {"t": 10.0, "job_id": 1, "kind": "expand"},
            {"t": 52.0, "job_id": 1, "kind": "shrink_request",
             "detail": "4->2: Slurm job 125 is waiting for 2 node(s)"},
            {"t": 53.5, "job_id": 1, "kind": "shrink", "detail": "4->2"},
        ],
        "node_events": [
            {"t": 0.0, "kind": "granted", "host": "node1", "detail": "allocation of Slurm job 111"},
            {"t": 9.0, "kind": "granted", "host": "node2",
             "detail": "granted by Slurm job 112 for Slurm job 111 in 0.9 s"},
            {"t": 54.0, "kind": "granted", "host": "node9", "detail": "allocation of Slurm job 125"},
            {"t": 55.0, "kind": "released", "host": "node2",
             "detail": "released to Slurm: Slurm job 126 is waiting for 1 node(s)"},
            {"t": 84.0, "kind": "released", "host": "node9", "detail": "Slurm job 125 ended"},
        ],
    }


def test_a_release_is_timed_to_the_shrunk_jobs_node_going_back_not_to_the_waiting_jobs_end():
    assert release_latencies(_history()) == [3.0]


def test_no_release_counts_when_the_shrunk_job_never_gave_a_node_back():
    h = _history()
    h["node_events"] = [e for e in h["node_events"] if e["host"] != "node2" or e["kind"] == "granted"]
    assert release_latencies(h) == []


def test_a_grant_is_timed_to_the_jobs_next_expansion():
    assert grow_latencies(_history()) == [1.0]


def test_a_node_given_back_before_the_jobs_next_expansion_is_not_timed_to_it():
    """Seen on real Slurm: an expander's node granted and at once given back to a waiting job; the job's
    next expansion, onto another node 49 s later, is not that node's grow latency."""
    h = _history()
    h["node_events"].insert(2, {"t": 9.0, "kind": "released", "host": "node2",
                                "detail": "released to Slurm: Slurm job 120 is waiting for 1 node(s)"})
    assert grow_latencies(h) == []


def test_a_request_withdrawn_before_any_node_went_back_is_not_timed_to_the_next_release():
    h = _history()
    h["events"].insert(1, {"t": 20.0, "job_id": 1, "kind": "shrink_request",
                           "detail": "4->2: Slurm job 117 is waiting for 1 node(s)"})
    assert release_latencies(h) == [3.0]


def test_the_twin_band_error_is_how_far_outside_the_jittered_range_the_measured_ratio_lies():
    from benchmarks.slurm_metrics import combine

    run = {"turnaround_static_over_reshape": 1.0, "utilization_reshape_over_static": 1.2}
    twin = {"turnaround_static_over_reshape": 1.1, "utilization_reshape_over_static": 1.2}
    band = {"turnaround_static_over_reshape": [1.05, 1.15], "utilization_reshape_over_static": [1.1, 1.3]}
    out = combine([run], twin, band)
    assert abs(out["twin_error_max"] - 0.1) < 1e-9  # the point twin's error
    assert abs(out["twin_band_error_max"] - 0.05) < 1e-9  # 1.0 lies 0.05 below the band; 1.2 lies inside
    assert combine([run], twin)["twin_error_max"] == out["twin_error_max"] and "twin_band" not in combine([run], twin)


def test_the_turnaround_moved_is_split_into_what_jobs_saved_and_lost_and_the_ratio_without_the_losses():
    rows = [{"ok": True, "turnaround_static": 100.0, "turnaround_reshape": 60.0},  # saved 40
            {"ok": True, "turnaround_static": 50.0, "turnaround_reshape": 70.0},  # lost 20
            {"ok": False, "turnaround_static": 10.0, "turnaround_reshape": 900.0}]  # lost job: left out
    m = moved(rows)
    assert m["turnaround_saved_per_job_s"] == 20.0 and m["turnaround_lost_per_job_s"] == 10.0
    assert m["turnaround_static_over_reshape_without_losses"] == 75.0 / 55.0  # the static mean over it less 20
    assert moved([]) == {}


def test_latencies_are_computed_again_from_a_runs_kept_evidence(tmp_path):
    """``--retwin`` takes a kept run's latencies from its evidence (the driver's record in the .tar.gz), so a
    metric's fix reaches results already written."""
    import io
    import json
    import tarfile

    from benchmarks.slurm_workload import evidence_latencies

    data = json.dumps({"history": _history()}).encode()
    path = tmp_path / "default-r1.tar.gz"
    with tarfile.open(path, "w:gz") as t:
        info = tarfile.TarInfo("w1-default-r1/result.json")
        info.size = len(data)
        t.addfile(info, io.BytesIO(data))
    got = evidence_latencies(str(path))
    assert got["release_latency_s"] == {"median": 3.0, "max": 3.0, "n": 1}
    assert got["grow_latency_s"] == {"median": 1.0, "max": 1.0, "n": 1}
    assert evidence_latencies(str(tmp_path / "missing.tar.gz")) == {}
