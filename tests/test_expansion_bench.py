"""``benchmarks.expansion``'s arithmetic: per-new-rank ratios of the largest step over 2 -> 4, medians over runs
(the benchmark's runs themselves start 30 processes: ``python -m benchmarks.expansion --quick``)."""

from __future__ import annotations

import pytest

from benchmarks import expansion


def _run(per_rank: dict[int, float]) -> list[dict]:
    """A run whose step into ``new`` ranks costs ``per_rank[new]`` seconds per new rank in every phase."""
    steps = []
    for old, new in zip(expansion.PLAN, expansion.PLAN[1:], strict=False):
        s = {"old": old, "new": new, "launch": 0.0, "startup": 0.0, "ready": 0.0}
        s.update({k: per_rank[new] * (new - old) for k, _ in expansion.PHASES})
        s["total"] = sum(s[k] for k, _ in expansion.PHASES)
        steps.append(s)
    return steps


def test_a_cost_linear_in_the_new_ranks_has_ratio_one():
    rows, summary = expansion.summarize([_run({4: 0.1, 8: 0.1, 16: 0.1, 32: 0.1})])
    assert summary["expand_cost_per_new_rank_ratio"] == pytest.approx(1.0)
    assert summary["spawn_per_new_rank_ratio"] == pytest.approx(1.0)
    assert [r["step"] for r in rows] == ["2->4", "4->8", "8->16", "16->32"]
    assert [r["new_ranks"] for r in rows] == [2, 4, 8, 16]
    assert rows[-1]["spawn"] == pytest.approx(1.6) and rows[-1]["spawn_per_new_rank"] == pytest.approx(0.1)
    assert summary["met"]


def test_the_headline_is_the_median_run_and_the_worst_run_is_beside_it():
    runs = [_run({4: 0.1, 8: 0.1, 16: 0.1, 32: r}) for r in (0.1, 0.3, 0.2)]
    _, summary = expansion.summarize(runs)
    assert summary["expand_cost_per_new_rank_ratio"] == pytest.approx(2.0)
    assert summary["expand_cost_per_new_rank_ratio_worst"] == pytest.approx(3.0)
    assert summary["largest_step"] == "16->32" and not summary["met"]
    assert summary["per_new_rank_ratio_per_step"]["8->16"]["total"] == pytest.approx(1.0)
    assert summary["per_new_rank_ratio_per_step"]["16->32"]["total"] == pytest.approx(2.0)
    assert summary["per_step_median_s"]["16->32"]["total"] == pytest.approx(0.2 * 16 * len(expansion.PHASES))
