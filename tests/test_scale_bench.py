"""``python -m benchmarks.scale --quick`` runs end to end: a live daemon with emulated jobs, and the simulator
on a synthetic Lublin-Feitelson trace (the full run is the benchmark, not a test)."""

from __future__ import annotations

import json
import os

import pytest


@pytest.mark.procs
def test_scale_benchmark_quick_writes_its_summary(capsys, tmp_path, monkeypatch):
    from benchmarks import _common, scale

    # results into the test's directory, not over the committed ones
    monkeypatch.setattr(_common, "RESULTS", str(tmp_path))
    monkeypatch.setattr(scale, "RESULTS", str(tmp_path))
    assert scale.main(["--quick", "--seconds", "2"]) == 0
    with open(os.path.join(tmp_path, "scale-quick.json")) as f:
        out = json.load(f)
    rows = out["daemon"]
    assert [(r["running"], r["queued"]) for r in rows] == [(20, 200), (20, 1000)]
    assert all(r["resize_point_n"] > 0 and r["submit_n"] > 0 and r["status_n"] > 0 for r in rows)
    assert all(r["policy_errors"] == 0 and r["queued_after"] > r["queued"] for r in rows)
    sims = {r["policy"]: r for r in out["simulator"]}
    assert set(sims) == {"easy", "reshape-plus"} and all(r["late_starts"] == 0 for r in sims.values())
    assert sims["reshape-plus"]["resizes"] > 0 and sims["easy"]["resizes"] == 0
    assert "resize p99" in capsys.readouterr().out
