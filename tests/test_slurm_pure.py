"""Slurm glue without Slurm: allocation parsing, squeue parsing, the broker's decisions, launchers.

The real thing (slurmctld, slurmd, munge in the compose cluster) is tested in
``tests/test_cluster_slurm.py``; these pin the pure parts.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reshape.joblink import launchers
from scheduler.core.pool import PoolError
from scheduler.rm.fixed import allocation_pool
from scheduler.rm.slurm.broker import (
    AskShrink,
    Broker,
    Cancel,
    Drain,
    Ended,
    Fail,
    Forget,
    Grant,
    Lost,
    Release,
    Submit,
    Tenant,
)
from scheduler.rm.slurm.view import SlurmJob, expander_name, idle_nodes, parse_squeue, partition_pool


def test_allocation_pool_reads_hostlist_and_cpu_counts():
    pool = allocation_pool({"SLURM_JOB_NODELIST": "node[1-3],gpu7", "SLURM_JOB_CPUS_PER_NODE": "2(x3),16"})
    assert [(n.host, n.slots) for n in pool.nodes] == [("node1", 2), ("node2", 2), ("node3", 2), ("gpu7", 16)]


@pytest.mark.parametrize("env, msg", [
    ({}, "not inside a Slurm allocation"),
    ({"SLURM_JOB_NODELIST": "node[1-3]", "SLURM_JOB_CPUS_PER_NODE": "2(x2)"}, "2 counts for 3 nodes"),
    ({"SLURM_JOB_NODELIST": "node[1-", "SLURM_JOB_CPUS_PER_NODE": "2"}, "cannot read the Slurm allocation"),
])
def test_allocation_pool_errors_name_the_values(env, msg):
    with pytest.raises(PoolError, match=msg):
        allocation_pool(env)


def test_parse_squeue_and_partition_pool():
    jobs = parse_squeue("7|heat|RUNNING|root|1|node1|None\n9|reshape-expand-7|PENDING|root|2||Resources\n"
                        "garbage\n")
    assert jobs[0] == SlurmJob("7", "heat", "RUNNING", "root", 1, ("node1",), "None")
    assert jobs[1].nodes == () and jobs[1].num_nodes == 2 and len(jobs) == 2
    pool = partition_pool("node1 2\nnode2 2\nnode3 4\n", {"node1"})
    assert pool.total == 2 and pool.capacity == 8 and pool.down == {"node2", "node3"}
    with pytest.raises(PoolError, match="not in the partition"):
        partition_pool("node1 2\n", {"node9"})



def test_idle_nodes_counts_each_plain_idle_node_once_and_no_completing_one():
    """``sinfo -N`` lists a node once per partition; a node whose last job is completing (its epilog not
    done, Slurm places nothing there yet) or not responding is not idle."""
    text = "node1 idle\nnode1 idle\nnode2 completing\nnode3 allocated\nnode4 idle*\nnode5 idle\n\ngarbage\n"
    assert idle_nodes(text) == 2
    assert idle_nodes("") == 0


def test_idle_nodes_counts_the_nodes_slurms_backfill_keeps_for_a_pending_job():
    """Slurm 22.05 lists an idle node its backfill plans a pending job onto as ``planned``: idle, and what a
    moldable start of that job is made of (``sinfo -N`` on the emulated cluster, a 16-node job waiting)."""
    assert idle_nodes("node1 allocated\nnode2 planned\nnode3 planned\nnode4 idle\nnode5 planned*\n") == 3

def job(jid, name, state, nodes=(), reason="None", n=None, prio=100, start=None, end=None):
    return SlurmJob(jid, name, state, "u", n if n is not None else len(nodes), tuple(nodes), reason, prio, start, end)


def broker(**kw) -> Broker:
    b = Broker(grant_timeout=10, idle_release=30, node_slots=2, **kw)
    b.add_group("7", "node1", 0.0)
    return b


def tenant(hosts, jid=1, main="7", points=None, times=None, min_procs=1, busy=False):
    n = len(hosts)
    pts = tuple(points if points is not None else range(1, n))
    return Tenant(jid, main, n, tuple(hosts), min_procs, busy, pts, times or {})


MAIN = job("7", "heat", "RUNNING", ["node1", "node2"])
X = expander_name("7")
USED = {"node1": 2, "node2": 2}


def never(jid, extra):
    return None


def test_grow_asks_once_and_grants_when_the_expander_runs():
    b = broker()
    t = [tenant(["node1"] * 2 + ["node2"] * 2)]
    want = {1: 8}.get
    ops = b.step(0, [MAIN], 2, USED, t, lambda jid, extra: want(jid))
    assert [o for o in ops if isinstance(o, Submit)] == [Submit("7", 2, None)]
    assert not [o for o in b.step(1, [MAIN], 2, USED, t, lambda j, e: 8) if isinstance(o, Submit)]  # one at a time
    b.submitted("7", "8", 1.0)
    assert not [o for o in b.step(2, [MAIN, job("8", X, "PENDING", reason="Resources", n=2)], 2, USED, t,
                                  lambda j, e: 8) if isinstance(o, Submit | Grant) and o.job != "7"]
    ops = b.step(3.5, [MAIN, job("8", X, "RUNNING", ["node3", "node4"])], 0, USED, t, lambda j, e: 8)
    assert [o for o in ops if isinstance(o, Grant) and o.job == "8"] == [Grant("node3", "8", "7", 2.5),
                                                                          Grant("node4", "8", "7", 2.5)]
    assert b.kept("8") == ["node3", "node4"] and b.group_of("node3") == "7"


def test_an_idle_node_an_expander_is_asked_for_is_not_asked_for_again_by_another_job():
    """Until Slurm starts an expander, the look still counts its node idle: a second job asking for it would
    leave one of the two with part of its step after a grant timeout (seen on real Slurm: a node unused
    for 30 s). Asked for (sbatch not answered) or pending, it is the first job's; started, the count is."""
    b = broker()
    b.add_group("9", "node5", 0.0)
    main9 = job("9", "lu", "RUNNING", ["node5"])
    t = [tenant(["node1"] * 2 + ["node2"] * 2), tenant(["node5"] * 2, jid=2, main="9")]
    used = {**USED, "node5": 2}
    grow = lambda j, e: {1: 6, 2: 4}[j] if e >= 2 else None  # noqa: E731
    asks = [o for o in b.step(0, [MAIN, main9], 1, used, t, grow) if isinstance(o, Submit)]
    assert len(asks) == 1 and asks[0].nodes == 1
    first = asks[0].main
    assert not [o for o in b.step(1, [MAIN, main9], 1, used, t, grow) if isinstance(o, Submit)]  # sbatch in flight
    b.submitted(first, "20", 1.0)
    pending = job("20", expander_name(first), "PENDING", reason="None", n=1)
    assert not [o for o in b.step(2, [MAIN, main9, pending], 1, used, t, grow) if isinstance(o, Submit)]
    assert [o.main for o in b.step(3, [MAIN, main9, pending], 2, used, t, grow) if isinstance(o, Submit)] == [
        "9" if first == "7" else "7"]  # a second idle node: the other job's


