"""Starting waiting Slurm jobs earlier, without Slurm: the backfill plan, the SD-Policy criterion, moldable
starts, and the time limits that follow a job's size (``scheduler.rm.slurm.plan``, ``admit``,
``limits``, the broker's use of them). The real slurmctld is in ``tests/test_cluster_slurm.py``."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.core.job import Job
from scheduler.core.jobfile import validate_job
from scheduler.rm.slurm.admit import delays, loss_weight, moldable_limit, own_cost, shrink_cost
from scheduler.rm.slurm.broker import AskShrink, Broker, Drain, Release, Tenant, Update
from scheduler.rm.slurm.limits import slurm_end
from scheduler.rm.slurm.plan import NO_LIMIT, Pending, limit_for, plan
from scheduler.rm.slurm.view import SlurmJob, expander_minutes, expander_name, parse_squeue

NODES = tuple(f"n{i}" for i in range(1, 9))


def sj(jid, name, state, nodes=(), n=None, reason="None", start=None, end=None, limit=None, prio=100, comment=""):
    return SlurmJob(jid, name, state, "u", n if n is not None else len(nodes), tuple(nodes), reason, prio, start, end,
                    None, limit, comment)


# ---------------------------------------------------------------------- the plan
def test_the_plan_starts_what_fits_now_and_reserves_the_rest_in_priority_order():
    running = [(("n1", "n2", "n3", "n4"), 100.0), (("n5", "n6"), 50.0)]
    got = plan(0.0, NODES, running, [Pending("a", 6, 60.0), Pending("b", 2, 30.0), Pending("c", 2, 120.0)])
    assert got["a"].start == 100.0  # needs six: n1-n4 end at 100
    assert got["b"].start == 0.0 and set(got["b"].nodes) <= {"n7", "n8"}  # fits before a's reservation
    assert got["c"].start == 30.0  # after b on n7-n8: a starts on n1-n6, the nodes busy until closest before it


def test_a_deadline_job_runs_with_the_minutes_left_and_a_range_takes_what_is_free():
    got = plan(0.0, NODES, [(NODES[:5], 1000.0)], [Pending("x", 2, None, deadline=150.0)])
    assert got["x"].start == 0.0 and got["x"].limit == 120.0
    assert plan(0.0, NODES, [], [Pending("x", 1, None, deadline=50.0)]) == {}
    got = plan(0.0, NODES, [(NODES[:5], 1000.0)], [Pending("r", 1, 60.0, max_nodes=8)])
    assert got["r"].start == 0.0 and len(got["r"].nodes) == 3


def test_an_expander_asked_for_with_the_minutes_to_its_deadline_backfills_before_the_reservation_it_borrows():
    """A 16-node job waits for a blocker ending at 300 s; 4 nodes idle until then. An expander asked for at
    100 s with a deadline at 300 s gets ``--time`` of the minutes left (2 s kept for the submission) and
    starts now in front of the reservation, its limit brought down to the minutes left should it start
    later; under one minute it is not asked for at all."""
    assert expander_minutes(300.9, 100.0) == 3 and expander_minutes(300.0, 179.0) == 1
    assert expander_minutes(300.0, 239.0) is None
    running = [(NODES[:4], 300.0)]
    borrow = Pending("x", 1, 60.0 * expander_minutes(300.0, 100.0), deadline=300.0)
    got = plan(100.0, NODES, running, [Pending("big", 8, 600.0), borrow])
    assert got["big"].start == 300.0 and got["x"].start == 100.0 and got["x"].limit == 180.0
    assert limit_for(borrow, 200.0) == 60.0 and limit_for(borrow, 250.0) is None


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 8), st.integers(1, 5)), min_size=1, max_size=8),
       st.lists(st.tuples(st.integers(1, 8), st.sampled_from([60.0, 120.0, 300.0])), min_size=1, max_size=6))
def test_the_plan_never_puts_two_jobs_on_a_node_at_once(runs, waits):
    running, free = [], list(NODES)
    for k, m in runs:
        take, free = free[:k], free[k:]
        if take:
            running.append((tuple(take), 60.0 * m))
    got = plan(0.0, NODES, running, [Pending(str(i), k, lim) for i, (k, lim) in enumerate(waits)])
    spans = [(h, 0.0, end) for hosts, end in running for h in hosts]
    spans += [(h, p.start, p.start + p.limit) for p in got.values() for h in p.nodes]
    for i, (h, a0, a1) in enumerate(spans):
        assert not [1 for h2, b0, b1 in spans[i + 1:] if h2 == h and a0 < b1 and b0 < a1], (spans, h)
    for i, (k, _) in enumerate(waits):
        assert str(i) in got and len(got[str(i)].nodes) == k


# ---------------------------------------------------------------------- costs and delays
def test_the_cost_of_a_shrink_is_the_time_the_job_loses_and_a_smaller_start_its_limit_stretched():
    assert math.isclose(shrink_cost(8, {8: 1.0, 4: 1.6}, 50, 4), 50 * 0.6)  # measured at 4
    assert shrink_cost(8, {8: 1.0}, 50, 4) == 50.0  # linear: twice as slow
    assert shrink_cost(8, {8: 1.0}, 50, 8) == 0.0
    assert own_cost(120.0, 4, 2) == 120.0 and own_cost(120.0, 4, 4) == 0.0
    assert moldable_limit(120.0, 4, 1) == 8  # the walltime charging rule: 4x as long, in whole minutes


def test_a_smaller_start_that_grows_back_costs_at_most_the_run_lost_until_slurm_would_have_started_it():
    # 30 s at half its nodes before it would have started at four: 15 s of its run lost
    assert own_cost(120.0, 4, 2, wait=30.0) == 15.0
    assert own_cost(120.0, 4, 2, wait=1000.0) == 120.0  # never more than its limit stretched
    assert own_cost(120.0, 4, 4, wait=30.0) == 0.0


def test_under_the_slowdown_criterion_a_second_weighs_in_proportion_to_the_jobs_run_times():
    assert loss_weight("slowdown", 60.0, 1200.0) == 0.05  # a short waiting job, a long running one
    assert loss_weight("slowdown", 600.0, 300.0) == 2.0
    assert loss_weight("turnaround", 60.0, 1200.0) == 1.0
    assert loss_weight("slowdown", None, 1200.0) == loss_weight("slowdown", 60.0, None) == 1.0  # unknown: seconds


def test_a_start_that_would_delay_a_job_planned_before_it_is_found():
    jobs = [sj("1", "grown", "RUNNING", NODES[:6], end=300.0, limit=300.0),
            sj("2", "rigid", "RUNNING", NODES[6:], end=100.0, limit=100.0),
            sj("10", "big", "PENDING", n=8, start=300.0, limit=60.0, prio=200),
            sj("11", "small", "PENDING", n=2, start=360.0, limit=600.0, prio=100)]
    # freeing n5, n6 for small: it would run past big's start, which needs every node, so Slurm would not
    # start it there
    assert delays(0.0, NODES, jobs, "11", 2, 600.0, {"n5", "n6"}, {}) == ["11"]
    # a short job fits in before it
    short = [*jobs[:3], sj("11", "small", "PENDING", n=2, start=360.0, limit=120.0, prio=100)]
    assert delays(0.0, NODES, short, "11", 2, 120.0, {"n5", "n6"}, {}) == []
    # a shrunk job whose end moves later delays big too
    assert delays(0.0, NODES, short, "11", 2, 120.0, {"n5", "n6"}, {"1": 400.0}) == ["10"]


def test_a_start_may_move_another_job_later_in_the_plan_but_never_past_its_first_predicted_start():
    jobs = [sj("1", "grown", "RUNNING", NODES[:6], end=300.0, limit=300.0),
            sj("2", "rigid", "RUNNING", NODES[6:], end=100.0, limit=100.0),
            sj("10", "big", "PENDING", n=8, start=300.0, limit=60.0, prio=200),
            sj("11", "small", "PENDING", n=2, start=360.0, limit=120.0, prio=100)]
    # the shrunk job ends 20 s later: big moves from 300 to 320 in Slurm's plan
    assert delays(0.0, NODES, jobs, "11", 2, 120.0, {"n5", "n6"}, {"1": 320.0}) == ["10"]
    # Slurm first predicted 330 for big (a start it announced, the one a late start is counted against): kept
    assert delays(0.0, NODES, jobs, "11", 2, 120.0, {"n5", "n6"}, {"1": 320.0}, promised={"10": 330.0}) == []
    assert delays(0.0, NODES, jobs, "11", 2, 120.0, {"n5", "n6"}, {"1": 320.0}, promised={"10": 310.0}) == ["10"]


# ---------------------------------------------------------------------- the broker
def broker(**kw) -> Broker:
    b = Broker(grant_timeout=10, idle_release=30, node_slots=2, nodes=NODES, **kw)
    b.add_group("7", "n1", 0.0)
    return b


def grown(times=None, left=100, ends=None) -> Tenant:
    """Job 1 of Slurm job 7: 12 processes on n1-n6 (n1-n2 its own, n3-n6 expander 8), it may shrink to 4."""
    hosts = tuple(h for h in NODES[:6] for _ in range(2))
    return Tenant(1, "7", 12, hosts, 2, False, (4, 8), times or {12: 1.0, 8: 1.2, 4: 2.0}, left, ends or {})


def jobs_with(*waiting) -> list[SlurmJob]:
    return [sj("7", "mall", "RUNNING", NODES[:2], start=0.0, end=3600.0, limit=3600.0),
            sj("8", expander_name("7"), "RUNNING", NODES[2:6], start=0.0, end=3600.0, limit=3600.0),
            sj("9", "rigid", "RUNNING", NODES[6:], start=0.0, end=200.0, limit=200.0), *waiting]


def first_look(b: Broker, t: Tenant) -> None:
    b.step(0.0, jobs_with(), 0, {h: 2 for h in NODES}, [t], lambda j, e: None)


def test_running_jobs_shrink_for_a_waiting_job_only_when_the_wait_saved_exceeds_what_they_lose():
    t = grown()
    b = broker()
    first_look(b, t)
    used = {h: 2 for h in NODES}
    # two nodes now from 12 -> 8 costs 100 iterations * 0.2 s = 20 s; Slurm would start it in 10 s: no
    soon = sj("20", "w", "PENDING", n=2, reason="Resources", start=10.0, limit=60.0)
    assert not [o for o in b.step(1.0, jobs_with(soon), 0, used, [t], lambda j, e: None) if isinstance(o, AskShrink)]
    # in 150 s: yes, and the nodes promised are the expander's last ones, never its first (its batch host)
    late = sj("20", "w", "PENDING", n=2, reason="Resources", start=150.0, limit=60.0)
    ops = b.step(2.0, jobs_with(late), 0, used, [t], lambda j, e: None)
    assert [o for o in ops if isinstance(o, AskShrink)] == [
        AskShrink(1, 8, "Slurm job 20 is waiting for 2 node(s)", ("n5", "n6"))]
    assert {o.host for o in ops if isinstance(o, Drain)} == {"n5", "n6"}


def test_a_shrink_that_keeps_a_job_within_its_slurm_limit_is_planned_with_that_limit():
    # the job registered 1.5 s after Slurm started it: its end at any size from 8 up is 1.5 s past its Slurm
    # limit, which rule 5 leaves as it is (within LIMIT_SLACK), so Slurm's plan keeps its end at 3600
    t = grown(ends={12: 3601.5, 8: 3601.5})
    b = broker()
    first_look(b, t)
    w = sj("20", "w", "PENDING", n=2, reason="Resources", start=200.0, limit=60.0, prio=200)
    whole = sj("21", "whole", "PENDING", n=8, reason="Priority", start=3600.0, limit=60.0, prio=100)
    ops = b.step(1.0, jobs_with(w, whole), 0, {h: 2 for h in NODES}, [t], lambda j, e: None)
    assert [o for o in ops if isinstance(o, AskShrink)] == [
        AskShrink(1, 8, "Slurm job 20 is waiting for 2 node(s)", ("n5", "n6"))]


def test_the_earlier_rule_shrinks_for_any_waiting_job_that_can_start():
    b = broker(shrink_to_start=False)
    t = grown()
    first_look(b, t)
    soon = sj("20", "w", "PENDING", n=2, reason="Resources", start=10.0, limit=60.0)
    asks = [o for o in b.step(1.0, jobs_with(soon), 0, {h: 2 for h in NODES}, [t], lambda j, e: None)
            if isinstance(o, AskShrink)]
    assert [a.nprocs for a in asks] == [8]


def test_no_shrink_lets_a_job_start_that_delays_one_ahead_of_it():
    b = broker()
    t = grown()
    first_look(b, t)
    big = sj("19", "big", "PENDING", n=8, reason="Resources", start=3600.0, limit=600.0, prio=300)
    long = sj("20", "w", "PENDING", n=2, reason="Priority", start=4200.0, limit=7200.0, prio=200)
    ops = b.step(1.0, jobs_with(big, long), 0, {h: 2 for h in NODES}, [t], lambda j, e: None)
    assert not [o for o in ops if isinstance(o, AskShrink | Drain)], ops


def test_a_waiting_malleable_job_starts_on_the_idle_nodes_when_waiting_for_all_would_cost_more():
    b = broker()
    t = grown()
    first_look(b, t)
    comment = "reshape-malleable sizes=2,4,6,8"  # what 'reshape submit --slurm' gives it
    mall = sj("20", "m", "PENDING", n=4, reason="Resources", start=900.0, limit=120.0, comment=comment)
    t = grown(times={12: 1.0, 8: 3.0, 4: 6.0})  # a shrink would cost it 200 s: more than the start on two
    used = {**{h: 2 for h in NODES}, "n7": 0, "n8": 0}
    idle_two = [sj(j.id, j.name, j.state, NODES[:2] if j.id == "7" else j.nodes, start=j.start, end=j.end,
                   limit=j.limit) for j in jobs_with()[:2]] + [mall]
    ops = b.step(1.0, idle_two, 2, used, [t], lambda j, e: None)
    # two nodes idle: it starts on them (waiting 900 s for four costs more than running twice as long)
    assert Update("20", nodes=2, minutes=4, why="started on 2 of its 4 node(s)") in ops
    b2 = broker(moldable=False)
    first_look(b2, t)
    assert not [o for o in b2.step(1.0, idle_two, 2, used, [t], lambda j, e: None) if isinstance(o, Update)
                and o.nodes]


def test_a_waiting_malleable_job_slurm_has_predicted_no_start_for_yet_is_weighed_by_the_controllers_plan():
    """``squeue %S`` is N/A until Slurm's backfill reaches a job: the wait it would save is then the start the
    controller's own plan of that backfill gives it (a 6-node job behind a rigid job holding three nodes until
    600 s: it starts on the five idle ones now)."""
    b = Broker(grant_timeout=10, idle_release=30, node_slots=2, nodes=NODES)
    rigid = sj("9", "rigid", "RUNNING", NODES[:3], start=0.0, end=600.0, limit=600.0)
    for start in (600.0, None):
        w = sj("20", "m", "PENDING", n=6, reason="Resources", start=start, limit=300.0,
               comment="reshape-malleable sizes=2,4,6,8,10,12")
        ops = b.step(10.0, [rigid, w], 5, {}, [], lambda j, e: None)
        assert Update("20", nodes=5, minutes=6, why="started on 5 of its 6 node(s)") in ops, (start, ops)


def test_time_limits_follow_the_end_each_job_has_at_its_size_and_its_expanders_never_outlast_it():
    b = broker()
    t = grown(ends={12: 1800.0, 8: 2400.0, 4: 3000.0})
    ops = b.step(0.0, jobs_with(), 0, {h: 2 for h in NODES}, [t], lambda j, e: None)
    assert Update("7", minutes=30, why="its end at 12 processes") in ops
    assert Update("8", minutes=30, why="its job 7 ends by then") in ops
    assert not [o for o in b.step(2.0, jobs_with(), 0, {h: 2 for h in NODES}, [t], lambda j, e: None)
                if isinstance(o, Update)]  # said once
    off = broker(time_limits="off")
    first_look(off, t)
    assert not [o for o in off.step(1.0, jobs_with(), 0, {h: 2 for h in NODES}, [t], lambda j, e: None)
                if isinstance(o, Update)]


def test_a_slurm_job_gives_its_first_node_back_last():
    b = broker()
    t = grown()
    first_look(b, t)
    used = {h: 2 for h in NODES[:2]}  # the job shrank to 4 on n1-n2: n3-n6 (expander 8) are free
    b.step(1.0, jobs_with(), 0, used, [grown()], lambda j, e: None)
    b.draining.update({h: "x" for h in ("n3", "n4")})  # promised to a waiting job; n5, n6 unused for 30 s
    ops = [o for o in b.step(40.0, jobs_with(), 0, used, [grown()], lambda j, e: None) if isinstance(o, Release)]
    # n3, the expander's first node, goes only with all the others: here they go together, n3 last
    assert [o.host for o in ops][-1] == "n3" and {o.host for o in ops} == {"n3", "n4", "n5", "n6"}
    b = broker()
    first_look(b, t)
    b.draining["n3"] = "x"
    ops = b.step(1.0, jobs_with(), 0, {**{h: 2 for h in NODES}, "n3": 0}, [t], lambda j, e: None)
    assert not [o for o in ops if isinstance(o, Release)]  # n4-n6 stay: n3 cannot go without them


# ---------------------------------------------------------------------- limits
def test_the_limit_a_job_needs_at_a_size():
    desc = validate_job({"name": "x", "command": ["a"], "nprocs": 4, "walltime": 300, "iterations": 100,
                         "sizes": [2, 4, 8]}, 16)
    j = Job(1, desc, 0.0)
    j.nprocs, j.deadline, j.start_time = 4, 300.0, 0.0
    assert slurm_end(j, 4, 0.0) == 300.0 and slurm_end(j, 8, 0.0) == 300.0  # the charging rule
    assert slurm_end(j, 2, 0.0) == 600.0  # half the size: twice the budget's time
    j.profile.record_iteration(4, 2.0)  # 100 * 2 s at 4 = 200 s: its user asked 1.5x that
    j.profile.record_iteration(8, 1.0)
    j.iterations = 50
    assert slurm_end(j, 8, 100.0, measured=True) == 100.0 + 50 * 1.0 * 1.5
    assert slurm_end(j, 2, 100.0, measured=True) == 100.0 + 50 * 4.0 * 1.5  # linear below what it measured
    assert math.isclose(slurm_end(j, 4, 100.0, measured=True), 250.0)


def test_squeue_lines_carry_the_limit_and_the_comment():
    (j,) = parse_squeue("5|m|PENDING|u|2||Priority|10|100|N/A|50|3:00|reshape-malleable sizes=2,4\n")
    assert j.limit == 180.0 and j.malleable_sizes() == (2, 4)
    (k,) = parse_squeue("5|m|RUNNING|u|1|n1|None|10|100|400|50|UNLIMITED|reshape-daemon=tcp://x|y\n")
    assert k.limit is None and k.malleable_sizes() == () and k.comment == "reshape-daemon=tcp://x|y"
    assert NO_LIMIT > 86400


def test_where_slurm_takes_one_update_of_a_shrunk_job_its_limit_goes_with_the_shrink_and_it_shrinks_once():
    """Slurm without accounting refuses any update of a job after its first NodeList shrink: the
    controller gives a job's own nodes back in one update with its new limit, and never again."""
    b = broker(resizes_once=True)
    hosts = tuple(h for h in NODES[:4] for _ in range(2))  # job 1 on its own allocation n1-n4
    t = Tenant(1, "7", 8, hosts, 2, False, (2, 4), {8: 1.0}, 100, {8: 600.0, 4: 1200.0, 2: 2400.0})
    own = [sj("7", "mall", "RUNNING", NODES[:4], start=0.0, end=600.0, limit=600.0),
           sj("9", "rigid", "RUNNING", NODES[4:], start=0.0, end=3000.0, limit=3000.0)]
    b.step(0.0, own, 0, {h: 2 for h in NODES}, [t], lambda j, e: None)
    w = sj("20", "w", "PENDING", n=2, reason="Resources", start=600.0, limit=60.0)
    ops = b.step(1.0, [*own, w], 0, {h: 2 for h in NODES}, [t], lambda j, e: None)
    assert [o for o in ops if isinstance(o, AskShrink)] == [AskShrink(1, 4, "Slurm job 20 is waiting for 2 node(s)",
                                                                      ("n3", "n4"))]
    small = Tenant(1, "7", 4, hosts[:4], 2, False, (2,), {8: 1.0, 4: 1.9}, 99, {4: 1200.0, 2: 2400.0})
    used = {**{h: 2 for h in NODES}, "n3": 0, "n4": 0}
    rel = [o for o in b.step(2.0, [*own, w], 0, used, [small], lambda j, e: None) if isinstance(o, Release)]
    assert {(o.host, o.job, o.minutes) for o in rel} == {("n3", "7", 20), ("n4", "7", 20)}  # with its limit
    assert "7" in b.frozen
    w2 = sj("21", "w2", "PENDING", n=1, reason="Resources", start=900.0, limit=60.0)
    later = [sj("7", "mall", "RUNNING", NODES[:2], start=0.0, end=1200.0, limit=1200.0), own[1], w2]
    ops = b.step(3.0, later, 0, {h: 2 for h in NODES[:2]} | {h: 2 for h in NODES[4:]}, [small],
                 lambda j, e: None)
    assert not [o for o in ops if isinstance(o, AskShrink | Update)], ops  # no second shrink, no limit update


