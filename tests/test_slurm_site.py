"""The site controller's logic without Slurm: the core, the Remap Scheduler and :class:`SlurmSite`
driven by Slurm views written here (the real slurmctld/slurmd are in ``tests/test_cluster_slurm.py``).

Jobs register from their batch scripts and are adopted on their allocation's nodes (leased to them);
an expander's nodes go to its own job only; a waiting rigid job gets nodes from the job that loses
least; a Slurm job that ends ends its reshape job; a cancel ends the Slurm job and its expanders.
"""

from __future__ import annotations

import pytest

from scheduler.core import events as C
from scheduler.core.actions import Kill, StateError
from scheduler.core.jobfile import validate_job
from scheduler.core.policy import app_policy, remap_policy
from scheduler.core.pool import Node, Pool
from scheduler.core.state import ClusterState
from scheduler.rm.slurm.edge import CancelJob, EndJob, SubmitExpanders
from scheduler.rm.slurm.site import SlurmSite
from scheduler.rm.slurm.view import SlurmJob, expander_name

NODES = [f"n{i}" for i in range(1, 7)]


def site() -> tuple[ClusterState, SlurmSite]:
    pool = Pool([Node(h, 2) for h in NODES])
    for h in NODES:
        pool.set_down(h)
    rm = SlurmSite("batch", {"grant_timeout": 10, "idle_release": 30, "expire_margin": 30}, pool=pool)
    rm.verified.me = "u"  # the user of every job in these views: the expanders are the controller's own
    st = ClusterState(rm.pool(None), app_policy("easy"), remap_policy("reshape"))
    for h in NODES:
        st.not_ours(h, "not ours")
    return st, rm


def emu(name: str, nprocs: int = 2, **kw) -> dict:
    return validate_job({"name": name, "command": ["python", "-m", "apps.emujob"], "nprocs": nprocs,
                         "max_procs": 8, "divides": 8, "launch": "single", **kw}, None)


def job(jid, name, state, nodes=(), reason="None", n=None, end=None, start=None) -> SlurmJob:
    return SlurmJob(jid, name, state, "u", n if n is not None else len(nodes), tuple(nodes), reason, 100, start, end)


def outbox(rm: SlurmSite) -> list:
    out = []
    while not rm.edge.outbox.empty():
        out.append(rm.edge.outbox.get())
    return out


def point(st: ClusterState, jid: int, it: int, t: float, now: float):
    return st.handle(C.ResizePoint(job_id=jid, iteration=it, nprocs=st.jobs[jid].nprocs, iter_time=t), now)[0]


def test_jobs_register_and_each_grows_only_onto_its_own_expanders():
    st, rm = site()
    a = rm.adopt(st.port, emu("a"), "101", ["n1", "n1"], 0.0, None)
    b = rm.adopt(st.port, emu("b"), "102", ["n2", "n2"], 0.0, None)
    assert rm.adopt(st.port, emu("a"), "101", ["n1", "n1"], 0.5, None) == a  # a retried registration
    st.validate()
    assert st.pool.leases == {"n1": "101", "n2": "102"} and st.pool.free == 0
    mains = [job("101", "a", "RUNNING", ["n1"]), job("102", "b", "RUNNING", ["n2"])]
    rm.apply(st.port, 1.0, mains, 4, 1.0)
    asks = [o for o in outbox(rm) if isinstance(o, SubmitExpanders)]
    assert sorted(o.main for o in asks) == ["101", "102"] and all(o.nodes == 1 for o in asks)  # 2 -> 4 each
    rm.broker.submitted("101", "201", 1.0)
    rm.broker.submitted("102", "202", 1.0)
    views = [*mains, job("201", expander_name("101"), "RUNNING", ["n3"]),
             job("202", expander_name("102"), "PENDING", reason="Resources", n=1)]
    rm.apply(st.port, 2.0, views, 2, 2.0)
    assert st.pool.leases["n3"] == "101" and st.pool.free_for("102") == 0 and st.pool.free_for("101") == 2
    assert point(st, b, 1, 4.0, 3.0).action == "continue"  # b may not take a's node
    adv = point(st, a, 1, 4.0, 3.0)
    assert adv.action == "expand" and adv.nprocs == 4 and set(adv.hosts) == {"n3"}
    st.validate()


