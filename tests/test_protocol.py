"""Protocol: every example in docs/protocol.md decodes; garbage is rejected with a code."""

from __future__ import annotations

import json
import os
import re
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reshape.joblink import protocol as P

DOC = os.path.join(os.path.dirname(os.path.dirname(__file__)), "docs", "protocol.md")


def doc_examples() -> list[str]:
    with open(DOC) as f:
        return re.findall(r"```json\n(.*?)\n```", f.read(), re.S)


def test_doc_has_an_example_for_every_type():
    types = {json.loads(e)["type"] for e in doc_examples()}
    assert types == set(P.JOB_TYPES | P.CONTROL_TYPES | P.REPLY_TYPES)


@pytest.mark.parametrize("example", doc_examples())
def test_doc_examples_decode_and_roundtrip(example):
    msg = P.decode(example.encode())
    assert P.decode(P.encode(msg)) == msg


@pytest.mark.parametrize("example", doc_examples())
def test_doc_examples_encode_back_to_the_same_json(example):
    """The typed messages carry the wire format as it is: a field sent as null stays null, one left
    out stays out (an optional field takes either form)."""
    assert json.loads(P.encode(P.decode(example.encode()))) == json.loads(example)


def test_every_body_field_is_declared_with_its_bounds():
    """The classes are the schema: every field but the envelope's is a declared body field."""
    from dataclasses import fields

    from reshape.joblink.wireschema import rules
    for cls in [*P.REQUESTS.values(), P.Advice, P.Error, *P.OK_REPLIES]:
        body = {f.name for f in fields(cls)} - {"seq", "job_id", "keys"}
        assert body == {r.attr for r in rules(cls)}, cls.__name__


def test_replies_decode_to_their_types():
    adv = P.decode(b'{"v": 1, "type": "advice", "seq": 2, "job_id": 3, "body": {"action": "expand", "nprocs": 6, '
                   b'"hosts": ["n1", "n2"], "reason": "idle processors"}}', P.MAX_REPLY_BYTES)
    assert isinstance(adv, P.Advice) and (adv.seq, adv.job_id) == (2, 3)
    assert adv.decision() == P.Advice("expand", 6, ("n1", "n2"), "idle processors")
    err = P.decode(P.encode(P.error_reply("out_of_order", "no pending resize", 9, 3)))
    assert isinstance(err, P.Error) and (err.code, err.message, err.seq) == ("out_of_order", "no pending resize", 9)
    frame = b'{"v": 1, "type": "ok", "seq": 2, "job_id": null, "body": {"job_id": 7}}'
    ok = P.decode(frame, P.MAX_REPLY_BYTES, P.Submit)
    assert type(ok) is P.Accepted and ok.target == 7 and ok.job_id is None and ok.body == {"job_id": 7}
    assert P.decode(frame) == ok  # without its request: the one ``ok`` class that takes the body


@pytest.mark.parametrize(("answering", "body", "code", "why"), [
    (P.Cancel, {"job_id": 7}, "bad_field", "missing field 'state'"),
    (P.Submit, {}, "bad_field", "missing field 'job_id'"),
    (P.Ping, {"now": 1.0, "version": 1, "extra": 2}, "bad_field", "unknown fields ['extra']"),
    (P.Status, {"job_id": 7}, "bad_field", "missing field 'now'"),
    (P.Heartbeat, {"orders": [1]}, "bad_field", "'orders' must list objects"),
    (P.JobOutput, {"at": -1}, "bad_field", "'at' must be >= 0"),
    (P.ResizePoint, {}, "unexpected", "does not answer"),
])
def test_an_ok_that_is_not_its_requests_reply_is_refused(answering, body, code, why):
    """A client reads an ``ok`` as its request's ``reply_type``: one with another body is refused, naming why."""
    frame = json.dumps({"v": 1, "type": "ok", "seq": 1, "job_id": None, "body": body}).encode()
    with pytest.raises(P.ProtocolError) as e:
        P.decode(frame, P.MAX_REPLY_BYTES, answering)
    assert e.value.code == code and why in e.value.message, e.value


def _reply_examples() -> list[str]:
    return [e for e in doc_examples() if json.loads(e)["type"] in P.REPLY_TYPES]


def test_doc_has_an_example_for_every_reply_class():
    assert {type(P.decode(e.encode())) for e in _reply_examples()} == {P.Advice, P.Error, *P.OK_REPLIES}


@pytest.mark.parametrize("example", _reply_examples())
def test_doc_reply_examples_decode_into_their_requests_reply_and_encode_to_the_same_bytes(example):
    """Each ``ok`` example decodes, as the reply to a request that names its class, into that class, and
    encodes back to the very bytes (compact JSON, its keys in the order the daemon sends them)."""
    cls = type(P.decode(example.encode()))
    asks = [r for r in P.REQUESTS.values() if r.reply_type is cls] or [None]  # error: the answer to any
    for req in asks:
        rep = P.decode(example.encode(), P.MAX_REPLY_BYTES, req)
        assert type(rep) is cls
        assert P.encode(rep) == json.dumps(json.loads(example), separators=(",", ":")).encode()
        assert P.encode(P.answer(rep, replace(rep, keys=None))) == P.encode(rep)  # as the daemon builds it


