"""The core's indexes (a pass costs the jobs it looks at, not the queue's length) answer exactly what a
scan of the queue would, and stale views refuse."""

from __future__ import annotations

import dataclasses
import math

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from scheduler.core.jobfile import validate_job
from scheduler.core.policies.easy import EasyBackfill
from scheduler.core.policy import Reserve, app_policy, remap_policy
from scheduler.core.pool import Node, Pool
from scheduler.core.state import ClusterState

pytestmark = pytest.mark.pure

JOBS = st.lists(st.tuples(st.integers(1, 12), st.one_of(st.none(), st.sampled_from([60.0, 600.0, 3600.0])),
                          st.floats(0, 50), st.booleans()), min_size=1, max_size=40)


def _state(jobs) -> ClusterState:
    s = ClusterState(Pool([Node("n", 12)]), app_policy("easy"), remap_policy("reshape"))
    blocker = s.submit(validate_job({"command": ["x"], "nprocs": 12}), 0.0)
    s.tick(0.0)  # the machine is full: everything below stays queued
    assert s.jobs[blocker].state == "running"
    ids = []
    for n, wall, t, cancel in jobs:
        ids.append(s.submit(validate_job({"command": ["x"], "nprocs": n, "walltime": wall}), t))
        if cancel and len(ids) > 1:
            s.cancel(ids.pop(0), t)
    s.validate()
    return s


@settings(max_examples=60, deadline=None)
@given(JOBS, st.integers(0, 13), st.sampled_from([math.inf, 0.0, 59.0, 600.0, 5000.0]), st.integers(0, 12))
def test_fitting_through_the_index_is_the_scan_of_the_queue(jobs, limit, within, short):
    s = _state(jobs)
    snap = s.snapshot(100.0)
    scan = dataclasses.replace(snap, queue=tuple(snap.queue))  # a plain tuple: scanned
    assert [j.job_id for j in snap.fitting(limit, within, short)] == \
        [j.job_id for j in scan.fitting(limit, within, short)]


@settings(max_examples=40, deadline=None)
@given(JOBS)
def test_easy_decides_the_same_with_and_without_the_index(jobs):
    s = _state(jobs)
    s.pool.release(s.running()[0].hosts[:5])  # five slots free, under the core's feet: policy view only
    snap = s.snapshot(100.0)
    easy = app_policy("easy")
    assert easy.schedule(snap) == easy.schedule(dataclasses.replace(snap, queue=tuple(snap.queue)))


def test_a_stale_queue_view_refuses_and_positions_are_checked():
    s = _state([(2, 60.0, 1.0, False), (3, None, 2.0, False)])
    snap = s.snapshot(5.0)
    assert len(snap.queue) == 2
    s.submit(validate_job({"command": ["x"], "nprocs": 1}), 6.0)
    with pytest.raises(RuntimeError, match="stale snapshot"):
        len(snap.queue)
    fresh = s.snapshot(6.0)
    assert len(fresh.queue) == 3 and fresh.queue[:2] == tuple(fresh.queue)[:2]
    r = fresh.running[0]
    other = dataclasses.replace(fresh, running=(dataclasses.replace(r, spec=dataclasses.replace(r.spec, job_id=99)),))
    assert other.job(99).spec.job_id == 99  # positions say index 0 is another job: a scan finds it
    with pytest.raises(KeyError):
        other.job(r.spec.job_id)


class _Full(EasyBackfill):
    """EASY computing the shadow time on every pass, as before the shortcut that skips it when nothing fits."""

    @staticmethod
    def _nothing_to_backfill(snap, free) -> bool:
        return False


@settings(max_examples=150, deadline=None)
@given(JOBS, st.integers(0, 6), st.floats(0, 700), st.sampled_from(["easy", "easy-plus"]))
@example([(8, 60.0, 1.0, False), (2, 60.0, 2.0, False)], 4, 400.0, "easy")  # job 3 backfills
def test_easy_starts_the_same_without_recomputing_a_held_reservation(jobs, free, reserved, name):
    """With the head holding a reservation and no queued job fitting the free slots, EASY skips the
    shadow time (no work on a full machine): the starts are those of the full computation."""
    s = _state(jobs)
    if free:
        s.pool.release(s.running()[0].hosts[:free])  # policy view only, as above
    snap = dataclasses.replace(s.snapshot(100.0), reserved=100.0 + reserved)
    easy = app_policy(name)
    full = _Full(give_back=easy.give_back, squeeze=easy.squeeze)
    assert [x for x in easy.schedule(snap) if not isinstance(x, Reserve)] == \
        [x for x in full.schedule(snap) if not isinstance(x, Reserve)]


@settings(max_examples=60, deadline=None)
@given(JOBS, st.integers(0, 11), st.integers(1, 12), st.integers(1, 12))
def test_a_submission_left_to_the_next_tick_would_have_started_nothing(jobs, free, n, lo):
    """The daemon skips the pass of a submission when :meth:`ClusterState.pass_needed` says no:
    a pass at that moment would have started nothing."""
    s = ClusterState(Pool([Node("n", 12)]), app_policy("easy"), remap_policy("reshape"))
    s.submit(validate_job({"command": ["x"], "nprocs": 12 - free, "walltime": 1000.0}), 0.0)
    for k, (size, wall, t, _) in enumerate(jobs):
        s.submit(validate_job({"command": ["x"], "nprocs": size, "walltime": wall}), min(t, 99.0) + 1e-3 * k)
    s.tick(100.0)  # settled: what can start has started
    desc = {"command": ["x"], "nprocs": n, "min_procs": min(lo, n), "resizable": lo < n}
    jid = s.submit(validate_job(desc), 100.0)
    if s.queue()[0].job_id == jid:
        assert s.pass_needed(jid)
    if not s.pass_needed(jid):
        assert s.tick(100.0) == [] and s.jobs[jid].state == "queued"