def test_a_waiting_rigid_job_gets_a_node_from_the_job_that_loses_least():
    st, rm = site()
    a = rm.adopt(st.port, emu("a"), "101", ["n1", "n1"], 0.0, None)
    b = rm.adopt(st.port, emu("b"), "102", ["n2", "n2"], 0.0, None)
    views = [job("101", "a", "RUNNING", ["n1"]), job("102", "b", "RUNNING", ["n2"]),
             job("201", expander_name("101"), "RUNNING", ["n3"]), job("202", expander_name("102"), "RUNNING", ["n4"])]
    rm.apply(st.port, 1.0, views, 0, 1.0)
    for jid, t2, t4 in ((a, 10.0, 5.1), (b, 10.0, 9.0)):  # a gains 2x from its 4 slots, b 10%
        point(st, jid, 1, t2, 2.0)
        st.handle(C.Resized(job_id=jid, old=2, new=4, seconds=0.1), 2.1)
        point(st, jid, 2, t4, 3.0)
    outbox(rm)
    rigid = job("300", "rigid", "PENDING", reason="Resources", n=1, start=1000.0)  # Slurm predicts it late
    rm.apply(st.port, 4.0, [*views, rigid], 0, 4.0)
    assert st.jobs[b].shrink_request == 2 and st.jobs[a].shrink_request is None
    assert "n4" in st.pool.draining
    adv = point(st, b, 3, 9.0, 5.0)
    assert adv.action == "shrink" and adv.nprocs == 2
    st.handle(C.Resized(job_id=b, old=4, new=2, seconds=0.1), 5.1)
    rm.apply(st.port, 6.0, [*views, rigid], 0, 6.0)
    assert CancelJob("202") in outbox(rm)  # its expander held nothing else: cancelled
    assert "n4" in st.pool.down
    st.validate()


def test_a_job_ends_with_its_slurm_job_and_a_cancel_ends_the_slurm_job():
    st, rm = site()
    a = rm.adopt(st.port, emu("a"), "101", ["n1", "n1"], 0.0, None)
    b = rm.adopt(st.port, emu("b"), "102", ["n2", "n2"], 0.0, None)
    st.handle(C.Finished(job_id=a, status="done"), 1.0)
    for t in (2.0, 2.5):  # gone from two looks in a row
        rm.apply(st.port, t, [job("102", "b", "RUNNING", ["n2"])], 4, t)
    assert st.jobs[a].state == "done" and "n1" in st.pool.down and "n1" not in st.pool.leases
    assert rm.kill(st.port, st.cancel(b, 3.0) and [b]) == {b}
    assert EndJob("102") in outbox(rm)
    st.validate()


def test_plain_submissions_and_bad_registrations_are_refused_with_a_reason():
    st, rm = site()
    with pytest.raises(StateError, match="reshape submit --slurm"):
        rm.check_submit(emu("x"))
    with pytest.raises(StateError, match="not a Slurm job id"):
        rm.adopt(st.port, emu("x"), "abc", ["n1", "n1"], 0.0, None)
    with pytest.raises(StateError, match="nowhere not in partition batch"):
        rm.adopt(st.port, emu("x"), "7", ["nowhere", "nowhere"], 0.0, None)
    st.validate()


