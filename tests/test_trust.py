"""Trust on a shared machine: what a message, a journal row or a name chosen by someone else can do to a
live daemon (nothing but a one-line refusal), and how it is shown (as text, never as a terminal's escape).

Each test starts a real daemon (``tests.helpers.DaemonProc``) and sends it raw frames, as an attacker
would: JSON the protocol's own encoder would never write.
"""

from __future__ import annotations

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
    return {"name": name, "command": ["sleep", "60"], "nprocs": 1, "resizable": False, "launch": "single", **kw}


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