def test_nothing_granted_in_time_is_cancelled_and_nothing_asked_on_a_full_cluster():
    b = broker()
    t = [tenant(["node1"] * 2 + ["node2"] * 2)]
    assert not [o for o in b.step(0, [MAIN], 0, USED, t, lambda j, e: 6) if isinstance(o, Submit)]
    assert [o for o in b.step(0, [MAIN], 1, USED, t, lambda j, e: 6) if isinstance(o, Submit)] == [Submit("7", 1)]
    b.submitted("7", "8", 0.0)
    ops = b.step(11, [MAIN, job("8", X, "PENDING", reason="Priority", n=1)], 1, USED, t, lambda j, e: 6)
    cancels = [o for o in ops if isinstance(o, Cancel)]
    assert len(cancels) == 1 and cancels[0].job == "8" and "granted no node" in cancels[0].why
    assert not [o for o in b.step(20, [MAIN], 1, USED, t, lambda j, e: 6) if isinstance(o, Submit)]  # quiet ...
    assert [o for o in b.step(42, [MAIN], 1, USED, t, lambda j, e: 6) if isinstance(o, Submit)]  # ... then again


def test_a_node_of_a_request_granted_only_in_part_goes_back_at_the_grant_timeout_unless_its_job_can_use_it():
    """A job asks for two nodes (one expander each) and Slurm starts one: when the other is cancelled at the
    grant timeout, the node granted is given back at once where its job cannot expand onto it alone (kept,
    it would idle ``idle_release`` seconds more: seen on real Slurm), and kept where it can."""
    def run(grow_on_one: bool) -> list:
        b = broker()
        t = [tenant(["node1"] * 2 + ["node2"] * 2)]
        grow = lambda j, e: 8 if e >= 4 else (6 if grow_on_one else None)  # noqa: E731
        assert [o for o in b.step(0, [MAIN], 2, USED, t, grow) if isinstance(o, Submit)] == [Submit("7", 2)]
        b.submitted("7", "8", 0.0)
        b.submitted("7", "9", 0.0)
        ops = b.step(1, [MAIN, job("8", X, "RUNNING", ["node3"]), job("9", X, "PENDING", reason="Priority", n=1)],
                     1, USED, t, grow)
        assert [o.host for o in ops if isinstance(o, Grant)] == ["node3"]
        ops = b.step(11, [MAIN, job("8", X, "RUNNING", ["node3"]), job("9", X, "PENDING", reason="Priority", n=1)],
                     1, USED, t, grow)
        assert [o.job for o in ops if isinstance(o, Cancel)] == ["9"]
        return [o for o in ops if isinstance(o, Release)]

    released = run(grow_on_one=False)
    assert [(r.host, r.job) for r in released] == [("node3", "8")] and "not granted in 10 s" in released[0].why
    assert run(grow_on_one=True) == []