def test_a_restarted_controller_readopts_its_jobs_from_the_journal_and_slurm():
    """The core's records written as the journal does, read back by a new controller: the job runs on
    its leased nodes (no heartbeat expected of them), a node Slurm no longer holds for it is vacated."""
    from scheduler.core.job import Job
    from scheduler.core.nodestate import NodeRecord

    st, rm = site()
    a = rm.adopt(st.port, emu("a"), "101", ["n1", "n1"], 0.0, None)
    views = [job("101", "a", "RUNNING", ["n1"]), job("201", expander_name("101"), "RUNNING", ["n2", "n3"])]
    rm.apply(st.port, 1.0, views, 0, 1.0)
    point(st, a, 1, 4.0, 2.0)
    st.handle(C.Resized(job_id=a, old=2, new=4, seconds=0.1), 2.1)
    assert st.jobs[a].hosts == ["n1", "n1", "n2", "n2"]
    jobs = [Job.from_dict(j.to_dict()) for j in st.jobs.values()]
    nodes = [NodeRecord.from_dict(r.to_dict()) for r in st.nodes.values()]

    new, rm2 = site()
    new.restore_nodes(nodes, 100.0)
    new.restore(jobs, st.next_id)
    # meanwhile Slurm ended the expander's n3 (scontrol update) and n2 is still its
    rm2.first_look = lambda: ([job("101", "a", "RUNNING", ["n1"]),
                               job("201", expander_name("101"), "RUNNING", ["n2"])], 0)
    rm2.attach(new.port, 100.0)
    new.validate()
    assert new.pool.leases == {"n1": "101", "n2": "101"} and "n3" in new.pool.down
    assert not new.check_nodes(130.0) and new.jobs[a].state == "running"  # no heartbeats expected
    assert point(new, a, 2, 2.0, 131.0).action in ("continue", "expand")
    assert rm2.adopt(new.port, emu("a"), "101", ["n1", "n1"], 132.0, None) == a  # re-registering: the same job



@pytest.mark.parametrize("report, slurm, end", [("done", "COMPLETED", "done"), (None, "COMPLETED", "done"),
                                                 (None, "FAILED", "failed"), ("error", "COMPLETED", "failed")])
def test_a_job_registering_on_the_node_of_a_job_whose_slurm_job_just_ended_is_adopted(report, slurm, end):
    """Slurm starts the next job on a finished job's node at once, while the controller's looks
    (one a second, an end believed from two) still show the old job, or while the controller is
    away: the registration itself says the node is free (whole nodes), so the old job is settled
    then (its own report, else Slurm's final state) and the new one adopted."""
    st, rm = site()
    rm.final_state = lambda main: slurm
    a = rm.adopt(st.port, emu("a"), "101", ["n1", "n1", "n2", "n2"], 0.0, None)
    rm.apply(st.port, 1.0, [job("101", "a", "RUNNING", ["n1", "n2"])], 4, 1.0)
    if report:
        st.handle(C.Finished(job_id=a, status=report), 5.0)
    b = rm.adopt(st.port, emu("b"), "102", ["n2", "n2"], 5.2, None)  # no look since job 101 ended
    assert st.jobs[a].state == end and st.jobs[b].state == "running"
    assert st.pool.leases == {"n2": "102"} and "n1" in st.pool.down
    assert "101" not in rm.broker.groups and rm.broker.held == {"n2": "102"}
    st.validate()
    rm.step(st.port, 5.5)  # the pending actions: nothing left of 101 to cancel but its expanders
    rm.apply(st.port, 6.0, [job("102", "b", "RUNNING", ["n2"])], 14, 6.0)
    assert st.jobs[b].state == "running" and st.jobs[a].state == end
    st.validate()


def grown_onto_an_expander():
    """Job ``a`` (Slurm job 101 on n1) grown 2 -> 4 onto n3, which its expander 201 holds; the views of that look."""
    st, rm = site()
    a = rm.adopt(st.port, emu("a"), "101", ["n1", "n1"], 0.0, None)
    rm.broker.submitted("101", "201", 0.5)
    views = [job("101", "a", "RUNNING", ["n1"]), job("201", expander_name("101"), "RUNNING", ["n3"])]
    rm.apply(st.port, 1.0, views, 0, 1.0)
    point(st, a, 1, 4.0, 2.0)
    st.handle(C.Resized(job_id=a, old=2, new=4, seconds=0.1), 2.1)
    return st, rm, a, views


