"""Restarts in their allocation under the site controller, without Slurm: the core, :class:`SlurmSite` and
``reshape slurm-run``'s choice of hosts, driven by registrations and Slurm views written here (the real
``docker kill`` of a node under a running job is in ``tests/test_cluster_slurm.py``).

A job with checkpoints whose ``mpiexec`` ended by a loss (a rank killed, a node dead) asks for its next
attempt on the nodes its allocation still holds: it keeps its reshape job id, runs at the largest legal
size that fits, its lost nodes go back to Slurm, and nothing else is touched. An end that is not a loss,
is refused with one line saying why (too few nodes left: requeued, ``tests/test_slurm_requeue.py``).
"""

from __future__ import annotations

import json

import pytest

from reshape.joblink import protocol as P
from scheduler.cli.slurm import restart_hosts
from scheduler.core import events as C
from scheduler.core.actions import StateError
from scheduler.core.jobfile import validate_job
from scheduler.rm.slurm.edge import KeepNodes
from tests.test_slurm_site import job, outbox, point, site


def heat(**kw) -> dict:
    return validate_job({"name": "heat", "command": ["python", "examples/heat.py"], "nprocs": 4, "min_procs": 2,
                         "max_procs": 4, "divides": 4, "checkpoint": "every:5", **kw}, None)


ALLOC = ["n1", "n1", "n2", "n2"]


def registered(**kw):
    st, rm = site()
    jid = rm.adopt(st.port, heat(**kw), "101", ALLOC, 0.0, None)
    st.handle(C.ResizePoint(job_id=jid, iteration=12, nprocs=4, iter_time=1.0), 5.0)
    return st, rm, jid


def test_a_job_that_lost_a_node_restarts_in_its_allocation_on_the_nodes_left_and_gives_the_lost_one_back():
    st, rm, jid = registered()
    again = rm.adopt(st.port, heat(), "101", ["n1", "n1"], 10.0, None, (255, ["n2"]))
    j = st.jobs[jid]
    assert again == jid and j.state == "running" and j.restarts == 1 and (j.nprocs, j.hosts) == (2, ["n1", "n1"])
    assert j.failures == ["exit code 255, node(s) n2 lost"] and j.iterations == 0
    assert st.pool.used["n2"] == 0 and "n2" in st.pool.draining and rm.broker.draining["n2"]
    st.validate()
    # the next look: Slurm still lists n2 in the job (it has not noticed yet): it is given back, n1 kept
    rm.apply(st.port, 11.0, [job("101", "heat", "RUNNING", ["n1", "n2"])], 4, 11.0)
    assert ("101", ["n1"]) in [(o.job, o.hosts) for o in outbox(rm) if isinstance(o, KeepNodes)]
    point(st, jid, 11, 1.0, 12.0)  # resumed at the checkpoint of iteration 10: two iterations lost
    assert (j.resumed_at, j.iterations_lost) == (10, 2)
    st.validate()


def test_a_rank_killed_restarts_the_job_on_its_own_nodes_and_leaves_its_expanders_nodes_to_it():
    st, rm = site()
    jid = rm.adopt(st.port, heat(nprocs=2, max_procs=4), "101", ["n1", "n1"], 0.0, None)
    mains = [job("101", "heat", "RUNNING", ["n1"])]
    rm.apply(st.port, 1.0, [*mains, job("201", "reshape-expand-101", "RUNNING", ["n3"])], 4, 1.0)
    st.pool.claim(["n3", "n3"])  # grown onto its expander's node
    j = st.jobs[jid]
    j.hosts, j.nprocs = ["n1", "n1", "n3", "n3"], 4
    rm.adopt(st.port, heat(nprocs=2, max_procs=4), "101", ["n1", "n1"], 5.0, None, (137, []))
    assert (j.restarts, j.nprocs, j.hosts) == (1, 2, ["n1", "n1"]) and not st.pool.draining
    assert st.pool.used["n3"] == 0 and st.pool.leases["n3"] == "101"  # its expander's, for it to grow into again
    st.validate()


@pytest.mark.parametrize(("kw", "report", "code", "hosts", "why"), [
    ({"checkpoint": None}, None, 255, ["n1", "n1"], "no checkpoint setting"),
    ({}, "error", 1, ["n1", "n1"], "the program failed"),
    ({}, None, 3, ["n1", "n1", "n2", "n2"], "exited with status 3: the program's own failure"),
    ({"max_restarts": 0}, None, 255, ["n1", "n1"], "restarted 0 time(s), its max_restarts"),
])
def test_an_end_that_is_no_loss_is_refused_with_why_and_nothing_changes(
        kw, report, code, hosts, why):
    st, rm, jid = registered(**kw)
    if report:
        st.handle(C.Finished(job_id=jid, status=report, error="division by zero"), 6.0)
    with pytest.raises(StateError) as e:
        rm.adopt(st.port, heat(**kw), "101", hosts, 10.0, None, (code, ["n2"] if len(hosts) == 2 else []))
    assert e.value.code == "not_restartable" and why in e.value.message, e.value.message
    j = st.jobs[jid]
    assert (j.restarts, j.hosts, j.state) == (0, ALLOC, "running") and not st.pool.draining
    assert any("not restarted" in n for n in rm.info()["notes"])
    st.validate()


