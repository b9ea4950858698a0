"""Nodes in the daemon core, without sockets: registration, heartbeats, a node going down and back.

Pure events on :class:`scheduler.core.state.ClusterState` (and the journal), invariants checked after each.
"""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from reshape.joblink import protocol as P
from scheduler.core import events as C
from scheduler.core.job import PendingResize
from scheduler.core.jobfile import validate_job
from scheduler.core.policy import app_policy, remap_policy
from scheduler.core.pool import Node, Pool
from scheduler.core.state import ClusterState, Job, Kill, Launch, StateError
from scheduler.daemon.journal import Journal


def make(require=False, timeout=2.0, remap="reshape"):
    pool = Pool([Node("n1", 2), Node("n2", 2), Node("n3", 2)])
    return ClusterState(pool, app_policy("easy"), remap_policy(remap), node_timeout=timeout,
                        require_monitors=require)


def job(n=2, **kw):
    return validate_job({"command": ["true"], "nprocs": n, **kw}, 6)


def up_all(s, now=0.0):
    for h in ("n1", "n2", "n3"):
        s.node_register(h, f"m-{h}", now)


def test_unmonitored_nodes_count_and_a_silent_node_goes_down_with_its_jobs():
    s = make()
    assert s.pool.total == 6 and all(r.state == "unmonitored" for r in s.nodes.values())
    a = s.submit(job(2), 0.0)
    b = s.submit(job(3), 0.0)  # n2 + n3
    assert s.tick(0.0) == [Launch(a), Launch(b)]
    assert s.jobs[b].hosts == ["n2", "n2", "n3"]
    up_all(s, 0.0)
    s.validate()
    for t in (1.0, 2.0, 3.0):  # n1 and n3 keep beating, n2 falls silent after t=0
        s.node_heartbeat("n1", "m-n1", [a], t)
        s.node_heartbeat("n3", "m-n3", [], t)
        acts = s.check_nodes(t)
        s.validate()
        if t < 2.5:
            assert acts == []
    assert acts == [Kill(b)]
    assert s.nodes["n2"].state == "down" and "no heartbeat" in s.nodes["n2"].reason
    assert s.jobs[b].state == "failed" and "node n2 down" in s.jobs[b].error
    assert s.jobs[a].state == "running"  # the other job continues
    assert (s.pool.total, s.pool.free, s.pool.capacity) == (4, 2, 6)
    st_ = s.status(3.0)
    assert st_["total_slots"] == 4 and st_["capacity_slots"] == 6
    assert {n["host"]: n["state"] for n in st_["nodes"]} == {"n1": "up", "n2": "down", "n3": "up"}
    assert [e["kind"] for e in s.node_events if e["host"] == "n2"] == ["up", "down"]
    # its monitor comes back: heartbeats are refused until it registers; then the node rejoins
    with pytest.raises(StateError) as e:
        s.node_heartbeat("n2", "m-n2", [], 4.0)
    assert e.value.code == "not_registered"
    s.node_register("n2", "m-n2b", 4.0)
    s.validate()
    assert s.pool.total == 6 and s.nodes["n2"].state == "up"
    assert s.node_events[-1]["kind"] == "rejoin"


def test_a_stalled_daemon_does_not_write_off_nodes_that_were_fine():
    s = make(timeout=2.0)
    up_all(s, 0.0)
    assert s.check_nodes(0.1) == []
    assert s.check_nodes(5.0) == []  # the daemon itself was away for 4.9 s: credited to every node
    assert all(r.state == "up" for r in s.nodes.values())
    s.node_heartbeat("n1", "m-n1", [], 5.5)
    for t in (6.0, 6.5, 7.0, 7.5):
        s.check_nodes(t)
    assert [r.state for r in s.nodes.values()] == ["up", "down", "down"]  # silent while it listened


def test_nothing_is_allocated_on_a_down_node_and_queued_jobs_wait_for_it():
    s = make()
    up_all(s)
    s.node_down("n1", 1.0, "test")
    a = s.submit(job(4), 1.0)
    assert s.tick(1.0) == [Launch(a)] and set(s.jobs[a].hosts) == {"n2", "n3"}
    b = s.submit(job(2), 1.0)  # 6 configured, 4 up: must wait (not refused)
    assert s.tick(2.0) == [] and s.jobs[b].state == "queued"
    assert s.node_register("n1", "again", 3.0) == [Launch(b)]
    assert s.jobs[b].hosts == ["n1", "n1"]
    s.validate()