def test_where_slurm_takes_one_update_a_job_whose_nodes_are_on_their_way_back_is_not_asked_to_shrink_again():
    """Seen on real Slurm: a 16-node job shrank for a waiting job; a look later, its nodes not yet given back,
    a second waiting job had it shrink again, the one update Slurm takes went with the first nodes only,
    and the second shrink's nodes idled in its allocation until it ended while the queue waited."""
    b = broker(resizes_once=True)
    hosts = tuple(h for h in NODES[:4] for _ in range(2))
    t = Tenant(1, "7", 8, hosts, 2, False, (2, 4, 6), {8: 1.0}, 100, {8: 600.0, 6: 800.0, 4: 1200.0, 2: 2400.0})
    own = [sj("7", "mall", "RUNNING", NODES[:4], start=0.0, end=600.0, limit=600.0),
           sj("9", "rigid", "RUNNING", NODES[4:], start=0.0, end=3000.0, limit=3000.0)]
    b.step(0.0, own, 0, {h: 2 for h in NODES}, [t], lambda j, e: None)
    w = sj("20", "w", "PENDING", n=1, reason="Resources", start=600.0, limit=60.0)
    ops = b.step(1.0, [*own, w], 0, {h: 2 for h in NODES}, [t], lambda j, e: None)
    assert [(o.job_id, o.nprocs) for o in ops if isinstance(o, AskShrink)] == [(1, 6)]
    w2 = sj("21", "w2", "PENDING", n=1, reason="Resources", start=600.0, limit=60.0)
    ops = b.step(1.5, [*own, w, w2], 0, {h: 2 for h in NODES}, [t], lambda j, e: None)  # not shrunk yet
    assert not [o for o in ops if isinstance(o, AskShrink)], ops
    six = Tenant(1, "7", 6, hosts[:6], 2, False, (2, 4), {8: 1.0, 6: 1.3}, 99, {6: 800.0, 4: 1200.0, 2: 2400.0})
    used = {**{h: 2 for h in NODES}, "n4": 0}
    ops = b.step(2.0, [*own, w, w2], 0, used, [six], lambda j, e: None)  # shrunk: n4 goes back, its one update
    assert not [o for o in ops if isinstance(o, AskShrink)], ops
    assert [(o.host, o.job) for o in ops if isinstance(o, Release)] == [("n4", "7")] and "7" in b.frozen
    # without that rule (Slurm taking every update) the second waiting job has it shrink again
    b = broker()
    b.step(0.0, own, 0, {h: 2 for h in NODES}, [t], lambda j, e: None)
    b.step(1.0, [*own, w], 0, {h: 2 for h in NODES}, [t], lambda j, e: None)
    ops = b.step(1.5, [*own, w, w2], 0, {h: 2 for h in NODES}, [t], lambda j, e: None)
    assert [(o.job_id, o.nprocs) for o in ops if isinstance(o, AskShrink)] == [(1, 4)]


