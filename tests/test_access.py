"""Who may do what: a daemon on a local ``ipc://`` socket knows each peer's uid from the kernel.

A client running as another user (uid 65534, forked from the test after
``zmq`` is loaded, then ``setuid``) submits, reads status, and cancels its own
job; it may not cancel root's job, stop the daemon or speak for a node. Root
(an admin) may cancel anyone's job. Needs root to change uid; skips otherwise.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import tempfile

import pytest
import zmq

from reshape.joblink import protocol as P
from tests.helpers import DaemonProc

pytestmark = [pytest.mark.procs,  # daemons started here, a client forked
              pytest.mark.skipif(os.geteuid() != 0, reason="access tests run a client as another user: need root")]

NOBODY = 65534


def as_user(uid: int, endpoint: str, requests: list[tuple[str, dict]]) -> list[dict]:
    """Send ``requests`` as ``uid`` from a forked child; the reply bodies (or errors) in order."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: drop to uid, fresh context, one DEALER
        try:
            os.close(r)
            os.setgid(uid)
            os.setuid(uid)
            ctx = zmq.Context()
            s = ctx.socket(zmq.DEALER)
            s.setsockopt(zmq.LINGER, 0)
            s.connect(endpoint)
            out = []
            for i, (t, body) in enumerate(requests, 1):
                s.send(P.encode(P.Message(t, i, body.pop("_job_id", None), body)))
                out.append(json.loads(s.recv()) if s.poll(5000) else {"type": "timeout"})
            os.write(w, json.dumps(out).encode())
        finally:
            os._exit(0)
    os.close(w)
    data = b""
    while chunk := os.read(r, 65536):
        data += chunk
    os.close(r)
    os.waitpid(pid, 0)
    return json.loads(data)


@pytest.fixture
def local_daemon(tmp_path):
    sockdir = tempfile.mkdtemp(prefix="reshape-access-", dir="/tmp")
    os.chmod(sockdir, 0o755)
    d = DaemonProc(str(tmp_path), 2, endpoint=f"ipc://{sockdir}/daemon.sock")
    try:
        yield d
    finally:
        d.cleanup()
        shutil.rmtree(sockdir, ignore_errors=True)


def job(name: str) -> dict:
    return {"name": name, "command": ["true"], "nprocs": 1, "arrival_delay": 600}


def test_owners_and_admins_on_a_local_socket(local_daemon):
    d = local_daemon
    mine = d.submit(**job("root-job"))
    replies = as_user(NOBODY, d.endpoint, [
        ("submit", {"job": job("nobody-job")}),
        ("status", {}),
        ("cancel", {"job_id": mine}),
        ("stop", {"kill_jobs": True}),
        ("node_register", {"node": "localhost", "incarnation": "evil"}),
        ("log", {"job_id": mine}),
    ])
    sub, st, cancel_root, stop, node, log = replies
    assert sub["type"] == "ok", sub
    theirs = sub["body"]["job_id"]
    assert st["type"] == "ok" and st["body"]["waiting_total"] == 2
    for rep, what in ((cancel_root, "belongs to uid:0"), (stop, "may not stop"), (node, "may not speak for node"),
                      (log, "belongs to uid:0")):
        assert rep["type"] == "error" and rep["body"]["code"] == "forbidden" and what in rep["body"]["message"], rep
    owners = {j["job_id"]: j["owner"] for j in d.req("history")["jobs"]}
    assert owners == {mine: "uid:0", theirs: f"uid:{NOBODY}"}
    # its own job it may cancel; root (an admin) may cancel anyone's
    (own,) = as_user(NOBODY, d.endpoint, [("cancel", {"job_id": theirs})])
    assert own["type"] == "ok", own
    (again,) = as_user(NOBODY, d.endpoint, [("submit", {"job": job("second")})])
    d.req("cancel", {"job_id": again["body"]["job_id"]})
    states = {j["job_id"]: j["state"] for j in d.req("history")["jobs"]}
    assert states == {mine: "waiting", theirs: "cancelled", again["body"]["job_id"]: "cancelled"}
    assert d.proc.poll() is None and d.req("ping")["version"] == P.VERSION


def test_the_default_endpoint_is_a_local_socket_and_one_daemon_holds_it(tmp_path):
    """Without --endpoint the daemon listens on ipc://$RESHAPE_STATE_DIR/daemon.sock (local users only,
    identified); the CLI finds it by the same default; a second daemon refuses to take it over."""
    import subprocess
    import sys
    import time

    from tests.helpers import ROOT, wait_for

    env = {**os.environ, "RESHAPE_STATE_DIR": str(tmp_path)}
    env.pop("RESHAPE_DAEMON", None)
    cli = [sys.executable, "-m", "scheduler.cli"]
    d = subprocess.Popen([*cli, "daemon", "--slots", "2"], env=env, cwd=ROOT, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        wait_for(lambda: subprocess.run([*cli, "status"], env=env, cwd=ROOT, capture_output=True).returncode == 0,
                 15, every=0.2)
        second = subprocess.run([*cli, "daemon", "--slots", "2"], env=env, cwd=ROOT, capture_output=True,
                                text=True, timeout=30)
        assert second.returncode == 1 and "a daemon already listens on ipc://" in second.stderr, second
        assert oct(os.stat(tmp_path / "daemon.sock").st_mode & 0o777) == "0o666"
        subprocess.run([*cli, "stop"], env=env, cwd=ROOT, check=True, capture_output=True, timeout=30)
        out = d.communicate(timeout=15)[0]
        assert f"reshape daemon on ipc://{tmp_path}/daemon.sock" in out and "identified by uid" in out, out
    finally:
        if d.poll() is None:
            d.kill()
            time.sleep(0.2)


def _others_can_run(path: str) -> bool:
    """Can another user execute ``path`` (every directory on the way searchable by others)?"""
    path = os.path.realpath(path)
    parts = path.split(os.sep)
    for i in range(2, len(parts)):
        if not os.stat(os.sep.join(parts[:i])).st_mode & 0o001:
            return False
    return bool(os.stat(path).st_mode & 0o001)


def test_a_root_daemon_runs_each_job_as_its_owner(local_daemon):
    """A job submitted by uid 65534 runs as 65534 (its processes, and what it prints); root's as root.
    Its exit status still reaches the daemon (the wrapper writes it as the job's user)."""
    from reshape.joblink.launch import mpiexec_path
    from tests.helpers import wait_for

    if not _others_can_run(mpiexec_path()):
        pytest.skip("mpiexec is not reachable by other users here (a private virtual environment)")
    d = local_daemon
    cmd = ["/bin/sh", "-c", "echo uid $(id -u) home $HOME"]
    (sub,) = as_user(NOBODY, d.endpoint, [("submit", {"job": {"name": "as-nobody", "command": cmd,
                                                               "nprocs": 1, "resizable": False}})])
    theirs = sub["body"]["job_id"]
    mine = d.submit(name="as-root", command=cmd, nprocs=1, resizable=False)
    wait_for(lambda: all(d.job(j)["state"] not in ("queued", "running") for j in (theirs, mine)), 60, every=0.3)
    logs = {j: d.req("log", {"job_id": j})["text"] for j in (theirs, mine)}
    assert d.job(theirs)["state"] == "done" and f"uid {NOBODY}" in logs[theirs], (d.job(theirs), logs[theirs])
    assert d.job(mine)["state"] == "done" and "uid 0 home" in logs[mine], logs[mine]
    assert f"home {pwd.getpwuid(NOBODY).pw_dir}" in logs[theirs]
