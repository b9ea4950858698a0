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
import sys
import tempfile
import time

import pytest
import zmq

from reshape.joblink import protocol as P
from tests.helpers import DaemonProc, wait_for

pytestmark = [pytest.mark.procs,  # daemons started here, a client forked
              pytest.mark.skipif(os.geteuid() != 0, reason="access tests run a client as another user: need root")]

NOBODY = 65534


def as_user(uid: int, endpoint: str, requests: list[tuple[str, dict]]) -> list[dict]:
    """Send ``requests`` as ``uid`` from a forked child (:func:`in_child`); the reply bodies (or errors) in order."""
    return in_child(uid, _send, endpoint, requests)


def _send(endpoint: str, requests: list[tuple[str, dict]]) -> list[dict]:
    """A fresh context, one DEALER: each request's reply, in order."""
    s = zmq.Context().socket(zmq.DEALER)
    s.setsockopt(zmq.LINGER, 0)
    s.connect(endpoint)
    out = []
    for i, (t, body) in enumerate(requests, 1):
        s.send(P.encode(P.Message(t, i, body.pop("_job_id", None), body)))
        out.append(json.loads(s.recv()) if s.poll(5000) else {"type": "timeout"})
    return out


def in_child(uid: int, fn, *args):
    """``fn(*args)`` as ``uid`` in a forked child; its JSON-able result (or ``{"raised": ...}``)."""
    return forked(uid, fn, *args)()