def test_an_expansion_onto_a_node_that_goes_down_is_abandoned_and_the_job_keeps_its_size():
    s = make()
    up_all(s)
    a = s.submit(job(2, max_procs=6), 0.0)
    s.tick(0.0)
    adv = s.handle(C.ResizePoint(job_id=a, iteration=1, nprocs=2, iter_time=1.0), 0.5)[0]
    assert adv.action == "expand" and "n2" in adv.hosts
    s.node_down("n2", 1.0, "test")
    s.validate()
    j = s.jobs[a]
    assert j.state == "running" and j.pending is None and j.nprocs == 2
    assert s.events[-1]["kind"] == "resize_failed"
    with pytest.raises(StateError):  # the job's late confirmation is out of order, harmlessly
        s.resized(a, 2, adv.nprocs, 0.1, None, 2.0)


def test_require_monitors_keeps_nodes_out_until_they_register():
    s = make(require=True)
    assert s.pool.total == 0 and s.pool.capacity == 6
    a = s.submit(job(2), 0.0)
    assert s.tick(0.0) == []
    assert s.node_register("n3", "m", 1.0) == [Launch(a)] and s.jobs[a].hosts == ["n3", "n3"]
    s.validate()


def test_unknown_node_and_only_the_first_node_reports_a_job():
    s = make()
    with pytest.raises(StateError) as e:
        s.node_register("n9", "m", 0.0)
    assert e.value.code == "unknown_node"
    a = s.submit(job(3), 0.0)
    s.tick(0.0)  # n1, n1, n2
    with pytest.raises(StateError) as e:
        s.job_ended(a, "n2", "end", None, 1.0)
    assert e.value.code == "not_first_node"
    s.job_ended(a, "n1", "end", "gone", 1.0)
    acts = s.ended_on_node(a, 1.5)
    assert acts[0] == Kill(a) and s.jobs[a].state == "done"
    b = s.submit(job(2), 2.0)
    s.tick(2.0)
    s.finished(b, "error", "boom", 2.5)
    s.job_ended(b, s.jobs[b].hosts[0], "end", None, 3.0)
    s.ended_on_node(b, 3.0)
    assert s.jobs[b].state == "failed"
    s.validate()


def test_same_incarnation_registering_twice_is_one_event():
    s = make()
    s.node_register("n1", "m", 0.0)
    n = len(s.node_events)
    s.node_register("n1", "m", 0.1)
    assert len(s.node_events) == n
    s.node_register("n1", "m2", 0.2)
    assert s.node_events[-1]["kind"] == "monitor_restart"


def test_journal_keeps_node_states_and_events(tmp_path):
    s = make()
    up_all(s)
    a = s.submit(job(2), 0.0)
    s.tick(0.0)
    s.node_down("n1", 1.0, "gone")
    j = Journal(str(tmp_path / "j.sqlite"), checkpoint_every=None)
    j.save([s.jobs[k] for k in sorted(s.dirty)], s.events, {"next_id": s.next_id},
           [s.nodes[h] for h in sorted(s.dirty_nodes)], s.node_events)
    j.close()
    j = Journal(str(tmp_path / "j.sqlite"), checkpoint_every=None)
    s2 = make()
    jobs, meta = j.load()
    s2.restore_nodes(j.load_nodes(), 5.0)
    s2.restore(jobs, meta["next_id"])
    s2.validate()
    assert s2.nodes["n1"].state == "down" and s2.pool.total == 4
    assert s2.nodes["n2"].state == "up" and s2.nodes["n2"].last_seen == 5.0  # one timeout to beat again
    assert s2.jobs[a].state == "failed"
    assert [(e["host"], e["kind"]) for e in j.node_history()][-1] == ("n1", "down")
    s2.node_heartbeat("n2", "m-n2", [], 6.0)  # the same monitor carries on after a daemon restart
    j.close()


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["submit", "beat", "down", "register", "tick", "point", "on_node",
                                           "cancel", "killed"]),
                          st.integers(0, 2), st.integers(1, 4)), max_size=40))
