"""Trust on a shared machine: what a message, a journal row or a name chosen by someone else can do to a
live daemon (nothing but a one-line refusal), and how it is shown (as text, never as a terminal's escape).

Each test starts a real daemon (``tests.helpers.DaemonProc``) and sends it raw frames, as an attacker
would: JSON the protocol's own encoder would never write.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import subprocess
import sys

import pytest
import zmq

from tests.helpers import ROOT, wait_for

pytestmark = pytest.mark.procs


def raw(endpoint: str, frames: list[dict]) -> list[dict]:
    """Each envelope sent as JSON (``json.dumps``: a lone surrogate travels as ``\\ud800``), its reply."""
    s = zmq.Context.instance().socket(zmq.DEALER)
    s.setsockopt(zmq.LINGER, 0)
    s.connect(endpoint)
    out = []
    try:
        for i, env in enumerate(frames, 1):
            s.send(json.dumps({"v": 1, "seq": i, "job_id": None, **env}).encode())
            out.append(json.loads(s.recv()) if s.poll(5000) else {"type": "timeout"})
    finally:
        s.close()
    return out


def quick(name: str, **kw) -> dict:
    return {"name": name, "command": ["sleep", "60"], "nprocs": 1, "resizable": False, "launch": "single"} | kw


def test_a_message_that_utf8_cannot_hold_or_out_of_bounds_is_refused_and_the_daemon_lives_on(daemon):
    """A lone surrogate in a reason or an error, ranks nested in ranks, 1e308 seconds, a reason of
    3,000 characters: each refused with ``bad_field`` naming the field; the daemon serves on and
    starts again from its journal."""
    d = daemon(2)
    jid = d.submit(**quick("victim"))
    wait_for(lambda: d.job(jid)["state"] == "running", 30)
    bad = [
        ({"type": "lost", "job_id": jid, "body": {"old": 1, "new": 1, "ranks": [0], "reason": "\ud800"}}, "reason"),
        ({"type": "finished", "job_id": jid, "body": {"status": "error", "error": "x\udfff"}}, "error"),
        ({"type": "lost", "job_id": jid, "body": {"old": 2, "new": 1, "ranks": [[1]], "reason": "r"}}, "ranks"),
        ({"type": "resized", "job_id": jid, "body": {"old": 1, "new": 2, "seconds": 1e308}}, "seconds"),
        ({"type": "lost", "job_id": jid, "body": {"old": 2, "new": 1, "ranks": [1], "reason": "r" * 3000}},
         "reason"),
        ({"type": "history", "body": {"since": 1e300}}, "since"),
        ({"type": "submit", "body": {"job": quick("\ud800")}}, "job.name"),
    ]
    replies = raw(d.endpoint, [env for env, _ in bad])
    for (env, field), rep in zip(bad, replies, strict=True):
        assert rep["type"] == "error" and rep["body"]["code"] == "bad_field" and field in rep["body"]["message"], \
            (env["type"], rep)
    assert d.proc.poll() is None and d.ping(), d.stderr()
    d.kill9()
    d.start()
    (j,) = d.req("history")["jobs"]
    assert j["job_id"] == jid and j["error"] is None and j["state"] in ("running", "lost", "failed"), j


def test_a_journal_row_the_daemon_cannot_read_back_is_set_aside(daemon):
    """A job record with a lone surrogate (as an older daemon journaled a 'finished' error) and one that
    is not JSON: the daemon starts, says what it set aside, keeps them in the table ``quarantine``, and
    serves (no crash at every start)."""
    d = daemon(2)
    jid = d.submit(**quick("kept"))
    other = d.submit(**quick("poisoned"))
    wait_for(lambda: d.job(other)["state"] == "running", 30)
    d.kill9()
    db = sqlite3.connect(os.path.join(d.state_dir, "journal.sqlite"))
    (rec,) = db.execute("SELECT record FROM jobs WHERE job_id = ?", (other,)).fetchone()
    poisoned = json.loads(rec) | {"error": "PLACEHOLDER"}
    db.execute("UPDATE jobs SET record = ? WHERE job_id = ?",
               (json.dumps(poisoned).replace("PLACEHOLDER", "\\ud800"), other))
    db.execute("INSERT INTO jobs(job_id, state, record) VALUES (99, 'running', '{not json')")
    db.commit()
    db.close()
    d.start()
    assert {j["job_id"] for j in d.req("history")["jobs"]} == {jid}
    err = d.stderr()
    assert f"journal record set aside (table quarantine): jobs {other}: ValueError: a string is not valid " \
           "Unicode" in err and "jobs 99:" in err, err
    db = sqlite3.connect(os.path.join(d.state_dir, "journal.sqlite"))
    assert sorted(k for (k,) in db.execute("SELECT key FROM quarantine")) == sorted([str(other), "99"])
    db.close()
    d.kill9()
    d.start()  # and again: nothing left to trip on
    assert d.ping()


ESCAPES = "\x1b]0;owned\x07\x1b[2J"  # retitle the terminal, clear the screen


def test_names_and_reasons_with_control_characters_are_printed_as_escapes(daemon):
    """A job named with terminal escape sequences that fails with one in its last words: 'reshape status'
    and 'reshape history' show them as text (``\\x1b``), and no control character reaches the terminal."""
    d = daemon(2)
    cmd = ["sh", "-c", "printf 'RuntimeError: \\033[31mboom\\n' >&2; exit 3"]
    jid = d.submit(name=f"job{ESCAPES}", command=cmd, nprocs=1, resizable=False, launch="single")
    wait_for(lambda: d.job(jid)["state"] == "failed", 30)
    assert "\x1b[31m" in d.job(jid)["error"]  # the data is kept as it came; only its display is escaped
    for cmd in (["status"], ["history"]):
        out = subprocess.run([sys.executable, "-m", "scheduler.cli", *cmd, "--endpoint", d.endpoint], cwd=ROOT,
                             capture_output=True, text=True, timeout=60).stdout
        shown = [c for c in out if (c < " " and c != "\n") or "\x7f" <= c <= "\x9f"]
        assert not shown and "job\\x1b]0;owned\\x07\\x1b[2J" in out and "\\x1b[31mboom" in out, (cmd, out)


def _outward_address() -> str | None:
    """An address of this machine that is not loopback (the one a route outward would use), or None."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.254", 9))  # no packet is sent: this only picks the route
            addr = s.getsockname()[0]
        except OSError:
            return None
    return None if addr.startswith("127.") else addr


