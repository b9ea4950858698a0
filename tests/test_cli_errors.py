"""The daemon's command line in front of mistakes: a busy endpoint, a dead daemon, a job that fails."""

import os
import subprocess
import sys
import time

import pytest

from tests.helpers import free_port, wait_for

pytestmark = pytest.mark.procs

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def cli(*argv, timeout=30):
    return subprocess.run([sys.executable, "-m", "scheduler.cli", *argv], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT)


@pytest.mark.parametrize("kind", ["tcp", "ipc"])
def test_second_daemon_on_a_busy_endpoint_fails_before_anything(daemon, tmp_path, kind):
    d = daemon(2, endpoint=f"ipc://{tmp_path}/d.sock" if kind == "ipc" else None)
    second = tmp_path / "second"
    res = cli("daemon", "--endpoint", d.endpoint, "--state-dir", str(second), "--slots", "2")
    assert res.returncode == 1 and res.stdout == "", res
    why = ("address already in use (another daemon? stop it, or choose another --endpoint)" if kind == "tcp" else
           f"a daemon already listens on {d.endpoint} (stop it, or choose another --endpoint)")
    assert res.stderr.strip() == f"reshape daemon: cannot listen on {d.endpoint}: {why}"
    assert not second.exists()
    assert d.ping()  # the first one is untouched


@pytest.mark.parametrize("command", ["history", "status"])
def test_commands_against_a_dead_daemon_fail_fast(command, tmp_path):
    for endpoint in (f"tcp://127.0.0.1:{free_port()}", f"ipc://{tmp_path}/daemon.sock"):
        res = cli(command, "--endpoint", endpoint)
        assert res.returncode == 1, res
        # the refused connection, not a timeout ("no reply from the scheduler daemon ...")
        assert res.stderr.startswith(f"reshape: no scheduler daemon listens at {endpoint} (is 'reshape daemon'")


def test_failed_job_shows_its_reason_and_where_its_log_is(daemon):
    d = daemon(2)
    jid = d.submit(name="bad", command=["python", "examples/heat.py", "--n", "16", "--steps", "2"], nprocs=2,
                   env={"RESHAPE_MAX_PROCS": "abc"})
    job = wait_for(lambda: (j := d.job(jid))["state"] in ("done", "failed") and j, 60)
    assert job["state"] == "failed"
    why = ("exit code 1: UsageError: reshape.init(): RESHAPE_MAX_PROCS='abc': expected an integer >= 1 "
           "(RESHAPE_DEBUG=1 shows the traceback)")
    assert job["error"] == why
    hist = cli("history", "--endpoint", d.endpoint)
    assert why[:60] in hist.stdout and f"failed: job {jid}; 'reshape log {jid}' shows a job's output" in hist.stdout
    ok = d.submit(name="fine", command=["python", "-c", "pass"], nprocs=1, resizable=False)
    wait_for(lambda: d.job(ok)["state"] == "done", 30)
    status = cli("status", "--all", "--endpoint", d.endpoint)
    assert "ended:" in status.stdout and f"'reshape log {jid}'" in status.stdout, status
    rows = [ln.split()[:3] for ln in status.stdout.splitlines() if ln[:1].isdigit()]
    assert [str(ok), "fine", "done"] in rows and [str(jid), "bad", "failed"] in rows
    log = cli("log", str(jid), "--endpoint", d.endpoint)
    assert "RESHAPE_MAX_PROCS='abc'" in log.stdout


def test_a_log_with_binary_output_is_shown_with_its_nul_bytes_replaced(daemon):
    """A job that writes NUL bytes (an MPI's diagnostics can) still has a log the protocol carries."""
    d = daemon(1)
    jid = d.submit(name="nul", command=["python", "-c", "import sys; sys.stdout.write('a\\0b\\xff\\n')"],
                   nprocs=1, resizable=False)
    wait_for(lambda: d.job(jid)["state"] == "done", 30)
    log = cli("log", str(jid), "--endpoint", d.endpoint)
    assert log.returncode == 0 and "a\ufffdb\u00ff" in log.stdout, log


