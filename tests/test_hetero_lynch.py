"""Lynch 1999 (Lynch): workload generator, model pieces, NS/SS/DNS/DSS, and the never-span ordering."""

from __future__ import annotations

import math
import random
import statistics

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.core.actions import PolicyError
from scheduler.lab.hetero import (
    NETWORKS,
    NetSimulator,
    cv,
    job_rate,
    network,
    random_network,
    run_network_policies,
)
from scheduler.lab.hetero_policies import (
    NetSnapshot,
    Node,
    Part,
    Place,
    QueuedJob,
    RunningNetJob,
    SetProcs,
    alt_capacity,
    equipartition,
    fold_factor,
    net_policy,
    place_threads,
)
from scheduler.lab.workloads.lynch import (
    HeteroJob,
    generate,
    hyperexp_interarrivals,
    job_size_pmf,
    mean_rep,
    mean_size_runtime,
)

# -- workload generator (notes §3, validation 1) ----------------------------


def test_size_distribution_as_printed():
    p = job_size_pmf()
    assert len(p) == 128 and math.isclose(sum(p), 1.0)
    assert p[0] == pytest.approx(0.181, abs=0.002)
    assert p[1] == pytest.approx(0.188, abs=0.002)
    assert p[7] == pytest.approx(0.131, abs=0.002)
    assert p[127] == pytest.approx(0.0345, abs=0.001)
    assert sum(p[i - 1] for i in (1, 2, 4, 8, 16, 32, 64, 128)) == pytest.approx(0.81, abs=0.005)
    assert sum((i + 1) * x for i, x in enumerate(p)) == pytest.approx(14.85, abs=0.02)


def test_repetitions_runtime_and_correlation():
    assert mean_rep() == pytest.approx(1.90, abs=0.005)
    assert mean_size_runtime() == pytest.approx(69_800, rel=0.02)
    jobs = generate(30_000, 0.5, seed=3)
    sizes = [j.threads for j in jobs]
    runs = [j.runtime for j in jobs]
    assert statistics.correlation(sizes, runs) == pytest.approx(0.187, abs=0.03)
    assert max(runs) < 64_800
    assert sum(j.rep == 1 for j in jobs) / len(jobs) == pytest.approx(0.745, abs=0.015)
    assert all(j.work == pytest.approx(100 * j.runtime * j.rep) for j in jobs[:100])


def test_hyperexponential_arrivals_mean_and_cv():
    gaps = hyperexp_interarrivals(random.Random(1), 400_000, mean=10.0, cv=8.0)
    m = statistics.fmean(gaps)
    assert m == pytest.approx(10.0, rel=0.08)
    assert statistics.pstdev(gaps) / m == pytest.approx(8.0, rel=0.15)


def test_common_random_numbers_across_loads():
    a, b = generate(200, 0.2, seed=7), generate(200, 0.6, seed=7)
    assert [(j.threads, j.work) for j in a] == [(j.threads, j.work) for j in b]
    assert b[-1].arrival == pytest.approx(a[-1].arrival / 3)
    assert generate(50, 0.2, seed=7) == a[:50]


def test_bad_workload_input():
    with pytest.raises(ValueError, match="load must be positive"):
        generate(10, -0.5)
    with pytest.raises(ValueError, match="CV >= 1"):
        hyperexp_interarrivals(random.Random(0), 3, 1.0, cv=0.5)


# -- model pieces --------------------------------------------------------------


def test_thread_placement_example_from_notes():
    nodes = (Node(2, 200.0), Node(4, 100.0))
    parts = place_threads(10, {0: 2, 1: 4}, nodes)
    assert parts == (Part(0, 2, 5), Part(1, 4, 5))


@settings(max_examples=200, deadline=None)
@given(
    threads=st.integers(1, 128),
    alloc=st.lists(st.tuples(st.integers(1, 16), st.sampled_from([50.0, 100.0, 250.0])), min_size=1, max_size=6),
)
def test_thread_placement_invariants(threads, alloc):
    nodes = tuple(Node(k, s) for k, s in alloc)
    procs = {i: k for i, (k, _) in enumerate(alloc)}
    parts = place_threads(threads, procs, nodes)
    assert sum(p.threads for p in parts) == threads
    total = sum(k * s for k, s in alloc)
    for p in parts:
        assert 1 <= p.procs <= min(p.threads, procs[p.node])
        ideal = threads * procs[p.node] * nodes[p.node].speed / total
        assert abs(p.threads - ideal) < len(alloc) + 1  # floor plus at most one remainder each


@settings(max_examples=200, deadline=None)
@given(total=st.integers(0, 64), demands=st.lists(st.integers(1, 40), max_size=10))
def test_equipartition_invariants(total, demands):
    a = equipartition(total, demands)
    assert sum(a) == min(total, sum(demands))
    assert all(0 <= x <= d for x, d in zip(a, demands, strict=True))
    uncapped = [x for x, d in zip(a, demands, strict=True) if x < d]
    if uncapped:
        assert max(a) - min(uncapped) <= 1  # nobody below the water level but by one