def test_an_expander_ends_with_its_job_and_starts_after_every_waiting_job():
    b = broker()
    t = [tenant(["node1"] * 2 + ["node2"] * 2)]
    main = job("7", "heat", "RUNNING", ["node1", "node2"], end=600.0)
    assert [o for o in b.step(100, [main], 2, USED, t, lambda j, e: 6) if isinstance(o, Submit)] == \
        [Submit("7", 1, 600.0)]
    short = broker()  # a job ending within the expire margin asks for nothing
    main = job("7", "heat", "RUNNING", ["node1", "node2"], end=180.0)
    assert not [o for o in short.step(100, [main], 2, USED, t, lambda j, e: 6) if isinstance(o, Submit)]


def test_idle_nodes_kept_for_a_job_that_cannot_start_yet_are_borrowed_until_its_predicted_start():
    """A 12-node job waits behind running work with 3 nodes idle that Slurm keeps for it: an expander may
    use them only until the start Slurm predicts (its --deadline), and none is asked without a prediction."""
    t = [tenant(["node1"] * 2 + ["node2"] * 2)]
    main = job("7", "heat", "RUNNING", ["node1", "node2"], end=5000.0)
    big = job("20", "rigid", "PENDING", reason="Resources", n=12, start=400.0)
    b = broker()
    assert [o for o in b.step(100, [main, big], 3, USED, t, lambda j, e: 8) if isinstance(o, Submit)] == \
        [Submit("7", 2, 400.0)]
    b = broker()  # no prediction yet: nothing borrowed
    unknown = job("20", "rigid", "PENDING", reason="Resources", n=12)
    assert not [o for o in b.step(100, [main, unknown], 3, USED, t, lambda j, e: 8) if isinstance(o, Submit)]
    b = broker()  # too soon to be worth an expander
    soon = job("20", "rigid", "PENDING", reason="Resources", n=12, start=200.0)
    assert not [o for o in b.step(100, [main, soon], 3, USED, t, lambda j, e: 8) if isinstance(o, Submit)]
    b = broker()  # as soon as our nodes would let it start, it gets them back
    b.step(0, [main, job("8", X, "RUNNING", ["node3", "node4"])], 0, {**USED, "node3": 2, "node4": 2}, [], never)
    hosts = ["node1"] * 2 + ["node2"] * 2 + ["node3"] * 2 + ["node4"] * 2
    ready = job("20", "rigid", "PENDING", reason="Resources", n=4, start=400.0)
    ops = b.step(1, [main, job("8", X, "RUNNING", ["node3", "node4"]), ready], 2, {**USED, "node3": 2, "node4": 2},
                 [tenant(hosts, points=[4])], never)
    assert AskShrink(1, 4, "Slurm job 20 is waiting for 4 node(s)", ("node3", "node4")) in ops


