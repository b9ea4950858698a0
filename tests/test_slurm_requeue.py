"""Requeues through Slurm under the site controller, without Slurm: :class:`SlurmSite` and the core driven by
registrations and Slurm views written here (the real ``docker kill`` of a batch host is in
``tests/test_cluster_slurm.py``).

A job with checkpoints whose batch host Slurm took out of its Slurm job (lost: the batch script went with it),
or that keeps too few CPUs for its smallest size after a loss, is requeued (``scontrol requeue``); once Slurm
shows its Slurm job back in the queue the job waits, holding no node, its restart counted once; its next batch
attempt registers (Slurm vouches: running, requeued, the owner's, holding the hosts) and it resumes from its
checkpoint at the size that allocation gives, as the same job. A job that cannot resume ends with why and its
Slurm job is cancelled (run again it would start over).
"""

from __future__ import annotations

import pytest

from scheduler.cli.slurm import site_flags
from scheduler.core import events as C
from scheduler.core.actions import StateError
from scheduler.rm.slurm.edge import CancelJob, EndJob, RequeueJob
from scheduler.rm.slurm.verify import mismatch, parse_show_job
from tests.test_slurm_restart import heat
from tests.test_slurm_site import job, outbox, point, site


def registered(**kw):
    st, rm = site()
    jid = rm.adopt(st.port, heat(**kw), "101", ["n1", "n1", "n2", "n2"], 0.0, None)  # n1: its batch host
    st.handle(C.ResizePoint(job_id=jid, iteration=12, nprocs=4, iter_time=1.0), 5.0)
    outbox(rm)
    return st, rm, jid


def leased(st, alloc: str) -> list[str]:
    return sorted(h for h, a in st.pool.leases.items() if a == alloc)


def test_a_job_whose_batch_host_slurm_took_out_is_requeued_and_resumes_on_its_next_allocation_as_the_same_job():
    st, rm, jid = registered()
    j = st.jobs[jid]
    rm.apply(st.port, 40.0, [job("101", "heat", "RUNNING", ["n2"])], 4, 40.0)  # Slurm: n1 is out of the job (--no-kill)
    assert RequeueJob("101") in outbox(rm) and j.state == "running"
    rm.apply(st.port, 41.0, [job("101", "heat", "RUNNING", ["n2"])], 4, 41.0)
    assert not [o for o in outbox(rm) if isinstance(o, RequeueJob)]  # asked once
    for t in (42.0, 43.0):  # Slurm requeued it: back in its queue; a second look changes nothing
        rm.apply(st.port, t, [job("101", "heat", "PENDING", reason="BeginTime")], 4, t)
    assert (j.state, j.restarts, j.hosts, j.nprocs) == ("waiting", 1, [], 0), (j.state, j.hosts)
    assert j.failures == ["Slurm requeued job 101"] and not leased(st, "101") and not any(st.pool.used.values())
    assert any("waits for requeued Slurm job 101" in n for n in rm.info()["notes"])
    assert st.tick(44.0) == [] and j.state == "waiting"  # never started by the controller itself
    st.validate()
    # its next batch attempt, on other nodes
    again = rm.adopt(st.port, heat(), "101", ["n3", "n3", "n4", "n4"], 60.0, None)
    assert again == jid and (j.state, j.restarts, j.hosts) == ("running", 1, ["n3", "n3", "n4", "n4"])
    assert leased(st, "101") == ["n3", "n4"] and rm.broker.groups["101"].batch_host == "n3"
    assert any("resumes from its checkpoint in requeued Slurm job 101 at 4" in n for n in rm.info()["notes"])
    st.validate()
    rm.apply(st.port, 61.0, [job("101", "heat", "RUNNING", ["n3", "n4"])], 4, 61.0)
    assert j.state == "running" and not [o for o in outbox(rm) if isinstance(o, RequeueJob | EndJob)]
    point(st, jid, 11, 1.0, 62.0)  # resumed at the checkpoint of iteration 10: two iterations lost
    assert (j.resumed_at, j.iterations_lost, j.restarts) == (10, 2, 1)
    st.validate()


def test_the_next_allocation_gives_the_size_it_has():
    st, rm, jid = registered()
    # a one-node loss: Slurm's own
    rm.apply(st.port, 42.0, [job("101", "heat", "PENDING", reason="BeginTime")], 4, 42.0)
    rm.adopt(st.port, heat(), "101", ["n5", "n5"], 60.0, None)
    j = st.jobs[jid]
    assert (j.state, j.nprocs, j.hosts, j.restarts) == ("running", 2, ["n5", "n5"], 1)
    st.validate()


