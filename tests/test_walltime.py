"""Walltimes and EASY's guarantee in the core (scheduler.core.walltime, ClusterState, the simulator)."""

from __future__ import annotations

import math
import re
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.core.actions import PolicyError
from scheduler.core.jobfile import validate_job
from scheduler.core.policies.easy import end_estimate
from scheduler.core.policy import (
    AppPolicy,
    JobSpec,
    Reserve,
    RunningJob,
    Snapshot,
    Start,
    app_policy,
    preset,
    remap_policy,
)
from scheduler.core.pool import Node, Pool
from scheduler.core.state import ClusterState
from scheduler.core.walltime import (
    budget_left,
    clock_time,
    deadline_after,
    fits,
    kill_time,
    moldable_limit,
    moldable_start,
    rate,
    start_deadline,
)
from scheduler.lab.jobmodel import JobModel, RedistModel, SimInput, downey_speedup
from scheduler.lab.simulator import simulate


def test_the_budget_rule():
    assert rate(8, 4) == 0.5 and rate(8, 8) == rate(8, 16) == 1.0
    assert start_deadline(100.0, 8, 4, 10.0) == 210.0  # squeezed to half: twice as long
    assert start_deadline(100.0, 8, 16, 10.0) == 110.0  # above its size: the walltime bounds it
    assert start_deadline(None, 8, 4, 10.0) is None
    # at 8 of 8 with 60 s left, shrinking to 4 at t=50: the 60 budget seconds last 120 s at half rate
    assert budget_left(110.0, 8, 8, 50.0) == 60.0
    assert deadline_after(110.0, 8, 8, 4, 50.0) == 170.0
    assert deadline_after(110.0, 8, 8, 16, 50.0) == 110.0  # an expansion never moves it later
    # 5 iterations of 10 s at the new size after a 5 s redistribution: 55 of the 60 s left
    assert fits(110.0, 8, 8, 8, 50.0, 5, 10.0, 5.0)
    assert not fits(110.0, 8, 8, 8, 50.0, 6, 10.0, 5.0)
    assert fits(None, 8, 8, 4, 50.0, 100, 10.0, 5.0)  # no limit
    assert kill_time(100.0) > 100.0 and kill_time(100.0, 30.0) > 130.0


def test_a_deadline_reads_as_a_date_and_time_on_the_wall_clock_and_as_seconds_on_a_virtual_one():
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", clock_time(1_795_820_000.0))
    assert clock_time(1234.4) == "t=1234 s"


@given(st.integers(1, 64), st.integers(1, 64), st.integers(1, 64), st.floats(1.0, 1e6), st.floats(0.0, 1e5),
       st.floats(0.0, 1.0))
def test_a_deadline_moves_later_only_by_a_shrink_below_the_requested_size(n, p, q, w, now, used):
    d = start_deadline(w, n, p, 0.0)
    t = min(now, used * d)
    after = deadline_after(d, n, p, q, t)
    if q >= p or q >= n:
        assert after <= d * (1 + 1e-12) + 1e-9
    assert after >= t


def core(slots=8, app="easy", remap="reshape"):
    return ClusterState(Pool([Node("h", slots)]), app_policy(app), remap_policy(remap), strict=True, record=True)


def desc(nprocs, walltime=None, **kw):
    return validate_job({"name": "j", "command": ["true"], "nprocs": nprocs, "walltime": walltime, **kw})


def test_the_core_keeps_each_jobs_first_reservation_and_counts_late_starts():
    s = core(8)
    a = s.submit(desc(6, 100.0, resizable=False), 0.0)
    s.tick(0.0)
    b = s.submit(desc(4, 50.0, resizable=False), 1.0)
    s.tick(1.0)
    assert s.jobs[b].reservation == 100.0  # when job a's walltime ends
    assert s.snapshot(1.0).reserved == 100.0
    s.tick(2.0)
    assert s.jobs[b].reservation == 100.0  # the first reservation stays
    s.exited(a, 0, 120.0)  # a overran its walltime (the daemon's grace): b starts 20 s late
    assert s.jobs[b].state == "running"
    assert s.late_start_count == 1 and s.late_starts[0]["late"] == pytest.approx(20.0)


