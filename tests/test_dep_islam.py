"""Islam, Prodromidis & Squillante: DEP's Table 1 exactly, SP(K), folding, and DEP driven through the simulator."""

from __future__ import annotations

import itertools
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scheduler.core.policies.dep import balanced, dep_partition, fold_partition
from scheduler.core.policy import JobSpec, app_policy, remap_policy
from scheduler.lab import JobModel, SimInput, simulate

# Islam, Prodromidis & Squillante Table 1 (P = 8, M = 1): state -> state after an arrival
TABLE1 = [
    [],
    [8],
    [4, 4],
    [3, 3, 2],
    [2, 2, 2, 2],
    [2, 2, 2, 1, 1],
    [2, 2, 1, 1, 1, 1],
    [2, 1, 1, 1, 1, 1, 1],
    [1] * 8,
]


def _sorted(d):
    return sorted(d.values(), reverse=True)


def test_table1_arrivals_and_reconfigured_counts():
    cur: dict[int, int] = {}
    reconf = []
    for i in range(1, 9):
        new = dep_partition({**cur, i: 0}, 8)
        assert _sorted(new) == TABLE1[i]
        reconf.append(sum(1 for j in cur if new[j] != cur[j]))
        assert all(new[j] <= cur[j] for j in cur)  # on arrival existing jobs only shrink
        cur = new
    assert reconf == [0, 1, 2, 2, 1, 1, 1, 1]
    with pytest.raises(ValueError):  # a ninth job is queued, not partitioned
        dep_partition({**cur, 9: 0}, 8)


def test_table1_departures():
    cur = {i: 1 for i in range(1, 9)}
    for n in range(8, 1, -1):
        # the departure column: remove a job, jobs only grow, state = row n-1
        cur.pop(max(cur, key=lambda j: (-cur[j], j)))
        new = dep_partition(cur, 8)
        assert _sorted(new) == TABLE1[n - 1]
        assert all(new[j] >= cur[j] for j in cur)
        cur = new


@given(st.integers(1, 64), st.data())
def test_dep_partition_is_balanced_and_minimal(P, data):
    n = data.draw(st.integers(1, P))
    cur = {i: data.draw(st.integers(0, P)) for i in range(n)}
    new = dep_partition(cur, P)
    assert sorted(new.values(), reverse=True) == balanced(P, n)
    # no assignment keeps more jobs unchanged than the multiset intersection
    from collections import Counter

    inter = sum((Counter(cur.values()) & Counter(balanced(P, n))).values())
    assert sum(1 for j in cur if new[j] == cur[j]) == inter


def test_folding_halves_the_largest_and_gives_back_to_smallest():
    s = fold_partition({}, 8, arriving=1)
    assert s == {1: 8}
    s = fold_partition(s, 8, arriving=2)
    assert s == {1: 4, 2: 4}
    s = fold_partition(s, 8, arriving=3)
    assert sorted(s.values()) == [2, 2, 4]
    s.pop(3)
    s = fold_partition(s, 8)
    assert sorted(s.values()) == [4, 4]


def _jobs(n, seed, rate=1 / 50.0, malleable=True):
    rng = random.Random(seed)
    t = 0.0
    out = []
    for i in range(n):
        t += rng.expovariate(rate)
        spec = JobSpec(i, f"j{i}", t, 1, min_procs=1, max_procs=None, resizable=malleable)
        model = JobModel(work=rng.expovariate(1 / 400.0) + 1, A=8, sigma=0.0, iterations=20)
        out.append(SimInput(spec, model, model.run_time(1)))
    return out


def test_dep_through_the_simulator_keeps_shares_and_all_jobs_finish():
    jobs = _jobs(60, 1)
    res = simulate(jobs, 8, app_policy("dep"), remap_policy("dep"), record=True)
    m = res.metrics()
    assert m["jobs"] == 60 and m["resizes"] > 0
    assert 0 < m["utilization"] <= 1
    # never more than N = 8 jobs running, never more than 8 slots busy
    assert max(d.nprocs for d in res.decisions) <= 8


def test_sp_never_resizes_and_uses_equal_partitions():
    jobs = _jobs(40, 2)
    for k in (1, 2, 4, 8):
        res = simulate(jobs, 8, app_policy("sp", k=k), None, record=True)
        assert {d.nprocs for d in res.decisions} == {8 // k}
        assert all(d.kind == "start" for d in res.decisions)
        assert res.metrics()["jobs"] == 40


def _long(i, t, iters=40):
    spec = JobSpec(i, f"j{i}", t, 1, min_procs=1, max_procs=None, resizable=True)
    model = JobModel(work=800.0, A=64, sigma=0.0, iterations=iters)
    return SimInput(spec, model, model.run_time(1))


def test_folding_policy_halves_the_largest_job_for_each_arrival():
    # Islam, Prodromidis & Squillante §2.6 folding through the one scheduler core (preset "fold"):
    # 8 nodes, three arrivals
    jobs = [_long(0, 0.0), _long(1, 10.0), _long(2, 20.0)]
    res = simulate(jobs, 8, app_policy("fold"), remap_policy("fold"), record=True)
    d = [(x.kind, x.job_id, x.nprocs) for x in res.decisions]
    assert d[:5] == [("start", 0, 8), ("shrink", 0, 4), ("start", 1, 4), ("shrink", 0, 2), ("start", 2, 2)]
    # a departure's nodes go to the smallest partition (ties: the lower id), one job each time:
    # job 1 (4 nodes) ends -> job 0 grows 2 -> 6; job 0 ends -> job 2 grows 2 -> 8
    assert d[5:] == [("expand", 0, 6), ("expand", 2, 8)]
    assert res.metrics()["jobs"] == 3


def test_folding_reconfigures_less_than_dep():
    # §2.6: folding "reduces the number of reconfigurations ... interrupt[s] fewer jobs"
    jobs = _jobs(200, 3, rate=1 / 1600.0)
    dep = simulate(jobs, 8, app_policy("dep"), remap_policy("dep")).metrics()
    fold = simulate(jobs, 8, app_policy("fold"), remap_policy("fold")).metrics()
    assert fold["jobs"] == dep["jobs"] == 200
    assert fold["resizes"] < 0.8 * dep["resizes"]


def test_smoothing_spaces_repartitions_and_pays_off_when_they_are_costly():
    # §2.6 DEP with smoothing: at least min_interval between repartitions, so fewer of them; with a
    # reconfiguration cost a third of a job's run at full size, smoothing beats plain DEP
    from scheduler.lab.jobmodel import RedistModel

    jobs = _jobs(200, 1, rate=1 / 1600.0)
    smooth = simulate(jobs, 8, app_policy("dep"), remap_policy("dep", min_interval=2000.0), record=True)
    ts = sorted(x.time for x in smooth.decisions if x.kind in ("expand", "shrink"))
    assert ts and all(b - a >= 2000.0 for a, b in itertools.pairwise(ts))
    plain = simulate(jobs, 8, app_policy("dep"), remap_policy("dep")).metrics()
    assert smooth.metrics()["resizes"] < 0.5 * plain["resizes"]
    costly = RedistModel(latency=300.0, seconds_per_slot=0.0)
    plain_c = simulate(jobs, 8, app_policy("dep"), remap_policy("dep"), redist=costly).metrics()
    smooth_c = simulate(jobs, 8, app_policy("dep"), remap_policy("dep", min_interval=2000.0),
                        redist=costly).metrics()
    assert smooth_c["mean_turnaround"] < plain_c["mean_turnaround"]
