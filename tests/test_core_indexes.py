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
