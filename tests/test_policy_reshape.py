"""ReSHAPE Remap Scheduler rules (Sudarsan & Ribbens 2007 §3.1) and the FCFS / EASY application policies."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.core.policies.easy import shadow_time
from scheduler.core.policies.reshape_remap import last_expansion
from scheduler.core.policy import (
    Continue,
    Expand,
    JobSpec,
    Profile,
    Reserve,
    RunningJob,
    Shrink,
    Snapshot,
    Start,
    app_policy,
    remap_policy,
)
from tests.helpers import repeated_undone_expansions


def starts_of(decisions):
    return [d for d in decisions if isinstance(d, Start)]


def spec(i, n, **kw):
    return JobSpec(i, f"j{i}", 0.0, n, **kw)


def running(i, n, times=None, history=None, **kw):
    prof = Profile(dict(times or {}), {}, tuple(history or (n,)))
    return RunningJob(spec(i, kw.pop("initial", n), **kw), n, 0.0, prof)


def snap(free, running_jobs, queue=(), total=16):
    return Snapshot(10.0, total, free, tuple(queue), tuple(running_jobs))


R = remap_policy("reshape")


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
    started = [x.job_id for x in starts_of(app_policy("easy").schedule(s))]
    # 2 ends before the shadow time; 3 and 4 run past it but the head leaves 2 extra slots: one fits
    assert started == [2, 3]


def test_easy_unknown_walltimes_give_infinite_shadow():
    s = Snapshot(0.0, 4, 1, (spec(1, 4), spec(2, 1, walltime=5.0)), (RunningJob(spec(9, 3), 3, 0.0),))
    assert shadow_time(s, 4)[0] == math.inf
    assert [x.job_id for x in starts_of(app_policy("easy").schedule(s))] == [2]


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 32), st.lists(st.tuples(st.integers(1, 16), st.one_of(st.none(), st.floats(1, 100))),
                                    max_size=8),
       st.lists(st.tuples(st.integers(1, 8), st.floats(1, 200)), max_size=4))
def test_easy_never_oversubscribes_and_never_delays_head(free, queue, run):
    total = free + sum(p for p, _ in run)
    q = tuple(spec(i + 1, min(n, total), walltime=w) for i, (n, w) in enumerate(queue))
    rj = tuple(RunningJob(spec(100 + i, p, walltime=w), p, 0.0) for i, (p, w) in enumerate(run))
    s = Snapshot(0.0, total, free, q, rj)
    out = app_policy("easy").schedule(s)
    starts = starts_of(out)
    reserved = [x for x in out if isinstance(x, Reserve)]
    assert len(reserved) <= 1
    assert sum(x.nprocs for x in starts) <= free
    assert len({x.job_id for x in starts}) == len(starts)
    started = {x.job_id for x in starts}
    rest = [j for j in q if j.job_id not in started]
    if rest:  # the head's reservation still holds with the backfilled jobs running
        head = rest[0]
        # the jobs started ahead of the head run in the reference too (a snapshot's free slots and
        # job sizes add up to the pool; a shortfall means an expansion under way)
        ahead = tuple(RunningJob(j, j.nprocs, 0.0) for j in q
                      if j.job_id in started and j.job_id < head.job_id)
        before = shadow_time(Snapshot(0.0, total, free - sum(
            x.nprocs for x in starts if x.job_id < head.job_id), (head,), rj + ahead),
            head.nprocs)[0]
        after_run = rj + tuple(RunningJob(j, j.nprocs, 0.0) for j in q if j.job_id in started)
        after = shadow_time(Snapshot(0.0, total, free - sum(x.nprocs for x in starts), (head,),
                                     after_run), head.nprocs)[0]
        assert after <= before or math.isinf(before)
        # the head's reservation is the shadow time with the jobs started ahead of it
        assert [x.time for x in reserved] == ([before] if not math.isinf(before) else [])


# --------------------------------------------------------------------------
# parameters beyond the paper (all off by default)
# --------------------------------------------------------------------------


def wspec(i, n, walltime, **kw):
    return JobSpec(i, f"j{i}", 0.0, n, walltime=walltime, **kw)


def test_paper_defaults_request_no_shrinks_and_keep_shrinks_to_sizes_run_at():
    r = running(1, 8, {8: 1.0}, (8,), min_procs=2)
    s = snap(0, [r], [spec(2, 4)])
    assert R.shrink_requests(s) == []
    assert isinstance(R.at_resize_point(s, 1), Continue)  # never ran below 8


def test_new_sizes_shrinks_below_the_starting_size_down_to_min_procs():
    P = remap_policy("reshape", new_sizes=True)
    r = running(1, 8, {8: 1.0}, (8,), min_procs=2)
    assert P.at_resize_point(snap(1, [r], [spec(2, 4)]), 1) == Shrink(1, 5, "admit queued job 2")
    assert P.at_resize_point(snap(0, [r], [spec(2, 12)], total=20), 1).nprocs == 2


def test_shrink_sizes_respect_divides_and_2d_grids():
    from scheduler.core.policies.reshape_remap import shrink_sizes

    assert shrink_sizes(spec(1, 16, min_procs=2, divides=8000), 16, 36) == [2, 4, 5, 8, 10]
    # 2d: both grid sides divide the order (5x5 and 4x5 do for 8000, 3x3 does not)
    assert shrink_sizes(spec(1, 25, topology="2d", divides=8000), 25, 36) == [
        1, 2, 4, 5, 8, 10, 16, 20]


def test_reserve_keeps_slots_idle_for_arrivals():
    r = running(1, 2, {2: 1.0})
    assert remap_policy("reshape", reserve=4).at_resize_point(snap(4, [r]), 1).reason == ""
    assert remap_policy("reshape", reserve=3).at_resize_point(snap(4, [r]), 1) == Expand(
        1, 3, "idle processors")
    # a fraction of the pool: 0.25 * 16 = 4 slots
    assert isinstance(remap_policy("reshape", reserve=0.25).at_resize_point(snap(4, [r]), 1),
                      Continue)
    for bad in (-1, 1.0, 1.5, True, "2"):
        try:
            remap_policy("reshape", reserve=bad)
        except ValueError as e:
            assert "reserve" in str(e)
        else:
            raise AssertionError(f"reserve={bad!r} accepted")


def test_announced_arrivals_keep_their_slots_idle_and_nothing_else_does():
    """``announced``: rule 4 leaves idle the slots of jobs submitted to arrive later, those arriving before
    the growing job's deadline; with none announced it grows into every idle slot."""
    from dataclasses import replace

    r = running(1, 2, {2: 1.0})
    plus = remap_policy("reshape", announced=True)
    assert plus.at_resize_point(snap(4, [r]), 1) == Expand(1, 3, "idle processors")
    coming = replace(snap(4, [r]), announced=((50.0, 2), (60.0, 1)))
    assert plus.at_resize_point(coming, 1) == Expand(1, 3, "idle processors")  # 4 idle, 3 held
    assert isinstance(plus.at_resize_point(replace(coming, announced=((50.0, 4),)), 1), Continue)
    assert isinstance(R.at_resize_point(replace(coming, announced=((50.0, 4),)), 1), Expand)  # the paper's rule
    late = replace(r, deadline=40.0)  # it is gone before they come
    assert plus.at_resize_point(replace(coming, running=(late,), announced=((50.0, 4),)), 1) == Expand(
        1, 3, "idle processors")
    # the fixed reserve, if larger, still holds
    assert isinstance(remap_policy("reshape", announced=True, reserve=4).at_resize_point(coming, 1), Continue)