def test_a_waiting_job_gets_free_nodes_first_then_shrinks_never_the_batch_host():
    b = broker()
    jobs = [MAIN, job("8", X, "RUNNING", ["node3", "node4"]),
            job("20", "other", "PENDING", reason="Resources", start=1000, n=2)]
    b.step(0, jobs[:2], 0, {**USED, "node3": 2, "node4": 2}, [], never)  # granted
    hosts = ["node1"] * 2 + ["node2"] * 2 + ["node3"] * 2
    # node4 free: drained and released at once; node3 comes from shrinking the job 6 -> 4
    ops = b.step(1, jobs, 0, {**USED, "node3": 2, "node4": 0}, [tenant(hosts, points=[2, 4])], never)
    assert Drain("node4") in ops and Drain("node3") in ops
    why = "Slurm job 20 is waiting for 2 node(s)"
    assert AskShrink(1, 4, why, ("node3",)) in ops
    assert [o for o in ops if isinstance(o, Release)] == [Release("node4", "8", why)]
    b.released_host("node4")
    # the job shrank: node3 is free and goes back too; nobody is asked again
    ops = b.step(2, jobs, 0, {**USED, "node3": 0}, [tenant(hosts[:4], points=[2])], never)
    assert [o.host for o in ops if isinstance(o, Release)] == ["node3"] and not [
        o for o in ops if isinstance(o, AskShrink)]
    b.released_host("node3")
    assert b.kept("8") == [] and "node1" in b.held
    # the waiting job started on them: nothing is drained, nothing lost
    started = job("20", "other", "RUNNING", ["node3", "node4"])
    assert b.step(3, [MAIN, job("8", X, "RUNNING", ["node4"]), started], 0, USED, [tenant(hosts[:4])], never) == []


def test_a_job_that_has_measured_no_size_yet_is_not_shrunk_past_max_stretch():
    """The stretch bound holds before a job has measured its iteration time: with linear speedup, a job
    with all of its 100 iterations left runs twice as long at half its size (more than 1.1 times, less
    than 2), one with 5 left 1.05 times as long."""
    jobs = [MAIN, job("20", "other", "PENDING", reason="Resources", start=5000, n=1)]
    shrink = [AskShrink(1, 2, "Slurm job 20 is waiting for 1 node(s)", ("node2",))]

    def asked(left, max_stretch):
        b = broker(max_stretch=max_stretch)
        t = Tenant(1, "7", 4, ("node1",) * 2 + ("node2",) * 2, 1, False, (2,), {}, left, requested=4, total=100)
        return [o for o in b.step(1, jobs, 0, USED, [t], never) if isinstance(o, AskShrink)]

    assert asked(100, 1.1) == [] and asked(100, 2.0) == shrink
    assert asked(5, 1.1) == shrink


