"""Who may do what with keys and accounts, and whom a node monitor obeys, against live daemons and monitors.

* A node's key (``node-HOST``) registers and reports for its node, and for nothing else.
* A key has its account's rights: a root daemon runs a ``user-*`` key's job as that account and
  refuses a key with no account; a key is an admin only when its account is root or the daemon's.
* A daemon not running as root takes jobs only from its own user unless ``--accept-users`` says.
* A node monitor without CURVE sends nothing to, and obeys nothing from, a socket that is not root's
  or its daemon user's (uid 65534 bound the daemon's port while it was away); a start order that names
  no uid is refused.

Needs root (clients and impostors run as other users); skips otherwise.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import pytest
import zmq

from reshape.joblink import auth
from reshape.joblink import protocol as P
from reshape.joblink.client import Connection, DaemonError
from tests.helpers import ROOT, DaemonProc, free_port, wait_for
from tests.test_access import NOBODY, _others_can_run, as_user, forked

pytestmark = [pytest.mark.procs,
              pytest.mark.skipif(os.geteuid() != 0, reason="runs clients and impostors as other users: need root")]

DAEMON_UID = 1  # the system's 'daemon' account: a third user


def keyed(endpoint: str, keys: str, name: str, type_: str, body: dict | None = None) -> dict:
    """One request with the key pair ``name``: its reply body, or {"error": code, "message": ...}."""
    public, secret = zmq.auth.load_certificate(os.path.join(keys, f"{name}.key_secret"))
    creds = auth.ClientKeys(public, secret, zmq.auth.load_certificate(os.path.join(keys, "server.key"))[0], keys)
    c = Connection(endpoint, 5.0, keys=creds)
    try:
        return c.request(type_, body or {}).body
    except DaemonError as e:
        return {"error": e.code, "message": e.message}
    finally:
        c.close()


@pytest.fixture
def keys(tmp_path):
    """Keys of root (client), a node, two users and an operator; the accounts table as an admin writes it."""
    d = str(tmp_path / "keys")
    auth.make_keys(d, ("client", "node-localhost", "user-nobody", "user-ghost", "ops"))
    with open(os.path.join(d, "accounts.toml"), "w") as f:  # no entry: user-ghost, node-localhost
        f.write('client = "root"\nuser-nobody = "nobody"\nops = "nobody"  # an operator without root\n')
    os.chown(os.path.join(d, "user-nobody.key_secret"), NOBODY, NOBODY)  # the admin hands it to its user
    return d


def test_reshape_keys_gives_each_key_its_account(tmp_path):
    """user-NAME: NAME where that account exists; node-*: none; any other: whoever made it, or --account."""
    d = str(tmp_path / "keys")
    auth.make_keys(d, ("client", "node-n1", "user-nobody", "user-nosuchuser", "ops"), accounts={"ops": "nobody"})
    assert auth.load_accounts(d) == {"client": "root", "user-nobody": "nobody", "ops": "nobody"}
    os.chmod(os.path.join(d, "accounts.toml"), 0o666)
    with pytest.raises(auth.AuthError, match="may be changed by others"):
        auth.load_accounts(d)


def test_node_keys_speak_for_their_node_only_and_keys_have_their_accounts_rights(tmp_path, keys, monkeypatch):
    monkeypatch.setenv(auth.ENV_KEYS, keys)  # this test's own requests: the admin key (root's)
    state = tmp_path / "state"
    state.mkdir()
    d = DaemonProc(str(state), 2, extra=("--keys", keys))
    mon = None
    try:
        # a node's key: its node, nothing else (no job, no other node, no stop)
        me = keyed(d.endpoint, keys, "node-localhost", "node_register", {"node": "localhost", "incarnation": "a"})
        assert me.get("node") == "localhost", me
        for t, body in (("node_register", {"node": "elsewhere", "incarnation": "b"}),
                        ("submit", {"job": {"name": "x", "command": ["true"], "nprocs": 1}}), ("stop", {})):
            rep = keyed(d.endpoint, keys, "node-localhost", t, body)
            assert rep.get("error") == "forbidden", (t, rep)
        # a monitor picks its node's key by itself (KEYS/node-localhost.key_secret): the node is up with it
        from scheduler.node.monitor import monitor_keys

        node_key = zmq.auth.load_certificate(os.path.join(keys, "node-localhost.key"))[0]
        assert monitor_keys(d.endpoint, keys, "localhost").public == node_key
        with open(state / "mon.log", "ab") as log:
            mon = subprocess.Popen([sys.executable, "-m", "scheduler.cli", "nodemon", "--daemon", d.endpoint,
                                    "--node", "localhost", "--keys", keys, "--spool", str(state / "spool")],
                                   cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        wait_for(lambda: any(n["host"] == "localhost" and n["state"] == "up" and n["monitor"]
                             for n in d.req("status")["nodes"]), 20)
        # a key with no account runs nothing; a user's key runs its job as that user; neither is an admin
        ghost = keyed(d.endpoint, keys, "user-ghost", "submit", {"job": {"name": "g", "command": ["true"],
                                                                          "nprocs": 1}})
        assert ghost.get("error") == "forbidden" and "no local account" in ghost["message"], ghost
        cmd = ["sh", "-c", "echo uid $(id -u)"]
        job = keyed(d.endpoint, keys, "user-nobody", "submit",
                    {"job": {"name": "n", "command": cmd, "nprocs": 1, "launch": "single", "resizable": False}})
        jid = job["job_id"]
        wait_for(lambda: d.job(jid)["state"] not in ("queued", "waiting", "running"), 30)
        assert d.job(jid)["state"] == "done" and d.job(jid)["owner"] == "key:user-nobody", d.job(jid)
        assert f"uid {NOBODY}" in d.req("log", {"job_id": jid})["text"]
        for name in ("user-nobody", "ops"):  # 'ops' is no user-* key, but its account is nobody: no admin
            rep = keyed(d.endpoint, keys, name, "stop", {})
            assert rep.get("error") == "forbidden", (name, rep)
        assert d.proc.poll() is None
        assert "stopping" not in keyed(d.endpoint, keys, "client", "ping")  # the admin key (root's) still works
    finally:
        if mon is not None and mon.poll() is None:
            mon.kill()
            mon.wait()
        d.cleanup()


def _daemon_as(uid: int) -> tuple[str, ...]:
    """A command prefix that runs the daemon as ``uid``."""
    return (sys.executable, "-c", f"import os, sys; os.setgid({uid}); os.setgroups([]); os.setuid({uid}); "
            "os.execv(sys.argv[1], sys.argv[1:])")


@pytest.mark.skipif(not _others_can_run(sys.executable), reason="this Python cannot be run by other users here "
                    "(an interpreter under a private home directory)")
def test_a_daemon_not_running_as_root_runs_only_its_own_users_jobs(tmp_path):
    """A daemon run by uid 65534: its own user's jobs are taken; another user's (uid 1) are refused,
    unless --accept-users names it, and that user is still no admin; root's are taken."""
    base = tempfile.mkdtemp(prefix="reshape-nonroot-", dir="/tmp")
    os.chmod(base, 0o755)
    made = []
    try:
        def start(*extra: str) -> DaemonProc:
            state = tempfile.mkdtemp(dir=base)
            os.chown(state, NOBODY, NOBODY)
            d = DaemonProc(state, 2, prefix=_daemon_as(NOBODY), extra=extra)
            made.append(d)
            return d

        job = {"name": "j", "command": ["sleep", "30"], "nprocs": 1, "arrival_delay": 600}
        d = start()
        (own,) = as_user(NOBODY, d.endpoint, [("submit", {"job": job})])
        (other,) = as_user(DAEMON_UID, d.endpoint, [("submit", {"job": job})])
        assert own["type"] == "ok", own
        assert other["type"] == "error" and other["body"]["code"] == "forbidden" and "--accept-users" in \
            other["body"]["message"], other
        assert d.submit(**job)  # root
        d2 = start("--accept-users", "daemon")
        sub, stop = as_user(DAEMON_UID, d2.endpoint, [("submit", {"job": job}), ("stop", {})])
        assert sub["type"] == "ok" and stop["type"] == "error" and stop["body"]["code"] == "forbidden", (sub, stop)
        assert d2.proc.poll() is None
    finally:
        for d in made:
            d.cleanup()
        shutil.rmtree(base, ignore_errors=True)