def test_shrink_requests_free_what_the_head_lacks_largest_jobs_first():
    P = remap_policy("reshape", request_shrinks=True)
    a = running(1, 6, {2: 1.0, 4: 0.7, 6: 0.6}, (2, 4, 6), initial=2)
    b = running(2, 10, {4: 1.0, 10: 0.5}, (4, 10), initial=4)
    c = running(3, 3, {3: 1.0}, resizable=False)
    reqs = P.shrink_requests(snap(1, [a, b, c], [spec(9, 4)], total=20))
    assert reqs == [Shrink(2, 4, "admit queued job 9")]  # frees 6 >= 3 missing
    reqs = P.shrink_requests(snap(0, [a, b, c], [spec(9, 9)], total=19))
    assert [(x.job_id, x.nprocs) for x in reqs] == [(2, 4), (1, 2)]  # 6 + 4 >= 9
    assert P.shrink_requests(snap(4, [a, b], [spec(9, 4)], total=20)) == []  # head fits


def test_a_stale_shrink_request_is_dropped_when_nobody_waits():
    P = remap_policy("reshape", request_shrinks=True)
    r = RunningJob(spec(1, 2), 6, 0.0, Profile({2: 1.0, 6: 0.5}, {}, (2, 6)), pending_shrink=2)
    assert isinstance(P.at_resize_point(snap(0, [r]), 1), Continue)
    assert P.at_resize_point(snap(0, [r], [spec(2, 4)]), 1) == Shrink(1, 2, "requested shrink")
    assert R.at_resize_point(snap(0, [r]), 1) == Shrink(1, 2, "requested shrink")  # paper


