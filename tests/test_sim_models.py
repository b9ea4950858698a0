"""The simulator's emulated-job models time jobs exactly as ``apps.emujob`` does."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from apps.emujob import main as emujob_main
from scheduler.core.policy import JobSpec, app_policy, remap_policy
from scheduler.lab import SimInput, simulate
from scheduler.lab.emumodel import AmdahlOverheadModel, EmuRedistModel


def test_iteration_time_is_amdahl_plus_overhead():
    m = AmdahlOverheadModel(work=1.0, serial=0.05, overhead=0.04, iterations=10)
    assert m.iter_time(1) == pytest.approx(1.04)
    assert m.iter_time(4) == pytest.approx(0.05 + 0.95 / 4 + 0.16)
    assert m.run_time(4) == pytest.approx(10 * m.iter_time(4))
    # sweet spot at sqrt(work * (1 - serial) / overhead) = 4.87: 5 beats 4 and 6
    assert min(range(1, 12), key=m.iter_time) == 5


@given(work=st.floats(0.01, 100), serial=st.floats(0, 1), overhead=st.floats(1e-6, 1),
       p=st.integers(1, 64))
def test_minimum_is_near_the_analytic_sweet_spot(work, serial, overhead, p):
    m = AmdahlOverheadModel(work, serial, overhead, 1)
    if serial < 1:
        star = math.sqrt(work * (1 - serial) / overhead)
        lo, hi = math.floor(star), math.ceil(star)
        best = min(m.iter_time(max(1, lo)), m.iter_time(max(1, hi)))
        assert best <= m.iter_time(p) + 1e-9
    assert m.iter_time(p) >= work * serial


def test_redistribution_cost_matches_emujob():
    r = EmuRedistModel(0.5)
    assert r.cost(2, 2, 4) == pytest.approx(0.75)
    assert r.cost(99, 4, 2) == r.cost(2, 2, 4)  # symmetric, starting size ignored
    assert r.cost(2, 3, 3) == pytest.approx(1.0)
    assert EmuRedistModel().cost(1, 1, 8) == 0.0


def test_argv_runs_the_emulated_job_with_the_model_timing(capsys, monkeypatch):
    m = AmdahlOverheadModel(work=0.02, serial=0.1, overhead=0.001, iterations=2)
    argv = m.argv(0.0)
    assert argv[:3] == ["python", "-m", "apps.emujob"]
    monkeypatch.delenv("RESHAPE_SCHEDULER", raising=False)
    monkeypatch.delenv("RESHAPE_PLAN", raising=False)
    assert emujob_main([*argv[3:], "--nprocs", "3"]) == 0
    out = capsys.readouterr().out
    assert f"iteration 2 at 3 processes: {m.iter_time(3):.3f}s" in out


@pytest.mark.parametrize("bad", [dict(work=0.0), dict(serial=1.5), dict(overhead=-1.0),
                                 dict(iterations=0)])
def test_bad_parameters_are_rejected(bad):
    kw = dict(work=1.0, serial=0.1, overhead=0.01, iterations=3) | bad
    with pytest.raises(ValueError):
        AmdahlOverheadModel(**kw)


def test_bad_sizes_and_costs_are_rejected():
    with pytest.raises(ValueError):
        AmdahlOverheadModel(1.0, 0.1, 0.01, 3).iter_time(0)
    with pytest.raises(ValueError):
        EmuRedistModel(-1.0)
    with pytest.raises(ValueError):
        EmuRedistModel(1.0).cost(1, 0, 2)


def test_simulator_runs_the_models():
    m = AmdahlOverheadModel(work=1.0, serial=0.05, overhead=0.04, iterations=8)
    # no walltime: a 4 s job has no room for the policies' 10 s redistribution prior
    spec = JobSpec(0, "a", 0.0, 2, min_procs=1, max_procs=None, resizable=True, walltime=None, iterations=8)
    res = simulate([SimInput(spec, m, m.run_time(2))], 8, app_policy("easy"),
                   remap_policy("reshape"), redist=EmuRedistModel(0.1), record=True)
    sizes = [d.nprocs for d in res.decisions]
    assert sizes[:4] == [2, 3, 4, 5]  # expands while it gains > 5%
    assert sizes[4] == 4  # 4 -> 5 gains < 5%: back to the sweet spot (shrink rule 1)
    # two expansions and the return cost redist * (1 + p/q) each
    r = res.records[0]
    assert r.resizes == len(sizes) - 1