def test_a_registration_on_a_node_an_expander_no_longer_holds_waits_until_its_job_has_left_it():
    st, rm, a, views = grown_onto_an_expander()
    assert st.jobs[a].hosts == ["n1", "n1", "n3", "n3"]
    with pytest.raises(StateError, match="node_busy"):  # Slurm ended expander 201 and started 301 on n3
        rm.adopt(st.port, emu("b"), "301", ["n3", "n3"], 3.0, None)
    assert any("refused" in n for n in rm.notes)
    rm.apply(st.port, 3.5, [views[0], job("301", "b", "RUNNING", ["n3"])], 0, 3.5)
    adv = point(st, a, 2, 2.0, 4.0)
    assert adv.action == "shrink" and adv.nprocs == 2
    st.handle(C.Resized(job_id=a, old=4, new=2, seconds=0.1), 4.1)
    rm.apply(st.port, 4.5, [views[0], job("301", "b", "RUNNING", ["n3"])], 0, 4.5)
    b = rm.adopt(st.port, emu("b"), "301", ["n3", "n3"], 5.0, None)  # slurm-run's retry
    assert st.jobs[b].state == st.jobs[a].state == "running" and st.pool.leases["n3"] == "301"
    st.validate()


def perform(st: ClusterState, rm: SlurmSite, acts: list) -> None:
    """The daemon's part: kills of the jobs the controller adopted go to it (``EndJob`` of their Slurm jobs)."""
    kills = [a.job_id for a in acts if isinstance(a, Kill)]
    if kills:
        rm.kill(st.port, kills)


def restarted(slurm_now: list[SlurmJob], final: str, resized: set[str] | None = None
              ) -> tuple[ClusterState, SlurmSite, int]:
    """Job a (Slurm job 101 on n1) journaled; the controller restarted and re-attached with ``slurm_now`` as
    Slurm's queue, Slurm saying job 101 ended ``final``; with ``resized``, a Slurm without accounting
    saying those jobs were resized (``ResizeTime``)."""
    from scheduler.core.job import Job
    from scheduler.core.nodestate import NodeRecord

    st, rm = site()
    a = rm.adopt(st.port, emu("a"), "101", ["n1", "n1"], 0.0, None)
    rm.apply(st.port, 1.0, [job("101", "a", "RUNNING", ["n1"])], 0, 1.0)
    new, rm2 = site()
    new.restore_nodes([NodeRecord.from_dict(r.to_dict()) for r in st.nodes.values()], 100.0)
    new.restore([Job.from_dict(j.to_dict()) for j in st.jobs.values()], st.next_id)
    rm2.final_state = lambda main: final if main == "101" else "RUNNING"
    rm2.first_look = lambda: (slurm_now, 0)
    rm2.broker.resizes_once = resized is not None
    rm2.resized = lambda names: set(resized or ()) & set(names)
    rm2.attach(new.port, 100.0)
    return new, rm2, a


def test_a_job_registering_after_a_restart_on_the_node_of_a_job_that_ended_meanwhile_is_adopted_and_kept():
    """Job 101 ended while the controller was away and Slurm started 102 on its node: 102 registers before
    the restarted controller's looks have shown 101 go. 101 is settled by Slurm's word, 102 adopted at once,
    and the looks that follow leave 102 alone (nothing of it cancelled, its node not failed under it)."""
    st, rm, a = restarted([job("102", "b", "RUNNING", ["n1"])], "COMPLETED")
    b = rm.adopt(st.port, emu("b"), "102", ["n1", "n1"], 100.5, None)
    assert st.jobs[a].state == "done" and st.jobs[b].state == "running" and st.pool.leases == {"n1": "102"}
    perform(st, rm, rm.step(st.port, 100.6))
    for t in (101.0, 102.0):
        perform(st, rm, rm.apply(st.port, t, [job("102", "b", "RUNNING", ["n1"])], 0, t))
    assert st.jobs[b].state == "running", st.jobs[b].error
    assert not [o for o in outbox(rm) if isinstance(o, EndJob | CancelJob)]
    st.validate()


@pytest.mark.parametrize("final", ["RUNNING", "GONE"])
def test_after_a_restart_a_job_slurm_does_not_say_ended_is_not_settled_by_a_registration(final):
    """Where Slurm says the old job still runs (the node was an expander's), or cannot say, the registration
    settles nothing: ``node_busy`` (retried) until the looks have."""
    st, rm, a = restarted([job("102", "b", "RUNNING", ["n1"])], final)
    with pytest.raises(StateError, match="node_busy"):
        rm.adopt(st.port, emu("b"), "102", ["n1", "n1"], 100.5, None)
    assert st.jobs[a].state == "running" and "101" in rm.broker.groups


