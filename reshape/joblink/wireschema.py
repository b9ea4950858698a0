"""The wire protocol's schema and limits, and the validation of every frame against them.

:mod:`reshape.joblink.protocol` (its only user) encodes and decodes with :func:`check_envelope`
and re-exports the public names here; ``docs/protocol.md`` is the normative description. The
limits bound what a peer may send (sizes, nesting, numbers, text), so that nothing it sends can
exhaust the parser or reach the journal as a value that cannot be written back.
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = [
    "ADVICE_ACTIONS",
    "CONTROL_TYPES",
    "FINISHED",
    "INT",
    "JOB_TYPES",
    "MAX_DEPTH",
    "MAX_EPOCH",
    "MAX_INT",
    "MAX_LEN",
    "MAX_MESSAGE_BYTES",
    "MAX_OUTPUT_BYTES",
    "MAX_REPLY_BYTES",
    "MAX_SECONDS",
    "MAX_SIZES",
    "MAX_TEXT",
    "NODE_TYPES",
    "REPLY_TYPES",
    "VERSION",
    "ProtocolError",
    "bad_value",
    "check_envelope",
    "finite_float",
    "is_type",
    "json_depth",
    "no_constant",
    "printable",
]

VERSION = 1
MAX_MESSAGE_BYTES = 64 * 1024  # a request larger than this is refused (``too_large``)
MAX_REPLY_BYTES = 64 * 1024 * 1024  # replies (status, history) may be large; a client accepts up to this
MAX_DEPTH = 16  # JSON nesting of a request (objects and arrays)
MAX_INT = 1 << 53  # integers a peer may send (beyond: not a count, an id or a time)
MAX_SIZES = 4096  # ``hello``'s ``sizes`` lists the sizes a job accepts among 1..MAX_SIZES
MAX_SECONDS = 1e9  # durations a peer may send (about 31 years)
MAX_EPOCH = 4e9  # times a peer may send (epoch seconds: the year 2096)
MAX_TEXT = 2000  # characters of a free text a peer sends (a reason, an error, a detail)
# the longest string each body field may hold (fields not listed: bounded by the message's size)
MAX_LEN = {"reason": MAX_TEXT, "error": MAX_TEXT, "detail": MAX_TEXT, "message": MAX_TEXT, "host": 255,
           "node": 255, "incarnation": 255, "status": 16, "allocation": 64}
# numbers that are seconds: at most MAX_SECONDS (no 1e308 reaches a sum, no sum reaches infinity)
_SECONDS_FIELDS = ("iter_time", "redist_time", "seconds")

INT = (int,)
_NUM = (int, float)
_STR = (str,)
_BOOL = (bool,)
_LIST = (list,)
_DICT = (dict,)
_NONE = (type(None),)

# type -> {field: (allowed JSON types, required)}
_JOB_BODIES: dict[str, dict[str, tuple[tuple[type, ...], bool]]] = {
    "hello": {"nprocs": (INT, True), "host": (_STR, False), "pid": (INT, False), "sizes": (_LIST, False)},
    "resize_point": {
        "iteration": (INT, True),
        "nprocs": (INT, True),
        "grid": (_LIST, False),
        "iter_time": (_NUM, True),
        "redist_time": (_NUM + _NONE, False),
        "redist_from": (INT + _NONE, False),
        "host": (_STR, False),
        "parked": (_LIST, False),
        "total": (INT + _NONE, False),
    },
    "resized": {
        "old": (INT, True),
        "new": (INT, True),
        "seconds": (_NUM, True),
        "error": (_STR + _NONE, False),
    },
    "finished": {"status": (_STR, True), "error": (_STR + _NONE, False)},
    # the job lost ranks and carried on without them (in-place recovery, reshape.runtime.inplace)
    "lost": {"old": (INT, True), "new": (INT, True), "ranks": (_LIST, True), "reason": (_STR, True),
             "seconds": (_NUM + _NONE, False)},
    # node monitor on the job's first node -> System Monitor (Sudarsan & Ribbens 2007 §3.1: job end / job error)
    "job_ended": {"node": (_STR, True), "incarnation": (_STR, True), "status": (_STR, True),
                  "processes": (INT, False), "detail": (_STR + _NONE, False), "attempt": (INT, False),
                  "code": (INT, False)},
    # the node monitor that runs a job's mpiexec -> the job's log on the head (docs/protocol.md, "Jobs on nodes")
    "job_output": {"node": (_STR, True), "incarnation": (_STR, True), "attempt": (INT, True),
                   "offset": (INT, True), "data": (_STR, True)},
}
_NODE_CONTROL_BODIES: dict[str, dict[str, tuple[tuple[type, ...], bool]]] = {
    "node_register": {"node": (_STR, True), "incarnation": (_STR, True), "pid": (INT, False),
                      "host": (_STR, False)},
    "heartbeat": {"node": (_STR, True), "incarnation": (_STR, True), "jobs": (_LIST, False),
                  "runs": (_LIST, False), "killed": (_LIST, False)},
}
_CONTROL_BODIES: dict[str, dict[str, tuple[tuple[type, ...], bool]]] = {
    "ping": {},
    "submit": {"job": (_DICT, True)},
    "status": {"limit": (INT, False)},
    "cancel": {"job_id": (INT, True)},
    "history": {"limit": (INT, False), "since": (_NUM, False), "after": (INT, False)},
    "log": {"job_id": (INT, True), "tail": (INT, False)},
    "stop": {"kill_jobs": (_BOOL, False)},
    # a job a resource manager started registers with a site controller (docs/slurm.md, "Site mode")
    # ... and, after its mpiexec exited (``code``; ``lost``: its nodes found dead), asks for its next attempt there
    "register": {"job": (_DICT, True), "allocation": (_STR, True), "hosts": (_LIST, True),
                 "restart": (_BOOL, False), "code": (INT + _NONE, False), "lost": (_LIST, False)},
    **_NODE_CONTROL_BODIES,
}
_REPLY_BODIES: dict[str, dict[str, tuple[tuple[type, ...], bool]]] = {
    "ok": {},
    "advice": {
        "action": (_STR, True),
        "nprocs": (INT, True),
        "hosts": (_LIST, False),
        "reason": (_STR, False),
    },
    "error": {"code": (_STR, True), "message": (_STR, True)},
}
JOB_TYPES = frozenset(_JOB_BODIES)
CONTROL_TYPES = frozenset(_CONTROL_BODIES)
REPLY_TYPES = frozenset(_REPLY_BODIES)
NODE_TYPES = frozenset({*_NODE_CONTROL_BODIES, "job_ended", "job_output"})  # sent by node monitors (the last two
# are job messages)
MAX_OUTPUT_BYTES = 32 * 1024  # a job_output's data, decoded (base64 makes it 4/3 as long: within a request)
_REQUEST_BODIES = {**_JOB_BODIES, **_CONTROL_BODIES}
_ALL = {**_REQUEST_BODIES, **_REPLY_BODIES}
_CLOSED = set(_JOB_BODIES) | {"advice", "error"} | set(_CONTROL_BODIES)  # no extra fields
ADVICE_ACTIONS = ("expand", "shrink", "continue")
# done; error: the program failed; lost: a process of the job was lost (a resize could not complete)
FINISHED = ("done", "error", "lost")


class ProtocolError(ValueError):
    """A message that does not follow the protocol; ``code`` names the rule it broke."""

    def __init__(self, code: str, message: str, seq: int | None = None):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.seq = seq


_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2066-\u2069\ufeff\ud800-\udfff]")


def printable(text: Any) -> str:
    """``text`` as a terminal, a log or a page may show it: control characters (an escape sequence
    that recolours, moves the cursor or retitles a terminal; a line break that forges a log line),
    invisible and bidirectional-override characters and lone surrogates written as their escapes
    (``\\x1b``, ``\\u202e``), so a name or a reason a peer chose shows as what it is."""
    text = str(text)
    return _UNPRINTABLE.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


def no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def finite_float(text: str) -> float:
    x = float(text)
    if x != x or x in (float("inf"), float("-inf")):
        raise ValueError(f"number {text[:40]} is not finite")
    return x


def json_depth(frame: bytes) -> int:
    """Deepest nesting of ``[``/``{`` outside strings (a linear scan, no recursion)."""
    depth = deepest = 0
    in_str = esc = False
    for b in frame:
        if in_str:
            if esc:
                esc = False
            elif b == 0x5C:  # backslash
                esc = True
            elif b == 0x22:
                in_str = False
        elif b == 0x22:
            in_str = True
        elif b in (0x5B, 0x7B):
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > MAX_DEPTH:
                    return deepest
        elif b in (0x5D, 0x7D):
            depth -= 1
    return deepest


def bad_value(x: Any, path: str = "message") -> str | None:
    """Why a parsed value cannot be accepted (out-of-range integer, NUL in a string), else None."""
    if isinstance(x, bool) or x is None or isinstance(x, float):
        return None
    if isinstance(x, int):
        return None if -MAX_INT <= x <= MAX_INT else f"{path}: integer out of range (|x| > 2**53)"
    if isinstance(x, str):
        return _bad_text(x, f"{path}: string")
    items = x.items() if isinstance(x, dict) else enumerate(x)
    for k, v in items:
        if isinstance(k, str) and (why := _bad_text(k, f"{path}: key")):
            return why
        why = bad_value(v, f"{path}.{k}" if isinstance(k, str) else f"{path}[{k}]")
        if why:
            return why
    return None


def _bad_text(s: str, what: str) -> str | None:
    """Why ``s`` cannot be taken (a NUL; a lone surrogate, which no UTF-8 file or reply can hold)."""
    if "\0" in s:
        return f"{what} contains a NUL byte"
    if not s.isascii():
        try:
            s.encode("utf-8")
        except UnicodeEncodeError as e:
            return f"{what} is not valid Unicode (character {e.start}: a lone surrogate {s[e.start]!a})"
    return None


def is_type(value: Any, types: tuple[type, ...]) -> bool:
    if isinstance(value, bool) and bool not in types:
        return False  # JSON true is not an integer here
    return isinstance(value, types)


def check_envelope(env: Any, size: int) -> None:
    if not isinstance(env, dict):
        raise ProtocolError("malformed", "the envelope must be a JSON object")
    seq = env.get("seq") if is_type(env.get("seq"), INT) else None
    v = env.get("v")
    if not is_type(v, INT):
        raise ProtocolError("malformed", "envelope field 'v' (integer version) is missing", seq)
    if v != VERSION:
        raise ProtocolError("bad_version", f"protocol version {v} not supported (this is {VERSION})", seq)
    extra = set(env) - {"v", "type", "seq", "job_id", "body"}
    if extra:
        raise ProtocolError("malformed", f"unknown envelope fields {sorted(extra)}", seq)
    t = env.get("type")
    if not is_type(t, _STR):
        raise ProtocolError("malformed", "envelope field 'type' must be a string", seq)
    if seq is None or seq < 0:
        raise ProtocolError("malformed", "envelope field 'seq' must be a non-negative integer", None)
    job_id = env.get("job_id")
    if job_id is not None and (not is_type(job_id, INT) or job_id < 0):
        raise ProtocolError("malformed", "'job_id' must be a non-negative integer or null", seq)
    if t not in _ALL:
        raise ProtocolError("unknown_type", f"unknown message type {t!r}", seq)
    if t in _JOB_BODIES and job_id is None:
        raise ProtocolError("malformed", f"{t!r} needs a 'job_id'", seq)
    body = env.get("body", {})
    if body is None:
        body = {}
    if not isinstance(body, dict):
        raise ProtocolError("malformed", "'body' must be a JSON object", seq)
    schema = _ALL[t]
    for name, (types, required) in schema.items():
        if name not in body:
            if required:
                raise ProtocolError("bad_field", f"{t}: missing field {name!r}", seq)
            continue
        if not is_type(body[name], types):
            names = "/".join("null" if x is type(None) else x.__name__ for x in types)
            raise ProtocolError("bad_field", f"{t}: field {name!r} must be {names}", seq)
    if t in _CLOSED:
        extra = set(body) - set(schema)
        if extra:
            raise ProtocolError("bad_field", f"{t}: unknown fields {sorted(extra)}", seq)
    _check_values(t, body, seq)


def _check_values(t: str, body: dict[str, Any], seq: int) -> None:
    def positive(name: str) -> None:
        if name in body and body[name] is not None and body[name] < 1:
            raise ProtocolError("bad_field", f"{t}: {name!r} must be >= 1", seq)

    def nonneg(name: str) -> None:
        if name in body and body[name] is not None and body[name] < 0:
            raise ProtocolError("bad_field", f"{t}: {name!r} must be >= 0", seq)

    for name in ("nprocs", "old", "new", "redist_from"):
        positive(name)
    for name in ("iteration", "iter_time", "redist_time", "seconds", "job_id", "tail", "processes", "pid",
                 "limit", "since", "after", "attempt", "offset"):
        nonneg(name)
    if t in _REQUEST_BODIES:
        _check_bounds(t, body, seq)
    if t == "resize_point" and "grid" in body:
        g = body["grid"]
        if len(g) > 3 or not all(is_type(x, INT) and x >= 1 for x in g):
            raise ProtocolError("bad_field", "resize_point: 'grid' must list 1-3 positive integers", seq)
    if t == "resize_point" and "parked" in body:
        pk = body["parked"]
        if len(pk) > MAX_SIZES or not all(is_type(h, _STR) and 0 < len(h) <= 255 for h in pk):
            raise ProtocolError("bad_field", f"resize_point: 'parked' must list at most {MAX_SIZES} host names "
                                             "of 1-255 characters", seq)
    if t == "register":
        if not 0 < len(body["allocation"]) <= 64:
            raise ProtocolError("bad_field", "register: 'allocation' must be 1-64 characters", seq)
        hs = body["hosts"]
        if not 0 < len(hs) <= MAX_SIZES or not all(is_type(h, _STR) and 0 < len(h) <= 255 for h in hs):
            raise ProtocolError("bad_field", f"register: 'hosts' must list 1-{MAX_SIZES} host names (one per "
                                             "slot) of 1-255 characters", seq)
        lost = body.get("lost", [])
        if len(lost) > MAX_SIZES or not all(is_type(h, _STR) and 0 < len(h) <= 255 for h in lost):
            raise ProtocolError("bad_field", f"register: 'lost' must list at most {MAX_SIZES} host names "
                                             "of 1-255 characters", seq)
    if t == "hello" and "sizes" in body:
        _check_sizes(body["sizes"], seq)
    if t == "advice":
        if body["action"] not in ADVICE_ACTIONS:
            raise ProtocolError("bad_field", f"advice: action must be one of {ADVICE_ACTIONS}", seq)
        if not all(is_type(h, _STR) for h in body.get("hosts", [])):
            raise ProtocolError("bad_field", "advice: 'hosts' must be strings", seq)
    if t == "finished" and body["status"] not in FINISHED:
        raise ProtocolError("bad_field", f"finished: status must be one of {', '.join(FINISHED)}", seq)
    if t == "job_ended" and body["status"] not in ("end", "error"):
        raise ProtocolError("bad_field", "job_ended: status must be 'end' or 'error'", seq)
    if t in NODE_TYPES:
        for name in ("node", "incarnation"):
            if not 0 < len(body[name]) <= 255:
                raise ProtocolError("bad_field", f"{t}: {name!r} must be 1-255 characters", seq)
    if t == "heartbeat" and not all(is_type(x, INT) and x >= 0 for x in body.get("jobs", [])):
        raise ProtocolError("bad_field", "heartbeat: 'jobs' must list job ids", seq)
    if t == "heartbeat" and not all(isinstance(r, dict) and set(r) == {"job_id", "attempt", "pid"}
                                    and all(is_type(v, INT) and v >= 0 for v in r.values())
                                    for r in body.get("runs", [])):
        raise ProtocolError("bad_field", "heartbeat: 'runs' must list objects {job_id, attempt, pid} of "
                                         "non-negative integers", seq)
    if t == "heartbeat" and not all(isinstance(r, dict) and set(r) == {"job_id", "attempt"}
                                    and all(is_type(v, INT) and v >= 0 for v in r.values())
                                    for r in body.get("killed", [])):
        raise ProtocolError("bad_field", "heartbeat: 'killed' must list objects {job_id, attempt} of "
                                         "non-negative integers", seq)
    if t == "job_output" and len(body["data"]) > (MAX_OUTPUT_BYTES * 4) // 3 + 4:
        raise ProtocolError("bad_field", f"job_output: 'data' must hold at most {MAX_OUTPUT_BYTES} bytes "
                                         "(base64)", seq)


def _check_bounds(t: str, body: dict[str, Any], seq: int) -> None:
    """A request's strings within their lengths, its seconds and times within range, its lists' shapes."""
    for name in (*_SECONDS_FIELDS, "since"):
        most = MAX_EPOCH if name == "since" else MAX_SECONDS
        if body.get(name) is not None and body[name] > most:
            raise ProtocolError("bad_field", f"{t}: {name!r} must be at most {most:g} seconds, got "
                                             f"{body[name]:.6g}", seq)
    for name, most in MAX_LEN.items():
        v = body.get(name)
        if isinstance(v, str) and len(v) > most:
            raise ProtocolError("bad_field", f"{t}: {name!r} must be at most {most} characters, got {len(v)}", seq)
    if t == "lost":
        rs = body["ranks"]
        if not 0 < len(rs) < body["old"] or not all(is_type(r, INT) and 0 <= r < body["old"] for r in rs) \
                or len(set(rs)) != len(rs):
            raise ProtocolError("bad_field", "lost: 'ranks' must list 1 to old-1 distinct ranks in [0, old) "
                                             f"(integers), got {json.dumps(rs)[:100]}", seq)
        if body["new"] > body["old"] - len(rs):
            raise ProtocolError("bad_field", f"lost: 'new' {body['new']} must be at most old - lost = "
                                             f"{body['old'] - len(rs)}", seq)


def _check_sizes(sizes: list, seq: int) -> None:
    """``hello``'s ``sizes``: 1 to :data:`MAX_SIZES` integers in ``[1, MAX_SIZES]``, strictly ascending."""
    if not sizes or len(sizes) > MAX_SIZES:
        raise ProtocolError("bad_field", f"hello: 'sizes' must list 1-{MAX_SIZES} sizes, got {len(sizes)}", seq)
    prev = 0
    for i, x in enumerate(sizes):
        if not is_type(x, INT) or not 1 <= x <= MAX_SIZES:
            raise ProtocolError("bad_field", f"hello: 'sizes'[{i}] must be an integer in [1, {MAX_SIZES}], "
                                             f"got {x!r}"[:200], seq)
        if x <= prev:
            raise ProtocolError("bad_field", f"hello: 'sizes' must be strictly ascending ('sizes'[{i}] = {x} "
                                             f"after {prev})", seq)
        prev = x