# ---------------------------------------------------------------------- SD-Policy's slowdown test, surplus nodes
@settings(max_examples=60, deadline=None)
@given(st.floats(60.0, 6000.0), st.sampled_from([60.0, 120.0, 300.0]), st.floats(3.0, 300.0))
def test_a_shrink_is_asked_exactly_when_the_slowdown_it_costs_is_less_than_the_slowdown_it_saves(run, limit, start):
    """The running job loses 100 iterations * 0.2 s = 20 s shrinking from 12 to 8; the waiting job saves its
    wait. Under ``slowdown`` each is divided by its job's run time (its limit for the waiting one)."""
    saving, loss = start - 2.0, 20.0
    if saving <= 0 or math.isclose(loss / run, saving / limit, rel_tol=1e-6):
        return
    for criterion, pays in (("slowdown", loss / run < saving / limit), ("turnaround", loss < saving)):
        t = Tenant(**{**grown().__dict__, "run": run})
        b = broker(criterion=criterion)
        first_look(b, t)
        w = sj("20", "w", "PENDING", n=2, reason="Resources", start=start, limit=limit)
        ops = b.step(2.0, jobs_with(w), 0, {h: 2 for h in NODES}, [t], lambda j, e: None)
        assert bool([o for o in ops if isinstance(o, AskShrink)]) == pays, (criterion, run, limit, start)