def test_a_node_given_back_and_not_yet_idle_in_slurm_counts_for_a_waiting_job_before_any_shrink():
    b = broker()
    jobs = [MAIN, job("8", X, "RUNNING", ["node3", "node4"])]
    used = {**USED, "node3": 2, "node4": 0}
    b.step(0, jobs, 0, used, [], never)  # granted
    assert b.step(31, jobs, 0, used, [], never) == [Release("node4", "8", "unused for 30 s")]
    b.released_host("node4")
    # Slurm still lists node4 under the expander (completing), a job now waits for 1 node: node4 covers it
    hosts = ["node1"] * 2 + ["node2"] * 2 + ["node3"] * 2
    waiting = job("20", "rigid", "PENDING", reason="Resources", start=1000, n=1)
    ops = b.step(32, [*jobs, waiting], 0, used, [tenant(hosts, points=[2, 4])], never)
    assert not [o for o in ops if isinstance(o, AskShrink | Drain | Release)], ops
    # a second job waiting for 1 more: that one is a shrink, for node3 only
    other = job("21", "rigid2", "PENDING", reason="Resources", start=1000, n=1, prio=50)
    ops = b.step(33, [*jobs, waiting, other], 0, used, [tenant(hosts, points=[2, 4])], never)
    assert [o for o in ops if isinstance(o, AskShrink)] == [
        AskShrink(1, 4, "Slurm job 21 is waiting for 1 node(s)", ("node3",))]


def test_a_demand_we_cannot_meet_releases_nothing_and_two_jobs_never_release_for_one():
    b = broker()
    b.add_group("9", "node5", 0.0)
    jobs = [MAIN, job("9", "emu", "RUNNING", ["node5", "node6"]),
            job("20", "rigid", "PENDING", reason="Resources", start=1000, n=6)]
    used = {h: 2 for h in ("node1", "node2", "node5", "node6")}
    t = [tenant(["node1"] * 2 + ["node2"] * 2, points=[2]), tenant(["node5"] * 2 + ["node6"] * 2, jid=2, main="9",
                                                                     points=[2])]
    b.step(0, jobs[:2], 0, used, t, never)
    assert not [o for o in b.step(1, jobs, 0, used, t, never) if isinstance(o, AskShrink | Drain)]  # 6 > 2 + 2
    jobs[2] = job("20", "rigid", "PENDING", reason="Resources", start=1000, n=1)
    slow = {1: {2: 10.0, 4: 5.0}, 2: {2: 10.0, 4: 9.0}}  # job 2 gains little from its 4 slots: it gives
    t = [replace(x, times=slow[x.job_id]) for x in t]
    asks = [o for o in b.step(2, jobs, 0, used, t, never) if isinstance(o, AskShrink)]
    assert asks == [AskShrink(2, 2, "Slurm job 20 is waiting for 1 node(s)", ("node6",))]
    assert not [o for o in b.step(3, jobs, 0, used, t, never) if isinstance(o, AskShrink) and o.job_id == 1]


def test_unused_granted_node_goes_back_and_a_vanished_expander_is_vacated():
    b = broker()
    jobs = [MAIN, job("8", X, "RUNNING", ["node3"])]
    used = {**USED, "node3": 0}
    b.step(0, jobs, 0, used, [], never)
    assert b.step(10, jobs, 0, used, [], never) == []
    assert b.step(31, jobs, 0, used, [], never) == [Release("node3", "8", "unused for 30 s")]
    b = broker()
    hosts = ["node1"] * 2 + ["node2"] * 2 + ["node3"] * 2
    b.step(0, jobs, 0, {**USED, "node3": 2}, [tenant(hosts, points=[4])], never)
    ops = b.step(1, [MAIN], 0, {**USED, "node3": 2}, [tenant(hosts, points=[4])], never)
    assert Lost("node3", "7", "Slurm job 8 no longer holds it") in ops
    assert AskShrink(1, 4, "Slurm job 8 no longer holds it", ("node3",)) in ops
    assert b.step(2, [MAIN], 0, USED, [tenant(hosts[:4], points=[])], never) == [
        Forget("node3", "Slurm job 8 no longer holds it")]
    b.forgotten("node3")
    assert b.step(3, [MAIN], 0, USED, [tenant(hosts[:4])], never) == []
    b = broker()  # a job that cannot shrink off a lost node fails there
    b.step(0, jobs, 0, {**USED, "node3": 2}, [tenant(hosts, points=[])], never)
    assert Fail("node3", "Slurm job 8 no longer holds it, and its job cannot shrink off it") in b.step(
        1, [MAIN], 0, {**USED, "node3": 2}, [tenant(hosts, points=[])], never)