def test_a_registration_retried_before_the_next_look_is_not_failed_on_the_node_its_job_left():
    """``reshape slurm-run``'s retry after ``node_busy`` comes as soon as the job using the node has shrunk off
    it, before the controller's next look: the node is the new job's, which is not failed there (nor
    its Slurm job cancelled) for the old job's having had to leave it."""
    st, rm, a, views = grown_onto_an_expander()
    with pytest.raises(StateError, match="node_busy"):  # Slurm ended expander 201 and started 301 on n3
        rm.adopt(st.port, emu("b"), "301", ["n3", "n3"], 3.0, None)
    rm.apply(st.port, 3.5, [views[0], job("301", "b", "RUNNING", ["n3"])], 0, 3.5)
    assert point(st, a, 2, 2.0, 4.0).action == "shrink"
    st.handle(C.Resized(job_id=a, old=4, new=2, seconds=0.1), 4.1)
    b = rm.adopt(st.port, emu("b"), "301", ["n3", "n3"], 4.2, None)  # the retry, before the next look
    perform(st, rm, rm.step(st.port, 4.3))
    perform(st, rm, rm.apply(st.port, 5.0, [views[0], job("301", "b", "RUNNING", ["n3"])], 0, 5.0))
    assert st.jobs[b].state == st.jobs[a].state == "running", st.jobs[b].error
    assert EndJob("301") not in outbox(rm)
    st.validate()


@pytest.mark.parametrize("report, end", [("done", "done"), (None, "done")])
def test_a_job_whose_slurm_job_is_completing_keeps_its_nodes_and_ends_as_it_ended(report, end):
    """Slurm lists only the nodes of a completing job that are still completing (``squeue`` ``%N``): a job
    whose batch host finished first has not lost it (not requeued, not failed, nothing cancelled); it ends
    with its Slurm job, as its report or Slurm's final state says."""
    st, rm = site()
    a = rm.adopt(st.port, emu("a", nprocs=4), "101", ["n1", "n1", "n2", "n2"], 0.0, None)
    rm.apply(st.port, 1.0, [job("101", "a", "RUNNING", ["n1", "n2"])], 0, 1.0)
    if report:
        st.handle(C.Finished(job_id=a, status=report), 5.0)
    perform(st, rm, rm.apply(st.port, 6.0, [job("101", "a", "COMPLETING", ["n2"])], 0, 6.0))  # n1 back in service
    assert st.jobs[a].state == "running" and not outbox(rm)
    perform(st, rm, rm.apply(st.port, 7.0, [job("101", "a", "COMPLETED", ["n2"])], 0, 7.0))
    assert st.jobs[a].state == end and not [o for o in outbox(rm) if isinstance(o, EndJob)]
    st.validate()


def test_a_registration_on_a_node_slurm_took_from_a_job_that_still_runs_ends_nothing_of_it():
    """Slurm took n2 out of job 101, which still runs (the node failed and came back), and started 102 there:
    101's job is not ended nor its expander cancelled; it leaves n2 as it would an expander's node, and
    102's registration waits (``node_busy``) until it has."""
    st, rm = site()
    rm.final_state = lambda main: "RUNNING"
    a = rm.adopt(st.port, emu("a", nprocs=4), "101", ["n1", "n1", "n2", "n2"], 0.0, None)
    rm.broker.submitted("101", "201", 0.5)
    views = [job("101", "a", "RUNNING", ["n1", "n2"]), job("201", expander_name("101"), "RUNNING", ["n3"])]
    rm.apply(st.port, 1.0, views, 0, 1.0)
    outbox(rm)
    with pytest.raises(StateError, match="node_busy"):
        rm.adopt(st.port, emu("b"), "102", ["n2", "n2"], 5.0, None)
    perform(st, rm, rm.step(st.port, 5.1))
    assert st.jobs[a].state == "running" and "101" in rm.broker.groups and not outbox(rm)
    assert "n2" in rm.broker.gone
    st.validate()