def test_peers_without_a_key_cannot_crowd_out_those_with_one(tmp_path, monkeypatch):
    """A CURVE daemon on a network address, at most 50 connections per identity: from this host, a
    connection that never completes a handshake (no key) every 5 ms, each held until libzmq drops it
    (5 s), while a client with a key sends 8 requests from the same address: every one is answered.
    The keyless connections are pending under their address, and the oldest of them makes room."""
    import socket
    import threading

    from reshape.joblink import auth
    from reshape.joblink.client import Connection
    from tests.helpers import DaemonProc, free_port

    addr = _outward_address()
    if addr is None:
        pytest.skip("no network address besides loopback on this machine")
    keys = str(tmp_path / "keys")
    auth.make_keys(keys)
    state = tmp_path / "state"
    state.mkdir()
    endpoint = f"tcp://{addr}:{free_port()}"
    monkeypatch.setenv(auth.ENV_KEYS, keys)  # this test's requests: the admin key
    d = DaemonProc(str(state), 2, endpoint=endpoint, extra=("--keys", keys, "--max-peers-per-user", "50"))
    stop = threading.Event()
    held: list[socket.socket] = []

    def flood() -> None:
        while not stop.wait(0.005):
            with contextlib.suppress(OSError):
                held.append(socket.create_connection((addr, int(endpoint.rsplit(":", 1)[1])), timeout=1))

    t = threading.Thread(target=flood)
    t.start()
    try:
        wait_for(lambda: len(held) >= 200, 30)  # two limits' worth: the flood is at full strength
        answered = 0
        for _ in range(8):
            c = Connection(endpoint, 2.0)
            try:
                answered += c.request("ping").type == "ok"
            except Exception:
                pass
            finally:
                c.close()
        conns = d.req("status")["daemon"]["connections"]
        assert answered == 8 and conns["shut"] >= 50, (answered, conns)
    finally:
        stop.set()
        t.join()
        for s in held:
            s.close()
        d.cleanup()


