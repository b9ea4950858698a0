"""``reshape demo --quick`` end to end: a real daemon, the bundled apps under mpiexec, resizes, no leftovers."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import psutil
import pytest

from scheduler.cli.demo import demo_jobs, resizes, shrink_reasons, story_times
from scheduler.daemon.startup import TAG, job_tag, kill_job

pytestmark = pytest.mark.procs


def tagged_under(state_dir: str) -> list[int]:
    """Processes of any job of the daemon with this state directory."""
    prefix = job_tag(state_dir, 0)[:-1]
    out = []
    for p in psutil.process_iter():
        try:
            if p.pid != os.getpid() and p.environ().get(TAG, "").startswith(prefix):
                out.append(p.pid)
        except (psutil.Error, OSError):
            continue
    return out


def test_resizes_counts_steps():
    assert resizes([2, 4, 2, 4, 2]) == (2, 2)
    assert resizes([4]) == (0, 0)


def test_shrink_reasons_from_advice_events():
    ev = [{"kind": "advise", "detail": "shrink 4->2: admit queued job 3"},
          {"kind": "advise", "detail": "shrink 4->2: sweet spot: 2 -> 4 did not help"},
          {"kind": "advise", "detail": "expand 2->4: idle processors"},
          {"kind": "shrink", "detail": "4->2"}]
    assert shrink_reasons(ev) == {"admit": 1, "sweet spot": 1, "requested": 0, "other": 0}


def test_demo_jobs_are_valid_job_descriptions():
    from scheduler.core.jobfile import validate_job

    for quick in (False, True):
        jobs = demo_jobs(quick)
        assert {j["command"][2].split(".")[0] for j in jobs} == {"apps"}
        for j in jobs:
            validate_job({k: v for k, v in j.items() if k != "hold"}, 8)  # run_workload takes "hold" out
        # the opening: two 2-process jobs with 4 slots idle, then a held 4-process job
        assert [(j["nprocs"], j["arrival_delay"]) for j in jobs[:2]] == [(2, 0.0), (2, 0.0)]
        assert jobs[2]["nprocs"] == 4 and jobs[2]["hold"]["after_expansions"] == 1


def test_story_times_from_events():
    ev = [{"t": 100.0, "job_id": 1, "kind": "start", "detail": ""},
          {"t": 103.0, "job_id": 2, "kind": "advise", "detail": "expand 2->4: idle processors"},
          {"t": 104.5, "job_id": 2, "kind": "expand", "detail": "2->4"},
          {"t": 105.0, "job_id": 1, "kind": "advise", "detail": "shrink 4->2: sweet spot: 2 -> 4 did not help"},
          {"t": 105.2, "job_id": 1, "kind": "shrink", "detail": "4->2"},
          {"t": 106.0, "job_id": 2, "kind": "advise", "detail": "shrink 4->2: admit queued job 3"},
          {"t": 106.4, "job_id": 2, "kind": "shrink", "detail": "4->2"}]
    assert story_times(ev, 100.0) == {"first_expansion_s": 4.5, "first_admit_shrink_s": 6.4}
    assert story_times(ev[:1], 100.0) == {"first_expansion_s": None, "first_admit_shrink_s": None}


def test_quick_demo_resizes_real_apps_and_leaves_nothing(tmp_path):
    """Also: the story (an expansion into idle slots, then a shrink to admit the queued job), progress that
    streams while the jobs run, the dashboard's real port with --dashboard 0, and the plot beside the state,
    not in the current directory. How soon the story comes is a measurement (docs/daemon.md, "The demo")."""
    state = str(tmp_path / "state")
    plot = os.path.join(state, "reshape-demo.png")
    try:
        # progress (plain lines, stdout is no terminal) on stderr while it runs, the result on stdout
        p = subprocess.Popen([sys.executable, "-m", "scheduler.cli", "demo", "--quick", "--json", "--dashboard", "0",
                              "--state-dir", state], cwd=str(tmp_path), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        try:
            progress = list(p.stderr)
            stdout = p.stdout.read()
            p.wait(timeout=170)
        finally:
            p.kill()
            p.wait()
        text = "".join(progress)
        assert p.returncode == 0, stdout[-3000:] + text[-3000:]
        assert "advised expand" in text and "idle processors" in text, text  # decisions with their reasons
        assert "advised shrink" in text and "t = " in text and "running: " in text, text
        # the output keeps coming while the jobs run: status lines, with decisions between them
        status = [i for i, line in enumerate(progress) if line.lstrip().startswith("t = ")]
        assert len(status) >= 2 and any("advised" in line for line in progress[status[0]:status[-1]]), text
        port = re.search(r"^dashboard: http://127\.0\.0\.1:(\d+)/$", text, re.M)
        assert port and int(port.group(1)) > 0, text
        out = json.loads(stdout)
        assert out["first_expansion_s"] is not None and out["first_admit_shrink_s"] is not None, out
        assert out["first_expansion_s"] <= out["first_admit_shrink_s"], out  # grown into idle slots, then given back
        assert out["plot"] == plot and not os.path.exists(tmp_path / "reshape-demo.png")
        jobs = out["jobs"]
        assert [j["name"] for j in jobs] == [j["name"] for j in demo_jobs(True)]
        assert all(j["state"] == "done" and j["check"] == "OK" for j in jobs), jobs
        assert sum(j["expansions"] for j in jobs) >= 1, jobs
        assert sum(j["shrinks"] for j in jobs) >= 1, jobs
        assert out["clean_stop"] and 0 < out["utilization"] <= 1
        assert sum(out["shrink_reasons"].values()) >= 1
        assert os.path.getsize(plot) > 10_000
        assert not tagged_under(state), "job processes left behind"
        with open(os.path.join(state, "logs", "job-1.log")) as f:
            assert "result OK" in f.read()  # the app's own verdict, in the per-job log
    finally:
        for jid in range(1, 10):
            kill_job(job_tag(state, jid), grace=0.5)


def test_example_job_files_load():
    import glob

    from scheduler.core.jobfile import load_job_file

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    files = sorted(glob.glob(os.path.join(root, "examples", "*.toml")))
    names = set()
    for f in files:
        if os.path.basename(f) == "pool.toml":
            continue
        names.add(load_job_file(f, 8).name)
    assert {"lu", "jacobi"} <= names
