"""The W1/W2 benchmark's emulated jobs take their curves from the committed calibration of the real apps."""

from __future__ import annotations

import pytest

from benchmarks import calibrate_apps
from benchmarks.workload import calibrated_jobs
from reshape.joblink.emulated import parse_times, table_time
from scheduler.cli.workload import W1, W2
from scheduler.lab.emumodel import APPS, app_iter_time


def test_the_committed_calibration_is_complete_and_says_how_it_was_made():
    cal = calibrate_apps.load()
    assert cal["command"] == "python -m benchmarks.calibrate_apps"
    assert cal["alpha_s"] > 0 and cal["beta_s_per_byte"] > 0 and len(cal["load_average"]) == 2
    assert set(cal["apps"]) == set(APPS)
    for app, c in cal["apps"].items():
        assert sorted(map(int, c["curve"])) == list(range(1, calibrate_apps.MAX_PROCS + 1))
        # the stored curve is the model at the stored constants (regenerated, not edited)
        model = calibrate_apps.APPS[app]["model"]
        for p in (1, 2, 9, 36):
            assert c["curve"][str(p)] == pytest.approx(
                app_iter_time(app, c["n"], p, c["t1"], cal["alpha_s"], cal["beta_s_per_byte"], **model))


@pytest.mark.parametrize("workload", [W1, W2], ids=["W1", "W2"])
def test_each_job_starts_at_its_static_iteration_time_and_follows_its_app(workload):
    cal = calibrate_apps.load()
    scale = 0.01
    for job, ej in zip(calibrated_jobs(workload, scale, cal), workload[1], strict=True):
        cmd = job["command"]
        times = parse_times(cmd[cmd.index("--times") + 1])
        assert table_time(ej.nprocs, times) == pytest.approx(ej.static_turnaround / 10 * scale, rel=1e-5)
        c = calibrate_apps.curve(cal, ej.name)
        q = min(workload[0], 2 * ej.nprocs)
        assert table_time(q, times) / table_time(ej.nprocs, times) == pytest.approx(c[q] / c[ej.nprocs], rel=1e-4)
        assert job["nprocs"] == ej.nprocs and job["launch"] == "single"


def test_an_unknown_job_is_refused_naming_it():
    with pytest.raises(ValueError, match="'Lanczos'"):
        calibrate_apps.curve(calibrate_apps.load(), "Lanczos")