def test_a_job_cannot_fill_the_journal_with_its_messages(daemon):
    """A running job sends 40 'lost' reports in a burst: the first is recorded, the malformed repeats are
    refused by the core, and from the 21st on the job is over its rate (over_limit): the journal holds
    one 'lost' event, not 40."""
    d = daemon(2)
    jid = d.submit(**quick("chatty", nprocs=2))
    wait_for(lambda: d.job(jid)["state"] == "running", 30)
    body = {"old": 2, "new": 1, "ranks": [1], "reason": "a rank went away"}
    replies = raw(d.endpoint, [{"type": "lost", "job_id": jid, "body": body}] * 40)
    codes = [r["body"].get("code", "ok") if r["type"] == "error" else r["type"] for r in replies]
    assert codes[0] == "ok" and codes[-1] == "over_limit" and set(codes[1:20]) == {"bad_size"}, codes
    events = [e for e in d.req("history")["events"] if e["job_id"] == jid and e["kind"] == "lost"]
    assert len(events) == 1, events
    assert d.req("status")["daemon"]["job_messages_refused"] == codes.count("over_limit")


def test_a_flood_of_resized_reports_is_refused_over_the_jobs_rate_and_the_daemon_answers_on(daemon):
    """A running job's ``resized`` reports, 1,000 sent without waiting for a reply: the first 20 (the job's burst)
    reach the core (which refuses them: no resize is pending), the others get ``over_limit`` before it sees
    them, beyond the 2 a second the bucket gains meanwhile; another client's pings, sent all along, are
    answered, and the job runs on."""
    import math
    import threading
    import time

    from reshape.joblink.client import Connection

    d = daemon(2)
    jid = d.submit(**quick("chatty"))
    wait_for(lambda: d.job(jid)["state"] == "running", 30)
    n = 1000
    s = zmq.Context.instance().socket(zmq.DEALER)
    s.setsockopt(zmq.LINGER, 0)
    s.connect(d.endpoint)
    pings: list[str] = []
    flooding = threading.Event()

    def ping() -> None:
        flooding.wait(10)
        while flooding.is_set() or not pings:
            c = Connection(d.endpoint, 5.0)
            try:
                pings.append(c.request("ping").type)
            except Exception as e:  # a ping not answered is what the test looks for
                pings.append(f"{type(e).__name__}: {e}")
            finally:
                c.close()

    t = threading.Thread(target=ping)
    t.start()
    try:
        t0 = time.monotonic()
        flooding.set()
        for i in range(1, n + 1):
            s.send(json.dumps({"v": 1, "seq": i, "job_id": jid, "type": "resized",
                               "body": {"old": 1, "new": 2, "seconds": 0.1}}).encode())
        replies = [json.loads(s.recv()) if s.poll(10000) else {"type": "timeout"} for _ in range(n)]
        elapsed = time.monotonic() - t0
    finally:
        flooding.clear()
        t.join(30)
        s.close()
    codes = [r["body"]["code"] if r["type"] == "error" else r["type"] for r in replies]
    assert set(codes) == {"out_of_order", "over_limit"} and codes[:20] == ["out_of_order"] * 20, codes
    assert codes.count("out_of_order") <= 20 + math.ceil(2 * elapsed), (codes.count("out_of_order"), elapsed)
    assert pings and set(pings) == {"ok"}, pings
    st = d.req("status")
    assert st["daemon"]["job_messages_refused"] == codes.count("over_limit")
    assert [r["state"] for r in st["running"] if r["job_id"] == jid] == ["running"]
    print(f"\n{n} resized in {elapsed:.2f} s: {codes.count('over_limit')} over_limit; {len(pings)} pings answered")


def test_ended_jobs_leave_memory_and_the_journal_after_their_retention(daemon):
    """--retain-jobs 5: of 30 jobs submitted and cancelled only the last 5 stay in memory; --retain-days
    0.0001 (8.6 s): then the journal holds none of them, nor their events."""
    d = daemon(2, extra=("--retain-jobs", "5", "--retain-days", "0.0001"))
    ids = [d.submit(**quick(f"j{i}", arrival_delay=600)) for i in range(30)]
    for jid in ids:
        d.req("cancel", {"job_id": jid})
    hist = d.req("history")
    assert [j["job_id"] for j in hist["jobs"]] == ids[-5:] and hist["jobs_total"] == 5, hist["jobs"]
    db = os.path.join(d.state_dir, "journal.sqlite")

    def rows() -> tuple[int, int]:
        con = sqlite3.connect(db)
        try:
            return (con.execute("SELECT count(*) FROM jobs").fetchone()[0],
                    con.execute("SELECT count(*) FROM events").fetchone()[0])
        finally:
            con.close()

    assert rows()[0] == 30  # journaled, all of them, until their retention in the journal ends
    wait_for(lambda: rows() == (0, 0), 60, every=0.5)
    assert d.req("status")["daemon"]["retention"]["pruned"] == 30