@pytest.mark.parametrize("restarted_controller", [False, True])
def test_a_job_registering_on_a_node_its_completing_predecessor_gave_back_first_settles_it(restarted_controller):
    """Job 101's n1 is back in service while n2 still completes its epilog, and Slurm starts 102 on n1: 101's
    job (it reported done) is settled then, and 102 adopted, whether or not the controller knew 101's nodes
    (a restarted one does not)."""
    st, rm = site()
    rm.final_state = lambda main: "COMPLETING"
    a = rm.adopt(st.port, emu("a", nprocs=4), "101", ["n1", "n1", "n2", "n2"], 0.0, None)
    rm.apply(st.port, 1.0, [job("101", "a", "RUNNING", ["n1", "n2"])], 0, 1.0)
    st.handle(C.Finished(job_id=a, status="done"), 5.0)
    if restarted_controller:
        rm.broker.let_go("n1")
    b = rm.adopt(st.port, emu("b"), "102", ["n1", "n1"], 5.5, None)
    perform(st, rm, rm.step(st.port, 5.6))
    assert st.jobs[a].state == "done" and st.jobs[b].state == "running"
    assert not [o for o in outbox(rm) if isinstance(o, EndJob)]
    st.validate()


def test_a_shrink_slurm_refuses_leaves_the_node_to_its_job_and_the_job_is_not_shrunk_again():
    """Slurm without accounting takes one ``NodeList`` update of a job: a controller restarted after the first
    does not remember it (asked of ``scontrol show job``'s ``ResizeTime`` now). A refused shrink says so: the
    node stays the job's (granted to it again, to grow back into), no waiting job counts on it, and the job
    is not asked to shrink again."""
    from scheduler.rm.slurm.edge import KeepNodes, KeepRefused, Look

    st, rm = site()
    a = rm.adopt(st.port, emu("a", nprocs=4), "101", ["n1", "n1", "n2", "n2"], 0.0, None)
    own = [job("101", "a", "RUNNING", ["n1", "n2"]), job("9", "other", "RUNNING", NODES[2:])]
    rm.apply(st.port, 1.0, own, 0, 1.0)
    point(st, a, 1, 2.0, 2.0)
    rigid = job("300", "rigid", "PENDING", reason="Resources", n=1, start=1000.0)  # Slurm predicts it late
    rm.apply(st.port, 3.0, [*own, rigid], 0, 3.0)
    assert st.jobs[a].shrink_request == 2
    assert point(st, a, 2, 2.0, 4.0).action == "shrink"
    st.handle(C.Resized(job_id=a, old=4, new=2, seconds=0.1), 4.1)
    rm.apply(st.port, 5.0, [*own, rigid], 0, 5.0)
    assert KeepNodes("101", ["n1"], None) in outbox(rm) and rm.broker.released == {"n2": "101"}
    rm.edge.inbox.put(KeepRefused("101", "Job update not available right now, the DB index is being set"))
    rm.edge.inbox.put(Look([*own, rigid], 0, 6.0))
    perform(st, rm, rm.step(st.port, 6.0))
    assert "101" in rm.broker.frozen and not rm.broker.released and st.pool.leases["n2"] == "101"
    assert not any("n2" in hosts for hosts in rm.broker.promised.values())
    assert any("shrink refused" in n for n in rm.notes)
    for t in (7.0, 8.0):
        rm.apply(st.port, t, [*own, rigid], 0, t)
    assert st.jobs[a].shrink_request is None and not [o for o in outbox(rm) if isinstance(o, KeepNodes)]
    assert point(st, a, 3, 4.0, 9.0).action == "expand"  # back onto its own node: nobody else can have it
    st.validate()


def test_a_restarted_controller_does_not_shrink_a_job_slurm_resized_before():
    """Without accounting Slurm takes one shrink of a job; the controller that made it kept that in memory
    only. Restarted, it asks Slurm (``ResizeTime``): the adopted job it resized is never shrunk again."""
    _, rm, _ = restarted([job("101", "a", "RUNNING", ["n1"])], "RUNNING", resized={"101", "555"})
    assert rm.broker.frozen == {"101"}  # 555: not one of ours