@example([("submit", 0, 4), ("tick", 0, 1), ("on_node", 0, 1), ("down", 0, 1), ("register", 0, 1),
          ("killed", 0, 1), ("killed", 1, 1), ("tick", 0, 1)])  # the runner's node lost: n2 confirms
@example([("submit", 0, 4), ("submit", 0, 2), ("tick", 0, 1), ("on_node", 0, 1), ("cancel", 0, 1),
          ("down", 0, 1), ("down", 1, 1), ("tick", 0, 1)])  # a cancel; the runner's node lost, then n2 too
def test_invariants_under_random_node_events(ops):
    """Node events in any order, jobs run by their first node's monitor or not, cancelled, their kills confirmed
    by the nodes ordered to (``scheduler.core.kills``): the slots and indexes stay consistent."""
    s = make()
    up_all(s)
    t = 0.0
    hosts = ("n1", "n2", "n3")
    for op, i, n in ops:
        t += 0.5
        h = hosts[i]
        if op == "submit":
            s.submit(job(n, max_procs=6), t)
        elif op == "beat" and s.nodes[h].state == "up":
            s.node_heartbeat(h, s.nodes[h].incarnation, [], t)
        elif op == "down":
            s.node_down(h, t, "random")
        elif op == "register":
            s.node_register(h, f"m{t}", t)
        elif op == "tick":
            s.check_nodes(t)
            s.tick(t)
        elif op == "point":
            run = s.running()
            if run:
                j = run[i % len(run)]
                if j.pending:
                    s.resized(j.job_id, j.pending.old, j.pending.new, 0.1, None, t)
                else:
                    s.handle(C.ResizePoint(job_id=j.job_id, iteration=1, nprocs=j.nprocs, iter_time=1.0 / n), t)[0]
        elif op == "on_node":
            run = [j for j in s.running() if j.runner is None]
            if run:
                j = run[i % len(run)]
                s.run_on(j.job_id, j.hosts[0], 0)
        elif op == "cancel":
            live = [j for j in s.running() + s.killing()]
            if live:
                s.cancel(live[i % len(live)].job_id, t)
        elif op == "killed" and s.nodes[h].state == "up":
            gone = tuple({"job_id": j.job_id, "attempt": j.restarts} for j in s.killing()
                         if j.job_id % n == 0)
            s.handle(C.Heartbeat(node=h, incarnation=s.nodes[h].incarnation, jobs=tuple(
                j.job_id for j in s.killing() if j.runner == h and j.job_id % n), killed=gone), t)
        s.validate()
        assert s.pool.total == 2 * sum(r.state != "down" for r in s.nodes.values())


def test_node_messages_validate():
    ok = P.Message("heartbeat", 1, None, {"node": "n1", "incarnation": "x", "jobs": [1, 2]})
    assert P.decode(P.encode(ok)) == P.Heartbeat(seq=1, node="n1", incarnation="x", jobs=(1, 2))
    for body in ({"node": "", "incarnation": "x"}, {"node": "n1", "incarnation": "x", "jobs": [-1]},
                 {"node": "n1", "incarnation": "x", "jobs": ["a"]}, {"node": "n1"}):
        with pytest.raises(P.ProtocolError):
            P.encode(P.Message("heartbeat", 1, None, body))
    with pytest.raises(P.ProtocolError):
        P.encode(P.Message("job_ended", 1, 3, {"node": "n1", "incarnation": "x", "status": "fine"}))
    with pytest.raises(P.ProtocolError):  # job_ended is about a job
        P.encode(P.Message("job_ended", 1, None, {"node": "n1", "incarnation": "x", "status": "end"}))