def test_expire_kills_a_job_past_its_deadline_and_frees_its_slots():
    s = core(8)
    a = s.submit(desc(4, 10.0, resizable=False), 0.0)
    s.tick(0.0)
    assert s.jobs[a].deadline == 10.0
    assert s.expire(10.0) == [] and s.expire(15.0, grace=30.0) == []
    acts = s.expire(41.0, grace=30.0)
    assert [type(x).__name__ for x in acts] == ["Kill"]
    j = s.jobs[a]
    assert j.state == "failed" and "walltime exceeded" in j.error and s.pool.free == 8
    assert s.walltime_kills == 1
    s.validate()


def test_a_squeezed_jobs_end_estimate_is_its_deadline_and_does_not_drift():
    s = core(8, "easy-plus", "reshape-plus")
    s.submit(desc(4, 100.0, resizable=False), 0.0)
    s.tick(0.0)
    b = s.submit(desc(8, 50.0, min_procs=2), 1.0)
    s.tick(1.0)  # squeezed to the 4 free slots
    jb = s.jobs[b]
    assert jb.state == "running" and jb.nprocs == 4 and jb.deadline == 101.0
    view = s.snapshot(1.0).job(b)
    assert end_estimate(view, 1.0) == end_estimate(view, 90.0) == 101.0


def sim_job(jid, t, n, run, walltime, resizable=False, A=None, iters=10):
    spec = JobSpec(jid, f"j{jid}", t, n, min_procs=1 if resizable else n, max_procs=None if resizable else n,
                   resizable=resizable, walltime=walltime, iterations=iters)
    A = A or n
    return SimInput(spec, JobModel(work=run / iters * downey_speedup(n, A, 0.0), A=A, sigma=0.0,
                                   iterations=iters), run)


def test_the_simulator_kills_a_job_at_its_walltime():
    jobs = [sim_job(0, 0.0, 4, 100.0, 60.0), sim_job(1, 0.0, 4, 50.0, 50.0)]
    res = simulate(jobs, 8, app_policy("easy"))
    rec = {r.job_id: r for r in res.records}
    assert rec[0].killed and rec[0].finish == pytest.approx(60.0, abs=1e-3)
    assert rec[0].work == pytest.approx(0.6 * 4 * 100.0, rel=1e-6)  # 60% of its work at speedup 4
    assert not rec[1].killed and rec[1].finish == 50.0  # ends exactly at its limit: not killed
    assert res.metrics()["walltime_kills"] == 1


PRESETS = ["easy", "reshape", "reshape-squeeze", "reshape-plus", "dep"]


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 500), st.integers(1, 8), st.floats(5, 300), st.floats(1.0, 3.0),
                          st.booleans(), st.floats(0.5, 20.0)), min_size=2, max_size=14),
       st.sampled_from(PRESETS))
def test_no_queue_head_starts_after_its_reservation_and_only_overrunning_jobs_are_killed(rows, name):
    """Random workloads (walltime = run x slack >= run) under every preset: EASY's guarantee holds
    and no job that fits its walltime at its requested size is killed, however it is resized, as
    long as redistributions cost what the policies expect at most (here <= 8.5 s, the prior 10 s)."""
    jobs = [sim_job(i, t, n, run, run * slack, res, A=n * a) for i, (t, n, run, slack, res, a) in enumerate(rows)]
    pair = preset(name)
    app, remap = pair.build()
    res = simulate(jobs, 8, app, None if pair.remap == "static" else remap, check=True,
                   redist=RedistModel(0.5, 1.0))
    m = res.metrics()
    assert m["late_starts"] == 0, res.late_starts
    assert m["walltime_kills"] == 0
    assert len(res.records) == len(jobs)


