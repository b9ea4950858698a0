"""Recovery from lost processes in the scheduler core (``scheduler.core.restarts``): events in, actions out.

A job with ``checkpoint`` that loses a rank, ``mpiexec`` or a node is queued again and relaunched as a new
attempt (its own process tag), resuming from its checkpoint; the iterations since the checkpoint are
counted as lost; anything the program itself got wrong ends it as before.
"""

from __future__ import annotations

import pytest

from scheduler.core import events as C
from scheduler.core.jobfile import validate_job
from scheduler.core.policy import app_policy, remap_policy
from scheduler.core.pool import Node, Pool, default_pool
from scheduler.core.restarts import KILLED
from scheduler.core.state import ClusterState, Kill, Launch


def make(pool=None) -> ClusterState:
    return ClusterState(pool or default_pool(4), app_policy("easy"), remap_policy("static"))


def job(**kw) -> dict:
    return validate_job({"command": ["true"], "nprocs": 2, "checkpoint": "every:5", **kw})


def started(st: ClusterState, **kw) -> int:
    jid = st.submit(job(**kw), 0.0)
    assert st.tick(0.0) == [Launch(jid)]
    return jid


@pytest.mark.parametrize("code", [*sorted(KILLED), None])
def test_a_job_whose_processes_were_killed_is_relaunched_as_its_next_attempt(code):
    st = make()
    jid = started(st)
    st.handle(C.ResizePoint(job_id=jid, iteration=12, nprocs=2, iter_time=1.0), 5.0)
    acts = st.exited(jid, code, 6.0)
    j = st.jobs[jid]
    assert acts == [Launch(jid)] and j.state == "running" and j.restarts == 1 and j.iterations == 0
    assert j.failures == [f"exit code {code}" if code is not None else "process vanished"]
    st.handle(C.ResizePoint(job_id=jid, iteration=11, nprocs=2, iter_time=1.0), 9.0)  # resumed at 10
    assert (j.resumed_at, j.iterations_lost) == (10, 2)
    st.validate()


@pytest.mark.parametrize(("report", "code"), [("error", 9), (None, 3), (None, 11), ("done", 9)])
def test_what_the_program_got_wrong_or_finished_is_not_restarted(report, code):
    st = make()
    jid = started(st)
    if report:
        st.handle(C.Finished(job_id=jid, status=report), 1.0)
    st.exited(jid, code, 2.0)
    assert st.jobs[jid].restarts == 0 and st.jobs[jid].state in ("done", "failed")


def test_a_job_that_reports_a_lost_process_is_restarted_until_max_restarts():
    st = make()
    jid = started(st, max_restarts=2)
    for attempt in (1, 2):
        st.handle(C.Finished(job_id=jid, status="lost", error="expand 2->4 did not complete within 60 s"), 1.0)
        assert st.exited(jid, 75, 2.0) == [Launch(jid)] and st.jobs[jid].restarts == attempt
    st.handle(C.Finished(job_id=jid, status="lost", error="again"), 3.0)
    st.exited(jid, 75, 4.0)
    j = st.jobs[jid]
    assert j.state == "failed" and j.restarts == 2 and "again" in j.error and len(j.failures) == 2
    without = make()
    jid = without.submit(validate_job({"command": ["true"], "nprocs": 2}), 0.0)  # no checkpoint: fails as before
    without.tick(0.0)
    without.exited(jid, 9, 1.0)
    assert without.jobs[jid].state == "failed" and without.jobs[jid].restarts == 0


def test_a_node_down_restarts_the_job_on_the_nodes_left_killing_only_the_lost_attempt():
    st = make(Pool([Node("a", 2), Node("b", 2)]))
    for n in ("a", "b"):
        st.node_register(n, "m1", 0.0)
    jid = started(st, nprocs=4, min_procs=1, sizes=[1, 2, 4])
    assert sorted(set(st.jobs[jid].hosts)) == ["a", "b"]
    acts = st.node_down("b", 1.0, "no heartbeat")
    assert acts[0] == Kill(jid, 0) and Launch(jid) in acts
    j = st.jobs[jid]
    assert j.restarts == 1 and j.nprocs == 2 and set(j.hosts) == {"a"} and j.spec.nprocs == 2
    st.validate()