def test_a_group_whose_job_ended_is_gone_with_its_expanders():
    b = broker()
    b.step(0, [MAIN, job("8", X, "RUNNING", ["node3"])], 0, {**USED, "node3": 0}, [], never)
    assert not b.step(1, [job("8", X, "RUNNING", ["node3"])], 0, {}, [], never)  # one look may miss it
    ops = b.step(2, [job("8", X, "RUNNING", ["node3"])], 0, {}, [], never)
    assert ops[:2] == [Ended("7", "GONE"), Cancel("8", "its job 7 ended")] and not b.groups and not b.held


def test_a_node_a_job_had_to_leave_is_not_failed_under_the_job_registered_there_next():
    """Slurm took node3 back (expander 8 gone) while job 1 used it: job 1 is to leave it. Once it has and
    Slurm's next job 9 registers there (no look at Slurm in between), node3 is job 9's: the next look
    neither fails job 9 there (its batch host: it cannot shrink off it) nor asks it to shrink off."""
    b = broker()
    hosts = ["node1"] * 2 + ["node2"] * 2 + ["node3"] * 2
    b.step(0, [MAIN, job("8", X, "RUNNING", ["node3"])], 0, {**USED, "node3": 2}, [tenant(hosts, points=[4])], never)
    assert AskShrink(1, 4, "Slurm job 8 no longer holds it", ("node3",)) in b.step(
        1, [MAIN], 0, {**USED, "node3": 2}, [tenant(hosts, points=[4])], never)
    b.add_group("9", "node3", 1.5, ["node3"])  # job 1 shrank off node3; Slurm started job 9 there
    views = [MAIN, job("9", "next", "RUNNING", ["node3"])]
    ts = [tenant(hosts[:4], points=[]), tenant(["node3"] * 2, jid=2, main="9", points=[])]
    ops = b.step(2, views, 0, {**USED, "node3": 2}, ts, never, seen=2.0)
    assert not [o for o in ops if isinstance(o, Fail | AskShrink | Forget | Lost)], ops
    assert b.held["node3"] == "9" and not b.gone


def test_a_look_taken_before_a_job_registered_does_not_take_its_nodes_from_it():
    """A look is up to two seconds old: one taken before Slurm started job 9 (pending there) says nothing of
    the nodes it registered with since; the first look after its registration does."""
    b = broker()
    b.step(0, [MAIN], 0, USED, [], never)
    b.add_group("9", "node3", 5.0, ["node3"])
    ts = [tenant(["node3"] * 2, jid=2, main="9", points=[])]
    stale = [MAIN, job("9", "next", "PENDING", reason="None", n=1)]
    ops = b.step(5.2, stale, 0, {**USED, "node3": 2}, ts, never, seen=4.5)
    assert not [o for o in ops if isinstance(o, Fail | Lost | Ended)], ops
    assert b.held["node3"] == "9" and not b.gone
    ops = b.step(6.2, [MAIN], 0, {**USED, "node3": 2}, ts, never, seen=6.0)  # after it: gone from Slurm's queue
    assert not [o for o in ops if isinstance(o, Fail | Lost | Ended)]  # an end is believed from two looks
    assert Ended("9", "FAILED") in b.step(7.2, [MAIN, job("9", "next", "FAILED", ["node3"])], 0,
                                          {**USED, "node3": 2}, ts, never, seen=7.0)


