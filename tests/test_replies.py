"""The daemon's replies are typed: every one an in-process daemon sends decodes into the class its
request names (``reply_type``) and encodes back to the same bytes, in the key order of the wire."""

from __future__ import annotations

import json

import pytest

from reshape.joblink import protocol as P
from scheduler.core.jobfile import validate_job
from scheduler.core.pool import default_pool
from scheduler.daemon.loop import Daemon

NOW = 1712345678.25
JOB = {"name": "lu", "command": ["python", "-m", "apps.lu"], "nprocs": 2, "max_procs": 4}


@pytest.fixture
def daemon(tmp_path):
    d = Daemon(str(tmp_path), pool=default_pool(4))
    d.state.submit(validate_job(JOB), NOW)  # job 1, running (started in the core, no process)
    d.state.tick(NOW)
    yield d
    d.journal.close()


def _exchange(d: Daemon, type_: str, body: dict, job_id: int | None = None) -> tuple[bytes, P.Typed]:
    """One request through the daemon: the reply's frame, and that frame as its request's client reads it."""
    req = P.Message(type_, 5, job_id, body)
    rep, _ = d.handle(P.encode(req), NOW)
    frame = d._encode(rep)
    return frame, P.decode(frame, P.MAX_REPLY_BYTES, P.REQUESTS[type_])


CASES = [
    ("ping", {}, None, P.Pong),
    ("submit", {"job": {**JOB, "name": "big", "nprocs": 4}}, None, P.Accepted),
    ("status", {}, None, P.StatusView),
    ("status", {"limit": 0}, None, P.StatusView),
    ("hello", {"nprocs": 2, "host": "localhost", "pid": 1}, 1, P.Ok),
    ("resize_point", {"iteration": 1, "nprocs": 2, "iter_time": 0.5}, 1, P.Advice),
    ("node_register", {"node": "localhost", "incarnation": "abc", "pid": 5}, None, P.NodeWelcome),
    ("cancel", {"job_id": 1}, None, P.Cancelled),
    ("log", {"job_id": 1, "tail": 5}, None, P.LogText),
    ("history", {}, None, P.HistoryView),
    ("history", {"after": 0, "limit": 1}, None, P.HistoryView),
    ("stop", {"kill_jobs": False}, None, P.Ok),
]


@pytest.mark.parametrize(("type_", "body", "job_id", "cls"), CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_each_reply_decodes_into_its_requests_class_and_back_to_the_same_bytes(daemon, type_, body, job_id, cls):
    frame, rep = _exchange(daemon, type_, body, job_id)
    assert type(rep) is cls, rep
    assert P.encode(rep) == frame
    assert frame == json.dumps(json.loads(frame), separators=(",", ":")).encode()  # compact, as before


def test_a_heartbeat_reply_carries_its_orders_typed(daemon):
    _exchange(daemon, "node_register", {"node": "localhost", "incarnation": "abc"})
    frame, rep = _exchange(daemon, "heartbeat", {"node": "localhost", "incarnation": "abc", "jobs": [],
                                                 "runs": [{"job_id": 9, "attempt": 0, "pid": 3}]})
    assert type(rep) is P.Orders and rep.orders == ({"op": "kill", "job_id": 9, "attempt": 0},)
    assert P.encode(rep) == frame
    _, quiet = _exchange(daemon, "heartbeat", {"node": "localhost", "incarnation": "abc", "jobs": []})
    assert type(quiet) is P.Orders and quiet.orders is None and quiet.body == {}  # no orders: an empty body


def test_the_status_and_history_views_keep_the_wire_key_order(daemon):
    """The order the daemon always sent (its status's ``now``, ``daemon``, then the core's page)."""
    frame, st = _exchange(daemon, "status", {})
    assert list(json.loads(frame)["body"]) == ["now", "daemon", "total_slots", "free_slots", "capacity_slots",
                                               "running", "running_total", "queue", "queued_total", "waiting",
                                               "waiting_total", "ended", "nodes"]
    assert (st.free_slots, st.total_slots, [j["job_id"] for j in st.running]) == (2, 4, [1])
    frame, hist = _exchange(daemon, "history", {})
    assert list(json.loads(frame)["body"]) == ["total_slots", "now", "jobs", "events", "node_events", "jobs_total"]
    assert (hist.now, hist.jobs_total, [e["kind"] for e in hist.events]) == (NOW, 1, ["submit", "start"])


def test_cancel_names_the_job_and_its_state(daemon):
    _, rep = _exchange(daemon, "cancel", {"job_id": 1})
    assert (rep.target, rep.state, rep.runner, rep.job_id) == (1, "cancelled", None, None)
    assert rep.body == {"job_id": 1, "state": "cancelled"}  # no runner: left out, as before