def test_a_monitor_report_of_an_earlier_attempt_settles_nothing():
    st = make(Pool([Node("a", 4)]))
    st.node_register("a", "m1", 0.0)
    jid = started(st)
    st.exited(jid, 9, 1.0)
    st.node_heartbeat("a", "m1", [], 1.5)  # heard from since the loss: the next attempt may start there
    st.tick(1.5)
    st.handle(C.JobEnded(job_id=jid, node="a", status="end"), 2.0)  # attempt 0 ended
    assert st.jobs[jid].node_report is None
    st.handle(C.JobEnded(job_id=jid, node="a", status="end", attempt=1), 3.0)
    assert st.jobs[jid].node_report is not None


@pytest.mark.parametrize("code", [0, 1, 255])
def test_a_job_that_ends_with_a_resize_under_way_is_restarted_whatever_its_exit_status(code):
    """A spawned rank killed mid-redistribution can leave Hydra exiting 0; the resize never confirmed means
    the job did not end by itself."""
    st = ClusterState(default_pool(4), app_policy("easy"), remap_policy("reshape"))
    jid = started(st, max_procs=4)
    reply = st.handle(C.ResizePoint(job_id=jid, iteration=6, nprocs=2, iter_time=1.0), 5.0)
    assert st.jobs[jid].pending is not None, reply
    assert st.exited(jid, code, 6.0) == [Launch(jid)]
    assert st.jobs[jid].restarts == 1 and st.jobs[jid].pending is None
    st.validate()


def test_a_checkpointed_job_that_exits_0_without_reporting_done_was_killed_and_is_restarted():
    """Hydra can exit 0 after a rank was killed; the runtime reports done at every normal exit, so a job
    that reached a resize point and exits 0 unannounced is a loss. Before any resize point, or with its
    done report, exit 0 is done; without checkpoints it is done as before."""
    st = make()
    jid = started(st)
    st.handle(C.ResizePoint(job_id=jid, iteration=12, nprocs=2, iter_time=1.0), 5.0)
    assert st.exited(jid, 0, 6.0) == [Launch(jid)] and st.jobs[jid].restarts == 1
    assert st.jobs[jid].failures == ["exit code 0 without a done report"]
    st.handle(C.ResizePoint(job_id=jid, iteration=13, nprocs=2, iter_time=1.0), 7.0)
    st.handle(C.Finished(job_id=jid, status="done"), 8.0)
    st.exited(jid, 0, 9.0)
    assert st.jobs[jid].state == "done" and st.jobs[jid].restarts == 1
    quiet = make()
    jid = started(quiet)
    quiet.exited(jid, 0, 1.0)  # never reached a resize point: nothing to resume, a plain program's end
    assert quiet.jobs[jid].state == "done"
    plain = make()
    jid = plain.submit(validate_job({"command": ["true"], "nprocs": 2}), 0.0)
    plain.tick(0.0)
    plain.handle(C.ResizePoint(job_id=jid, iteration=3, nprocs=2, iter_time=1.0), 1.0)
    plain.exited(jid, 0, 2.0)
    assert plain.jobs[jid].state == "done"


def test_a_lost_attempt_s_monitored_nodes_take_nothing_until_they_heartbeat_again():
    """Its mpiexec exits before the node that died is known down (node timeout): the restart is placed only
    on nodes heard from since, never on the dead one."""
    st = make(Pool([Node("a", 2), Node("b", 2), Node("c", 2)]))
    for n in ("a", "b", "c"):
        st.node_register(n, "m1", 0.0)
    jid = started(st, nprocs=4)
    assert sorted(set(st.jobs[jid].hosts)) == ["a", "b"]
    assert st.exited(jid, 255, 1.0) == []  # a and b suspect, c alone cannot hold 4
    assert st.jobs[jid].state == "queued" and st.node_rows(1.5)[0]["state"] == "suspect"
    st.node_heartbeat("a", "m1", [], 2.0)
    assert st.tick(2.0) == [Launch(jid)] and sorted(set(st.jobs[jid].hosts)) == ["a", "c"]
    st.node_down("b", 11.0, "no heartbeat")  # the dead node, known at last: nothing of the job was there
    j = st.jobs[jid]
    assert j.state == "running" and j.restarts == 1 and not st.suspect
    st.validate()