def forked(uid: int, fn, *args):
    """``fn(*args)`` as ``uid`` in a child forked now; a function that waits for its JSON-able result."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(r)
            os.setgid(uid)
            os.setuid(uid)
            try:
                out = fn(*args)
            except Exception as e:
                out = {"raised": f"{type(e).__name__}: {e}"}
            os.write(w, json.dumps(out).encode())
        finally:
            os._exit(0)
    os.close(w)

    def result():
        with os.fdopen(r, "rb") as f:
            data = f.read()
        os.waitpid(pid, 0)
        return json.loads(data)

    return result


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


# ---------------------------------------------------------------------- a shared head node
def flood(uid: int, path, n: int) -> tuple[int, dict, int]:
    """A child as ``uid`` opening ``n`` raw connections to ``path`` (a Unix socket's path, or a TCP
    ``(host, port)``; no ZMTP handshake) and holding them: (its pid, {"opened", "refused"}, the
    descriptor whose closing releases it)."""
    import socket

    r, w = os.pipe()
    hold_r, hold_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(r)
            os.close(hold_w)
            os.setgid(uid)
            os.setuid(uid)
            socks, refused = [], 0
            for _ in range(n):
                s = socket.socket(socket.AF_UNIX if isinstance(path, str) else socket.AF_INET, socket.SOCK_STREAM)
                try:
                    s.connect(path)
                    socks.append(s)
                except OSError:
                    refused += 1
                    s.close()
            os.write(w, json.dumps({"opened": len(socks), "refused": refused}).encode())
            os.close(w)
            os.read(hold_r, 1)  # until the test lets go
        finally:
            os._exit(0)
    os.close(w)
    os.close(hold_r)
    got = json.loads(os.read(r, 4096))
    os.close(r)
    return pid, got, hold_w


# runs the daemon's command with an open-file limit of 1,024, soft and hard (what prlimit(1) does)
LIMIT_FILES_1024 = (sys.executable, "-c", "import os, resource, sys; resource.setrlimit(resource.RLIMIT_NOFILE, "
                    "(1024, 1024)); os.execv(sys.argv[1], sys.argv[1:])")


@pytest.mark.parametrize("transport", ["ipc", "tcp"])
def test_a_connection_flood_by_another_user_never_stops_the_daemon(tmp_path, transport):
    """uid 65534 opens 3,000 raw connections (no handshake) to a daemon whose file limit is 1,024
    (libzmq's ipc listener aborts the process when accept() fails with EMFILE): connections over
    the per-user limit are shut as they open, an ipc socket closes to other users while files run
    short, and root is served all along; the flooder itself is served again once it lets go."""
    from tests.helpers import free_port

    sockdir = tempfile.mkdtemp(prefix="reshape-flood-", dir="/tmp")
    os.chmod(sockdir, 0o711)
    port = free_port()
    path = f"{sockdir}/daemon.sock" if transport == "ipc" else ("127.0.0.1", port)
    endpoint = f"ipc://{path}" if transport == "ipc" else f"tcp://127.0.0.1:{port}"
    d = DaemonProc(str(tmp_path), 2, endpoint=endpoint, prefix=LIMIT_FILES_1024)
    pid = hold = None
    try:
        t0 = time.monotonic()
        pid, got, hold = flood(NOBODY, path, 3000)
        took = time.monotonic() - t0
        for _ in range(5):  # fresh connections of root's while the flood holds its own
            assert d.req("ping", timeout=15)["version"] == P.VERSION
        conns = d.req("status", timeout=15)["daemon"]["connections"]
        print(f"\nflood ({transport}): {got['opened']} connections accepted by the kernel in {took:.1f} s, "
              f"{got['refused']} refused; daemon: {conns}")
        assert conns["shut"] > 0 and conns["open"] <= conns["per_user"] + 8, conns
        os.close(hold)
        hold = None
        os.waitpid(pid, 0)
        pid = None
        assert d.proc.poll() is None, d.stderr()
        wait_for(lambda: as_user(NOBODY, d.endpoint, [("ping", {})])[0]["type"] == "ok", 30, every=0.5)
        assert "connections open >= the limit 256 per user" in d.stderr()
    finally:
        if hold is not None:
            os.close(hold)
        if pid is not None:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
        d.cleanup()
        shutil.rmtree(sockdir, ignore_errors=True)


def test_loopback_tcp_peers_are_identified_by_uid(daemon):
    """On tcp://127.0.0.1 without CURVE the daemon knows each sender's uid (the kernel's socket table):
    uid 65534's job is its own (and runs as 65534 under a root daemon), and it may not speak for
    root's job, for a node, or stop the daemon."""
    d = daemon(2)
    mine = d.submit(**job("root-job"))
    sub, fin, node, stop, log, cancel = as_user(NOBODY, d.endpoint, [
        ("submit", {"job": job("nobody-job")}),
        ("finished", {"status": "done", "_job_id": mine}),
        ("node_register", {"node": "localhost", "incarnation": "evil"}),
        ("stop", {"kill_jobs": True}),
        ("log", {"job_id": mine}),
        ("cancel", {"job_id": mine}),
    ])
    assert sub["type"] == "ok", sub
    for rep in (fin, node, stop, log, cancel):
        assert rep["type"] == "error" and rep["body"]["code"] == "forbidden", rep
    owners = {j["job_id"]: j["owner"] for j in d.req("history")["jobs"]}
    assert owners == {mine: "uid:0", sub["body"]["job_id"]: f"uid:{NOBODY}"}
    from scheduler.daemon.supervisor import run_as

    assert run_as(owners[sub["body"]["job_id"]]) == NOBODY
    assert d.proc.poll() is None and d.job(mine)["state"] == "waiting"
    # two users' connections from one address: neither can be told from the other, both may only read
    host, port = d.endpoint[len("tcp://"):].rsplit(":", 1)
    pid, _, hold = flood(NOBODY, (host, int(port)), 1)
    try:
        ping, submit = as_user(0, d.endpoint, [("ping", {}), ("submit", {"job": job("shared-address")})])
    finally:
        os.close(hold)
        os.waitpid(pid, 0)
    assert ping["type"] == "ok" and submit["type"] == "error" and "cannot identify" in submit["body"]["message"], \
        submit


def test_an_unidentified_peer_may_only_read(tmp_path):
    """A sender the daemon cannot identify (TCP without CURVE, not a local peer) runs nothing and
    speaks for no job or node; it may ping and read status and history."""
    from scheduler.core.pool import default_pool
    from scheduler.daemon.loop import Daemon
    from scheduler.daemon.peers import UNIDENTIFIED

    d = Daemon(str(tmp_path), pool=default_pool(2))
    try:
        now = time.time()
        for t, body in (("submit", {"job": job("x")}), ("stop", {}), ("node_register",
                        {"node": "localhost", "incarnation": "i"}), ("cancel", {"job_id": 1})):
            rep, acts = d.handle(P.encode(P.Message(t, 1, None, body)), now, UNIDENTIFIED)
            assert rep.type == "error" and rep.body["code"] == "forbidden" and "cannot identify" in \
                rep.body["message"] and not acts, rep
        for t in ("ping", "status", "history"):
            rep, _ = d.handle(P.encode(P.Message(t, 1, None, {})), now, UNIDENTIFIED)
            assert rep is None or rep.type == "ok", rep  # reads are answered later (None)
        assert d.state.jobs == {}
    finally:
        d.journal.close()


def _try_read(paths: list[str]) -> dict:
    out = {}
    for p in paths:
        try:
            with open(p, "rb") as f:
                f.read(1)
            out[p] = "read"
        except OSError as e:
            out[p] = type(e).__name__
    return out


def test_state_files_are_private(tmp_path):
    """Job logs and the journal are readable by the job's owner and admins only; nobody lists the
    state directory; a job's log is its owner's."""
    base = tempfile.mkdtemp(prefix="reshape-private-", dir="/tmp")
    os.chmod(base, 0o755)  # so the state directory's own modes are what protects it
    state = os.path.join(base, "state")
    os.mkdir(state, 0o700)
    os.mkdir(os.path.join(state, "logs"), 0o755)  # as an earlier version left it, with a log others could read
    old = os.path.join(state, "logs", "job-99.log")
    with open(old, "w") as f:
        f.write("an old job's output\n")
    os.chmod(old, 0o644)
    d = DaemonProc(state, 2, endpoint=f"ipc://{state}/daemon.sock")
    try:
        quick = {"command": ["true"], "nprocs": 1, "resizable": False}
        mine = d.submit(name="root-job", **quick)
        (sub,) = as_user(NOBODY, d.endpoint, [("submit", {"job": {"name": "theirs", **quick}})])
        theirs = sub["body"]["job_id"]
        wait_for(lambda: all(d.job(j)["state"] not in ("queued", "running") for j in (mine, theirs)), 60, every=0.3)
        logs = {j: os.path.join(state, "logs", f"job-{j}.log") for j in (mine, theirs)}
        mode = {p: (os.stat(p).st_mode & 0o777, os.stat(p).st_uid) for p in
                [state, os.path.join(state, "logs"), os.path.join(state, "journal.sqlite"), *logs.values()]}
        assert mode[state] == (0o711, 0) and mode[os.path.join(state, "logs")] == (0o711, 0), mode
        assert mode[os.path.join(state, "journal.sqlite")] == (0o600, 0), mode
        assert mode[logs[mine]] == (0o600, 0) and mode[logs[theirs]] == (0o600, NOBODY), mode
        assert os.stat(old).st_mode & 0o777 == 0o600
        seen = in_child(NOBODY, _try_read, [logs[mine], os.path.join(state, "journal.sqlite"), logs[theirs]])
        assert seen == {logs[mine]: "PermissionError", os.path.join(state, "journal.sqlite"): "PermissionError",
                        logs[theirs]: "read"}, seen
        assert in_child(NOBODY, lambda: sorted(os.listdir(state)))["raised"].startswith("PermissionError")
    finally:
        d.cleanup()
        shutil.rmtree(base, ignore_errors=True)


def test_a_state_directory_someone_else_prepared_is_refused(tmp_path):
    """A state directory made by another user (in a sticky, world-writable directory), one open to
    others' writes, or one holding a link where the daemon writes: refused in one line, nothing
    written through it."""
    import subprocess

    from tests.helpers import ROOT, free_port

    base = tempfile.mkdtemp(prefix="reshape-prepared-", dir="/tmp")
    os.chmod(base, 0o1777)
    victim = tmp_path / "victim"
    victim.write_text("root's\n")
    os.chmod(victim, 0o600)

    def prepare(where: str, target: str) -> None:
        os.mkdir(where, 0o755)
        os.symlink(target, os.path.join(where, "daemon.pid"))

    def start(state: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "scheduler.cli", "daemon", "--state-dir", state, "--slots", "1",
                               "--endpoint", f"tcp://127.0.0.1:{free_port()}"], cwd=ROOT, capture_output=True,
                              text=True, timeout=30)

    try:
        theirs = os.path.join(base, "theirs")
        assert in_child(NOBODY, prepare, theirs, str(victim)) is None
        open_dir = os.path.join(base, "open")
        os.mkdir(open_dir)
        os.chmod(open_dir, 0o777)
        linked = os.path.join(base, "linked")
        prepare(linked, str(victim))
        for state, why in ((theirs, f"is owned by uid {NOBODY}, not by the daemon's user"),
                           (open_dir, "is writable by group or others (mode 0777)"),
                           (linked, "daemon.pid is a symbolic link")):
            r = start(state)
            assert r.returncode == 2 and why in r.stderr and len(r.stderr.strip().splitlines()) == 1, (state, r)
            assert not os.path.exists(os.path.join(state, "journal.sqlite")), state
        assert victim.read_text() == "root's\n"
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_per_user_limits_on_queued_jobs_and_submissions(daemon):
    """uid 65534 may have 5 jobs waiting and submit 2 a second (4 at once); more is refused naming
    the limit; root (an admin) is not held to either."""
    d = daemon(2, extra=("--max-queued-per-user", "5", "--submit-rate", "2", "--submit-burst", "4"))
    burst = as_user(NOBODY, d.endpoint, [("submit", {"job": job(f"n{i}")}) for i in range(8)])
    assert [r["type"] for r in burst] == ["ok"] * 4 + ["error"] * 4, burst
    assert all(r["body"]["code"] == "over_limit" and "2 jobs per second" in r["body"]["message"]
               and "--submit-rate" in r["body"]["message"] for r in burst[4:]), burst[4]
    time.sleep(1.2)
    (fifth,) = as_user(NOBODY, d.endpoint, [("submit", {"job": job("n5")})])
    assert fifth["type"] == "ok", fifth
    time.sleep(1.2)
    (sixth,) = as_user(NOBODY, d.endpoint, [("submit", {"job": job("n6")})])
    assert sixth["type"] == "error" and "the limit per user is 5" in sixth["body"]["message"] and \
        "--max-queued-per-user" in sixth["body"]["message"], sixth
    for i in range(12):  # root: neither limit
        d.submit(**job(f"r{i}"))
    refused = len(burst) - 4 + 1
    print(f"\nquota: {refused} of {len(burst) + 2} submissions of uid {NOBODY} refused; root's 12 accepted")
    st = d.req("status")
    assert st["waiting_total"] == 5 + 12 and st["daemon"]["over_limit"] == refused, st["daemon"]


