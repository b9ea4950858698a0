"""A job's legal sizes: one definition (scheduler.core.policy.legal_sizes) for job files, policies and
the sizes a running job announces (scheduler.core.jobfile.narrow_spec)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reshape.redistribution.layout import nearly_square_grid
from scheduler.core.jobfile import JobFileError, narrow_spec, validate_job
from scheduler.core.policies.reshape_remap import next_size, shrink_sizes
from scheduler.core.policy import JobSpec, RunningJob, Snapshot, Start, app_policy, legal_sizes, remap_policy


def spec(n=4, **kw):
    return JobSpec(1, "j", 0.0, n, **kw)


def test_range_min_max_and_pool():
    assert legal_sizes(spec(), 6) == [1, 2, 3, 4, 5, 6]
    assert legal_sizes(spec(min_procs=2, max_procs=4), 6) == [2, 3, 4]
    assert legal_sizes(spec(min_procs=2, max_procs=40), 6) == [2, 3, 4, 5, 6]
    assert legal_sizes(spec(min_procs=8), 6) == []


def test_listed_sizes_and_1d_divides():
    assert legal_sizes(spec(sizes=(8, 2, 4, 64)), 16) == [2, 4, 8]
    assert legal_sizes(spec(divides=12), 16) == [1, 2, 3, 4, 6, 12]
    assert legal_sizes(spec(divides=12, sizes=(2, 3, 5, 8, 12), min_procs=3), 16) == [3, 12]


def test_2d_divides_applies_to_each_side_of_the_nearly_square_grid():
    # 8 = 2x4 and 9 = 3x3 have sides dividing 12 though they do not divide 12; 5 = 1x5 does not
    assert legal_sizes(spec(topology="2d", divides=12), 16) == [1, 2, 3, 4, 6, 8, 9, 12, 16]
    assert legal_sizes(spec(topology="2d", divides=8000), 40) == [1, 2, 4, 5, 8, 10, 16, 20, 25, 32, 40]
    assert legal_sizes(spec(topology="2d", divides=12, sizes=(5, 9, 10)), 16) == [9]
    # without divides every size has a grid
    assert legal_sizes(spec(topology="2d"), 7) == [1, 2, 3, 4, 5, 6, 7]


@pytest.fixture
def no_listing(monkeypatch):
    """A range of more than a million sizes made by the legal-size code (policy, job files) fails the test: the
    sizes it would test one by one."""
    import scheduler.core.jobfile
    import scheduler.core.policy

    def guarded(*args):
        r = range(*args)
        assert len(r) <= 10**6, f"listed {len(r)} sizes"
        return r

    for mod in (scheduler.core.policy, scheduler.core.jobfile):
        monkeypatch.setattr(mod, "range", guarded, raising=False)


def test_among_tests_or_intersects_without_listing_the_range(no_listing):
    s = spec(min_procs=2, divides=2**30)
    assert legal_sizes(s, 2**31, (2**30,)) == [2**30]
    assert legal_sizes(s, 2**31, (2**30 - 1, 0, -4, 1)) == []
    with pytest.raises(AssertionError, match="listed"):  # the guard works: the whole range is refused
        legal_sizes(s, 2**31)
    assert legal_sizes(spec(topology="2d", divides=12), 16, {5, 8, 9, 10, 99}) == [8, 9]


@settings(max_examples=300, deadline=None)
@given(n=st.one_of(st.none(), st.integers(1, 5000)), topo=st.sampled_from(["1d", "2d"]),
       lo=st.integers(1, 6), hi=st.one_of(st.none(), st.integers(1, 60)), pool=st.integers(1, 60),
       listed=st.one_of(st.none(), st.sets(st.integers(1, 70), min_size=1).map(tuple)))
def test_one_definition(n, topo, lo, hi, pool, listed):
    s = spec(min_procs=lo, max_procs=hi, divides=n, topology=topo, sizes=listed)
    legal = legal_sizes(s, pool)
    assert legal == sorted(set(legal))
    for p in range(0, pool + 3):
        ok = (lo <= p <= min(hi or pool, pool) and (listed is None or p in listed)
              and (not n or (all(n % side == 0 for side in nearly_square_grid(p)) if topo == "2d"
                             else n % p == 0)))
        assert (p in legal) == ok == bool(legal_sizes(s, pool, (p,)))
    # the policy's shrink points are the legal sizes below the current one; its expansions legal sizes
    for cur in legal:
        assert shrink_sizes(s, cur, pool) == [p for p in legal if p < cur]
        q = next_size(s, cur, pool)
        assert q is None or (q > cur and q in legal)


# ---------------------------------------------------------------- job files


def job(**kw):
    return {"command": ["app"], "nprocs": 4, **kw}


@pytest.mark.parametrize(("d", "why"), [
    (job(nprocs=5, topology="2d", divides=12),
     "nprocs 5 is not a legal size: the sides of its 1x5 grid must divide 12"),
    (job(nprocs=5, divides=12), "nprocs 5 is not a legal size: it does not divide 12"),
    (job(nprocs=5, sizes=[4, 8]), "nprocs 5 is not a legal size: not one of 'sizes' [4, 8]"),
    (job(nprocs=8, topology="2d", divides=12, sizes=[4, 9]), "not one of 'sizes' [4, 9]"),
])
def test_job_file_checks_nprocs_with_the_same_definition(d, why):
    with pytest.raises(JobFileError) as e:
        validate_job(d)
    assert why in str(e.value)


def test_job_file_accepts_2d_sizes_that_do_not_divide_the_order():
    assert validate_job(job(nprocs=9, topology="2d", divides=12)).nprocs == 9
    assert validate_job(job(nprocs=8, topology="2d", divides=12), 16).nprocs == 8


def test_job_file_with_a_huge_size_is_checked_without_listing_sizes(no_listing):
    assert validate_job(job(nprocs=2**31 - 1)).nprocs == 2**31 - 1


# ---------------------------------------------------------------- policies


def test_easy_squeeze_uses_the_2d_rule():
    run = (RunningJob(spec(10, resizable=False), 10, 0.0),)
    head = JobSpec(1, "h", 0.0, 12, min_procs=2, topology="2d", divides=12, walltime=50.0)
    # 9 free slots: 9 = 3x3 is a legal 2-D size for 12 (it does not divide 12)
    out = app_policy("easy", squeeze=True).schedule(Snapshot(0.0, 19, 9, (head,), run))
    assert [(s.job_id, s.nprocs) for s in out] == [(1, 9)]


def test_dep_runs_jobs_at_legal_sizes_near_their_share():
    a = RunningJob(spec(8, divides=8), 8, 0.0)
    b = JobSpec(2, "b", 0.0, 2, divides=8)
    # DEP's share for each of two jobs on 12 slots is 6; 6 does not divide 8: 4
    snap = Snapshot(0.0, 12, 4, (b,), (a,))
    assert app_policy("dep").schedule(snap) == [Start(2, 4)]
    assert [(s.job_id, s.nprocs) for s in remap_policy("dep").shrink_requests(snap)] == [(1, 4)]
    # without constraints DEP's share is unchanged
    a2 = RunningJob(spec(8), 8, 0.0)
    snap2 = Snapshot(0.0, 12, 4, (JobSpec(2, "b", 0.0, 2),), (a2,))
    assert app_policy("dep").schedule(snap2) == []  # the share (6) is not free yet
    assert [(s.job_id, s.nprocs) for s in remap_policy("dep").shrink_requests(snap2)] == [(1, 6)]


# ---------------------------------------------------------------- narrowing by announced sizes


def test_narrow_spec_intersects_and_keeps_the_start_and_current_sizes():
    s = spec(4, min_procs=2, max_procs=32)
    n = narrow_spec(s, [1, 2, 4, 8, 16, 64], current=6)
    assert n.sizes == (2, 4, 6, 8, 16)  # 1 < min_procs, 64 > max_procs; 6: runs there
    assert legal_sizes(n, 32) == [2, 4, 6, 8, 16]
    assert (n.min_procs, n.max_procs, n.nprocs) == (2, 32, 4)
    assert narrow_spec(n, [1, 2, 4, 8, 16, 64], current=6) == n  # idempotent
    # current defaults to the starting size
    assert narrow_spec(s, [8, 16]).sizes == (4, 8, 16)


def test_narrow_spec_with_2d_and_listed_sizes():
    s = spec(4, topology="2d", divides=12, sizes=(2, 4, 8, 9, 10, 16))
    # the program accepts only powers of two: 9 goes; 10 and 5 were never legal for the job file
    assert narrow_spec(s, [1, 2, 4, 5, 8, 10, 16, 32]).sizes == (2, 4, 8, 16)


def test_narrowed_spec_still_validates_as_a_job_file():
    d = validate_job(job(nprocs=4, divides=48))
    n = narrow_spec(d.spec(1, 0.0), [2, 4, 8, 16, 32], current=8)
    d2 = validate_job({**job(nprocs=4, divides=48), "sizes": list(n.sizes)})
    assert d2.spec(1, 0.0) == n


def test_narrow_spec_with_nothing_in_common_says_so():
    s = spec(4, divides=12)
    with pytest.raises(JobFileError) as e:
        narrow_spec(s, [5, 7, 8, 9, 10, 11], current=4)
    msg = str(e.value)
    assert "its program accepts none of the sizes its job file allows" in msg
    assert "program: 5, 7-11; job file, up to 4096: 1-4, 6, 12)" in msg
    with pytest.raises(JobFileError) as e:  # a long list is cut short in the message
        narrow_spec(spec(2, divides=2), list(range(3, 4096, 2)))
    assert len(str(e.value)) < 400 and "program: 3, 5, 7, " in str(e.value) and ", ...;" in str(e.value)


@pytest.mark.parametrize("bad", [[0], [4097], ["4"], [True], "124"])
def test_narrow_spec_refuses_what_is_not_a_size_list(bad):
    with pytest.raises(JobFileError, match="announced sizes must be integers"):
        narrow_spec(spec(), bad)