def test_alt_capacity_reduces_to_capacity():
    assert alt_capacity([800.0], 0.9) == 800.0
    assert alt_capacity([400.0, 200.0], 0.0) == 600.0
    assert alt_capacity([400.0, 200.0], 0.5, "A") == pytest.approx(600.0 * (1 - 0.5))
    assert alt_capacity([400.0, 200.0], 0.5) < 600.0


def test_folding_is_mild_and_monotone():
    assert fold_factor(1) == 1.0 and fold_factor(2) == pytest.approx(0.91)
    assert fold_factor(128) == pytest.approx(0.517, abs=0.002)
    nodes = (Node(128, 100.0),)
    rt = [1.0 / job_rate(64, {0: [k, 64]}, nodes) for k in (1, 2, 4, 8, 16, 32, 64)]
    assert rt == sorted(rt, reverse=True)  # speedup increases with processors


def test_communication_penalty_fig_3_8():
    """8 threads, work 1 each, on 8 uniprocessor nodes: with large c, 8 processors ~ sequential."""
    nodes = tuple(Node(1, 1.0) for _ in range(8))
    spread = tuple(Part(i, 1, 1) for i in range(8))
    rt_large_c = 1.0 / job_rate(8, spread, nodes, c=10.0)
    rt_small_c = 1.0 / job_rate(8, spread, nodes, c=0.1)
    seq = 8.0  # 8 threads folded on one processor without folding penalty or communication
    assert rt_large_c > 0.9 * seq
    assert rt_small_c < 0.3 * seq


# -- policies on hand-built snapshots ---------------------------------------------


def _snap(nodes, free, queue, running=()):
    return NetSnapshot(0.0, nodes, tuple(free), tuple(queue), tuple(running))


def test_ns_deals_freed_processors_round_robin():
    nodes = (Node(8, 100.0), Node(8, 100.0))
    s = _snap(nodes, [0, 5], [QueuedJob(1, 10), QueuedJob(2, 10)],
              [RunningNetJob(9, 8, (Part(0, 8, 8),)), RunningNetJob(8, 3, (Part(1, 3, 3),))])
    assert net_policy("ns").decide(s, "departure") == [Place(1, (Part(1, 3, 10),)), Place(2, (Part(1, 2, 10),))]


def test_ns_arrival_picks_fastest_service_rate():
    nodes = (Node(8, 100.0), Node(8, 250.0), Node(2, 400.0))
    s = _snap(nodes, [8, 8, 2], [QueuedJob(1, 8)])
    assert net_policy("ns").decide(s, "arrival") == [Place(1, (Part(1, 8, 8),))]
    s = _snap(nodes, [8, 8, 2], [QueuedJob(1, 1)])  # one thread: the fastest processor
    assert net_policy("ns").decide(s, "arrival") == [Place(1, (Part(2, 1, 1),))]


def test_dns_equipartitions_the_chosen_node():
    nodes = (Node(8, 100.0), Node(8, 100.0))
    running = [RunningNetJob(1, 8, (Part(0, 8, 8),)), RunningNetJob(2, 8, (Part(1, 8, 8),))]
    s = _snap(nodes, [0, 0], [QueuedJob(3, 8)], running)
    d = net_policy("dns").decide(s, "arrival")
    assert d == [SetProcs(1, 0, 4), Place(3, (Part(0, 4, 8),))]


def test_ss_stops_at_target_and_dss_steals():
    nodes = (Node(16, 100.0),)
    # 2 jobs in system -> target 800 = 8 processors
    s = _snap(nodes, [16], [QueuedJob(1, 32)], [])
    assert net_policy("ss").decide(s, "arrival") == [Place(1, (Part(0, 16, 32),))]  # alone: target 1600
    s = _snap(nodes, [0], [QueuedJob(2, 16)], [RunningNetJob(1, 32, (Part(0, 16, 32),))])
    assert net_policy("ss").decide(s, "arrival") == []  # nothing free: SS waits
    d = net_policy("dss").decide(s, "arrival")
    assert d[-1] == Place(2, (Part(0, 8, 16),)) and d[-2] == SetProcs(1, 0, 8)


def test_ss_spans_only_with_a_large_spanning_factor():
    nodes = (Node(4, 100.0), Node(4, 100.0))
    s = _snap(nodes, [4, 4], [QueuedJob(1, 8)])
    assert net_policy("ss", sigma=0.1).decide(s, "arrival") == [Place(1, (Part(0, 4, 8),))]
    assert net_policy("ss", sigma=0.9).decide(s, "arrival") == [Place(1, (Part(0, 4, 4), Part(1, 4, 4)))]


# -- simulator ---------------------------------------------------------------------


def test_single_job_runs_at_its_model_rate():
    job = HeteroJob(0, 5.0, 8, 100.0 * 60)
    res = NetSimulator(NETWORKS["13"], [job], net_policy("ns")).run()
    r = res.records[0]
    assert r.start == 5.0 and r.finish == pytest.approx(5.0 + 6000 / 250.0)  # one fast 8-way node