def test_registrations_take_the_same_tokens_as_submissions(daemon):
    """A site controller asks Slurm about each ``register`` inside its loop, so registrations are held to the
    sender's submission rate before anything is checked: of uid 65534's 8 at once (``--submit-burst 4``) the
    first 4 get this daemon's answer (it takes no registrations), the others ``over_limit``, and so does a
    submission after them; the daemon answers on; root is not held to it."""
    d = daemon(2, extra=("--submit-rate", "2", "--submit-burst", "4"))
    regs = [("register", {"job": job(f"r{i}"), "allocation": str(100 + i), "hosts": ["localhost"]}) for i in range(8)]
    out = as_user(NOBODY, d.endpoint, [*regs, ("submit", {"job": job("s")}), ("ping", {})])
    codes = [r["body"].get("code", r["type"]) for r in out]
    assert codes == ["not_supported"] * 4 + ["over_limit"] * 5 + ["ok"], out
    assert f"uid:{NOBODY} registers faster than the limit of 2 jobs per second" in out[4]["body"]["message"], out[4]
    mine = [r["body"].get("code") for r in _send(d.endpoint, [(t, dict(b)) for t, b in regs])]
    assert mine == ["not_supported"] * 8  # root's
    assert d.req("status")["daemon"]["over_limit"] == 5


def test_history_and_status_all_come_in_pages(daemon):
    """'reshape history' and 'status --all' read the history in pages ('after'): every job once,
    each reply bounded, whatever the journal's size."""
    import subprocess

    from scheduler.cli.commands import read_history
    from tests.helpers import ROOT

    d = daemon(2)
    ids = [d.submit(**job(f"j{i}")) for i in range(7)]
    for j in ids[:3]:
        d.req("cancel", {"job_id": j})
    whole = d.req("history")
    paged = read_history(d.endpoint, page=3)
    assert [j["job_id"] for j in paged.jobs] == ids == [j["job_id"] for j in whole["jobs"]]
    assert sorted(map(json.dumps, paged.events)) == sorted(map(json.dumps, whole["events"]))
    page = d.req("history", {"after": 3, "limit": 2})
    assert [j["job_id"] for j in page["jobs"]] == [4, 5] and {e["job_id"] for e in page["events"]} == {4, 5}
    for cmd in (["history"], ["status", "--all"]):
        r = subprocess.run([sys.executable, "-m", "scheduler.cli", *cmd, "--endpoint", d.endpoint], cwd=ROOT,
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0 and "j2" in r.stdout and "cancelled" in r.stdout, r