# borrow: a rigid job of 8 slots ends at t=100 (walltime); the head needs 12 of 16; the
# malleable job 1 (4 slots, iteration 20 s) sees 4 idle slots at t=10.

def borrow_case(t_iter, nprocs=4, history=(4,), free=4, now=10.0):
    rigid_ = RunningJob(wspec(9, 8, 100.0, resizable=False), 8, 0.0)
    m = RunningJob(wspec(1, 4, 1000.0), nprocs, 0.0,
                   Profile({4: 20.0, nprocs: t_iter}, {}, history))
    return Snapshot(now, 16, free, (wspec(2, 12, 50.0),), (rigid_, m))


B = remap_policy("reshape", borrow=True)


def test_borrow_expands_into_reserved_idle_slots_only_until_the_shadow_time():
    d = B.at_resize_point(borrow_case(20.0), 1)
    assert isinstance(d, Expand) and d.nprocs == 5
    assert isinstance(R.at_resize_point(borrow_case(20.0), 1), Continue)  # the paper waits
    # the next resize point (t=10+95) would come after the head's shadow time (t=100)
    assert isinstance(B.at_resize_point(borrow_case(95.0), 1), Continue)


def test_borrowed_slots_are_kept_while_safe_and_given_back_in_time():
    held = borrow_case(15.0, nprocs=8, history=(4, 8), free=0, now=50.0)
    assert B.at_resize_point(held, 1).reason.startswith("borrowed slots")
    late = borrow_case(15.0, nprocs=8, history=(4, 8), free=0, now=90.0)
    assert B.at_resize_point(late, 1) == Shrink(1, 4, "give back borrowed slots to queued job 2")


def test_another_jobs_shrink_under_way_does_not_excuse_a_borrower():
    """EASY's reservation for the head counts on each borrower giving back at its next resize point plus a
    redistribution. A borrower that kept its slots because another job's shrink under way would cover the
    head started the head late when that shrink ended after the reservation (Mira, seed 4: 0.8 s)."""
    from dataclasses import replace

    late = borrow_case(15.0, nprocs=8, history=(4, 8), free=0, now=90.0)
    other = RunningJob(wspec(3, 2, 1000.0), 16, 0.0, Profile({2: 40.0, 16: 10.0}, {(2, 16): 30.0}, (2, 16)),
                       pending_shrink=2)
    s = replace(late, total_slots=32, running=(*late.running, other), reserved=100.0)
    assert B.at_resize_point(s, 1) == Shrink(1, 4, "give back borrowed slots to queued job 2")


def test_borrow_counts_other_jobs_borrowed_slots_as_returned():
    # job 3 borrowed 4 slots (started at 2); with them back the head starts at t=100, not never
    rigid_ = RunningJob(wspec(9, 8, 100.0, resizable=False), 8, 0.0)
    other = RunningJob(wspec(3, 2, 1e6), 6, 0.0, Profile({2: 9.0, 6: 5.0}, {}, (2, 6)))
    m = RunningJob(wspec(1, 2, 1e6), 2, 0.0, Profile({2: 20.0}, {}, (2,)))
    s = Snapshot(10.0, 16, 0, (wspec(2, 12, 50.0),), (rigid_, other, m))
    assert B._head_shadow(s) == 100.0


def test_borrow_without_walltimes_falls_back_to_the_paper():
    r = running(1, 8, {2: 1.0, 8: 0.4}, (2, 8), initial=2)
    rigid_ = RunningJob(spec(9, 8, resizable=False), 8, 0.0)  # no walltime: no shadow time
    s = snap(0, [r, rigid_], [spec(2, 12)])
    assert B.at_resize_point(s, 1) == R.at_resize_point(s, 1) == Shrink(1, 2, "admit queued job 2")