def test_a_job_run_on_its_node_is_cancelling_holding_its_slots_until_its_monitor_confirms_the_kill():
    """``scheduler.core.state``, "Ending a job run on a node": cancelled only once the runner confirms."""
    s = make(remap="static")
    up_all(s)
    a = s.submit(job(6), 0.0)
    b = s.submit(job(6), 0.0)
    assert s.tick(0.0) == [Launch(a)]
    s.run_on(a, "n1", 0)
    s.handle(C.Heartbeat(node="n1", incarnation="m-n1", jobs=(a,), runs=({"job_id": a, "attempt": 0, "pid": 7},)),
             0.5)
    assert s.cancel(a, 1.0) == [Kill(a)]  # nothing scheduled: its slots are still held
    s.validate()
    assert s.jobs[a].state == "cancelling" and s.pool.free == 0 and s.jobs[b].state == "queued"
    assert s.cancel(a, 1.1) == [Kill(a)]  # a second cancel: still cancelling
    row = next(r for r in s.status(1.5)["running"] if r["job_id"] == a)
    assert row["state"] == "cancelling" and "not yet confirmed by the monitor of n1" in row["detail"], row
    # a heartbeat still listing the run, or another node's, confirm nothing; nor does another attempt's end
    for ev in (C.Heartbeat(node="n1", incarnation="m-n1", jobs=(a,), runs=({"job_id": a, "attempt": 0, "pid": 7},)),
               C.Heartbeat(node="n2", incarnation="m-n2", jobs=())):
        assert s.handle(ev, 2.0) == (None, [])
        assert s.jobs[a].state == "cancelling"
    with pytest.raises(StateError):
        s.handle(C.JobEnded(job_id=a, node="n1", status="error", attempt=1, code=143), 2.0)
    assert s.jobs[a].state == "cancelling"
    with pytest.raises(StateError):  # nor does a job's own report any more
        s.finished(a, "done", None, 2.0)
    # the runner's exit status does: cancelled, slots free, the next job starts
    _, acts = s.handle(C.JobEnded(job_id=a, node="n1", status="error", code=143), 2.5)
    assert acts == [Launch(b)] and s.jobs[a].state == "cancelled" and s.jobs[a].error is None
    s.validate()
    with pytest.raises(StateError):
        s.cancel(a, 3.0)


def test_a_cancelling_job_is_confirmed_by_a_heartbeat_without_it_or_ends_unconfirmed_when_its_node_goes_down():
    s = make(remap="static", timeout=1.0)
    up_all(s)
    a, b = s.submit(job(2), 0.0), s.submit(job(2), 0.0)
    assert s.tick(0.0) == [Launch(a), Launch(b)]
    s.run_on(a, "n1", 0)
    s.run_on(b, "n2", 0)
    s.cancel(a, 0.5)
    s.cancel(b, 0.5)
    assert s.handle(C.Heartbeat(node="n1", incarnation="m-n1", jobs=()), 0.6) == (None, [])  # no run, no process
    assert s.jobs[a].state == "cancelled" and s.jobs[a].error is None
    s.validate()
    s.node_heartbeat("n1", "m-n1", [], 1.0)
    s.node_heartbeat("n3", "m-n3", [], 1.0)
    s.check_nodes(1.0)
    s.node_heartbeat("n1", "m-n1", [], 1.8)
    s.node_heartbeat("n3", "m-n3", [], 1.8)
    s.check_nodes(1.8)  # n2 silent since 0.0
    j = s.jobs[b]
    assert j.state == "cancelled" and "never confirmed: node n2 went down" in j.error, j.error
    s.validate()
    assert s.pool.free == 4
    # journaled and restored: a cancelling job keeps its slots
    c = s.submit(job(2), 2.0)
    s.tick(2.0)
    s.run_on(c, "n1", 0)
    s.cancel(c, 2.5)
    s2 = make(remap="static")
    s2.restore([Job.from_dict(x.to_dict()) for x in s.jobs.values()], s.next_id)
    s2.validate()
    assert s2.jobs[c].state == "cancelling" and s2.pool.free == 4


def on_nodes(**kw):
    """Jobs a and b (2 slots each, on n1 and n2), b queued behind a on a pool that holds one of them at a time
    (n3 is down): a's ``mpiexec`` runs on n1, started by its monitor (``run_on``), which confirmed the start."""
    s = make(remap="static", timeout=1.0)
    up_all(s)
    s.node_down("n3", 0.0, "out of the test")
    a = s.submit(job(4, **kw), 0.0)
    b = s.submit(job(4), 0.0)
    assert s.tick(0.0) == [Launch(a)] and s.jobs[a].hosts == ["n1", "n1", "n2", "n2"]
    s.run_on(a, "n1", 0)
    s.handle(C.Heartbeat(node="n1", incarnation="m-n1", jobs=(a,), runs=({"job_id": a, "attempt": 0, "pid": 7},)),
             0.1)
    return s, a, b


