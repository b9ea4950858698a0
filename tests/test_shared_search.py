"""GBS optimality, the GS counterexample and the anytime searches (Nakazawa 2005 §4.2)."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reshape.mheta.search import (
    SearchError,
    certify,
    exhaustive,
    ga,
    gbs,
    gs,
    random_split,
    sa,
)


def monotone_costs(c, n, k, o):
    """f_i(x) = c_i x + h_i(x) + o_i, h_i the ICLA step (0 in core, ceil(x/N_i) k_i out)."""

    def f(i: int, x: int) -> float:
        h = 0.0 if x <= n[i] else math.ceil(x / n[i]) * k[i]
        return c[i] * x + h + o[i]

    return f


@st.composite
def instances(draw, max_p=6, max_s=100):
    p = draw(st.integers(2, max_p))
    # keep exhaustive enumeration cheap: C(S+P-1, P-1) stays small
    s_cap = {2: 100, 3: 100, 4: 60, 5: 30, 6: 20}[p]
    s = draw(st.integers(0, min(max_s, s_cap)))
    c = draw(st.lists(st.integers(1, 20), min_size=p, max_size=p))
    n = draw(st.lists(st.integers(1, 60), min_size=p, max_size=p))
    k = draw(st.lists(st.integers(0, 50), min_size=p, max_size=p))
    o = draw(st.lists(st.integers(0, 10), min_size=p, max_size=p))
    seed = draw(st.integers(0, 2**32 - 1))
    return p, s, monotone_costs(c, n, k, o), seed


@settings(max_examples=300, deadline=None)
@given(instances())
def test_gbs_equals_exhaustive_optimum(inst):
    p, s, f, seed = inst
    _, opt = exhaustive(f, p, s)
    r = gbs(f, p, s, rng=random.Random(seed))
    assert sum(r.split) == s and min(r.split) >= 0
    assert r.certified
    assert max(f(i, x) for i, x in enumerate(r.split)) == opt
    # Lemma 1: m <= OPT <= M for any feasible vector
    x = random_split(p, s, random.Random(seed + 1))
    vals = [f(i, a) for i, a in enumerate(x)]
    assert min(vals) <= opt <= max(vals)


@settings(max_examples=100, deadline=None)
@given(instances(max_p=5), st.integers(0, 3))
def test_gbs_optimal_with_min_rows(inst, min_rows):
    p, s, f, seed = inst
    s = max(s, p * min_rows)
    _, opt = exhaustive(f, p, s, min_rows)
    r = gbs(f, p, s, rng=random.Random(seed), min_rows=min_rows)
    assert min(r.split) >= min_rows and sum(r.split) == s
    assert max(f(i, x) for i, x in enumerate(r.split)) == opt


@settings(max_examples=50, deadline=None)
@given(instances())
def test_certificate_means_optimal(inst):
    p, s, f, seed = inst
    _, opt = exhaustive(f, p, s)
    x = random_split(p, s, random.Random(seed))
    if certify(f, x):
        assert max(f(i, a) for i, a in enumerate(x)) == opt


def _counterexample():
    """Thesis §4.2.2: f_u(x_u) > f_a(x_a) >> f_d(x_d); d's next row is expensive (I/O step)."""
    c = {0: 1.0, 1: 1.0, 2: 1.0}

    def f(i: int, x: int) -> float:
        if i == 2:  # d: in core up to 1 row, then an I/O step
            return c[i] * x + (0.0 if x <= 1 else 100.0)
        return c[i] * x

    return f, [10, 8, 1]  # u, a, d


def test_gs_stalls_where_gbs_does_not():
    f, start = _counterexample()
    g = gs(f, 3, 19, start=start)
    b = gbs(f, 3, 19, start=start)
    assert g.split == (10, 8, 1) and g.value == 10 and not g.certified
    assert b.value == 9 and b.certified
    assert exhaustive(f, 3, 19)[1] == 9