def test_too_few_cpus_left_requeues_instead_of_failing_and_counts_the_restart_once():
    st, rm, jid = registered(min_procs=4)
    with pytest.raises(StateError) as e:
        rm.adopt(st.port, heat(min_procs=4), "101", ["n1", "n1"], 10.0, None, (255, ["n2"]))
    assert e.value.code == "requeued", e.value
    assert e.value.message.startswith("2 CPU(s) left in its allocation (lost: n2), its smallest size is 4: requeued")
    j = st.jobs[jid]
    assert RequeueJob("101") in outbox(rm) and (j.state, j.restarts) == ("running", 0)
    rm.apply(st.port, 12.0, [job("101", "heat", "PENDING", reason="BeginTime")], 4, 12.0)
    assert (j.state, j.restarts) == ("waiting", 1) and not any(st.pool.used.values())
    st.validate()
    rm.adopt(st.port, heat(min_procs=4), "101", ["n3", "n3", "n4", "n4"], 60.0, None)
    assert (j.state, j.nprocs, j.restarts) == ("running", 4, 1)
    st.validate()


def test_a_requeued_job_that_cannot_resume_ends_with_why_and_its_slurm_job_is_cancelled():
    st, rm, jid = registered(max_restarts=0)
    rm.apply(st.port, 40.0, [job("101", "heat", "RUNNING", ["n2"])], 4, 40.0)
    j = st.jobs[jid]
    assert EndJob("101") in outbox(rm) and j.state == "failed"
    assert "its batch host n1 left Slurm job 101 (lost); not requeued: it was restarted 0 time(s)" in j.error, j.error
    st.validate()
    st, rm, jid = registered(checkpoint=None)
    rm.apply(st.port, 42.0, [job("101", "heat", "PENDING", reason="BeginTime")], 4, 42.0)
    j = st.jobs[jid]
    assert EndJob("101") in outbox(rm) and j.state == "failed" and "no checkpoint setting" in j.error, j.error
    st.validate()


def test_a_requeued_job_whose_slurm_job_is_cancelled_meanwhile_fails_and_its_expanders_go():
    st, rm, jid = registered()
    rm.apply(st.port, 1.0, [job("101", "heat", "RUNNING", ["n1", "n2"]), job("201", "reshape-expand-101", "RUNNING",
                                                                        ["n3"])], 4, 1.0)
    rm.apply(st.port, 42.0, [job("101", "heat", "PENDING", reason="BeginTime"),
                        job("201", "reshape-expand-101", "RUNNING", ["n3"])], 4, 42.0)
    assert CancelJob("201") in outbox(rm) and not leased(st, "101")
    for t in (50.0, 51.0):
        rm.apply(st.port, t, [], 4, t)  # scancel: gone from two looks
    j = st.jobs[jid]
    assert j.state == "failed" and "requeued Slurm job 101 ended GONE before it ran again" in j.error, j.error
    st.validate()


def test_a_new_attempt_is_taken_only_where_slurm_says_it_requeued_the_job():
    line = ("JobId=101 UserId=alice(1001) JobState=RUNNING Reason=None Requeue=1 Restarts={n} BatchFlag=1 "
            "BatchHost=n3 NodeList=n[3-4]")
    assert parse_show_job(line.format(n=2))[0].restarts == 2
    assert mismatch(parse_show_job(line.format(n=1)), "101", ["n3"], "alice", 1001, requeued=True) is None
    assert mismatch(parse_show_job(line.format(n=0)), "101", ["n3"], "alice", 1001, requeued=True) == (
        "bad_hosts", "Slurm job 101 was never requeued (Restarts=0): not a new attempt of it")


def test_site_jobs_with_checkpoints_are_requeueable_and_the_others_are_not():
    assert site_flags(heat())[1:] == ["--no-kill", "--requeue"]
    assert site_flags(heat(checkpoint=None))[1:] == ["--no-kill", "--no-requeue"]


def test_a_new_batch_attempt_whose_requeue_no_look_saw_is_taken_as_one_when_slurm_says_so():
    """The controller was away while Slurm requeued and restarted the job: its next batch attempt registers from
    another batch host while the job still runs in the controller's books."""
    st, rm, jid = registered()
    line = "JobId=101 UserId=u(1001) JobState=RUNNING Restarts={n} BatchHost=n3 NodeList=n[3-4]"

    class Accounts:
        def account(self, who):
            return "u"

        def uid(self, who):
            return 1001

    rm.verified.accounts = Accounts()
    rm.verified.show = lambda jid: line.format(n=0)
    with pytest.raises(StateError, match="never requeued"):
        rm.adopt(st.port, heat(), "101", ["n3", "n3", "n4", "n4"], 60.0, "uid:1001")
    j = st.jobs[jid]
    assert (j.state, j.restarts, j.hosts) == ("running", 0, ["n1", "n1", "n2", "n2"])
    rm.verified.show = lambda jid: line.format(n=1)
    assert rm.adopt(st.port, heat(), "101", ["n3", "n3", "n4", "n4"], 61.0, "uid:1001") == jid
    assert (j.state, j.restarts, j.hosts) == ("running", 1, ["n3", "n3", "n4", "n4"])
    assert leased(st, "101") == ["n3", "n4"] and not st.pool.used["n1"]
    st.validate()