def test_a_long_job_shrinks_for_a_short_one_under_the_slowdown_criterion_and_not_under_turnaround():
    t = Tenant(**{**grown().__dict__, "run": 1200.0})  # a 20-minute job loses 20 s: 1.7% of its run
    w = sj("20", "w", "PENDING", n=2, reason="Resources", start=16.0, limit=60.0)  # a 1-minute job saves 14 s
    asked = {}
    for criterion in ("slowdown", "turnaround"):
        b = broker(criterion=criterion)
        first_look(b, t)
        asked[criterion] = [o for o in b.step(2.0, jobs_with(w), 0, {h: 2 for h in NODES}, [t], lambda j, e: None)
                            if isinstance(o, AskShrink)]
    assert asked == {"slowdown": [AskShrink(1, 8, "Slurm job 20 is waiting for 2 node(s)", ("n5", "n6"))],
                     "turnaround": []}


def test_nodes_a_shrink_frees_beyond_the_need_go_back_to_slurm_with_the_others():
    """The job steps from 12 to 8 processes (two nodes) for a job waiting for one: both nodes are given
    back, one promised to the waiting job, the other to no one (Slurm's backfill starts what fits)."""
    t = grown()
    b = broker()
    first_look(b, t)
    w = sj("20", "w", "PENDING", n=1, reason="Resources", start=300.0, limit=60.0)
    ops = b.step(2.0, jobs_with(w), 0, {h: 2 for h in NODES}, [t], lambda j, e: None)
    assert [o for o in ops if isinstance(o, AskShrink)] == [
        AskShrink(1, 8, "Slurm job 20 is waiting for 1 node(s)", ("n5", "n6"))]
    assert {o.host for o in ops if isinstance(o, Drain)} == {"n5", "n6"}
    assert len(b.promised["20"]) == 1
    shrunk = Tenant(**{**t.__dict__, "nprocs": 8, "hosts": t.hosts[:8]})
    used = {h: 2 for h in NODES[:4]} | {h: 2 for h in NODES[6:]}
    ops = b.step(3.0, jobs_with(w), 0, used, [shrunk], lambda j, e: None)
    assert {o.host for o in ops if isinstance(o, Release)} == {"n5", "n6"}


