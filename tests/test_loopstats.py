"""The daemon's loop statistics (where its time goes, docs/daemon.md): the service window's percentiles
are the sorted list's, and the loop's histograms count every turn and phase."""

from __future__ import annotations

import gc

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.observe.loopstats import BOUNDS, LoopStats, ServiceWindow, delta, percentile

pytestmark = pytest.mark.pure


@settings(max_examples=80, deadline=None)
@given(st.lists(st.floats(0, 10, allow_nan=False), max_size=60), st.integers(1, 20))
def test_the_service_window_reports_the_sorted_windows_ranks(xs, size):
    w = ServiceWindow(size)
    for x in xs:
        w.append(x)
    window = sorted(xs[-size:])
    if not window:
        assert w.stats() is None and len(w) == 0
        return
    n = len(window)
    assert len(w) == n
    assert w.stats() == (window[n // 2], window[min(n - 1, int(0.99 * n))], window[-1])


def test_loop_stats_count_turns_phases_requests_and_gc_pauses():
    ls = LoopStats()
    before = ls.to_dict()
    ls.watch_gc()
    try:
        for k in range(100):
            ls.begin()
            ls.add("handle", 1e-4)
            ls.add("commit", 0.02 if k == 99 else 2e-4)
            ls.request("resize_point", 5e-5)
            if k == 50:
                gc.collect()
            ls.end(0.021 if k == 99 else 4e-4, 3)
    finally:
        ls.unwatch_gc()
    d = delta(ls.to_dict(), before)
    assert d["turns"] == 100 and d["phases"]["busy"]["n"] == 100
    assert d["phases"]["commit"]["p50_ms"] == pytest.approx(0.2, rel=0.34)
    assert d["phases"]["commit"]["max_ms"] == pytest.approx(20.0)
    assert d["requests"]["resize_point"]["n"] == 100
    assert d["gc_pauses"]["n"] >= 1 and d["phases"]["gc"]["total_s"] > 0
    slow = ls.to_dict()["slowest"]
    assert len(slow) == 1 and slow[0]["commit_ms"] == pytest.approx(20.0) and slow[0]["requests"] == 3
    again = delta(ls.to_dict(), ls.to_dict())  # nothing between two readings
    assert again["turns"] == 0 and again["phases"]["busy"]["p99_ms"] is None


def test_percentile_is_the_upper_bound_of_its_bucket():
    bounds = [1e3 * b for b in BOUNDS]
    counts = [0] * (len(bounds) + 1)
    counts[3], counts[10] = 98, 2
    assert percentile(counts, bounds, 0.5) == bounds[3]
    assert percentile(counts, bounds, 0.99) == bounds[10]
    assert percentile([0] * len(counts), bounds, 0.5) is None