@pytest.mark.parametrize(
    ("frame", "code"),
    [
        (b"\xff\xfe", "malformed"),
        (b"not json", "malformed"),
        (b"[1, 2]", "malformed"),
        (b'{"type": "ping", "seq": 1}', "malformed"),
        (b'{"v": 2, "type": "ping", "seq": 1}', "bad_version"),
        (b'{"v": "1", "type": "ping", "seq": 1}', "malformed"),
        (b'{"v": 1, "type": "dance", "seq": 1}', "unknown_type"),
        (b'{"v": 1, "type": "ping", "seq": -1}', "malformed"),
        (b'{"v": 1, "type": "ping", "seq": 1, "extra": 0}', "malformed"),
        (b'{"v": 1, "type": "resize_point", "seq": 1, "body": {"iteration": 1, "nprocs": 2, "iter_time": 1}}',
         "malformed"),  # no job_id
        (b'{"v": 1, "type": "resize_point", "seq": 1, "job_id": 1, "body": {"nprocs": 2, "iter_time": 1}}',
         "bad_field"),
        (b'{"v": 1, "type": "resize_point", "seq": 1, "job_id": 1, '
         b'"body": {"iteration": 1, "nprocs": "2", "iter_time": 1}}', "bad_field"),
        (b'{"v": 1, "type": "resize_point", "seq": 1, "job_id": 1, '
         b'"body": {"iteration": 1, "nprocs": 0, "iter_time": 1}}', "bad_field"),
        (b'{"v": 1, "type": "resize_point", "seq": 1, "job_id": 1, '
         b'"body": {"iteration": 1, "nprocs": true, "iter_time": 1}}', "bad_field"),
        (b'{"v": 1, "type": "resize_point", "seq": 1, "job_id": 1, '
         b'"body": {"iteration": 1, "nprocs": 2, "iter_time": NaN}}', "malformed"),
        (b'{"v": 1, "type": "resize_point", "seq": 1, "job_id": 1, '
         b'"body": {"iteration": 1, "nprocs": 2, "iter_time": 1, "parked": ["n1", 2]}}', "bad_field"),
        (b'{"v": 1, "type": "resize_point", "seq": 1, "job_id": 1, '
         b'"body": {"iteration": 1, "nprocs": 2, "iter_time": 1, "parked": [""]}}', "bad_field"),
        (b'{"v": 1, "type": "cancel", "seq": 1, "body": {"job_id": 1, "force": true}}', "bad_field"),
        (b'{"v": 1, "type": "finished", "seq": 1, "job_id": 1, "body": {"status": "meh"}}', "bad_field"),
        (b'{"v": 1, "type": "advice", "seq": 1, "job_id": 1, "body": {"action": "jump", "nprocs": 2}}',
         "bad_field"),
        (b" " * (P.MAX_MESSAGE_BYTES + 1), "too_large"),
    ],
)
def test_garbage_is_rejected_with_a_code(frame, code):
    with pytest.raises(P.ProtocolError) as e:
        P.decode(frame)
    assert e.value.code == code


def test_encode_refuses_what_decode_would_reject():
    with pytest.raises(P.ProtocolError):
        P.encode(P.Message("resized", 1, 3, {"old": 2}))


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**40), st.integers(0, 10**6), st.integers(1, 4096),
       st.floats(0, 1e6, allow_nan=False), st.lists(st.integers(1, 64), max_size=3),
       st.lists(st.text("abcdefghijklmnopqrstuvwxyz0123456789.-", min_size=1, max_size=20), max_size=4))
def test_resize_point_roundtrip(seq, it, n, t, grid, parked):
    m = P.Message("resize_point", seq, 5, {"iteration": it, "nprocs": n, "iter_time": t, "grid": grid,
                                            "parked": parked})
    got = P.decode(P.encode(m))  # a request decodes to its typed event
    assert got == P.ResizePoint(seq=seq, job_id=5, iteration=it, nprocs=n, iter_time=t, grid=tuple(grid),
                                parked=tuple(parked))
    assert got.body == m.body and P.decode(P.encode(got)) == got


def test_every_request_type_has_a_typed_event():
    assert set(P.REQUESTS) == set(P.JOB_TYPES | P.CONTROL_TYPES)
    c = P.decode(b'{"v": 1, "type": "cancel", "seq": 3, "body": {"job_id": 7}}')
    assert isinstance(c, P.Cancel) and c.target == 7 and c.job_id is None and c.body == {"job_id": 7}


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300))
def test_random_bytes_never_crash(data):
    try:
        P.decode(data)
    except P.ProtocolError as e:
        assert e.code in {"malformed", "bad_version", "unknown_type", "bad_field", "too_large"}


