"""The trace job model's assumptions: parallelism, user estimates, expansion step, seeded streams."""

from __future__ import annotations

import math
import random
import statistics

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.core.policy import legal_sizes
from scheduler.lab.jobmodel import (
    DEFAULT_PARALLELISM,
    ROUND_LIMITS,
    from_trace,
    round_limit,
    sigma_cirne_berman,
    user_estimate,
)
from scheduler.lab.swf import SwfJob, SwfTrace


def _trace(sizes, runs=None, max_procs=256, header=None, req=None):
    jobs = tuple(
        SwfJob(job_id=i + 1, submit=10.0 * i, wait=-1, run_time=(runs[i] if runs else 100.0 + 37 * i),
               procs=p, req_time=req[i] if req else None, status=1, user=1, line=i + 1)
        for i, p in enumerate(sizes)
    )
    return SwfTrace("t.swf", jobs, header or {"MaxProcs": str(max_procs)}, max_procs)


def _mixed(n=2000, seed=5):
    """Half small jobs (1-4 slots), half big ones (64-128) on 256 slots, run times 10 s - 30 h."""
    r = random.Random(seed)
    sizes = [r.randint(1, 4) if i % 2 else r.randint(64, 128) for i in range(n)]
    runs = [10 * 2 ** r.uniform(0, 13.4) for _ in range(n)]
    return _trace(sizes, runs)


def _is_round(t):
    return t in ROUND_LIMITS or t % 86400 == 0


def test_the_default_is_the_size_linked_model():
    """The default (the literature's): A tied to the trace size, log2(A/size) uniform on [-1, 1], sigma a
    normal law truncated at 0 (Cirne and Berman, as recalled: mean 1.209, sd 1.132)."""
    tr = _mixed()
    jobs, _ = from_trace(tr, malleable_fraction=0.5, seed=3)
    named, _ = from_trace(tr, malleable_fraction=0.5, seed=3, parallelism=DEFAULT_PARALLELISM)
    assert DEFAULT_PARALLELISM == "size-linked" and [j.model for j in jobs] == [j.model for j in named]
    rel = [math.log2(j.model.A / j.spec.nprocs) for j in jobs if j.spec.nprocs >= 2]
    assert min(rel) >= -1 - 1e-9 and max(rel) <= 1 + 1e-9
    assert statistics.mean(rel) == pytest.approx(0, abs=0.1)
    xs = [math.log2(j.spec.nprocs) for j in jobs]
    ys = [math.log2(j.model.A) for j in jobs]
    assert statistics.correlation(xs, ys) > 0.9
    sig = [j.model.sigma for j in jobs]
    assert min(sig) >= 0
    # a normal(1.209, 1.132) truncated at 0 has mean ~1.51, median ~1.41
    assert statistics.mean(sig) == pytest.approx(1.51, abs=0.08)
    assert statistics.median(sig) == pytest.approx(1.41, abs=0.1)
    for j in jobs:  # the run time at the trace size is the trace's, whatever the curve
        assert j.model.run_time(j.spec.nprocs) == pytest.approx(j.run_time)
    assert sigma_cirne_berman(0.0) == pytest.approx(0.0, abs=1e-9)
    assert sigma_cirne_berman(0.5) == pytest.approx(1.413, abs=0.005)


def test_independent_parallelism_does_not_follow_the_trace_size():
    jobs, total = from_trace(_mixed(), malleable_fraction=0.5, seed=3, parallelism="independent")
    assert total == 256
    small = [math.log2(j.model.A) for j in jobs if j.spec.nprocs <= 4]
    big = [math.log2(j.model.A) for j in jobs if j.spec.nprocs >= 64]
    # the same distribution for small and big jobs: log2 A uniform on [0, 8]
    for logs in (small, big):
        assert min(logs) >= 0 and max(logs) <= 8
        assert statistics.mean(logs) == pytest.approx(4, abs=0.3)
        assert statistics.quantiles(logs, n=4) == pytest.approx([2, 4, 6], abs=0.4)
    xs = [math.log2(j.spec.nprocs) for j in jobs]
    ys = [math.log2(j.model.A) for j in jobs]
    assert abs(statistics.correlation(xs, ys)) < 0.1
    # many jobs cannot use the processors they asked for
    below = sum(j.spec.nprocs > j.model.A for j in jobs) / len(jobs)
    assert 0.3 < below < 0.6