def beat(s, now, *, runs=(), jobs=(), nodes=("n1", "n2")):
    out = []
    for h in nodes:
        mine = tuple(r for r in runs if h == "n1")
        out += s.handle(C.Heartbeat(node=h, incarnation=f"m-{h}", jobs=tuple(jobs) if h == "n1" else (),
                                    runs=mine), now)[1]
    return out


def confirm(s, a, now, code=143, attempt=0):
    return s.handle(C.JobEnded(job_id=a, node="n1", status="error", code=code,
                               attempt=attempt), now)[1]


def test_a_walltime_kill_of_a_job_run_on_its_node_holds_its_slots_until_the_monitor_confirms():
    s, a, b = on_nodes(walltime=10)
    assert s.expire(11.0) == [Kill(a)]  # nothing scheduled: a's slots are still held
    s.validate()
    j = s.jobs[a]
    assert j.state == "ending" and s.pool.free == 0 and s.jobs[b].state == "queued"
    row = next(r for r in s.status(11.5)["running"] if r["job_id"] == a)
    assert row["detail"].startswith("walltime exceeded: kill ordered 0.5 s ago, not yet confirmed by the monitor "
                                    "of n1"), row
    run = {"job_id": a, "attempt": 0, "pid": 7}
    assert beat(s, 11.6, runs=(run,), jobs=(a,)) == []  # still listed: not confirmed
    assert s.expire(20.0) == [] and s.tick(20.0) == []  # not killed twice; nothing starts
    assert confirm(s, a, 20.5) == [Launch(b)]
    assert j.state == "failed" and "walltime exceeded" in j.error and j.then is None, j
    assert [e["kind"] for e in s.events if e["job_id"] == a][-2:] == ["ending", "end"]
    s.validate()


def test_a_job_whose_other_node_goes_down_is_ending_until_its_runner_confirms_then_fails_or_restarts():
    for ckpt in (False, True):
        s, a, b = on_nodes(**({"checkpoint": "every:5"} if ckpt else {}))
        s.node_heartbeat("n1", "m-n1", [a], 1.5)
        acts = s.check_nodes(1.5)  # n2 silent since 0
        assert acts == [Kill(a)] and s.nodes["n2"].state == "down", acts
        j = s.jobs[a]
        assert j.state == "ending" and j.hosts == ["n1", "n1", "n2", "n2"] and s.pool.free == 0
        s.validate()
        assert beat(s, 1.7, nodes=("n1",)) == ([Launch(a)] if ckpt else [])  # no run, no process: confirmed
        s.validate()
        if ckpt:  # queued again, and relaunched at the largest legal size that fits what is up (n1)
            assert j.state == "running" and j.restarts == 1 and j.hosts == ["n1", "n1"] and j.runner is None
            assert "node n2 down" in j.failures[0] and s.jobs[b].state == "queued"
            assert "n1" not in s.suspect  # the cause is known: n2
        else:
            assert j.state == "failed" and "node n2 down" in j.error and s.jobs[b].state == "queued"
            assert s.pool.free == 2


def test_a_stuck_resize_of_a_job_run_on_its_node_restarts_it_once_the_kill_is_confirmed():
    s, a, _ = on_nodes(checkpoint="every:5", resizable=True, min_procs=2, max_procs=4, resize_timeout=10)
    j = s.jobs[a]
    j.pending = PendingResize("shrink", 4, 2, ["n2", "n2"], 1.0)
    for t in (10.0, 20.0):
        beat(s, t - 0.5)
        s.check_nodes(t - 0.5)
    acts = s.check_resizes(20.0)
    assert acts == [Kill(a)] and j.state == "ending" and j.restarts == 0 and j.pending is None
    with pytest.raises(StateError):  # another attempt's end confirms nothing
        confirm(s, a, 20.5, attempt=1)
    assert j.state == "ending"
    assert confirm(s, a, 20.6) == [] and j.state == "queued" and j.restarts == 1
    assert "shrink 4->2 not confirmed" in j.failures[0]
    s.validate()
    beat(s, 21.0)  # the cause is not known: its nodes took nothing until they heartbeat
    assert s.tick(21.0) == [Launch(a)] and j.hosts == ["n1", "n1", "n2", "n2"]
    s.validate()


