"""The pure parts of ``benchmarks.recovery --slurm``: when a job hit by a node loss ran again (from the site
controller's events) and what the rows sum to. The runs themselves need the compose cluster (Slurm tier:
``tests/test_cluster_slurm.py`` runs the same scenario, :func:`scheduler.testing.slurm_site.node_loss`)."""

from __future__ import annotations

import pytest

from benchmarks.recovery_slurm import summarize
from scheduler.testing.slurm_site import node_loss, running_again


def ev(t: float, job_id: int, kind: str) -> dict:
    return {"t": t, "job_id": job_id, "kind": kind, "nprocs": 4, "busy": 4, "detail": ""}


def test_a_job_restarted_in_its_allocation_runs_again_at_its_restart_event():
    events = [ev(1.0, 1, "start"), ev(5.0, 2, "restart"), ev(12.0, 1, "restart"), ev(40.0, 1, "end")]
    assert running_again(events, 1, 10.0) == 12.0


def test_a_requeued_job_runs_again_when_its_new_batch_attempt_starts_not_when_it_is_requeued():
    events = [ev(1.0, 1, "start"), ev(12.0, 1, "restart"), ev(30.0, 1, "start")]
    assert running_again(events, 1, 10.0) == 30.0


def test_a_job_that_never_ran_again_has_no_time():
    assert running_again([ev(1.0, 1, "start"), ev(11.0, 1, "end")], 1, 10.0) is None


def row(case: str, recovered: bool, identical: bool, lost: int | None, t: float | None) -> dict:
    return {"case": case, "recovered": recovered, "bit_identical": identical, "iterations_lost": lost,
            "failure_to_running_s": t, "done_at_failure": None if lost is None else 20 + lost}


def test_the_summary_counts_each_case_and_keeps_the_worst_time_beside_the_median():
    rows = [row("node", True, True, 3, 2.0), row("node", True, True, 5, 4.0), row("batch-host", True, True, 7, 30.0),
            row("batch-host", False, False, None, None)]
    s = summarize(rows, "here")
    assert (s["slurm_runs"], s["slurm_recovered"], s["slurm_bit_identical"]) == (4, 3, False)
    assert s["slurm_cases"]["node"] == {"runs": 2, "recovered": 2, "bit_identical": 2, "max_iterations_lost": 5,
                                        "max_done_at_failure": 25,
                                        "failure_to_running_s": {"median": 3.0, "max": 4.0}}
    assert s["slurm_cases"]["batch-host"]["recovered"] == 1
    assert s["slurm_failure_to_running_s"] == {"median": 4.0, "max": 30.0}
    assert s["slurm_max_iterations_lost"] == 7 and s["slurm_host"] == "here"


def test_an_unknown_case_is_refused_in_one_line_before_the_cluster_is_touched():
    with pytest.raises(ValueError, match="case 'head': allowed node, batch-host"):
        node_loss(None, "head", None)