def test_plus_preset_is_the_same_class_with_parameters():
    from scheduler.core.policies.reshape_remap import PLUS, ReshapeRemap

    p = remap_policy("reshape-plus")
    assert type(p) is ReshapeRemap and p.borrow and p.announced == PLUS["announced"] and p.reserve == 0
    assert remap_policy("reshape-plus", reserve=0.2).reserve == 0.2


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 12), st.integers(1, 12), st.integers(1, 12), st.floats(1, 200),
       st.floats(0, 300), st.integers(1, 16), st.floats(1, 400), st.booleans(), st.booleans())
def test_borrowing_never_holds_slots_past_the_heads_shadow_time(
        free, base, extra, t_iter, now, head, rigid_wall, new_sizes, req):
    cur = base + extra
    rigid_ = RunningJob(wspec(9, 4, rigid_wall, resizable=False), 4, 0.0)
    m = RunningJob(wspec(1, base, 1e6), cur, 0.0,
                   Profile({base: t_iter * 1.5, cur: t_iter}, {}, (base, cur)))
    total = free + cur + 4
    s = Snapshot(now, total, free, (wspec(2, min(head, total), 10.0),), (rigid_, m))
    P = remap_policy("reshape", borrow=True, new_sizes=new_sizes, request_shrinks=req)
    d = P.at_resize_point(s, 1)
    if isinstance(d, Expand):
        assert cur < d.nprocs <= cur + free
    elif isinstance(d, Shrink):
        assert 1 <= d.nprocs < cur
    keeps = d.nprocs if isinstance(d, Expand | Shrink) else cur
    if keeps > base and P._need(s, 1) > 0:  # holding borrowed slots while the head waits
        assert now + t_iter <= P._head_shadow(s)


def test_reserve_does_not_limit_borrowing():
    # borrowed slots come back by the head's shadow time; the reserve is for arrivals
    assert remap_policy("reshape", borrow=True, reserve=8).at_resize_point(
        borrow_case(20.0), 1) == Expand(1, 5, "idle slots until t=100, queued job 2's reservation")


# --------------------------------------------------------------------------
# EASY: end estimates, expansions under way, give_back, squeeze
# --------------------------------------------------------------------------


def test_end_estimate_scales_the_walltime_below_the_requested_size():
    from scheduler.core.policies.easy import end_estimate

    s = wspec(1, 8, 100.0, iterations=10)
    assert end_estimate(RunningJob(s, 8, 5.0), 50.0) == 105.0
    assert end_estimate(RunningJob(s, 16, 5.0), 50.0) == 105.0  # above: the walltime bounds it
    # with a deadline (the core's walltime rule) the estimate is the deadline, whatever the clock says
    assert end_estimate(RunningJob(s, 4, 5.0, iterations_done=4, deadline=170.0), 50.0) == 170.0
    assert end_estimate(RunningJob(s, 4, 5.0, iterations_done=4, deadline=170.0), 150.0) == 170.0
    assert end_estimate(RunningJob(wspec(2, 8, 100.0), 2, 5.0), 50.0) == 405.0
    assert end_estimate(RunningJob(wspec(3, 8, 100.0, resizable=False), 8, 5.0), 9.0) == 105.0
    assert end_estimate(RunningJob(spec(4, 8), 8, 5.0), 9.0) == math.inf


def test_slots_of_an_expansion_under_way_are_not_lost_to_the_shadow_time():
    # 16 slots: job 1 shows 4 but has reserved 4 more for an expansion; job 2 (4) ends at 50
    a = RunningJob(wspec(1, 4, 200.0), 4, 0.0)
    b = RunningJob(wspec(2, 4, 50.0, resizable=False), 4, 0.0)
    s = Snapshot(10.0, 16, 4, (wspec(3, 16, 10.0),), (a, b))
    assert shadow_time(s, 16) == (200.0, 0)  # not inf: the reserved 4 return with job 1
    # job 1 has no iteration measured, so nobody knows when it could give back: held till it ends
    assert shadow_time(s, 16, give_back=True) == (200.0, 0)
    # grown from 4 to 8, an iteration at 8 takes 0.6 s, a redistribution 2 s: back at 0.6 + 2
    grown = RunningJob(wspec(1, 4, 200.0), 8, 0.0, Profile({4: 1.0, 8: 0.6}, {(4, 8): 2.0}, (4, 8)))
    s2 = Snapshot(0.0, 16, 4, (wspec(3, 8, 10.0),), (grown, b))
    assert shadow_time(s2, 8, give_back=True) == (2.6, 0)
    assert shadow_time(s2, 8) == (50.0, 0)  # without give-back: when job 2 ends