def hello(sizes) -> bytes:
    return json.dumps({"v": 1, "type": "hello", "seq": 1, "job_id": 3,
                       "body": {"nprocs": 4, "sizes": sizes}}).encode()


@pytest.mark.parametrize("sizes", [[4], [1, 2, 4, 8], [2, 3, 5, 4096], list(range(1, P.MAX_SIZES + 1))])
def test_hello_sizes_accepted(sizes):
    m = P.decode(hello(sizes))
    assert m.body["sizes"] == sizes
    assert P.decode(P.encode(m)) == m


@pytest.mark.parametrize(
    ("sizes", "why"),
    [
        (4, "'sizes' must be list"),
        ([], "must list 1-4096 sizes, got 0"),
        (list(range(1, P.MAX_SIZES + 2)), "must list 1-4096 sizes, got 4097"),
        ([0, 2], "'sizes'[0] must be an integer in [1, 4096], got 0"),
        ([2, 4097], "'sizes'[1] must be an integer in [1, 4096], got 4097"),
        ([2, -1], "'sizes'[1] must be an integer in [1, 4096], got -1"),
        ([2, "4"], "'sizes'[1] must be an integer in [1, 4096], got '4'"),
        ([True], "'sizes'[0] must be an integer in [1, 4096], got True"),
        ([1.0], "'sizes'[0] must be an integer in [1, 4096], got 1.0"),
        ([[2]], "'sizes'[0] must be an integer in [1, 4096], got [2]"),
        ([2, 2], "strictly ascending ('sizes'[1] = 2 after 2)"),
        ([4, 2], "strictly ascending ('sizes'[1] = 2 after 4)"),
    ],
)
def test_hello_sizes_rejected_with_a_reason(sizes, why):
    with pytest.raises(P.ProtocolError) as e:
        P.decode(hello(sizes))
    assert e.value.code == "bad_field" and e.value.seq == 1
    assert why in e.value.message
    with pytest.raises(P.ProtocolError):  # nor can a job send it
        P.encode(P.Message("hello", 1, 3, {"nprocs": 4, "sizes": sizes}))


@pytest.mark.parametrize(("kind", "job", "body", "why"), [
    ("heartbeat", "null", '"runs": [{"job_id": 1, "attempt": 0}]', "'runs' must list objects {job_id, attempt, pid}"),
    ("heartbeat", "null", '"runs": [{"job_id": 1, "attempt": -1, "pid": 5}]', "'runs' must list objects"),
    ("heartbeat", "null", '"runs": [[1, 0, 5]]', "'runs' must list objects"),
    ("job_output", "3", '"attempt": 0, "offset": -1, "data": ""', "'offset' must be >= 0"),
    ("job_output", "3", '"attempt": 0, "offset": 0', "missing field 'data'"),
    ("job_output", "3", '"attempt": 0, "offset": 0, "data": "' + "A" * 50000 + '"', "at most 32768 bytes"),
], ids=["runs-no-pid", "runs-negative", "runs-list", "output-offset", "output-no-data", "output-too-long"])
def test_heartbeat_runs_and_job_output_rejected_with_a_reason(kind, job, body, why):
    frame = (f'{{"v": 1, "type": "{kind}", "seq": 1, "job_id": {job}, '
             '"body": {"node": "n1", "incarnation": "i", ' + body + '}}').encode()
    with pytest.raises(P.ProtocolError) as e:
        P.decode(frame)
    assert e.value.code == "bad_field" and why in e.value.message


def test_the_core_events_are_the_requests_in_the_cores_terms():
    """Each event of the core has a request of the same name on the wire with every field it holds, so the
    daemon's edge converts by field name; a decoded request converts to the event with the same values."""
    import dataclasses

    from scheduler.core import events as C
    from scheduler.daemon.handlers import core_event
    for cls in C.EVENTS:
        wire = getattr(P, cls.__name__)
        assert {f.name for f in dataclasses.fields(cls)} <= {f.name for f in dataclasses.fields(wire)}, cls
    rp = P.decode(P.encode(P.ResizePoint(seq=1, job_id=5, iteration=2, nprocs=4, iter_time=1.5, parked=("h",),
                                         total=9, host="n1")))
    assert core_event(rp) == C.ResizePoint(job_id=5, iteration=2, nprocs=4, iter_time=1.5, parked=("h",), total=9)
    hb = P.decode(P.encode(P.Heartbeat(seq=2, node="n1", incarnation="m", jobs=(3,))))
    assert core_event(hb) == C.Heartbeat(node="n1", incarnation="m", jobs=(3,))