def test_no_expander_is_asked_for_a_job_missing_from_a_look_and_one_submitted_as_its_job_ended_is_cancelled():
    """A job missing from one look may have ended (a restarted controller's first look at a job that ended
    while it was away): nothing is asked for it. An expander whose ``sbatch`` answers after its job's end
    was seen is nobody's (its group's end cancelled the others): cancelled at once, not left holding a node."""
    b = broker()
    t = [tenant(["node1"] * 2 + ["node2"] * 2)]
    assert [o for o in b.step(0, [MAIN], 2, USED, t, lambda j, e: 8) if isinstance(o, Submit)] == [Submit("7", 2)]
    b.submitted("7", None, 0.5)  # that sbatch failed
    assert not [o for o in b.step(1, [], 2, USED, t, lambda j, e: 8) if isinstance(o, Submit)]
    assert b.step(2, [], 2, {}, [], never) == [Ended("7", "GONE")]
    assert b.submitted("7", "8", 2.5) == [Cancel("8", "its job 7 ended while it was submitted")]
    assert "8" not in b.owner and not b.requested


def test_late_starts_are_counted_against_the_first_prediction():
    b = broker(late_tolerance=5)
    b.step(0, [MAIN, job("20", "rigid", "PENDING", reason="Priority", n=1, start=100.0)], 0, USED, [], never)
    b.step(1, [MAIN, job("20", "rigid", "PENDING", reason="Priority", n=1, start=200.0)], 0, USED, [], never)
    b.step(2, [MAIN, job("21", "rigid", "PENDING", reason="Priority", n=1, start=150.0)], 0, USED, [], never)
    b.step(3, [MAIN, job("20", "rigid", "RUNNING", ["node3"], start=104.0),
               job("21", "rigid", "RUNNING", ["node4"], start=190.0)], 0, USED, [], never)
    assert b.late == [{"job": "21", "predicted": 150.0, "started": 190.0, "late": 40.0}]


NODES = [f"node{i}" for i in range(1, 9)]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 3), st.integers(1, 4)), min_size=1, max_size=3),
       st.lists(st.integers(1, 6), max_size=3), st.integers(0, 3), st.data())
def test_waiting_jobs_get_at_most_their_shortfall_never_a_batch_host_or_a_used_node(shapes, waits, idle, data):
    """Property: over any groups (main + expander nodes) and waiting jobs, the nodes promised to each
    waiting job never exceed what it lacks after the idle nodes, no node is promised twice, the batch
    hosts and used nodes are never released, and every shrink keeps min_procs and retires exactly the
    ranks on the nodes it drops."""
    b = Broker(node_slots=2)
    free = iter(NODES)
    jobs, tenants, used = [], [], {}
    for g, (main_nodes, exp_nodes) in enumerate(shapes):
        mine = [next(free, None) for _ in range(main_nodes + exp_nodes)]
        mine = [h for h in mine if h]
        if not mine:
            break
        main = str(100 + g)
        b.add_group(main, mine[0], 0.0)
        jobs.append(job(main, "emu", "RUNNING", mine[:main_nodes]))
        if mine[main_nodes:]:
            jobs.append(job(str(200 + g), expander_name(main), "RUNNING", mine[main_nodes:]))
        ranks = data.draw(st.integers(1, 2 * len(mine)))
        hosts = [h for h in mine for _ in range(2)][:ranks]
        for h in mine:
            used[h] = hosts.count(h)
        tenants.append(tenant(hosts, jid=g + 1, main=main, points=sorted(set(range(1, ranks))),
                              min_procs=data.draw(st.integers(1, ranks))))
    b.step(0, [j for j in jobs], 0, used, tenants, never)
    waiting = [job(str(300 + i), "rigid", "PENDING", reason="Resources", n=n, prio=1000 - i)
               for i, n in enumerate(waits)]
    ops = b.step(1, [*jobs, *waiting], idle, used, tenants, never)
    batch = {g.batch_host for g in b.groups.values()}
    promised = [h for hs in b.promised.values() for h in hs]
    assert len(promised) == len(set(promised))
    left = idle
    for w in waiting:
        got = len(b.promised.get(w.id, ()))
        use = min(left, w.num_nodes)
        left -= use
        assert got <= max(0, w.num_nodes - use)
    for o in ops:
        if isinstance(o, Release):
            assert o.host not in batch and not used.get(o.host)
        if isinstance(o, AskShrink):
            t = next(t for t in tenants if t.job_id == o.job_id)
            assert t.min_procs <= o.nprocs < t.nprocs and not batch & set(o.drop)
            assert set(t.hosts[o.nprocs:]) == set(o.drop)