def test_a_late_reservation_stops_backfilling_past_it():
    """If the head is already behind its reservation, EASY backfills nothing that ends after it."""
    run = (RunningJob(JobSpec(9, "r", 0.0, 6, walltime=100.0, resizable=False), 6, 0.0, deadline=200.0),)
    q = (JobSpec(1, "h", 0.0, 8, walltime=10.0), JobSpec(2, "b", 0.0, 2, walltime=150.0))
    s = Snapshot(0.0, 8, 2, q, run, reserved=100.0)
    out = app_policy("easy").schedule(s)
    assert out == [Reserve(1, 100.0)]  # job 2 would run to 150 on slots the head needs
    assert not [x for x in out if isinstance(x, Start)]
    assert math.isinf(end_estimate(RunningJob(JobSpec(3, "x", 0.0, 2), 2, 0.0), 0.0))


class _SqueezeWithoutLimit(AppPolicy):
    """Starts queued jobs in order on whatever is free, below their size, and leaves their time limits alone."""

    name = "squeeze-keep-limit"

    def schedule(self, snap):
        out, free = [], snap.free_slots
        for job in snap.queue:
            if not free:
                break
            out.append(Start(job.job_id, min(job.nprocs, free)))
            free -= out[-1].nprocs
        return out


def _squeezed_workload():
    # job 0 holds 4 of 8 slots for 100 s; job 1 (8 slots, 40 s, walltime 50 s) is squeezed onto the other 4:
    # at linear speedup it runs 80 s there, past the 50 s it asked for but within 100 s = 50 x 8 / 4
    return [sim_job(0, 0.0, 4, 100.0, 100.0), sim_job(1, 0.0, 8, 40.0, 50.0, resizable=True, A=64)]


def test_wall_clock_limits_kill_a_squeezed_job_unless_the_policy_set_a_longer_limit():
    res = simulate(_squeezed_workload(), 8, _SqueezeWithoutLimit())
    rec = {r.job_id: r for r in res.records}
    assert rec[1].killed and rec[1].finish == pytest.approx(50.0, abs=1e-3)  # its own limit, from its start
    assert res.metrics()["walltime_kills"] == 1 and res.limit_extensions == 0
    stretched = simulate(_squeezed_workload(), 8, _SqueezeWithoutLimit(), limits="stretched")
    rec = {r.job_id: r for r in stretched.records}
    assert not rec[1].killed and rec[1].finish == pytest.approx(80.0)
    m = stretched.metrics()
    assert m["limit_extensions"] == 1 and m["past_request"] == 1  # ran 80 s, asked for 50 s
    for name in ("moldable-easy", "reshape-plus"):  # the presets set the longer limit themselves
        pair = preset(name)
        app, remap = pair.build()
        res = simulate(_squeezed_workload(), 8, app, None if pair.remap == "static" else remap, check=True)
        m = res.metrics()
        assert m["walltime_kills"] == 0 and m["limit_extensions"] == 1 and m["past_request"] == 1, (name, m)


def test_a_limit_beyond_what_the_rule_charges_is_a_policy_error():
    assert moldable_limit(50.0, 8, 4) == 100.0 and moldable_limit(None, 8, 4) is None
    assert moldable_start(JobSpec(1, "a", 0.0, 8, walltime=50.0), 4) == Start(1, 4, 100.0)
    assert moldable_start(JobSpec(1, "a", 0.0, 8, walltime=50.0), 8) == Start(1, 8)

    class Greedy(_SqueezeWithoutLimit):
        def schedule(self, snap):
            return [replace(s, limit=101.0) for s in super().schedule(snap)]

    with pytest.raises(PolicyError, match=r"time limit of 101\.0 s; allowed: more than 0 and at most 100\.0 s"):
        simulate(_squeezed_workload(), 8, Greedy())
    with pytest.raises(ValueError, match="limits must be one of wall-clock, stretched, got 'none'"):
        simulate(_squeezed_workload(), 8, Greedy(), limits="none")