class Ticks:
    """The searches' clock, advancing 1/1024 s at each reading: a budget is spent after a known number of
    readings (256 for 0.25 s, after the first), whatever the machine's speed."""

    def __init__(self):
        self.now, self.reads = 0.0, 0

    def perf_counter(self) -> float:
        self.now += 1 / 1024
        self.reads += 1
        return self.now


def test_anytime_searches_improve_and_respect_budget(monkeypatch):
    import reshape.mheta.search as search_module

    rng = random.Random(3)
    p, s = 8, 400
    f = monotone_costs([rng.randint(1, 9) for _ in range(p)], [rng.randint(20, 80) for _ in range(p)],
                       [rng.randint(0, 40) for _ in range(p)], [0] * p)
    best = gbs(f, p, s, rng=random.Random(0)).value
    for search in (ga, sa):
        clock = Ticks()
        monkeypatch.setattr(search_module, "time", clock)
        r = search(f, p, s, rng=random.Random(1), budget=0.25)
        # it searched until its clock said the budget was spent (reading 257), and stopped then
        assert 257 <= clock.reads <= 257 + 2, (search.__name__, clock.reads)
        assert sum(r.split) == s and min(r.split) >= 0
        assert r.value >= best
        vals = [v for _, v in r.trace]
        assert vals == sorted(vals, reverse=True) and r.best_at(0.25) == r.value
    r = gbs(f, p, s, rng=random.Random(0), budget=0.0)
    assert not r.certified and len(r.trace) == 1


def test_bad_input_is_refused():
    f, _ = _counterexample()
    with pytest.raises(SearchError, match="not a split"):
        gbs(f, 3, 19, start=[1, 2, 3])
    with pytest.raises(SearchError, match="at least 5 rows"):
        gbs(f, 3, 10, min_rows=5)
    with pytest.raises(SearchError, match="at least one node"):
        gs(f, 0, 10)


def _sections(a, b):
    """Two sections each ending in a reduction: time = slowest node of A + slowest node of B,
    while each node's own unblocked time is (a_i + b_i) x_i (what GBS balances)."""
    def f(i: int, x: int) -> float:
        return (a[i] + b[i]) * x

    def objective(x) -> float:
        return max(ai * xi for ai, xi in zip(a, x, strict=True)) + max(bi * xi for bi, xi in zip(b, x, strict=True))

    return f, objective


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(1, 9), min_size=3, max_size=5), st.data())
def test_gbs_finish_never_worse_and_near_the_blocked_optimum(a, data):
    p = len(a)
    b = data.draw(st.lists(st.integers(1, 9), min_size=p, max_size=p))
    s = data.draw(st.integers(p, {3: 40, 4: 24, 5: 14}[p]))
    f, obj = _sections(a, b)
    plain = gbs(f, p, s, objective=obj, rng=random.Random(0), min_rows=1)
    fin = gbs(f, p, s, objective=obj, rng=random.Random(0), min_rows=1, finish=True, budget=5.0)
    assert fin.value <= plain.value and fin.certified == plain.certified
    assert obj(fin.split) == fin.value and sum(fin.split) == s
    # the exhaustive optimum of the blocked objective bounds it from below
    best = min(obj(x) for x in _compositions(s, p, 1))
    assert fin.value >= best


def _compositions(s, p, lo):
    if p == 1:
        yield (s,)
        return
    for v in range(lo, s - lo * (p - 1) + 1):
        for rest in _compositions(s - v, p - 1, lo):
            yield (v, *rest)


def test_gbs_finish_reaches_the_blocked_optimum_where_gbs_does_not():
    # GBS balances each node's sum over both sections; the time with blocking wants each
    # section's maximum low: GBS's best is 10% off the optimum, the descent reaches it
    a, b = [7, 7, 2, 1], [1, 7, 6, 9]
    f, obj = _sections(a, b)
    opt = min(obj(x) for x in _compositions(24, 4, 1))
    plain = gbs(f, 4, 24, objective=obj, start=[6, 6, 6, 6], min_rows=1)
    fin = gbs(f, 4, 24, objective=obj, start=[6, 6, 6, 6], min_rows=1, finish=True, budget=5.0)
    assert plain.value > 1.1 * opt and fin.value == opt