def test_a_command_waits_for_a_daemon_that_is_starting(daemon, tmp_path):
    import threading

    from reshape.joblink.client import Connection

    endpoint = f"ipc://{tmp_path}/d.sock"
    got = {}
    conn = Connection(endpoint, timeout=10.0, fail_fast=3.0)
    asker = threading.Thread(target=lambda: got.update(reply=conn.request("ping").body))
    asker.start()
    time.sleep(0.5)  # refused meanwhile: no socket yet
    daemon(2, endpoint=endpoint)
    asker.join(15)
    conn.close()
    assert got.get("reply", {}).get("version"), got


def test_stop_takes_the_pid_file_and_socket_away_and_log_reads_the_file_without_a_daemon(daemon, tmp_path):
    d = daemon(2, endpoint=f"ipc://{tmp_path}/d.sock")
    jid = d.submit(name="talk", command=["python", "-c", "print('hello from the job')"], nprocs=1, resizable=False)
    wait_for(lambda: d.job(jid)["state"] == "done", 30)
    assert (tmp_path / "daemon.pid").exists() and (tmp_path / "d.sock").exists()
    res = cli("stop", "--endpoint", d.endpoint)
    assert res.returncode == 0 and res.stdout.strip() == "daemon stopping", res
    d.proc.wait(10)
    assert not (tmp_path / "daemon.pid").exists() and not (tmp_path / "d.sock").exists()
    res = cli("log", str(jid), "--endpoint", d.endpoint, "--state-dir", str(tmp_path))
    assert res.returncode == 0 and res.stdout.strip() == "hello from the job", res
    assert res.stderr.strip() == (f"reshape: no scheduler daemon listens at {d.endpoint}; job {jid}'s log, from "
                                  f"{tmp_path}/logs/job-{jid}.log:"), res.stderr
    res = cli("log", str(jid + 1), "--endpoint", d.endpoint, "--state-dir", str(tmp_path))  # no such log
    assert res.returncode == 1 and res.stderr.startswith("reshape: no scheduler daemon listens"), res


def test_the_status_footer_names_the_failed_job_that_ended_last(daemon, tmp_path):
    """Job 1 fails after job 2 (it waits for a file): the footer's 'reshape log' names job 1."""
    d = daemon(2)
    go = tmp_path / "go"
    wait_then_fail = f"import os, sys, time\nwhile not os.path.exists({str(go)!r}):\n    time.sleep(0.05)\nsys.exit(3)"
    late = d.submit(name="late", nprocs=1, resizable=False, command=["python", "-c", wait_then_fail])
    early = d.submit(name="early", nprocs=1, resizable=False, command=["python", "-c", "import sys; sys.exit(4)"])
    wait_for(lambda: d.job(early)["state"] == "failed", 30)
    go.touch()
    wait_for(lambda: d.job(late)["state"] == "failed", 30)
    status = cli("status", "--endpoint", d.endpoint)
    assert f"failed: jobs {late}, {early}; 'reshape log {late}' shows a job's output" in status.stdout, status.stdout
    hist = cli("history", "--endpoint", d.endpoint)
    assert f"'reshape log {late}'" in hist.stdout, hist.stdout


def test_wait_prints_how_each_job_ended_and_fails_unless_every_one_is_done(daemon):
    d = daemon(2)
    ok = d.submit(name="ok", command=["python", "-c", "pass"], nprocs=1, resizable=False)
    bad = d.submit(name="bad", command=["python", "-c", "import sys; sys.exit(3)"], nprocs=1, resizable=False)
    res = cli("wait", str(ok), "--endpoint", d.endpoint, timeout=60)
    assert res.returncode == 0 and res.stdout == f"job {ok} ok: done, exit code 0\n", res
    res = cli("wait", str(ok), str(bad), "--endpoint", d.endpoint, timeout=60)
    assert res.returncode == 1 and f"job {bad} bad: failed, exit code 3: exit code 3" in res.stdout, res
    res = cli("wait", "99", "--endpoint", d.endpoint)
    assert res.returncode == 1 and res.stderr.strip() == "reshape: no job 99", res
    held = d.submit(name="held", command=["true"], nprocs=1, arrival_delay=600)
    res = cli("wait", str(held), "--timeout", "0.5", "--endpoint", d.endpoint)
    assert res.returncode == 1 and res.stderr.strip() == f"reshape: job {held} still not ended after 0.5 s", res