def test_squeeze_starts_a_resizable_head_on_the_free_slots():
    run = (RunningJob(wspec(9, 10, 100.0, resizable=False), 10, 0.0),)
    q = (wspec(1, 12, 50.0, min_procs=4), wspec(2, 12, 50.0, min_procs=4, resizable=False))
    s = Snapshot(0.0, 16, 6, q, run)
    assert app_policy("easy").schedule(s) == [Reserve(1, 100.0)]
    # squeezed to 6 of its 12 slots, with the time limit the walltime rule allows there: 50 x 12 / 6
    assert app_policy("easy", squeeze=True).schedule(s) == [Reserve(1, 100.0), Start(1, 6, 100.0)]
    assert starts_of(app_policy("easy-plus").schedule(s)) == [Start(1, 6, 100.0)]
    small = Snapshot(0.0, 16, 3, q, run)  # below min_procs: wait
    assert starts_of(app_policy("easy", squeeze=True).schedule(small)) == []
    rigid_head = Snapshot(0.0, 16, 6, q[::-1], run)
    assert starts_of(app_policy("easy", squeeze=True).schedule(rigid_head)) == []


def test_repeated_undone_expansions_detects_the_compose_clusters_sequence():
    assert repeated_undone_expansions([2, 4, 8, 4, 8, 4, 8, 4]) == [(4, 8), (4, 8)]
    assert repeated_undone_expansions([2, 3, 4, 5, 4]) == []


def drive(policy, model, noise, points: int, total: int = 16) -> list[int]:
    """One job alone on ``total`` slots through ``points`` resize points; returns its sizes.

    The measured time at each point is the model time slowed by ``noise`` (>= 0): interference
    only ever slows an iteration down. The profile is the daemon's own (``JobProfile``).
    """
    from scheduler.core.profiler import JobProfile

    prof, n = JobProfile(), 2
    prof.ran_at(n)
    s = spec(1, 2, max_procs=total)
    for k in range(points):
        prof.record_iteration(n, model(n) * (1 + noise[k % len(noise)]))
        r = RunningJob(s, n, 0.0, prof.frozen(), k)
        d = policy.at_resize_point(Snapshot(float(k), total, total - n, (), (r,)), 1)
        if isinstance(d, Expand | Shrink) and d.nprocs != n:
            n = d.nprocs
            prof.ran_at(n)
    return list(prof.history)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.floats(0.0, 0.6), min_size=1, max_size=40), st.floats(0.5, 8.0), st.floats(0.0, 0.2))
def test_no_expansion_undone_by_the_sweet_spot_rule_is_made_again(noise, work, overhead):
    """Noisy timings (up to 60% slower) of an Amdahl-plus-overhead job never make it oscillate."""
    sizes = drive(R, lambda p: work / p + overhead * p, noise, 60)
    assert repeated_undone_expansions(sizes) == [], sizes


def test_a_job_shrunk_to_admit_another_grows_back_to_a_size_it_ran_faster_at_and_no_further():
    times, hist = {2: 1.0, 4: 0.6, 8: 0.59}, (2, 4, 8, 4, 2)
    r = running(1, 2, times, hist, initial=2, sizes=(2, 4, 8))
    assert R.at_resize_point(snap(6, [r]), 1) == Expand(1, 4, "idle processors")
    r = running(1, 4, times, (*hist, 4), initial=2, sizes=(2, 4, 8))
    assert isinstance(R.at_resize_point(snap(4, [r]), 1), Continue)


# --------------------------------------------------------------------------
# the prior speedup curve (``prior=True``, in the preset reshape-plus)
# --------------------------------------------------------------------------

P = remap_policy("reshape", prior=True)


def prior_case(n, p, t_iter, left, budget, free, total=64, history=None):
    """A job sized ``n`` running at ``p`` with ``left`` iterations of ``t_iter`` to go and ``budget``
    walltime seconds left (its deadline under the walltime rule), ``free`` slots idle, nobody waiting."""
    s = JobSpec(1, "j1", 0.0, n, walltime=1e9, iterations=10)
    dl = 10.0 + budget / min(1.0, p / n)
    r = RunningJob(s, p, 0.0, Profile({p: t_iter}, {}, tuple(history or (p,))), iterations_done=10 - left,
                   deadline=dl)
    return Snapshot(10.0, total, free, (), (r,))