# ---------------------------------------------------------------------- a monitor and an impostor
def _impostor(port: int, seconds: float, proof: str) -> dict:
    """As another user: a ZeroMQ ROUTER on the daemon's port, answering as a daemon would, with a start
    order that names no uid (run as whoever the monitor is). What it received."""
    ctx = zmq.Context()
    s = ctx.socket(zmq.ROUTER)
    s.linger = 0
    s.bind(f"tcp://127.0.0.1:{port}")
    got = []
    order = {"op": "start", "job_id": 1, "attempt": 0, "argv": ["sh", "-c", f"id -u > {proof}"],
             "env": {"RESHAPE_JOB_TAG": "impostor-1"}, "cwd": "/", "uid": None}
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if not s.poll(100):
            continue
        ident, frame = s.recv_multipart()
        msg = P.decode(frame)
        got.append(msg.type)
        rep = P.NodeWelcome(node="localhost", heartbeat=0.2, timeout=5.0, tag="impostor-") \
            if msg.type == "node_register" else P.Orders(orders=(order,)) if msg.type == "heartbeat" else P.Ok()
        s.send_multipart([ident, P.encode(P.answer(msg, rep))])
    s.close()
    ctx.term()
    return {"got": got}


def test_a_monitor_obeys_no_socket_but_its_daemons(tmp_path):
    """While no daemon runs, uid 65534 binds its port and answers as a daemon, with a start order
    naming no uid: the root monitor sends it nothing, runs nothing, and says why in its log."""
    port = free_port()
    proof = tempfile.mktemp(prefix="reshape-impostor-", dir="/tmp")
    result = forked(NOBODY, _impostor, port, 8.0, proof)
    log = tmp_path / "mon.log"
    mon = None
    try:
        wait_for(lambda: subprocess.run(["ss", "-Hltn", f"sport = :{port}"], capture_output=True,
                                        text=True).stdout.strip(), 5)
        with open(log, "ab") as f:
            mon = subprocess.Popen([sys.executable, "-m", "scheduler.cli", "nodemon", "--daemon",
                                    f"tcp://127.0.0.1:{port}", "--node", "localhost", "--interval", "0.2",
                                    "--spool", str(tmp_path / "spool")], cwd=ROOT, stdout=f,
                                   stderr=subprocess.STDOUT, start_new_session=True)
        wait_for(lambda: log.read_text().count(f"the socket there is uid {NOBODY}'s") >= 2 or os.path.exists(proof),
                 20)
    finally:
        if mon is not None:
            mon.kill()
            mon.wait()
        got = result()
        ran = os.path.exists(proof)
        if ran:
            os.unlink(proof)
    assert got == {"got": []}, got
    assert not ran, "the impostor's order ran"


def test_a_start_order_that_names_no_uid_is_refused(tmp_path):
    from scheduler.node.runner import NodeRunner

    proof = tmp_path / "proof"
    said: list[str] = []
    runner = NodeRunner(str(tmp_path / "spool"), threading.Event(), said.append)
    runner.order({"op": "start", "job_id": 7, "attempt": 0, "argv": ["sh", "-c", f"id -u > {proof}"],
                  "env": {"RESHAPE_JOB_TAG": "t-7"}, "cwd": "/"})
    (run,) = runner.runs.values()
    assert run.code == 127 and run.ended.is_set() and not proof.exists()
    assert "names no uid to run as" in (tmp_path / "spool" / "job-7~0.log").read_text()
