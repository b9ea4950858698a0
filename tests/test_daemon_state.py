"""The daemon core without sockets or processes: events in, actions out, invariants kept."""

from __future__ import annotations

from collections import Counter

import pytest

from scheduler.core import events as C
from scheduler.core.jobfile import JobFileError, validate_job
from scheduler.core.policy import RemapPolicy, Shrink, app_policy, remap_policy
from scheduler.core.pool import default_pool
from scheduler.core.state import ClusterState, Job, Kill, Launch, StateError


def make(slots=8, app="easy", remap="reshape"):
    return ClusterState(default_pool(slots), app_policy(app), remap_policy(remap))


def job(n=2, **kw):
    return validate_job({"command": ["true"], "nprocs": n, **kw})


def point(st, jid, n, t, it=1):
    adv = st.handle(C.ResizePoint(job_id=jid, iteration=it, nprocs=n, iter_time=t), 0.0)[0]
    st.validate()
    return adv


def test_expand_sweet_spot_and_shrink_to_admit():
    st = make(8)
    a = st.submit(job(2, max_procs=8), 0.0)
    assert st.tick(0.0) == [Launch(a)]
    adv = point(st, a, 2, 1.0)
    assert adv.action == "expand" and adv.nprocs == 3 and len(adv.hosts) == 1
    assert st.pool.free == 5  # reserved at once
    st.resized(a, 2, 3, 0.1, None, 1.0)
    adv = point(st, a, 3, 0.7)
    st.resized(a, 3, 4, 0.1, None, 2.0)
    adv = point(st, a, 4, 0.69)  # 4 did not help over 3: sweet spot
    assert adv.action == "shrink" and adv.nprocs == 3
    assert st.pool.free == 4  # released only when confirmed
    st.resized(a, 4, 3, 0.1, None, 3.0)
    assert st.pool.free == 5 and point(st, a, 3, 0.7).action == "continue"
    b = st.submit(job(6), 4.0)  # needs 6, 5 free
    assert st.jobs[b].state == "queued"
    adv = point(st, a, 3, 0.7)
    assert adv.action == "shrink" and adv.nprocs == 2
    acts = st.resized(a, 3, 2, 0.1, None, 5.0)
    assert acts == [Launch(b)] and st.pool.free == 0
    st.validate()
    assert st.jobs[a].profile.redist_time[(3, 4)] == 0.1


def test_lost_confirmation_is_settled_by_the_next_resize_point():
    st = make(8)
    a = st.submit(job(2), 0.0)
    st.tick(0.0)
    assert point(st, a, 2, 1.0).action == "expand"
    point(st, a, 3, 0.5)  # never sent 'resized'
    assert st.jobs[a].nprocs == 3 and len(st.jobs[a].hosts) == 3
    adv = point(st, a, 3, 0.4)
    assert adv.action == "expand"
    adv = point(st, a, 3, 0.4)  # the expansion to 4 failed silently; it is advised again
    assert st.jobs[a].nprocs == 3 and adv.action == "expand" and st.pool.free == 4
    assert [e["kind"] for e in st.events].count("resize_failed") == 2


def test_out_of_order_and_unknown_jobs_are_errors_that_change_nothing():
    st = make(4)
    a = st.submit(job(2), 0.0)
    with pytest.raises(StateError) as e:
        st.handle(C.ResizePoint(job_id=a, iteration=1, nprocs=2, iter_time=1.0), 0.0)[0]
    assert e.value.code == "not_running"
    st.tick(0.0)
    with pytest.raises(StateError) as e:
        st.resized(a, 2, 4, 0.1, None, 0.0)
    assert e.value.code == "out_of_order"
    with pytest.raises(StateError) as e:
        st.handle(C.ResizePoint(job_id=99, iteration=1, nprocs=2, iter_time=1.0), 0.0)[0]
    assert e.value.code == "unknown_job"
    with pytest.raises(StateError) as e:
        st.handle(C.ResizePoint(job_id=a, iteration=1, nprocs=3, iter_time=1.0), 0.0)[0]
    assert e.value.code == "bad_size"
    st.validate()
    assert st.pool.free == 2


def test_exit_and_cancel_free_everything():
    st = make(4, remap="static")
    a, b, c = (st.submit(job(2), 0.0) for _ in range(3))
    assert st.tick(0.0) == [Launch(a), Launch(b)]
    assert st.exited(a, -9, 1.0) == [Launch(c)]
    assert st.jobs[a].state == "failed"
    assert st.cancel(b, 2.0) == [Kill(b)]
    d = st.submit(job(4), 3.0)
    assert st.cancel(d, 3.0) == [] and st.jobs[d].state == "cancelled"
    st.exited(c, 0, 4.0)
    assert st.pool.free == 4 and st.jobs[c].state == "done"
    with pytest.raises(StateError):
        st.cancel(c, 5.0)
    st.validate()