def test_a_cancel_of_an_ending_job_cancels_it_and_a_runner_that_goes_down_leaves_the_kill_to_its_other_node():
    s, a, _ = on_nodes(checkpoint="every:5")
    s.node_heartbeat("n1", "m-n1", [a], 1.5)
    s.check_nodes(1.5)
    assert s.jobs[a].state == "ending"
    assert s.cancel(a, 1.6) == [Kill(a)]
    assert s.jobs[a].state == "cancelling" and s.jobs[a].then is None
    s.validate()
    assert confirm(s, a, 1.7) == [] and s.jobs[a].state == "cancelled" and s.jobs[a].restarts == 0
    # journaled and restored: an ending job keeps its slots and what it becomes; its runner's node goes down
    s, a, _ = on_nodes(walltime=10)
    s.expire(11.0)
    s2 = make(remap="static", timeout=1.0)
    s2.restore([Job.from_dict(x.to_dict()) for x in s.jobs.values()], s.next_id)
    s2.restore_nodes([r for r in s.nodes.values()], 11.0)
    s2.validate()
    j = s2.jobs[a]
    assert j.state == "ending" and s2.pool.free == 0 and j.then["detail"] == "walltime exceeded"
    acts = s2.node_down("n1", 12.0, "no heartbeat")
    assert acts == [] and s2.pool.free == 0  # a's slots on n2 are held until n2's monitor confirms
    assert j.state == "ending" and j.hosts == ["n2", "n2"] and j.kill_on == {"n1": "down (no heartbeat)", "n2": ""}
    s2.validate()
    assert s2.handle(C.Heartbeat(node="n2", incarnation="m-n2", killed=({"job_id": a, "attempt": 0},)), 12.5) \
        == (None, [])
    assert j.state == "failed" and s2.pool.free == 2 and j.kill_on == {}
    assert "walltime exceeded" in j.error and "never confirmed on n1: it went down (no heartbeat)" in j.error, j.error
    s2.validate()


def killed(s, node, a, now, attempt=0):
    """A heartbeat of ``node``'s monitor saying no process of job ``a``'s attempt is left there."""
    return s.handle(C.Heartbeat(node=node, incarnation=f"m-{node}", killed=({"job_id": a, "attempt": attempt},)),
                    now)[1]


def test_the_runners_node_lost_its_other_nodes_kill_the_rest_and_free_their_slots_as_they_confirm():
    """``scheduler.core.kills``: the node of a job's ``mpiexec`` (n1) goes down. The job is ``ending``, its slots on
    n1 leave with n1, those on n2 are held until n2's monitor confirms that nothing of the attempt is left there:
    then it fails, or (checkpoints) restarts on what is up."""
    for ckpt in (False, True):
        s, a, b = on_nodes(**({"checkpoint": "every:5"} if ckpt else {}))
        j = s.jobs[a]
        s.node_heartbeat("n2", "m-n2", [], 1.5)
        assert s.check_nodes(1.5) == [Kill(a)] and s.nodes["n1"].state == "down"  # n1 silent since 0.1
        assert j.state == "ending" and j.hosts == ["n2", "n2"] and s.pool.free == 0 and s.jobs[b].state == "queued"
        assert j.kill_on == {"n1": "down (no heartbeat for 1.4 s)", "n2": ""}, j.kill_on
        detail = [e["detail"] for e in s.events if e["job_id"] == a][-1]
        assert "kill ordered to the monitor of n2 (its mpiexec's node n1 is down), not yet confirmed" in detail
        row = next(r for r in s.status(1.6)["running"] if r["job_id"] == a)
        assert "not yet confirmed by the monitor of n2 (its mpiexec's node n1 is down)" in row["detail"], row
        s.validate()
        # n2's heartbeats without that confirmation, or confirming another attempt, confirm nothing
        assert beat(s, 1.7, nodes=("n2",)) == [] and killed(s, "n2", a, 1.8, attempt=1) == []
        assert j.state == "ending" and s.pool.free == 0
        acts = killed(s, "n2", a, 2.0)
        s.validate()
        assert j.kill_on == {} and s.jobs[b].state == "queued"  # b needs 4 slots: only n2's 2 are up
        if ckpt:
            assert acts == [Launch(a)] and j.state == "running" and j.restarts == 1 and j.hosts == ["n2", "n2"]
            assert "node n1 down" in j.failures[0]
        else:
            assert acts == [] and j.state == "failed" and s.pool.free == 2
            assert j.error.startswith("node n1 down") and "never confirmed on n1" in j.error, j.error
            end = [e["detail"] for e in s.events if e["job_id"] == a][-1]
            assert "killed on n2 by the monitor of n2" in end, end


