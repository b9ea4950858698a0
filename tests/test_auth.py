"""Access to the daemon: key files, the loopback rule, and CURVE against the real daemon (loopback with
``--keys``): clients without the key or with an unknown key are refused and logged while an
authorized client and the daemon's own jobs keep working.

The same on the namespace network (where keys are mandatory): ``tests/test_netns.py``.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys

import pytest
import zmq

from reshape.joblink import auth
from reshape.joblink.client import Connection, SchedulerUnavailable
from tests.helpers import ROOT, wait_for
from tests.test_nodemon import Cluster

pytestmark = pytest.mark.procs


@pytest.mark.parametrize("endpoint, loop", [
    ("tcp://127.0.0.1:5555", True), ("tcp://localhost:1", True), ("tcp://[::1]:5", True),
    ("ipc:///tmp/x", True), ("tcp://0.0.0.0:5555", False), ("tcp://*:5555", False),
    ("tcp://10.77.0.1:5555", False), ("tcp://head:5555", False),
])
def test_loopback_rule(endpoint, loop, monkeypatch):
    monkeypatch.delenv(auth.ENV_KEYS, raising=False)
    monkeypatch.setenv("HOME", "/nonexistent")
    monkeypatch.delenv("RESHAPE_STATE_DIR", raising=False)
    assert auth.is_loopback(endpoint) is loop
    assert auth.keys_dir_for(endpoint) == (None if loop else "/nonexistent/.reshape/keys")
    assert auth.keys_dir_for(endpoint, "/k") == "/k"
    monkeypatch.setenv(auth.ENV_KEYS, "/env")
    assert auth.keys_dir_for(endpoint) == "/env"


def test_keys_command_makes_private_secrets_and_authorizes_clients(tmp_path):
    d = tmp_path / "keys"
    out = subprocess.run([sys.executable, "-m", "scheduler.cli", "keys", "--dir", str(d), "--client", "nodemon"],
                         capture_output=True, text=True, cwd=ROOT, timeout=30)
    assert out.returncode == 0, out.stderr
    for name in ("server", "client", "nodemon"):
        assert stat.S_IMODE(os.stat(d / f"{name}.key_secret").st_mode) == 0o600
    assert sorted(os.listdir(d / "authorized")) == ["client.key", "nodemon.key"]
    keys = auth.load_server_keys(str(d))
    assert len(keys.authorized) == 2
    first = (d / "server.key_secret").read_bytes()
    again = subprocess.run([sys.executable, "-m", "scheduler.cli", "keys", "--dir", str(d)],
                           capture_output=True, text=True, cwd=ROOT, timeout=30)
    assert again.returncode == 0 and (d / "server.key_secret").read_bytes() == first  # kept
    bad = subprocess.run([sys.executable, "-m", "scheduler.cli", "keys", "--dir", str(d), "--client", "../x"],
                         capture_output=True, text=True, cwd=ROOT, timeout=30)
    assert bad.returncode == 2 and "bad client key name" in bad.stderr


def test_daemon_beyond_loopback_without_keys_refuses_to_start(tmp_path):
    env = os.environ | {"HOME": str(tmp_path)}
    env.pop(auth.ENV_KEYS, None)
    env.pop("RESHAPE_STATE_DIR", None)
    out = subprocess.run([sys.executable, "-m", "scheduler.cli", "daemon", "--endpoint", "tcp://0.0.0.0:5999",
                          "--state-dir", str(tmp_path / "s"), "--slots", "1"],
                         capture_output=True, text=True, cwd=ROOT, timeout=30, env=env)
    assert out.returncode == 2
    assert "reshape keys" in out.stderr and str(tmp_path / ".reshape" / "keys") in out.stderr
    assert not os.path.exists(tmp_path / "s" / "journal.sqlite")  # nothing was created


def test_unauthenticated_and_unknown_clients_are_refused_while_others_work(tmp_path):
    keys = tmp_path / "keys"
    auth.make_keys(str(keys), ("client", "nodemon"))
    auth.make_keys(str(tmp_path / "stranger"))
    c = Cluster(tmp_path, slots=2, keys=str(keys))
    try:
        assert c.req("status")["daemon"]["auth"] == "curve"
        plain = Connection(c.endpoint, 1.0)  # loopback without --keys: no CURVE
        assert plain.keys is None
        with pytest.raises(SchedulerUnavailable):
            plain.request("status")
        stranger = auth.ClientKeys(*zmq.auth.load_certificate(str(tmp_path / "stranger" / "client.key_secret")),
                                   server=auth.load_client_keys(str(keys)).server, directory="")
        with pytest.raises(SchedulerUnavailable, match="may not accept it"):
            Connection(c.endpoint, 1.0, keys=stranger).request("status")
        # the authorized client was never disturbed, and the refusals are counted and logged
        st = c.req("status")
        assert st["daemon"]["refused"] >= 2
        log = c.log("daemon.err")
        assert "refused client 127.0.0.1: key" in log and "is not authorized" in log
        assert "handshake failed" in log
        # a job started by the daemon gets the keys and talks to it (its iterations are reported)
        emu = {"name": "emu", "launch": "single", "nprocs": 1, "max_procs": 1,
               "command": ["python", "-m", "apps.emujob", "--work", "0.2", "--iterations", "3"]}
        a = c.req("submit", {"job": emu})["job_id"]
        wait_for(lambda: c.job(a)["state"] == "done", 30)
        j = c.job(a)
        assert j["iterations"] >= 2 and j["reported"] == "done", j
        # a node monitor with the second key pair
        env = os.environ | {auth.ENV_CLIENT_KEY: str(keys / "nodemon.key_secret")}
        c._spawn("nodemon.log", "nodemon", "--daemon", c.endpoint, "--node", "localhost", "--keys", str(keys),
                 env=env)
        wait_for(lambda: c.node()["state"] == "up", 15)
        cli = subprocess.run([sys.executable, "-m", "scheduler.cli", "status", "--endpoint", c.endpoint,
                              "--keys", str(keys)], capture_output=True, text=True, cwd=ROOT, timeout=30)
        assert cli.returncode == 0 and "localhost  up" in cli.stdout
    finally:
        c.close()



def test_compose_cluster_runs_monitors_with_keys_from_the_shared_volume():
    yaml = pytest.importorskip("yaml", reason="needs pyyaml (test extra) to read docker-compose.yml")
    from scheduler.cli import build_parser

    with open(os.path.join(ROOT, "docker-compose.yml")) as f:
        compose = yaml.safe_load(f)
    head = compose["services"]["head"]
    args = build_parser().parse_args(["daemon", "--endpoint", head["environment"]["RESHAPE_ENDPOINT"],
                                      "--state-dir", "/tmp/x", *head["command"][1:]])
    assert args.require_monitors and args.node_timeout > 0
    assert not auth.is_loopback(head["environment"]["RESHAPE_ENDPOINT"])  # so keys are required
    for name, svc in compose["services"].items():
        if name != "head":
            assert svc["environment"]["RESHAPE_DAEMON"] == "tcp://head:5555"
    with open(os.path.join(ROOT, "docker", "Dockerfile")) as f:
        assert "RESHAPE_KEYS=/cluster/keys" in f.read()  # every node, and `docker compose exec` clients
    with open(os.path.join(ROOT, "docker", "entrypoint.sh")) as f:
        script = f.read()
    assert 'reshape keys --dir "$curve"' in script
    assert 'exec reshape nodemon --daemon "${RESHAPE_DAEMON:-tcp://head:5555}" --node "$(hostname)"' in script
    nodemon = build_parser().parse_args(["nodemon", "--daemon", "tcp://head:5555", "--node", "node1"])
    assert nodemon.func is not None