def test_the_no_delay_check_counts_every_node_the_planned_shrinks_give_back():
    """Job 7 (8 processes on n1-n4) steps down to 4 for W1 (n3, n4 go back), then to 2 for W2 (n2 too).
    A job X waiting for six nodes still starts at 200 on n2-n8 if the check for W2 counts n3 and n4, given
    back for W1, as free; held by job 7 until its longer end at 2 processes, X would move past the 3600
    Slurm predicted for it, and W2 would wait."""
    own = tuple(h for h in NODES[:4] for _ in range(2))
    t = Tenant(1, "7", 8, own, 2, False, (2, 4), {8: 1.0, 4: 2.0, 2: 4.0}, 10, {8: 3600.0, 4: 5000.0, 2: 8000.0})
    b = broker()
    base = [sj("7", "mall", "RUNNING", NODES[:4], start=0.0, end=3600.0, limit=3600.0),
            sj("9", "rigid", "RUNNING", NODES[4:], start=0.0, end=200.0, limit=200.0),
            sj("30", "x", "PENDING", n=6, reason="Resources", start=3600.0, limit=100.0, prio=300)]
    b.step(0.0, base, 0, {h: 2 for h in NODES}, [t], lambda j, e: None)
    w1 = sj("21", "w1", "PENDING", n=1, reason="Priority", start=300.0, limit=60.0, prio=200)
    w2 = sj("22", "w2", "PENDING", n=1, reason="Priority", start=300.0, limit=60.0, prio=100)
    ops = b.step(2.0, [*base, w1, w2], 0, {h: 2 for h in NODES}, [t], lambda j, e: None)
    assert [o for o in ops if isinstance(o, AskShrink)] == [
        AskShrink(1, 2, "Slurm job 21 is waiting for 1 node(s)", ("n2", "n3", "n4"))]