def test_prior_predicts_with_downey_at_the_requested_size_and_charges_the_safe_curve():
    from scheduler.core.speedup import downey_speedup, predicted_iter_time, safe_iter_time

    assert predicted_iter_time(10.0, 4, 8, 8) == pytest.approx(10.0 * downey_speedup(4, 8, 1) / downey_speedup(8, 8, 1))
    # safe: the slowest curve with A >= half the size; above A = n/2 no gain at all
    assert safe_iter_time(10.0, 8, 12, 8) == 10.0 and safe_iter_time(10.0, 2, 2, 2) == 10.0
    for n, p, q in ((8, 2, 3), (64, 16, 30), (64, 8, 64), (256, 1, 128), (6, 4, 5)):
        safe = safe_iter_time(1.0, p, q, n)
        assert predicted_iter_time(1.0, p, q, n) <= safe <= 1.0
        for A in (n / 2, n * 0.7, n, 2 * n):  # any curve the size-linked model draws is at least as fast
            for sigma in (0.0, 0.3, 1.0, 1.7, 2.5, 5.0, 20.0):
                assert downey_speedup(p, A, sigma) / downey_speedup(q, A, sigma) <= safe * (1 + 1e-9)


def test_prior_expands_where_the_prior_predicts_a_gain_and_not_past_it():
    # plenty of walltime, 32 idle slots: without the prior one step (5); with it the size the prior
    # predicts saves the most among its candidates (5, 6, 8, 12, 16, 36): 8, as Downey's curve
    # (A = 4, sigma = 1) is flat from 2A - 1 = 7 on
    s = prior_case(4, 4, 100.0, 9, 1e6, 32)
    assert R.at_resize_point(s, 1) == Expand(1, 5, "idle processors")
    d = P.at_resize_point(s, 1)
    assert d == Expand(1, 8, "idle processors")
    # already at twice its size: the prior predicts nothing more, the paper's rule would probe on
    s = prior_case(4, 8, 100.0, 9, 1e6, 32)
    assert isinstance(P.at_resize_point(s, 1), Continue)
    assert R.at_resize_point(s, 1) == Expand(1, 9, "idle processors")
    # a gain that does not pay for its redistribution (one iteration of 1 s left, the 10 s prior)
    assert isinstance(P.at_resize_point(prior_case(4, 4, 1.0, 1, 1e6, 32), 1), Continue)


def test_prior_allows_a_first_expansion_an_exact_walltime_can_afford():
    # sized 8, squeezed to 2, 10 iterations of 10 s left, 42 budget seconds: going to 3 with no gain
    # (the old check) needs 47.5 s, with the safe curve's (A = 4) least gain 40 s
    s = prior_case(8, 2, 10.0, 10, 42.0, 1)
    assert isinstance(R.at_resize_point(s, 1), Continue)
    assert P.at_resize_point(s, 1) == Expand(1, 3, "idle processors")
    # at its requested size with no slack, nothing is safe: a program may not use more than it asked
    assert isinstance(P.at_resize_point(prior_case(8, 8, 10.0, 10, 100.0, 8), 1), Continue)


def test_prior_weighs_the_iterations_left_the_program_reported_else_as_many_as_it_has_done():
    """On a daemon a job's count comes from its program (``resize_point``'s ``total``) or not at all: a
    first expansion (no redistribution measured: one iteration of 20 s assumed) pays over 9 iterations
    left, not over one; without a count, the iterations left are taken to be as many as were done."""
    def case(iterations, done):
        s = JobSpec(1, "j1", 0.0, 4, iterations=iterations)
        r = RunningJob(s, 4, 0.0, Profile({4: 20.0}, {}, (4,)), iterations_done=done)
        return Snapshot(10.0, 16, 12, (), (r,))

    assert P.at_resize_point(case(10, 1), 1) == Expand(1, 8, "idle processors")
    assert isinstance(P.at_resize_point(case(None, 1), 1), Continue)  # one iteration cannot pay for one
    assert P.at_resize_point(case(None, 9), 1) == Expand(1, 8, "idle processors")