class _EveryPass(EasyBackfill):
    """EASY that never lets the core skip a pass (as before ``idle_since``)."""

    def idle_since(self, before, snap) -> bool:
        return False


def _sim_jobs(rows):
    from scheduler.core.policy import JobSpec
    from scheduler.lab import JobModel, SimInput

    out = []
    for i, (t, n, run, slack, resizable, a) in enumerate(rows):
        spec = JobSpec(i, f"j{i}", t, n, min_procs=1 if resizable else n, max_procs=None if resizable else n,
                       resizable=resizable, walltime=run * slack, iterations=6)
        out.append(SimInput(spec, JobModel(work=run / 6 * n, A=n * a, sigma=0.5, iterations=6), run))
    return out


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 400), st.integers(1, 8), st.floats(5, 300), st.floats(1.0, 4.0),
                          st.booleans(), st.floats(0.5, 8.0)), min_size=2, max_size=16),
       st.sampled_from(["easy", "moldable-easy", "reshape-squeeze", "reshape-plus"]))
def test_passes_the_core_skips_would_have_started_nothing(rows, name):
    """Random workloads through the simulator: skipping the passes EASY calls idle (only the clock moved
    and jobs made progress since a pass that started nothing) gives the decisions of running every pass."""
    from scheduler.core.policy import preset
    from scheduler.lab import RedistModel, simulate

    pair = preset(name)
    app, remap = pair.build()
    remap = None if pair.remap == "static" else remap
    every = _EveryPass(give_back=app.give_back, squeeze=app.squeeze, window=app.window)
    kw = {"record": True, "redist": RedistModel(0.5, 1.0)}
    assert simulate(_sim_jobs(rows), 8, app, remap, **kw).decisions == \
        simulate(_sim_jobs(rows), 8, every, remap and preset(name).build()[1], **kw).decisions


def test_easy_runs_a_pass_when_a_release_time_moved():
    """idle_since is False, and the pass starts a job, when a release time moved without the free slots or
    the queue changing: a running job's deadline (a shrink under way), a borrower's give-back at its resize
    point, or the clock passing a borrower's next resize point."""
    from scheduler.core.policy import JobSpec, Profile, RunningJob, Snapshot, Start

    head, small = JobSpec(1, "h", 0.0, 8, walltime=50.0), JobSpec(2, "c", 0.0, 4, walltime=150.0)
    queue = (head, small)  # the same queue object in both snapshots, as the core's view
    r = RunningJob(JobSpec(9, "r", 0.0, 4, walltime=100.0, resizable=False), 4, 0.0, deadline=100.0)
    before = Snapshot(0.0, 8, 4, queue, (r,))
    easy = app_policy("easy")
    assert not [x for x in easy.schedule(before) if isinstance(x, Start)]  # 2 would end after the head's 100
    assert easy.idle_since(before, dataclasses.replace(before, now=10.0))  # only the clock moved
    later = dataclasses.replace(r, deadline=250.0)  # e.g. a shrink under way: its deadline moved
    snap = Snapshot(10.0, 8, 4, queue, (later,))
    assert not easy.idle_since(before, snap) and Start(2, 4) in easy.schedule(snap)
    # easy-plus: a borrower at 8 (started at 4) gives 4 back at its next resize point (10 + 10 s) plus a
    # redistribution (measured 2 s): the head (8 of 16, 4 free) can start at 22; 2 (20 s) would end at 30
    head = JobSpec(1, "h", 0.0, 8, walltime=50.0, resizable=False)
    queue = (head, JobSpec(2, "c", 0.0, 4, walltime=20.0))
    grown = RunningJob(JobSpec(9, "r", 0.0, 4, walltime=1000.0), 8, 0.0,
                       Profile({4: 20.0, 8: 10.0}, {(4, 8): 2.0}, (4, 8)), deadline=1000.0, point_time=10.0)
    rigid = RunningJob(JobSpec(8, "x", 0.0, 4, walltime=500.0, resizable=False), 4, 0.0, deadline=500.0)
    plus = app_policy("easy-plus")
    base = Snapshot(10.0, 16, 4, queue, (grown, rigid))
    assert not [x for x in plus.schedule(base) if isinstance(x, Start)]
    assert plus.idle_since(base, dataclasses.replace(base, now=15.0))  # before its next resize point
    assert not plus.idle_since(base, dataclasses.replace(base, now=25.0))  # past it: it gives back later
    # its resize point measured 30 s at 8: it gives back at 20 + 30 + 2 = 52, and 2 fits before
    moved = dataclasses.replace(grown, point_time=20.0, profile=Profile({4: 20.0, 8: 30.0}, {(4, 8): 2.0}, (4, 8)))
    snap = Snapshot(20.0, 16, 4, queue, (moved, rigid))
    assert not plus.idle_since(base, snap) and Start(2, 4) in plus.schedule(snap)
