"""ReSHAPE Remap Scheduler rules (seed 001 §3.1) and the FCFS / EASY application policies."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.policies.easy import shadow_time
from scheduler.policies.reshape_remap import last_expansion, next_size
from scheduler.policy import (
    Continue,
    Expand,
    JobSpec,
    Profile,
    RunningJob,
    Shrink,
    Snapshot,
    app_policy,
    remap_policy,
)


def spec(i, n, **kw):
    return JobSpec(i, f"j{i}", 0.0, n, **kw)


def running(i, n, times=None, history=None, **kw):
    prof = Profile(dict(times or {}), {}, tuple(history or (n,)))
    return RunningJob(spec(i, kw.pop("initial", n), **kw), n, 0.0, prof)


def snap(free, running_jobs, queue=(), total=16):
    return Snapshot(10.0, total, free, tuple(queue), tuple(running_jobs))


R = remap_policy("reshape")


def test_table2_grid_sequences():
    def seq(n, start, limit):
        out = [start]
        while (p := next_size(spec(1, start, topology="2d", divides=n), out[-1], limit)) is not None:
            out.append(p)
        return out

    assert seq(8000, 2, 40) == [2, 4, 8, 16, 20, 25, 40]
    assert seq(12000, 2, 48) == [2, 4, 6, 9, 12, 16, 20, 25, 30, 36, 48]
    assert seq(14000, 4, 49) == [4, 8, 16, 20, 25, 35, 49]


def test_expand_when_idle_and_never_expanded():
    d = R.at_resize_point(snap(4, [running(1, 2, {2: 1.0})]), 1)
    assert d == Expand(1, 3, "idle processors")


def test_no_expand_when_jobs_wait_or_no_idle():
    assert isinstance(R.at_resize_point(snap(0, [running(1, 2, {2: 1.0})]), 1), Continue)
    q = [spec(2, 8)]
    assert isinstance(R.at_resize_point(snap(4, [running(1, 2, {2: 1.0})], q), 1), Continue)


def test_keeps_expanding_while_it_helps():
    r = running(1, 3, {2: 1.0, 3: 0.8}, (2, 3), initial=2)
    assert R.at_resize_point(snap(4, [r]), 1) == Expand(1, 4, "idle processors")


def test_sweet_spot_returns_to_previous_size_and_stays():
    r = running(1, 5, {2: 1.0, 3: 0.8, 4: 0.7, 5: 0.69}, (2, 3, 4, 5), initial=2)
    d = R.at_resize_point(snap(4, [r]), 1)
    assert isinstance(d, Shrink) and d.nprocs == 4
    back = running(1, 4, {2: 1.0, 3: 0.8, 4: 0.7, 5: 0.69}, (2, 3, 4, 5, 4), initial=2)
    assert isinstance(R.at_resize_point(snap(5, [back]), 1), Continue)


def test_shrink_to_admit_queued_job_frees_just_enough():
    r = running(1, 8, {2: 1.0, 4: 0.6, 6: 0.5, 8: 0.45}, (2, 4, 6, 8), initial=2)
    d = R.at_resize_point(snap(1, [r], [spec(2, 3)]), 1)
    assert d.nprocs == 6 and isinstance(d, Shrink)  # frees 2, plus 1 free = 3
    d = R.at_resize_point(snap(0, [r], [spec(2, 10)]), 1)
    assert d.nprocs == 2  # cannot free enough: smallest shrink point


def test_shrink_counts_pending_shrinks_of_other_jobs():
    a = RunningJob(spec(1, 2), 6, 0.0, Profile({2: 1, 6: .5}, {}, (2, 6)), pending_shrink=2)
    b = running(3, 6, {2: 1, 6: .5}, (2, 6), initial=2)
    assert isinstance(R.at_resize_point(snap(0, [a, b], [spec(2, 4)]), 3), Continue)


def test_static_jobs_and_static_policy_never_resize():
    r = running(1, 2, {2: 1.0}, resizable=False)
    assert isinstance(R.at_resize_point(snap(8, [r]), 1), Continue)
    assert isinstance(remap_policy("static").at_resize_point(snap(8, [running(1, 2)]), 1), Continue)


def test_last_expansion():
    assert last_expansion((2, 4, 6, 4)) == (4, 6)
    assert last_expansion((4,)) is None
    assert last_expansion((4, 2)) is None


def test_fcfs_stops_at_first_misfit():
    q = [spec(1, 4), spec(2, 6), spec(3, 1)]
    assert [s.job_id for s in app_policy("fcfs").schedule(snap(5, [], q))] == [1]


def test_easy_backfills_short_job_only_if_head_not_delayed():
    run = [RunningJob(spec(9, 6, walltime=100.0), 6, 0.0)]  # ends at t=100
    q = [spec(1, 8), spec(2, 2, walltime=50.0), spec(3, 2, walltime=500.0), spec(4, 2)]
    s = Snapshot(10.0, 10, 4, tuple(q), tuple(run))
    assert shadow_time(s, 8) == (100.0, 2)
    started = [x.job_id for x in app_policy("easy").schedule(s)]
    # 2 ends before the shadow time; 3 and 4 run past it but the head leaves 2 extra slots: one fits
    assert started == [2, 3]


def test_easy_unknown_walltimes_give_infinite_shadow():
    s = Snapshot(0.0, 4, 1, (spec(1, 4), spec(2, 1, walltime=5.0)), (RunningJob(spec(9, 3), 3, 0.0),))
    assert shadow_time(s, 4)[0] == math.inf
    assert [x.job_id for x in app_policy("easy").schedule(s)] == [2]


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 32), st.lists(st.tuples(st.integers(1, 16), st.one_of(st.none(), st.floats(1, 100))),
                                    max_size=8),
       st.lists(st.tuples(st.integers(1, 8), st.floats(1, 200)), max_size=4))
def test_easy_never_oversubscribes_and_never_delays_head(free, queue, run):
    total = free + sum(p for p, _ in run)
    q = tuple(spec(i + 1, min(n, total), walltime=w) for i, (n, w) in enumerate(queue))
    rj = tuple(RunningJob(spec(100 + i, p, walltime=w), p, 0.0) for i, (p, w) in enumerate(run))
    s = Snapshot(0.0, total, free, q, rj)
    starts = app_policy("easy").schedule(s)
    assert sum(x.nprocs for x in starts) <= free
    assert len({x.job_id for x in starts}) == len(starts)
    started = {x.job_id for x in starts}
    rest = [j for j in q if j.job_id not in started]
    if rest:  # the head's reservation still holds with the backfilled jobs running
        head = rest[0]
        before = shadow_time(Snapshot(0.0, total, free - sum(
            x.nprocs for x in starts if x.job_id < head.job_id), (head,), rj), head.nprocs)[0]
        after_run = rj + tuple(RunningJob(j, j.nprocs, 0.0) for j in q if j.job_id in started)
        after = shadow_time(Snapshot(0.0, total, free - sum(x.nprocs for x in starts), (head,),
                                     after_run), head.nprocs)[0]
        assert after <= before or math.isinf(before)