def test_a_node_lost_before_it_confirms_takes_its_slots_with_it_and_a_returning_runner_confirms_nothing():
    s, a, _ = on_nodes()
    j = s.jobs[a]
    s.node_heartbeat("n2", "m-n2", [], 1.5)
    s.check_nodes(1.5)
    assert j.state == "ending" and j.kill_on["n2"] == ""
    # n1 comes back (its monitor restarted) while n2 has not confirmed: n1's word settles nothing now
    s.node_register("n1", "m2-n1", 1.6)
    assert s.handle(C.Heartbeat(node="n1", incarnation="m2-n1", jobs=()), 1.7) == (None, [])
    assert s.handle(C.JobEnded(job_id=a, node="n1", status="error", code=137), 1.8) \
        == (None, [])  # (taken: the monitor forgets the run)
    assert j.state == "ending" and j.hosts == ["n2", "n2"]
    s.validate()
    # journaled and restored mid-way
    s2 = make(remap="static", timeout=1.0)
    s2.restore([Job.from_dict(x.to_dict()) for x in s.jobs.values()], s.next_id)
    s2.restore_nodes(list(s.nodes.values()), 2.0)
    s2.validate()
    j = s2.jobs[a]
    assert j.state == "ending" and j.kill_on["n2"] == "" and s2.pool.used["n2"] == 2
    s2.node_heartbeat("n1", "m2-n1", [], 2.5)
    s2.check_nodes(3.5)  # n2 silent: declared down by the node timeout before it confirmed
    assert j.state == "failed" and s2.pool.used["n2"] == 0 and j.kill_on == {}
    assert "never confirmed on n1" in j.error and "never confirmed on n2: it went down" in j.error, j.error
    s2.validate()


def test_a_cancelled_job_whose_runners_node_goes_down_is_cancelled_once_its_other_node_confirms():
    s, a, _ = on_nodes()
    j = s.jobs[a]
    s.cancel(a, 1.0)
    assert j.state == "cancelling"
    s.node_heartbeat("n2", "m-n2", [], 1.5)
    s.check_nodes(1.5)
    assert j.state == "cancelling" and j.kill_on["n2"] == "" and j.hosts == ["n2", "n2"]
    assert [e["kind"] for e in s.events if e["job_id"] == a][-1] == "cancelling"
    s.validate()
    killed(s, "n2", a, 2.0)
    assert j.state == "cancelled" and "never confirmed on n1" in j.error and s.pool.free == 2
    s.validate()


def test_heartbeat_killed_is_checked_at_the_edge():
    ok = P.Message("heartbeat", 1, None, {"node": "n1", "incarnation": "x", "killed": [{"job_id": 3, "attempt": 1}]})
    assert P.decode(P.encode(ok)).killed == ({"job_id": 3, "attempt": 1},)
    for bad in ([{"job_id": 3}], [{"job_id": -1, "attempt": 0}], [[3, 0]], [{"job_id": 3, "attempt": 0, "x": 1}]):
        with pytest.raises(P.ProtocolError, match="'killed' must list objects"):
            P.encode(P.Message("heartbeat", 1, None, {"node": "n1", "incarnation": "x", "killed": bad}))
