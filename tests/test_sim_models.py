"""The simulator's emulated-job models time jobs exactly as ``apps.emujob`` does."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from apps.emujob import main as emujob_main
from reshape.joblink.emulated import parse_times, table_time
from scheduler.core.policy import JobSpec, app_policy, remap_policy
from scheduler.lab import SimInput, simulate
from scheduler.lab.emumodel import APPS, AmdahlOverheadModel, EmuRedistModel, TableModel, app_iter_time, comm_counts


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


# --- measured curves (apps.emujob --times, TableModel) and the applications' model (app_iter_time) ---

def test_table_model_interpolates_between_sizes_and_is_flat_outside():
    m = TableModel(((2, 4.0), (4, 2.0), (8, 1.5)), iterations=3)
    assert m.iter_time(1) == 4.0 and m.iter_time(2) == 4.0
    assert m.iter_time(3) == pytest.approx(3.0)
    assert m.iter_time(6) == pytest.approx(1.75)
    assert m.iter_time(50) == 1.5
    assert m.run_time(4) == pytest.approx(6.0)


@given(st.dictionaries(st.integers(1, 64), st.floats(1e-3, 1e3), min_size=1, max_size=12), st.integers(1, 80))
def test_table_time_stays_within_its_neighbours(points, p):
    times = tuple(sorted(points.items()))
    t = table_time(p, times)
    assert min(points.values()) - 1e-9 <= t <= max(points.values()) + 1e-9
    if p in points:
        assert t == pytest.approx(points[p])


def test_table_model_argv_runs_the_emulated_job_with_its_times(capsys, monkeypatch):
    m = TableModel(((1, 0.03), (4, 0.01)), iterations=2)
    argv = m.argv(0.0)
    monkeypatch.delenv("RESHAPE_SCHEDULER", raising=False)
    monkeypatch.delenv("RESHAPE_PLAN", raising=False)
    assert emujob_main([*argv[3:], "--nprocs", "2"]) == 0
    assert f"iteration 2 at 2 processes: {m.iter_time(2):.3f}s" in capsys.readouterr().out


@pytest.mark.parametrize("text", ["1:x", "0:1.0", "2:0", "2:1,2:3", "4"])
def test_bad_times_are_refused_naming_the_part(text):
    with pytest.raises(ValueError, match="--times"):
        parse_times(text)
    with pytest.raises(SystemExit):
        emujob_main(["--times", text])


@pytest.mark.parametrize("bad", [(), ((2, 1.0), (1, 2.0)), ((1, 0.0),), ((0, 1.0),)])
def test_bad_tables_are_rejected(bad):
    with pytest.raises(ValueError):
        TableModel(bad, 1)


@pytest.mark.parametrize("app", APPS)
def test_one_rank_does_not_communicate_and_more_ranks_do(app):
    assert comm_counts(app, 1024, 1) == (0.0, 0.0)
    steps, nbytes = comm_counts(app, 1024, 4)
    assert steps > 0 and (nbytes > 0 or app == "master_worker")
    assert app_iter_time(app, 1024, 1, 2.0, 1e-5, 1e-9) == 2.0


def test_lu_communication_follows_the_grid():
    # 1 x 2: no pivot search across processes, the panel broadcast along the row only
    steps, nbytes = comm_counts("lu", 1024, 2, nb=64)
    assert steps == 16 and nbytes == 8 * 1024 * 1024 / 2
    # 2 x 2: every column also searches and swaps down the process column
    assert comm_counts("lu", 1024, 4, nb=64)[0] == 1024 * 2 + 16 * 2


def test_model_time_falls_then_communication_wins():
    t = [app_iter_time("jacobi", 1000, p, 0.01, 2e-5, 1e-10, sweeps=20) for p in range(1, 65)]
    best = t.index(min(t)) + 1
    assert 2 < best < 64 and t[-1] > min(t)
    # master-worker: the master computes nothing, so 2 ranks are no faster than 1
    assert app_iter_time("master_worker", 2000, 2, 1.0, 0.0, 0.0) == 1.0


def test_bad_model_input_is_refused():
    with pytest.raises(ValueError, match="unknown application 'x'"):
        comm_counts("x", 10, 2)
    with pytest.raises(ValueError, match="p >= 1"):
        comm_counts("lu", 10, 0)
    with pytest.raises(ValueError, match="t1 > 0"):
        app_iter_time("lu", 10, 2, 0.0, 0.0, 0.0)


def test_simulator_runs_a_table_model_to_its_sweet_spot():
    # a measured curve with its minimum at 4: the Remap Scheduler grows 2 -> 3 -> 4 -> 5 and returns to 4
    m = TableModel(((1, 4.0), (2, 2.0), (3, 1.5), (4, 1.2), (5, 1.25), (8, 2.0)), iterations=8)
    spec = JobSpec(0, "a", 0.0, 2, min_procs=1, max_procs=None, resizable=True, walltime=None, iterations=8)
    res = simulate([SimInput(spec, m, m.run_time(2))], 8, app_policy("easy"),
                   remap_policy("reshape"), redist=EmuRedistModel(0.1), record=True)
    sizes = [d.nprocs for d in res.decisions]
    assert sizes[:4] == [2, 3, 4, 5] and sizes[4] == 4


def test_times_and_the_amdahl_options_do_not_mix():
    with pytest.raises(SystemExit):
        emujob_main(["--times", "1:1.0", "--serial", "0.1"])
    with pytest.raises(SystemExit):
        emujob_main(["--times", "1:1.0", "--work", "1.0"])