def test_the_models_share_their_draws():
    tr = _mixed(500)
    ind, _ = from_trace(tr, seed=7, parallelism="independent")
    rel, _ = from_trace(tr, seed=7, parallelism="relative:0:2")
    lin, _ = from_trace(tr, seed=7)
    for a, b, c in zip(ind, rel, lin, strict=True):
        x = math.log2(b.model.A / b.spec.nprocs) / 2  # A = size * 2**U(0, 2)
        assert 0 <= x <= 1
        assert x == pytest.approx(math.log2(a.model.A) / 8)  # the same uniform draw
        if c.model.A > 1:
            assert math.log2(c.model.A / c.spec.nprocs) == pytest.approx(2 * x - 1)  # and again
        assert a.model.sigma == b.model.sigma and 0 <= a.model.sigma <= 2
        # the run time at the trace size is the trace's, whatever the curve
        assert b.model.run_time(b.spec.nprocs) == pytest.approx(b.run_time)
        assert a.model.run_time(a.spec.nprocs) == pytest.approx(a.run_time)
    assert statistics.mean(math.log2(j.model.A / j.spec.nprocs) for j in rel) == \
        pytest.approx(1, abs=0.1)
    shifted, _ = from_trace(tr, seed=7, parallelism="relative:-1:1")
    assert [s.model.A for s in shifted] == pytest.approx([max(1.0, r.model.A / 2) for r in rel])
    assert [s.model.A for s in shifted] == pytest.approx([c.model.A for c in lin])


@pytest.mark.parametrize("bad", ["", "relative", "relative:2", "relative:2:1", "relative:a:b",
                                 "relative:0:inf", "Independent", "relative:0:2:3"])
def test_bad_parallelism_is_refused_naming_the_value(bad):
    with pytest.raises(ValueError) as e:
        from_trace(_mixed(10), parallelism=bad)
    assert repr(bad) in str(e.value) and "independent" in str(e.value) and "relative:LO:HI" in str(e.value)
    assert "size-linked" in str(e.value)


def test_other_bad_arguments():
    with pytest.raises(ValueError, match=r"estimates must be 'model'.*'perfect'"):
        from_trace(_mixed(10), estimates="perfect")
    for bad in (0, -2, 1.5, True):
        with pytest.raises(ValueError, match="step must be"):
            from_trace(_mixed(10), step=bad)


def test_modelled_estimates_are_round_overestimates_never_below_the_run_time():
    tr = _mixed()
    jobs, _ = from_trace(tr, seed=1)
    exact, _ = from_trace(tr, seed=1, estimates="exact")
    assert all(j.spec.walltime == j.run_time for j in exact)
    longest = max(j.run_time for j in jobs)
    ratios = []
    for j in jobs:
        w = j.spec.walltime
        assert w >= j.run_time and _is_round(w)
        assert w <= round_limit(longest)  # the site's limit
        ratios.append(w / j.run_time)
    assert sum(r > 1.5 for r in ratios) > 0.7 * len(ratios)  # mostly overestimates
    assert 2 < statistics.median(ratios) < 10
    # users pick a few values: under 20 for 2,000 jobs from 10 s to 30 h
    assert len({j.spec.walltime for j in jobs}) < 20
    again, _ = from_trace(tr, seed=1)
    assert [j.spec.walltime for j in again] == [j.spec.walltime for j in jobs]
    other, _ = from_trace(tr, seed=2)
    assert [j.spec.walltime for j in other] != [j.spec.walltime for j in jobs]


def test_trace_estimates_are_kept_and_the_header_limit_counts():
    tr = _trace([4, 4, 4], runs=[100.0, 200.0, 300.0], req=[150.0, None, 7.0])
    for est in ("model", "exact"):
        jobs, _ = from_trace(tr, estimates=est)
        assert jobs[0].spec.walltime == 150.0 and jobs[2].spec.walltime == 7.0
    jobs, _ = from_trace(tr)
    assert jobs[1].spec.walltime == 300.0  # the site's limit: 5 min covers the longest job
    tr = _trace([4, 4], runs=[100.0, 200.0], header={"MaxProcs": "256", "MaxRuntime": "40000"})
    walls = {from_trace(tr, seed=s)[0][1].spec.walltime for s in range(40)}
    assert max(walls) <= 12 * 3600 and len(walls) > 1


@settings(max_examples=300, deadline=None)
@given(run=st.floats(min_value=1e-3, max_value=1e9), seed=st.integers(0, 2**32),
       limit=st.one_of(st.just(math.inf), st.floats(min_value=1.0, max_value=2e9)))
def test_user_estimate_is_never_below_the_run_time(run, seed, limit):
    est = user_estimate(run, random.Random(seed), limit)
    assert est >= run
    assert est <= max(run, limit)
    assert est <= 1e9 or est == run
    assert _is_round(est) or est in (run, limit, 1e9)
    assert round_limit(run) >= run