def test_launchers_choose_and_probe(monkeypatch):
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    assert launchers.choose(None, ["localhost"])[0].name == "local"
    la, why = launchers.choose(None, ["node1", "node2"], env={})
    assert la.name == "ssh" and "no Slurm job" in why
    assert launchers.choose("netns", ["n1"])[0].env()["HYDRA_LAUNCHER_EXEC"].endswith("netns-launch")
    with pytest.raises(launchers.LauncherError, match="unknown launcher 'pbs'"):
        launchers.choose("pbs", ["localhost"])
    with pytest.raises(launchers.LauncherError, match="needs a Slurm job"):
        launchers.choose("slurm", ["node1"], env={})
    with pytest.raises(launchers.LauncherError, match="this machine only"):
        launchers.choose("local", ["node1"], env={})
    slurm = launchers.get("slurm")
    assert slurm.probe("node7", 5)[1:] == ["node7", "true"] and slurm.probe("localhost", 5) is None
    assert launchers.get("ssh").probe("node7", 3)[:1] == ["ssh"]
    assert launchers.from_env({"RESHAPE_LAUNCHER": "slurm"}) is slurm
    assert launchers.from_env({"HYDRA_LAUNCHER": "fork"}).probe("node7", 1) is None


def test_pool_config_names_its_launcher(tmp_path):
    from scheduler.core.pool import load_pool

    p = tmp_path / "pool.toml"
    p.write_text('launcher = "ssh"\n[[node]]\nhost = "n1"\nslots = 2\n')
    assert load_pool(str(p)).launcher == "ssh"
    p.write_text('launcher = "pbs"\n[[node]]\nhost = "n1"\nslots = 2\n')
    with pytest.raises(PoolError, match="launcher 'pbs' is not one of local, ssh, netns, slurm"):
        load_pool(str(p))
    p.write_text('launchr = "ssh"\n[[node]]\nhost = "n1"\nslots = 2\n')
    with pytest.raises(PoolError, match=r"unknown keys \['launchr'\]"):
        load_pool(str(p))


def test_the_jobs_slurm_resized_are_those_with_a_resize_time_and_a_job_name_cannot_say_so():
    from scheduler.rm.slurm.view import resized

    text = ("JobId=7 JobName=a JobState=RUNNING ResizeTime=2026-11-28T21:30:25 NodeList=node[1-2]\n"
            "JobId=8 JobName=b ResizeTime=2026-01-01T00:00:00 JobId=7 JobState=RUNNING NodeList=node[4-6]\n"
            "JobId=9 JobName=c JobState=PENDING ResizeTime=None Comment=x=y\n"
            "JobId=10 JobName=d JobState=RUNNING ResizeTime=2026-11-28T21:31:00\n")
    names = {"7": "a", "8": "b ResizeTime=2026-01-01T00:00:00 JobId=7", "9": "c"}  # 10: not one of ours
    assert resized(text, names) == {"7"}
