"""The workload runner submits a job when it arrives by default in the benchmark, or announces it ahead.

``run_workload(..., announce=False)`` is how ``python -m benchmarks.workload`` measures its headline:
each job goes to the daemon when its arrival delay has passed, so the daemon (and a policy that holds
slots for announced arrivals) never sees it before; ``announce=True`` hands the delay to the daemon with
every job at the start (``reshape submit --delay``).
"""

from __future__ import annotations

import pytest

from scheduler.cli.workload import run_workload

pytestmark = pytest.mark.procs

DELAY = 1.0


def jobs() -> list[dict]:
    cmd = ["python", "-m", "apps.emujob", "--work", "0.4", "--serial", "0", "--overhead", "0",
           "--iterations", "2", "--redist", "0"]
    return [{"name": name, "command": cmd, "nprocs": 1, "max_procs": 2, "launch": "single",
             "arrival_delay": delay} for name, delay in (("first", 0.0), ("later", DELAY))]


@pytest.mark.parametrize("announce", [False, True])
def test_a_job_is_seen_before_it_arrives_only_when_announced(announce):
    seen_waiting: list[str] = []

    def watch(status: dict, _events: list[dict]) -> None:
        seen_waiting.extend(j["name"] for j in status["waiting"])

    res = run_workload(jobs(), 2, remap="reshape-plus", app="easy-plus", timeout=120, watch=watch,
                       announce=announce)
    assert res["clean_stop"], res["stop_error"]
    rows = {j["name"]: j for j in res["history"].jobs}
    assert {j["state"] for j in rows.values()} == {"done"}
    # either way the later job arrives after the first
    assert rows["later"]["arrival_time"] > rows["first"]["arrival_time"]
    if announce:
        assert "later" in seen_waiting  # the daemon held it, announced, until it arrived
    else:
        assert seen_waiting == []  # the daemon never knew of it before it came