def test_arrival_delay_and_bad_jobs():
    st = make(4)
    a = st.submit(job(2, arrival_delay=5.0), 0.0)
    assert st.tick(4.0) == [] and st.jobs[a].state == "waiting"
    assert st.tick(5.0) == [Launch(a)]
    with pytest.raises(StateError):
        st.submit(job(6), 0.0)
    for bad in ({"nprocs": 2}, {"command": "ls", "nprocs": 2}, {"command": ["ls"], "nprocs": 0},
                {"command": ["ls"], "nprocs": 2, "topology": "3d"},
                {"command": ["ls"], "nprocs": 3, "divides": 8},
                {"command": ["ls"], "nprocs": 2, "colour": "red"}):
        with pytest.raises(JobFileError):
            validate_job(bad)


class AskBiggest(RemapPolicy):
    """ReSHAPE's rules, plus: while jobs wait, ask the largest resizable job to halve.

    A test policy that uses :meth:`RemapPolicy.shrink_requests` (ReSHAPE's own
    returns none), so the daemon core and the simulator can be compared on it.
    """

    name = "ask-biggest"

    def __init__(self):
        self.inner = remap_policy("reshape")

    def at_resize_point(self, snap, job_id):
        return self.inner.at_resize_point(snap, job_id)

    def shrink_requests(self, snap):
        run = [r for r in snap.running if r.spec.resizable and r.nprocs >= 2 and r.pending_shrink is None]
        if not snap.queue or not run:
            return []
        big = max(run, key=lambda r: (r.nprocs, -r.spec.job_id))
        return [Shrink(big.spec.job_id, max(big.spec.min_procs, big.nprocs // 2), "admit queued job")]


def test_shrink_requests_become_pending_shrinks_and_are_told_at_the_next_resize_point():
    st = ClusterState(default_pool(8), app_policy("easy"), AskBiggest())
    a = st.submit(job(6, max_procs=8), 0.0)
    st.tick(0.0)
    assert st.snapshot(0.0).job(a).pending_shrink is None  # nothing waits: no request
    b = st.submit(job(4, resizable=False), 1.0)  # needs 4, 2 free
    assert st.tick(1.0) == []
    assert st.jobs[b].state == "queued" and st.jobs[a].shrink_request == 3
    assert st.snapshot(1.0).job(a).pending_shrink == 3
    assert any(e["kind"] == "shrink_request" for e in st.events)
    adv = point(st, a, 6, 1.0)
    assert (adv.action, adv.nprocs, adv.reason) == ("shrink", 3, "requested shrink")
    assert st.jobs[a].shrink_request is None  # consumed; the advice is pending now
    assert st.resized(a, 6, 3, 0.1, None, 2.0) == [Launch(b)]
    st.validate()
    # journaled with the job
    st2 = ClusterState(default_pool(8), app_policy("easy"), AskBiggest())
    c = st.submit(job(8), 3.0)
    st.tick(3.0)
    assert st.jobs[a].shrink_request == 1
    st2.restore([Job.from_dict(j.to_dict()) for j in st.jobs.values()], st.next_id)
    assert st2.jobs[a].shrink_request == 1 and st2.snapshot(3.0).job(a).pending_shrink == 1
    st2.cancel(c, 4.0)
    st2.validate()


class BadRequests(RemapPolicy):
    name = "bad-requests"

    def __init__(self, requests):
        self.requests = requests

    def at_resize_point(self, snap, job_id):
        return remap_policy("static").at_resize_point(snap, job_id)

    def shrink_requests(self, snap):
        return self.requests


def test_invalid_shrink_requests_are_ignored():
    reqs: list = []
    st = ClusterState(default_pool(4), app_policy("fcfs"), BadRequests(reqs))
    a = st.submit(job(2, min_procs=2), 0.0)
    s = st.submit(job(2, resizable=False), 0.0)
    st.tick(0.0)
    reqs += [Shrink(a, 1, "below min_procs"), Shrink(a, 2, "not smaller"), Shrink(s, 1, "static"),
             Shrink(99, 1, "no such job")]
    st.submit(job(4), 1.0)
    st.tick(1.0)
    assert reqs and all(j.shrink_request is None for j in st.jobs.values())
    st.validate()


@pytest.mark.parametrize("reported,code,state", [(None, 0, "failed"), ("done", 0, "done"), (None, 9, "failed"),
                                                 (None, None, "lost"), ("done", None, "done")])
def test_an_exit_during_a_resize_is_a_failure_unless_the_job_said_it_was_done(reported, code, state):
    """Hydra has exited 0 after a rank was killed mid-expansion: an unconfirmed resize says otherwise."""
    st = make(8)
    a = st.submit(job(2), 0.0)
    st.tick(0.0)
    assert point(st, a, 2, 1.0).action == "expand"
    if reported:
        st.finished(a, reported, None, 1.0)
    st.exited(a, code, 2.0)
    st.validate()
    j = st.jobs[a]
    assert j.state == state and st.pool.free == 8
    if state != "done":
        assert j.error.endswith("during expand 2->3"), j.error
    if code == 0 and state == "failed":
        assert "never confirmed its resize" in j.error


def test_a_resize_not_confirmed_in_time_fails_and_kills_the_job():
    st = make(8)
    a = st.submit(job(2, resize_timeout=10.0), 0.0)
    st.tick(0.0)
    assert point(st, a, 2, 1.0).action == "expand"  # advised at t=0
    assert st.check_resizes(15.9) == []  # 10 s + 5 s + 10% = 16 s
    acts = st.check_resizes(16.1)
    st.validate()
    assert acts == [Kill(a)] and st.jobs[a].state == "failed" and st.pool.free == 8
    assert st.jobs[a].error == "expand 2->3 not confirmed within 16 s; job killed"
    assert st.status(17.0)["ended"][0]["error"] == st.jobs[a].error


def test_nodes_granted_drained_and_released_by_a_resource_manager():
    """The core's side of growing through Slurm (scheduler.rm.slurm.manager), through the node events a
    resource manager reports: a node not ours is down, a granted one joins the pool, a draining one offers
    no slot, and only an unused node can be given back; each change is in the node history."""
    from scheduler.core.pool import Node, Pool

    st = ClusterState(Pool([Node("n1", 2), Node("n2", 2)]), app_policy("easy"), remap_policy("reshape"))
    st.not_ours("n2", "held by Slurm, not by this job")
    assert st.pool.total == 2 and st.node_rows(0.0)[1]["state"] == "down"
    assert st.handle(C.NodeDraining("n2", "lost"), 0.0) == (False, [])  # a node down stays as it is
    assert st.handle(C.NodeDraining("n9", "lost"), 0.0) == (False, [])  # so does one not in the pool
    a = st.submit(job(2, max_procs=4), 0.0)
    st.tick(0.0)
    assert st.would_expand(a, 2, 0.0) == 3  # with 2 more slots the policy would expand it 2 -> 3
    assert st.handle(C.NodeGranted("n2", "granted by Slurm job 9 in 1.0 s"), 1.0) == (None, [])
    assert st.pool.free == 2 and st.node_events[-1]["kind"] == "granted"
    assert st.handle(C.NodeDraining("n2", "promised to Slurm job 10"), 1.0) == (True, [])
    assert st.handle(C.NodeDraining("n2", "again"), 1.0) == (False, [])  # no change, no second event
    assert st.pool.free == 0 and st.node_rows(1.0)[1]["state"] == "draining"
    assert [e["kind"] for e in st.node_events[-2:]] == ["granted", "draining"]
    assert point(st, a, 2, 1.0).action == "continue"  # nothing new is placed on a draining node
    assert st.handle(C.NodeReleased("n1", "released to Slurm"), 2.0) == (False, [])  # the job's ranks are there
    assert st.handle(C.NodeReleased("n2", "released to Slurm"), 2.0) == (True, [])
    assert st.pool.total == 2 and "n2" not in st.pool.draining and st.node_events[-1]["kind"] == "released"
    assert st.would_expand(a, 0, 3.0) is None


def test_an_allocation_that_ends_gives_back_its_leased_nodes():
    """``LeaseEnded``: the nodes leased to an allocation that ended go back to the resource manager; one a job
    still uses stays, offered to every job, until it is released."""
    from scheduler.core.pool import Node, Pool

    st = ClusterState(Pool([Node("n1", 2), Node("n2", 2), Node("n3", 2)]), app_policy("easy"),
                      remap_policy("reshape"))
    for h in ("n2", "n3"):
        st.not_ours(h, "held by Slurm")
        st.handle(C.NodeGranted(h, "allocation of Slurm job 7", "7"), 0.0)
    jid = st.adopt(job(2), ["n2", "n2"], "7", 0.0)
    assert st.pool.leases == {"n2": "7", "n3": "7"}
    assert st.handle(C.LeaseEnded("7", "Slurm job 7 ended"), 1.0) == (None, [])
    assert st.pool.leases == {} and st.node_rows(1.0)[2]["state"] == "down" and "n2" not in st.pool.down
    assert st.jobs[jid].hosts == ["n2", "n2"]
    assert [(e["host"], e["kind"]) for e in st.node_events[-1:]] == [("n3", "released")]


def test_a_resource_manager_is_given_only_the_port():
    """``state.port``: node events in, the requests PORT lists, read-only views; not the pool, not the parts."""
    from scheduler.core.state import PORT

    st = make(4)
    port = st.port
    assert not any(hasattr(port, n) for n in ("pool", "table", "node_table", "handle", "submit", "forget"))
    assert all(callable(getattr(port, n)) for n in PORT)
    with pytest.raises(StateError, match="Hello is not a node event"):
        port.report(C.Hello(1, 2), 0.0)
    a = st.submit(job(2), 0.0)
    st.tick(0.0)
    with pytest.raises(TypeError):
        port.jobs[a] = None  # a read-only view
    assert port.hosts == ("localhost",) and port.used("localhost") == 2 and not port.is_down("localhost")
    assert port.report(C.NodeDraining("localhost", "about to go"), 1.0) == (True, [])
    assert st.pool.free == 0 and st.node_events[-1]["kind"] == "draining"


def test_sizes_a_job_announces_narrow_its_legal_sizes_and_are_journaled():
    """The runtime announces the sizes its program accepts (arrays' layouts, a ``sizes`` test) in ``hello``;
    the Remap Scheduler then never advises another size, and the narrowing survives a restart."""
    st = make(8)
    a = st.submit(job(2, max_procs=8), 0.0)
    st.tick(0.0)
    st.hello(a, 2, 0.0, sizes=[1, 2, 4, 8])
    assert st.jobs[a].spec.sizes == (1, 2, 4, 8)
    assert point(st, a, 2, 10.0).nprocs == 4  # grows to the next announced size, not 3
    st2 = ClusterState(default_pool(8), app_policy("easy"), remap_policy("reshape"))
    st2.restore([Job.from_dict(j.to_dict()) for j in st.jobs.values()], st.next_id)
    assert st2.jobs[a].spec.sizes == (1, 2, 4, 8)
    with pytest.raises(StateError, match="bad_sizes"):
        st.hello(a, 2, 0.0, sizes=[3])  # 3 is no longer legal: the narrowing holds, nothing is left


def test_an_expansion_is_placed_where_the_job_has_parked_ranks():
    """A job with reuse on reports the hosts of its parked ranks (``parked``); the expansion's slots are
    taken there first, so the runtime calls those ranks back instead of spawning (reshape.runtime.parking)."""
    from scheduler.core.pool import Node, Pool

    def expand_hosts(parked):
        st = ClusterState(Pool([Node("a", 2), Node("b", 2), Node("c", 2)]), app_policy("easy"),
                          remap_policy("reshape"))
        a = st.submit(job(2, max_procs=3), 0.0)
        st.tick(0.0)
        adv = st.handle(C.ResizePoint(job_id=a, iteration=1, nprocs=2, iter_time=1.0, parked=parked), 0.0)[0]
        st.validate()
        assert adv.action == "expand" and adv.nprocs == 3
        assert st.jobs[a].pending.hosts == list(adv.hosts)  # the reservation is where the advice says
        assert st.status(0.0)["running"][0]["parked"] == dict(Counter(parked))  # shown: processes beyond slots
        return adv.hosts

    assert expand_hosts([]) == ("b",)  # first fit
    assert expand_hosts(["c", "c"]) == ("c",)
    assert expand_hosts(["gone", "c"]) == ("c",)  # a host not in the pool is ignored


def test_the_count_a_program_reports_reaches_the_policies_view_and_its_job_file_wins():
    st = make(16, app="easy-plus", remap="reshape-plus")
    a = st.submit(job(4, max_procs=16), 0.0)
    b = st.submit(job(2, max_procs=16, iterations=50), 0.0)
    st.tick(0.0)
    assert st.jobs[a].spec.iterations is None
    adv = st.handle(C.ResizePoint(job_id=a, iteration=1, nprocs=4, iter_time=20.0, total=10), 0.0)[0]
    assert st.jobs[a].spec.iterations == 10
    assert adv.action == "expand"  # 9 iterations left pay for a first redistribution (one iteration assumed)
    st.handle(C.ResizePoint(job_id=b, iteration=1, nprocs=2, iter_time=1.0, total=10), 0.0)
    assert st.jobs[b].spec.iterations == 50
    st.validate()
