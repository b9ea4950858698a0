"""Checkpoints of a job's registered arrays while it iterates, and a restart from them at another size.

The runs are ``examples/heat.py`` under real ``mpiexec``: a run cut short (or killed with ``kill -9``)
with ``RESHAPE_CHECKPOINT`` set, resumed at another size from its last complete checkpoint, ends with
the same bytes as a run that never stopped (the stencil is deterministic per iteration).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from reshape.joblink.launch import kill_session, mpiexec_path
from reshape.runtime.checkpoint import latest, parse_every
from tests.helpers import ROOT, wait_for

HEAT = ["examples/heat.py", "--n", "64"]


def digest(res) -> tuple[list[int], str]:
    m = re.search(r"sizes \[([\d, ]+)\] sha256 (\w+)", res.stdout)
    assert m, res.stdout + res.stderr
    return [int(x) for x in m.group(1).split(",")], m.group(2)


@pytest.mark.parametrize(("text", "want"), [("every:10", ("every", 10)), ("seconds:2.5", ("seconds", 2.5)),
                                            ("auto", ("auto", 50.0)), ("auto:3", None),
                                            ("every:0", None), ("every:x", None), ("minutes:3", None),
                                            ("seconds:inf", None), ("every", None), ("", None)])
def test_checkpoint_settings_parse(text, want):
    assert parse_every(text) == want


def test_auto_spaces_checkpoints_by_their_cost_and_at_least_a_second():
    from reshape.runtime.checkpoint import AUTO_FACTOR, Checkpointer

    ck = Checkpointer("unused", *parse_every("auto"))
    assert ck.kind == "auto" and ck.interval == AUTO_FACTOR == 50
    ck._started_at, ck._done = 10, 12
    ck._schedule(cost=0.1, iter_time=0.5)  # 50 x 0.1 s = 5 s of 0.5 s iterations
    assert ck.next_at == 20
    ck._schedule(cost=0.001, iter_time=0.05)  # 0.05 s < 1 s: a second of iterations
    assert ck.next_at == 30
    ck._schedule(cost=1.0, iter_time=0.0)  # no iteration time yet: the next iteration end
    assert ck.next_at == 13
    assert ck.due(None, 12) is False and ck.due(None, 13) is True  # no message decides it


def test_only_a_complete_checkpoint_is_ever_read(tmp_path):
    assert latest(str(tmp_path / "none")) is None
    for name, meta in (("ckpt-00000004", True), ("ckpt-00000008", False), ("ckpt-00000012.part", True)):
        (tmp_path / name).mkdir()
        if meta:
            (tmp_path / name / "meta.json").write_text("{}")
    assert latest(str(tmp_path)) == str(tmp_path / "ckpt-00000004")


@pytest.mark.procs
def test_a_job_resumes_from_its_checkpoint_at_another_size_with_the_same_result(mpirun, tmp_path):
    _, ref = digest(mpirun(2, [*HEAT, "--steps", "12"]))
    env = {"RESHAPE_CHECKPOINT": "every:4", "RESHAPE_CHECKPOINT_DIR": str(tmp_path)}
    mpirun(2, [*HEAT, "--steps", "10"], env=env)  # stops after 10: checkpoints after 4 and 8 iterations
    assert sorted(os.listdir(tmp_path)) == ["ckpt-00000004", "ckpt-00000008"]
    meta = json.loads((tmp_path / "ckpt-00000008" / "meta.json").read_text())
    assert meta["iteration"] == 8 and meta["size"] == 2 and meta["arrays"]["T"]["shape"] == [64, 64]
    res = mpirun(3, [*HEAT, "--steps", "12"], env=env)
    assert "resuming at iteration 8" in res.stderr and digest(res)[1] == ref
    # the run that resumed wrote a checkpoint after iteration 12 and kept the last two
    assert sorted(os.listdir(tmp_path)) == ["ckpt-00000008", "ckpt-00000012"]
    res = mpirun(1, [*HEAT, "--steps", "16"], env={**env, "RESHAPE_PLAN": "1,3,2", "RESHAPE_ALLOW_NEW_SIZES": "1"})
    assert "resuming at iteration 12" in res.stderr and digest(res) == ([1, 3, 2], digest(
        mpirun(2, [*HEAT, "--steps", "16"]))[1])


@pytest.mark.procs
def test_a_job_killed_mid_run_loses_at_most_the_iterations_since_its_last_checkpoint(mpirun, tmp_path):
    _, ref = digest(mpirun(2, [*HEAT, "--steps", "30"]))
    env = {**os.environ, "RESHAPE_CHECKPOINT": "every:5", "RESHAPE_CHECKPOINT_DIR": str(tmp_path),
           "PYTHONPATH": ROOT}
    p = subprocess.Popen([mpiexec_path(), "-n", "2", sys.executable, *HEAT, "--steps", "30", "--work", "3"],
                         cwd=ROOT, env=env, start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        wait_for(lambda: latest(str(tmp_path)) is not None and latest(str(tmp_path)).endswith("00010"), 60,
                 every=0.05)
        kill_session(p.pid, grace=0.0)  # SIGTERM then SIGKILL at once: every rank dies mid-iteration
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
        p.wait(10)
    time.sleep(0.2)
    assert p.returncode != 0
    res = mpirun(4, [*HEAT, "--steps", "30"], env={"RESHAPE_CHECKPOINT": "every:5",
                                                    "RESHAPE_CHECKPOINT_DIR": str(tmp_path)})
    done = int(re.search(r"resuming at iteration (\d+)", res.stderr).group(1))
    assert done >= 10 and digest(res)[1] == ref


@pytest.mark.procs
@pytest.mark.parametrize(("env", "why"), [
    ({"RESHAPE_CHECKPOINT": "every:0"}, "RESHAPE_CHECKPOINT='every:0': expected every:N"),
    ({"RESHAPE_CHECKPOINT": "every:2", "RESHAPE_CHECKPOINT_DIR": "/proc/self/no"},
     "RESHAPE_CHECKPOINT_DIR='/proc/self/no'"),
])
def test_bad_checkpoint_settings_stop_every_rank_with_one_reason(mpirun, env, why):
    res = mpirun(2, [*HEAT, "--steps", "3"], env=env, check=False)
    assert res.returncode != 0 and why in res.stderr, res.stderr


@pytest.mark.procs
def test_under_the_daemon_a_job_that_loses_a_rank_restarts_from_its_checkpoint_and_ends_done(daemon, mpirun):
    """kill -9 of one rank of a running job: the daemon queues it again as its next attempt, which resumes
    from the last complete checkpoint and ends ``done`` with the bytes of a run that never failed."""
    from reshape.joblink.launch import tagged_pids
    from scheduler.daemon.startup import job_tag

    steps = 24
    _, ref = digest(mpirun(2, [*HEAT, "--steps", str(steps)]))
    d = daemon(4, remap="static")
    jid = d.submit(name="heat", command=["python", *HEAT, "--steps", str(steps), "--work", "4"], nprocs=2,
                   resizable=False, checkpoint="every:3", max_restarts=2)
    ckdir = os.path.join(d.state_dir, "checkpoints", f"job-{jid}")
    wait_for(lambda: (p := latest(ckdir)) is not None and not p.endswith("00003"), 60, every=0.1)
    ranks = [p for p in tagged_pids(job_tag(d.state_dir, jid), "RESHAPE_JOB_TAG") if _is_rank(p)]
    assert ranks, "no rank of the job found"
    os.kill(ranks[-1], signal.SIGKILL)
    j = wait_for(lambda: (j := d.job(jid))["state"] in ("done", "failed") and j, 120, every=0.5)
    assert j["state"] == "done" and j["restarts"] == 1, j
    assert j["resumed_at"] >= 6 and j["iterations_lost"] <= 3, j
    kinds = [e["kind"] for e in d.req("history")["events"] if e["job_id"] == jid]
    assert kinds.count("restart") == 1 and kinds.count("start") == 2, kinds
    log = d.req("log", {"job_id": jid, "tail": 0})["text"]
    assert "resuming at iteration" in log and f"sha256 {ref}" in log, log[-2000:]
    assert not tagged_pids(job_tag(d.state_dir, jid, 0), "RESHAPE_JOB_TAG")


def _is_rank(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = f.read().split(b"\0")
    except OSError:
        return False
    launcher = (b"mpiexec", b"mpiexec.hydra")
    return any(a.endswith(b"examples/heat.py") for a in argv) and not any(a.endswith(launcher) for a in argv)


def test_under_the_daemon_a_checkpointed_program_that_never_calls_finish_ends_done_once(daemon):
    """Rank 0's normal exit reports done (the daemon restarts a checkpointed job that exits 0 without it:
    Hydra's status after a killed rank), so a program that skips ``rt.finish()`` is done, not run again."""
    d = daemon(2, remap="static")
    jid = d.submit(name="nofinish", command=["python", "-m", "tests.mpi.resize_nofinish"], nprocs=2,
                   checkpoint="every:2", max_restarts=2)
    try:
        j = wait_for(lambda: (j := d.job(jid))["state"] in ("done", "failed") and j, 120, every=0.5)
    except AssertionError:  # say where it stopped: the job as the daemon sees it, and its output
        raise AssertionError(f"the job never ended: {d.job(jid)}\n{d.req('log', {'job_id': jid})}") from None
    assert j["state"] == "done" and j["restarts"] == 0, j


@pytest.mark.procs
def test_a_program_that_exits_mid_checkpoint_without_finish_exits(mpirun, tmp_path):
    """Its writer thread holds h5py's lock as the program ends: every rank still exits (the runtime waits
    for its own threads at exit), and the checkpoint cut off there is never read."""
    env = {"RESHAPE_CHECKPOINT": "every:1", "RESHAPE_CHECKPOINT_DIR": str(tmp_path)}
    res = mpirun(2, ["-m", "tests.mpi.ckpt_exit_midwrite"], env=env, timeout=60)
    assert "exiting at iteration 1" in res.stdout, res.stdout + res.stderr
    assert latest(str(tmp_path)) is None and os.listdir(tmp_path) == ["ckpt-00000001.part"]