def test_the_malleable_set_does_not_depend_on_the_other_assumptions():
    tr = _mixed(600)
    base, _ = from_trace(tr, malleable_fraction=0.4, seed=11)
    mall = [j.spec.resizable for j in base]
    assert 0.3 < sum(mall) / len(mall) < 0.5
    for kw in ({"estimates": "exact"}, {"parallelism": "relative:0:2"}, {"parallelism": "independent"}, {"step": 4},
               {"parallelism": "relative:1:3", "estimates": "exact", "step": 2}):
        jobs, _ = from_trace(tr, malleable_fraction=0.4, seed=11, **kw)
        assert [j.spec.resizable for j in jobs] == mall
    # speedup curves do not depend on the estimate model, nor estimates on the speedup model
    exact, _ = from_trace(tr, malleable_fraction=0.4, seed=11, estimates="exact")
    assert [j.model for j in exact] == [j.model for j in base]
    rel, _ = from_trace(tr, malleable_fraction=0.4, seed=11, parallelism="relative:0:2")
    assert [j.spec.walltime for j in rel] == [j.spec.walltime for j in base]
    # a job malleable at one fraction is malleable at every larger one
    more, _ = from_trace(tr, malleable_fraction=0.7, seed=11)
    assert all(b.spec.resizable for a, b in zip(base, more, strict=True) if a.spec.resizable)


def test_step_makes_legal_sizes_multiples():
    tr = _trace([1, 3, 4, 6, 8, 13, 20, 64, 100, 255], max_procs=256)
    jobs, total = from_trace(tr, malleable_fraction=1.0, step=4)
    for j in jobs:
        s = j.spec
        legal = legal_sizes(s, total)
        assert s.nprocs in legal and s.min_procs == legal[0]
        assert all(p % 4 == 0 or p == s.nprocs for p in legal)
        assert legal[-1] == 256
        assert s.min_procs <= s.nprocs
    by_size = {j.spec.nprocs: j.spec for j in jobs}
    assert by_size[3].min_procs == 3 and legal_sizes(by_size[3], total)[:3] == [3, 4, 8]
    assert by_size[20].min_procs == 8  # ceil(0.25 * 20) = 5, rounded up to a multiple
    assert by_size[13].min_procs == 4 and 13 in legal_sizes(by_size[13], total)
    rigid, _ = from_trace(tr, malleable_fraction=0.0, step=4)
    assert all(j.spec.sizes is None and j.spec.min_procs == j.spec.nprocs for j in rigid)
    one, _ = from_trace(tr, malleable_fraction=1.0)
    assert all(j.spec.sizes is None for j in one)  # default 1 slot: every size


def test_default_step_is_a_whole_node():
    sizes = [8 * (1 + i % 4) for i in range(40)]
    head = {"MaxProcs": "256", "MaxNodes": "64"}  # 4 processors per node
    tr = _trace(sizes, header=head)
    jobs, total = from_trace(tr, malleable_fraction=1.0, unit=1)
    assert total == 256
    assert all(p % 4 == 0 or p == j.spec.nprocs for j in jobs for p in legal_sizes(j.spec, total))
    assert jobs[0].spec.sizes is not None
    jobs, total = from_trace(tr, malleable_fraction=1.0, unit=2)  # 2 slots per node
    assert jobs[0].spec.sizes == tuple(range(2, 129, 2))
    for unit in (4, 8):  # a slot holds a node or more: every size
        jobs, _ = from_trace(tr, malleable_fraction=1.0, unit=unit)
        assert all(j.spec.sizes is None for j in jobs)
    jobs, _ = from_trace(_trace(sizes, header={"MaxProcs": "256", "MaxNodes": "256"}),
                         malleable_fraction=1.0, unit=1)
    assert all(j.spec.sizes is None for j in jobs)


def test_the_simulator_keeps_stepped_jobs_on_their_legal_sizes():
    from scheduler.core.policy import app_policy, remap_policy
    from scheduler.lab.simulator import simulate

    sizes = [2 + (i * 7) % 30 for i in range(60)]
    runs = [500.0 + 50 * i for i in range(60)]
    jobs, total = from_trace(_trace(sizes, runs=runs, max_procs=64, req=[3 * r for r in runs]),
                             malleable_fraction=0.6, seed=2, step=4)
    res = simulate(jobs, total, app_policy("easy"), remap_policy("reshape"), record=True)
    spec = {j.spec.job_id: j.spec for j in jobs}
    resized = [d for d in res.decisions if d.kind in ("expand", "shrink")]
    assert resized
    for d in resized:
        assert d.nprocs % 4 == 0 or d.nprocs == spec[d.job_id].nprocs