def test_a_restart_of_an_unregistered_allocation_or_on_nodes_not_its_own_is_refused():
    st, rm, jid = registered()
    with pytest.raises(StateError, match="no registered job"):
        rm.adopt(st.port, heat(), "999", ["n1"], 10.0, None, (255, []))
    with pytest.raises(StateError) as e:
        rm.adopt(st.port, heat(), "101", ["n5", "n5"], 10.0, None, (255, ["n2"]))
    assert e.value.code == "bad_hosts" and st.jobs[jid].restarts == 0
    st.validate()


@pytest.mark.parametrize(("held", "dead", "want"), [
    (["n1", "n2"], set(), ["n1", "n1", "n2", "n2"]),
    (["n1", "n2"], {"n2"}, ["n1", "n1"]),
    (["n1"], set(), ["n1", "n1"]),  # Slurm removed n2 from the job already
    (["n1", "n2"], {"n1", "n2"}, []),
])
def test_slurm_run_restarts_on_the_slots_of_the_nodes_slurm_still_gives_it_that_answer(held, dead, want):
    assert restart_hosts(["n1", "n1", "n2", "n2"], held, dead) == want


def test_a_register_naming_bad_lost_hosts_is_refused_on_the_wire():
    body = {"job": {}, "allocation": "1", "hosts": ["n1"], "restart": True, "code": 9}
    ok = P.decode(json.dumps({"v": P.VERSION, "type": "register", "seq": 1, "body": {**body, "lost": ["n2"]}}).encode())
    assert ok.restart and ok.code == 9 and ok.lost == ("n2",)
    for lost in ([""], ["n" * 256], [3]):
        frame = json.dumps({"v": P.VERSION, "type": "register", "seq": 1, "body": {**body, "lost": lost}}).encode()
        with pytest.raises(P.ProtocolError, match="'lost'"):
            P.decode(frame)


def test_nodes_named_lost_that_are_not_the_jobs_own_are_left_alone():
    st, rm, _ = registered()
    rm.adopt(st.port, heat(nprocs=2), "102", ["n4", "n4"], 1.0, None)  # another job's node, named lost by this one
    rm.adopt(st.port, heat(), "101", ["n1", "n1"], 10.0, None, (255, ["n2", "n4"]))
    assert "n4" not in st.pool.draining and "n4" not in rm.broker.draining and "n2" in st.pool.draining
    st.validate()


def test_a_node_slurm_took_out_of_the_job_before_its_batch_script_looked_is_lost_though_the_script_found_none():
    """A node that hangs is found by Slurm first: it leaves the job (``--no-kill``) before ``mpiexec`` ends,
    so the batch script probes only the node left and names none lost; the controller saw Slurm take it."""
    st, rm, jid = registered()
    rm.apply(st.port, 8.0, [job("101", "heat", "RUNNING", ["n1"])], 4, 8.0)  # Slurm: n2 is out of the job
    again = rm.adopt(st.port, heat(), "101", ["n1", "n1"], 10.0, None, (255, []))
    j = st.jobs[jid]
    assert again == jid and (j.state, j.restarts, j.hosts) == ("running", 1, ["n1", "n1"])
    assert j.failures == ["exit code 255, node(s) n2 lost"], j.failures
    st.validate()


def test_a_job_at_its_smallest_size_on_a_node_slurm_lost_is_left_to_its_allocation_to_restart():
    """It cannot shrink off the node Slurm took: the node is down, but the job, whose batch script restarts
    it in its allocation, is not failed by the controller meanwhile."""
    st, rm = site()
    jid = rm.adopt(st.port, heat(nprocs=2, min_procs=2, max_procs=2, divides=2), "101", ["n1", "n2"], 0.0, None)
    st.handle(C.ResizePoint(job_id=jid, iteration=12, nprocs=2, iter_time=1.0), 5.0)
    rm.apply(st.port, 8.0, [job("101", "heat", "RUNNING", ["n1"])], 4, 8.0)
    rm.apply(st.port, 9.0, [job("101", "heat", "RUNNING", ["n1"])], 4, 9.0)
    j = st.jobs[jid]
    assert j.state == "running" and "n2" in st.pool.down, (j.state, j.error)
    rm.adopt(st.port, heat(nprocs=2, min_procs=2, max_procs=2, divides=2), "101", ["n1", "n1"], 10.0, None, (255, []))
    assert (j.state, j.restarts, j.hosts) == ("running", 1, ["n1", "n1"]) and j.failures[0].endswith("n2 lost")
    st.validate()