def test_rogue_policy_is_reported():
    class Rogue:
        name = "rogue"

        def decide(self, snap, event):
            return [Place(snap.queue[0].job_id, (Part(0, 200, 200),))] if snap.queue else []

    with pytest.raises(PolicyError, match="rogue"):
        NetSimulator(NETWORKS["1"], [HeteroJob(0, 0.0, 200, 10.0)], Rogue()).run()


def test_bad_names_and_networks():
    with pytest.raises(ValueError, match="unknown network policy 'xx'"):
        net_policy("xx")
    with pytest.raises(ValueError, match="bad network"):
        network("8x")
    with pytest.raises(ValueError, match="sigma"):
        net_policy("ss", sigma=1.5)
    assert network("8x100,4x200") == (Node(8, 100.0), Node(4, 200.0))


def test_substitute_networks_match_thesis_cv():
    for name, target in (("11", 0.20), ("12", 0.43), ("13", 0.866)):
        assert cv([n.speed for n in NETWORKS[name]]) == pytest.approx(target, abs=0.01)
    for name, target in (("14", 0.478), ("15", 0.829), ("16", 1.21)):
        assert cv([n.size for n in NETWORKS[name]]) == pytest.approx(target, abs=0.01)
    for nodes in NETWORKS.values():
        assert sum(n.capacity for n in nodes) == 12800


# -- the orderings the thesis reports, in shape ----------------------------------


def _mrt(net: str, load: float, names, seeds=3, n=800, **params):
    tot = dict.fromkeys(names, 0.0)
    for seed in range(seeds):
        jobs = generate(n, load, seed)
        res = run_network_policies(NETWORKS[net], jobs, names, params=params, warmup=n // 10, max_queue=n)
        for k, m in res.items():
            tot[k] += m["mrt"]
    return {k: v / seeds for k, v in tot.items()}


@pytest.mark.parametrize("load", [0.3, 0.6])
def test_never_span_beats_span_on_a_multinode_network(load):
    """Lynch 1999 conclusion 1: on multi-node networks NS and DNS beat SS and DSS (MRT)."""
    m = _mrt("13", load, ["ns", "ss", "dns", "dss"])
    assert m["dns"] < m["dss"]
    assert m["ns"] < m["ss"]
    assert max(m["ns"], m["dns"]) < min(m["ss"], m["dss"]) * 1.05


def test_spanning_more_is_worse():
    """A large spanning factor (almost free spanning) makes SS/DSS far worse than never spanning."""
    m = _mrt("13", 0.3, ["ns", "ss", "dns", "dss"], seeds=2,
             ss={"sigma": 0.9}, dss={"sigma": 0.9})
    assert 2 * max(m["ns"], m["dns"]) < min(m["ss"], m["dss"])


def test_single_node_network_ordering():
    """Network 1 (no communication): DNS ~ DSS < SS < NS (thesis Fig. 5.1)."""
    m = _mrt("1", 0.3, ["ns", "ss", "dns", "dss"])
    assert m["dns"] < m["ss"] < m["ns"]
    assert m["dss"] < m["ss"] and m["dss"] == pytest.approx(m["dns"], rel=0.1)


def test_cli(capsys):
    from scheduler.cli import main

    assert main(["hetero", "--network", "13", "--jobs", "150", "--seeds", "1", "--warmup", "10"]) == 0
    out = capsys.readouterr().out
    assert "ns" in out and "dss" in out
    assert main(["hetero", "--policy", "zz", "--jobs", "10"]) == 2
    assert "unknown network policy" in capsys.readouterr().err
    assert main(["hetero", "--load", "-1", "--jobs", "10"]) == 2


@pytest.mark.parametrize(("kind", "target"), [("size", 1.2), ("speed", 0.6)])
def test_random_networks_hit_the_cv(kind, target):
    nets = [random_network(kind, target, seed) for seed in range(3)]
    for nodes in nets:
        vals = [n.size if kind == "size" else n.speed for n in nodes]
        assert len(nodes) == 16 and cv(vals) == pytest.approx(target, abs=0.02)
        assert sum(n.capacity for n in nodes) == 12800
    assert len(set(nets)) == 3
    assert network(f"{kind}:{target}:1") == nets[1]
    with pytest.raises(ValueError, match="kind"):
        random_network("colour", 0.5)


def test_dss_stealing_unbalances_threads():
    """Notes §11.9: DSS's victims fold without re-balancing, so its jobs run far more unevenly than SS's."""
    imb = {"ss": 0.0, "dss": 0.0}
    for seed in range(2):
        res = run_network_policies(NETWORKS["16"], generate(500, 0.6, seed), ["ss", "dss"], warmup=50)
        for k in imb:
            imb[k] += res[k]["mean_imbalance"]
    assert imb["dss"] > imb["ss"] + 0.2
