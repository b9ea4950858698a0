"""Slurm glue without Slurm: allocation parsing, squeue parsing, the broker's decisions, launchers.

The real thing (slurmctld, slurmd, munge in the compose cluster) is tested in
``tests/test_cluster_slurm.py``; these pin the pure parts.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reshape.joblink import launchers
from scheduler.core.pool import PoolError
from scheduler.service.slurm import (
    AskShrink,
    Broker,
    Cancel,
    Drain,
    Grant,
    Lost,
    Release,
    SlurmJob,
    Submit,
    allocation_pool,
    expander_name,
    parse_squeue,
    partition_pool,
)


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


def job(jid, name, state, nodes=(), reason="None", n=None):
    return SlurmJob(jid, name, state, "u", n if n is not None else len(nodes), tuple(nodes), reason)


def broker(**kw) -> Broker:
    return Broker("7", ["node1", "node2"], "node1", grant_timeout=10, idle_release=30, **kw)


MAIN = job("7", "heat", "RUNNING", ["node1", "node2"])
X = expander_name("7")


def test_grow_asks_once_and_grants_when_the_expander_runs():
    b = broker()
    used = {"node1": 2, "node2": 2}
    assert b.step(0, [MAIN], 2, used, 2, []) == [Submit(2)]
    assert b.step(1, [MAIN], 2, used, 2, []) == []  # one request at a time
    b.submitted("8", 1.0)
    assert b.step(2, [MAIN, job("8", X, "PENDING", reason="Resources", n=2)], 2, used, 2, []) == []
    ops = b.step(3.5, [MAIN, job("8", X, "RUNNING", ["node3", "node4"])], 0, used, 2, [])
    assert ops == [Grant("node3", "8", 2.5), Grant("node4", "8", 2.5)]
    assert b.kept("8") == ["node3", "node4"]


def test_nothing_granted_in_time_is_cancelled_and_nothing_asked_on_a_full_cluster():
    b = broker()
    used = {"node1": 2, "node2": 2}
    assert b.step(0, [MAIN], 0, used, 2, []) == []  # no idle node: nothing asked, the job keeps its size
    assert b.step(0, [MAIN], 1, used, 2, []) == [Submit(1)]
    b.submitted("8", 0.0)
    ops = b.step(11, [MAIN, job("8", X, "PENDING", reason="Priority", n=1)], 1, used, 2, [])
    assert len(ops) == 1 and isinstance(ops[0], Cancel) and ops[0].job == "8" and "granted no node" in ops[0].why
    assert b.step(20, [MAIN], 1, used, 2, []) == []  # not asking again at once ...
    assert b.step(42, [MAIN], 1, used, 2, []) == [Submit(1)]  # ... but after three grant timeouts


def test_a_waiting_job_gets_free_nodes_first_then_shrinks_never_the_batch_host():
    b = broker()
    b.held.update({"node3": "8", "node4": "8"})
    other = job("20", "other", "PENDING", reason="Resources", n=2)
    jobs = [MAIN, job("8", X, "RUNNING", ["node3", "node4"]), other]
    hosts = ["node1"] * 2 + ["node2"] * 2 + ["node3"] * 2
    # node4 free: drained and released at once; node3 comes from shrinking the job 6 -> 4
    ops = b.step(0, jobs, 0, {"node1": 2, "node2": 2, "node3": 2, "node4": 0}, 0, [(1, 6, 2, hosts)])
    assert Drain("node4") in ops and Drain("node3") in ops
    why = "Slurm job 20 is waiting for 2 node(s)"
    assert AskShrink(1, 4, why, ("node3",)) in ops
    assert [o for o in ops if isinstance(o, Release)] == [Release("node4", "8", why)]
    b.released("node4")
    # the job shrank: node3 is free and goes back too
    ops = b.step(1, jobs, 0, {"node1": 2, "node2": 2, "node3": 0}, 0, [(1, 4, 2, hosts[:4])])
    assert [o.host for o in ops if isinstance(o, Release)] == ["node3"]
    b.released("node3")
    assert b.kept("8") == [] and "node1" in b.held
    # the waiting job started: nothing is drained any more
    assert b.step(2, [MAIN], 0, {"node1": 2, "node2": 2}, 0, []) == []


def test_unused_granted_node_goes_back_and_a_vanished_expander_is_a_lost_node():
    b = broker()
    b.held["node3"] = "8"
    jobs = [MAIN, job("8", X, "RUNNING", ["node3"])]
    used = {"node1": 2, "node2": 2, "node3": 0}
    assert b.step(0, jobs, 0, used, 0, []) == []
    assert b.step(31, jobs, 0, used, 0, []) == [Release("node3", "8", "unused for 30 s")]
    assert b.step(32, [MAIN], 0, used, 0, []) == [Lost("node3", "expander job 8 ended")]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["node1", "node2", "node3", "node4"]), min_size=1, max_size=8),
       st.integers(1, 4), st.dictionaries(st.sampled_from(["node1", "node2", "node3", "node4"]), st.integers(0, 2)))
def test_never_gives_back_the_batch_host_or_a_used_node(hosts, need, used):
    b = broker()
    b.held.update({"node3": "8", "node4": "9"})
    jobs = [MAIN, job("8", X, "RUNNING", ["node3"]), job("9", X, "RUNNING", ["node4"]),
            job("20", "other", "PENDING", reason="Resources", n=need)]
    ops = b.step(0, jobs, 0, used, 0, [(1, len(hosts), 1, hosts)])
    for o in ops:
        if isinstance(o, Release):
            assert o.host != "node1" and not used.get(o.host)
        if isinstance(o, AskShrink):
            assert 1 <= o.nprocs < len(hosts) and "node1" not in o.drop
            assert set(hosts[o.nprocs:]) == set(o.drop)  # the retired ranks are exactly those on dropped hosts


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
