"""The Lublin-Feitelson generator draws the shared lublin_256.swf's distributions, seeded."""

from __future__ import annotations

import os

import numpy as np
import pytest

from scheduler.lab.swf import read_swf
from scheduler.lab.workloads.lublin import generate, offered_load

pytestmark = pytest.mark.pure
SHARED = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data", "traces", "lublin_256.swf")


def _stats(tr, nodes):
    s = np.array([j.submit for j in tr.jobs])
    r = np.array([j.run_time for j in tr.jobs])
    p = np.array([j.procs for j in tr.jobs])
    return {"serial": (p == 1).mean(), "pow2": ((p & (p - 1)) == 0).mean(), "median_run": np.median(r),
            "gap": np.diff(s).mean(), "size": p.mean(), "load": offered_load(s, r, p, nodes)}


@pytest.mark.skipif(not os.path.exists(SHARED), reason="shared traces not present")
def test_generated_traces_match_the_shared_lublin_trace():
    ref = _stats(read_swf(SHARED), 256)
    got = [_stats(generate(10000, 256, seed), 256) for seed in range(3)]
    for g in got:
        assert abs(g["serial"] - ref["serial"]) < 0.02 and abs(g["pow2"] - ref["pow2"]) < 0.02
        assert 0.8 < g["median_run"] / ref["median_run"] < 1.25
        assert 0.85 < g["size"] / ref["size"] < 1.15
    assert 0.85 < np.mean([g["gap"] for g in got]) / ref["gap"] < 1.2


def test_seeded_and_scaled_to_the_load_asked():
    a, b = generate(2000, 1024, seed=3, load=0.7), generate(2000, 1024, seed=3, load=0.7)
    assert a.jobs == b.jobs and a.jobs != generate(2000, 1024, seed=4, load=0.7).jobs
    s = _stats(a, 1024)
    assert abs(s["load"] - 0.7) < 0.01 and max(j.procs for j in a.jobs) <= 1024 and a.max_procs == 1024
    assert all(j.run_time >= 1 and j.procs >= 1 for j in a.jobs)
    assert [j.submit for j in a.jobs] == sorted(j.submit for j in a.jobs)


@pytest.mark.parametrize(("kw", "word"), [({"n": 0}, "n must"), ({"nodes": 1}, "nodes must"),
                                          ({"load": -1.0}, "load must"), ({"params": {"x": 1}}, "unknown")])
def test_bad_arguments_are_refused_by_name(kw, word):
    with pytest.raises(ValueError, match=word):
        generate(**{"n": 10, **kw})
