"""Wire protocol between jobs, the command line and the scheduler daemon (version 1).

``docs/protocol.md`` is the normative description; this module is its only
implementation, with its schema, limits and frame checks in
:mod:`reshape.joblink.wireschema`. A message is one ZeroMQ frame holding a
UTF-8 JSON object, the *envelope*::

    {"v": 1, "type": "resize_point", "seq": 7, "job_id": 3, "body": {...}}

``decode`` validates the envelope and the body of every known type (field
names, JSON types, ranges) and raises :class:`ProtocolError` with a stable
``code`` on anything else, so the daemon can answer with an ``error`` message
and carry on serving.

:class:`ResizeReport` and :class:`Advice` are the two sides of a resize point
as records: what a job reports (``resize_point``'s body) and what it is told
(``advice``'s body). The runtime's advisors, the daemon's client and the
scheduler core exchange them.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, Literal

from reshape.joblink.wireschema import (
    CONTROL_TYPES,
    INT,
    JOB_TYPES,
    MAX_DEPTH,
    MAX_LEN,
    MAX_MESSAGE_BYTES,
    MAX_OUTPUT_BYTES,
    MAX_REPLY_BYTES,
    MAX_SECONDS,
    MAX_SIZES,
    MAX_TEXT,
    NODE_TYPES,
    REPLY_TYPES,
    VERSION,
    ProtocolError,
    bad_value,
    check_envelope,
    finite_float,
    is_type,
    json_depth,
    no_constant,
    printable,
)

__all__ = [
    "CONTROL_TYPES",
    "JOB_TYPES",
    "MAX_DEPTH",
    "MAX_LEN",
    "MAX_MESSAGE_BYTES",
    "MAX_OUTPUT_BYTES",
    "MAX_REPLY_BYTES",
    "MAX_SECONDS",
    "MAX_SIZES",
    "MAX_TEXT",
    "NODE_TYPES",
    "REPLY_TYPES",
    "REQUESTS",
    "VERSION",
    "Advice",
    "Cancel",
    "Finished",
    "Heartbeat",
    "Hello",
    "History",
    "JobEnded",
    "JobOutput",
    "Log",
    "Lost",
    "Message",
    "NodeRegister",
    "Ping",
    "ProtocolError",
    "Register",
    "Request",
    "ResizePoint",
    "ResizeReport",
    "Resized",
    "Status",
    "Stop",
    "Submit",
    "decode",
    "encode",
    "error_reply",
    "printable",
    "reply",
]


@dataclass(frozen=True)
class Message:
    """One protocol message: envelope fields plus the type-specific ``body`` (what a client sends
    and reads; the daemon reads requests as :class:`Request` events)."""

    type: str
    seq: int = 0
    job_id: int | None = None
    body: dict[str, Any] = field(default_factory=dict)
    v: int = VERSION


@dataclass(frozen=True)
class ResizeReport:
    """What a job tells the scheduler at a resize point (``resize_point``'s body)."""

    job_id: int
    iteration: int  # iterations completed so far
    nprocs: int
    grid: tuple[int, ...]
    iter_time: float  # seconds, last iteration (or the mean since the last resize point)
    redist_time: float | None = None  # cost of the previous resize, reported one point later
    redist_from: int | None = None  # size before that resize
    host: str = ""
    parked: tuple[str, ...] = ()  # hosts of the ranks parked for reuse, one per rank (reshape.runtime.parking)
    total: int | None = None  # iterations the job runs in all, if it knows (``rt.iterations(n)``)


@dataclass(frozen=True)
class Advice:
    """The answer (``advice``'s body): expand or shrink to ``nprocs`` processes, or continue.

    For an expansion ``hosts`` lists one host name per new rank (repeats allowed);
    empty means "spawn on the job's own hosts" (one machine, or the hostfile).
    """

    action: Literal["expand", "shrink", "continue"]
    nprocs: int
    hosts: tuple[str, ...] = ()
    reason: str = ""


# ---------------------------------------------------------------------- typed requests
@dataclass(frozen=True, kw_only=True, slots=True)
class Request:
    """A decoded, validated request: the envelope's ``seq`` and ``job_id`` plus its body's fields,
    typed (lists become tuples). :func:`decode` returns one subclass per request type."""

    type: ClassVar[str] = ""
    _WIRE: ClassVar[dict[str, str]] = {}  # field -> body key, where the body's name is the envelope's
    seq: int = 0
    job_id: int | None = None
    v: ClassVar[int] = VERSION

    @property
    def body(self) -> dict[str, Any]:
        """The request's body as sent (optional fields left out when None)."""
        out = {}
        for f in fields(self):
            if f.name in ("seq", "job_id"):
                continue
            x = getattr(self, f.name)
            if x is not None:
                out[self._WIRE.get(f.name, f.name)] = list(x) if isinstance(x, tuple) else x
        return out


@dataclass(frozen=True, kw_only=True, slots=True)
class Hello(Request):
    """A job (re)connects at ``nprocs``; ``sizes``: every size its program accepts."""

    type: ClassVar[str] = "hello"
    nprocs: int
    host: str | None = None
    pid: int | None = None
    sizes: tuple[int, ...] | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class ResizePoint(Request):
    """A job at a resize point (Sudarsan & Ribbens 2007 §3.2.3 ``contact_scheduler``): its iteration and its time."""

    type: ClassVar[str] = "resize_point"
    iteration: int
    nprocs: int
    iter_time: float
    grid: tuple[int, ...] | None = None
    redist_time: float | None = None
    redist_from: int | None = None
    host: str | None = None
    parked: tuple[str, ...] | None = None
    total: int | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class Resized(Request):
    type: ClassVar[str] = "resized"
    old: int
    new: int
    seconds: float
    error: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class Lost(Request):
    """The job lost ranks ``ranks`` (of ``old``) and carried on, in place, on the ``new`` survivors."""

    type: ClassVar[str] = "lost"
    old: int
    new: int
    ranks: tuple[int, ...]
    reason: str
    seconds: float | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class Finished(Request):
    type: ClassVar[str] = "finished"
    status: str
    error: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class JobEnded(Request):
    """The monitor of a job's first node saw its processes there end (Sudarsan & Ribbens 2007 §3.1)."""

    type: ClassVar[str] = "job_ended"
    node: str
    incarnation: str
    status: str
    processes: int | None = None
    detail: str | None = None
    attempt: int | None = None  # of a job restarted after a loss (0: the first)
    code: int | None = None  # the exit status of the job's mpiexec, when this monitor ran it


@dataclass(frozen=True, kw_only=True, slots=True)
class JobOutput(Request):
    """Output of a job's ``mpiexec`` run by the monitor of ``node``: bytes ``offset``.. of this attempt's
    output, base64 in ``data`` (at most :data:`MAX_OUTPUT_BYTES` decoded)."""

    type: ClassVar[str] = "job_output"
    node: str
    incarnation: str
    attempt: int
    offset: int
    data: str


@dataclass(frozen=True, kw_only=True, slots=True)
class NodeRegister(Request):
    type: ClassVar[str] = "node_register"
    node: str
    incarnation: str
    pid: int | None = None
    host: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class Heartbeat(Request):
    type: ClassVar[str] = "heartbeat"
    node: str
    incarnation: str
    jobs: tuple[int, ...] = ()
    runs: tuple[dict, ...] | None = None  # the jobs whose mpiexec this monitor runs: {job_id, attempt, pid}
    killed: tuple[dict, ...] | None = None  # attempts it was ordered to kill by tag, none left: {job_id, attempt}


@dataclass(frozen=True, kw_only=True, slots=True)
class Ping(Request):
    type: ClassVar[str] = "ping"


@dataclass(frozen=True, kw_only=True, slots=True)
class Submit(Request):
    type: ClassVar[str] = "submit"
    job: dict[str, Any]


@dataclass(frozen=True, kw_only=True, slots=True)
class Status(Request):
    type: ClassVar[str] = "status"
    limit: int | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class Cancel(Request):
    type: ClassVar[str] = "cancel"
    _WIRE: ClassVar[dict[str, str]] = {"target": "job_id"}
    target: int


@dataclass(frozen=True, kw_only=True, slots=True)
class History(Request):
    type: ClassVar[str] = "history"
    limit: int | None = None
    since: float | None = None
    after: int | None = None  # a page: the first ``limit`` jobs with a larger id


@dataclass(frozen=True, kw_only=True, slots=True)
class Log(Request):
    type: ClassVar[str] = "log"
    _WIRE: ClassVar[dict[str, str]] = {"target": "job_id"}
    target: int
    tail: int | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class Register(Request):
    """A job started by a resource manager in ``allocation`` on ``hosts`` (one per slot) registers."""

    type: ClassVar[str] = "register"
    job: dict[str, Any]
    allocation: str
    hosts: tuple[str, ...]
    restart: bool | None = None  # the registered job's next attempt after a loss, on ``hosts``
    code: int | None = None  # the exit status of the attempt that ended (None: unknown)
    lost: tuple[str, ...] = ()  # the job's nodes found dead


@dataclass(frozen=True, kw_only=True, slots=True)
class Stop(Request):
    type: ClassVar[str] = "stop"
    kill_jobs: bool | None = None


REQUESTS: dict[str, type[Request]] = {c.type: c for c in (
    Hello, ResizePoint, Resized, Lost, Finished, JobEnded, JobOutput, NodeRegister, Heartbeat,
    Ping, Submit, Status, Cancel, History, Log, Stop, Register)}


def _request(env: dict[str, Any]) -> Request:
    cls = REQUESTS[env["type"]]
    body = env.get("body") or {}
    names = {v: k for k, v in cls._WIRE.items()}
    kw = {names.get(k, k): tuple(v) if isinstance(v, list) else v for k, v in body.items()}
    return cls(seq=env["seq"], job_id=env.get("job_id"), **kw)


def encode(msg: Message | Request) -> bytes:
    """The frame for ``msg`` (validated, so a sender cannot emit what a receiver rejects)."""
    env = {"v": msg.v, "type": msg.type, "seq": msg.seq, "job_id": msg.job_id, "body": msg.body}
    data = json.dumps(env, separators=(",", ":"), allow_nan=False).encode()
    check_envelope(env, len(data))
    return data


def decode(frame: bytes, limit: int = MAX_MESSAGE_BYTES) -> Request | Message:
    """Parse and validate one frame: a typed :class:`Request` (one class per request type) or a
    reply :class:`Message`; raises :class:`ProtocolError`.

    Before the schema: at most ``limit`` bytes (a client reading replies passes
    :data:`MAX_REPLY_BYTES`), nesting at most :data:`MAX_DEPTH` deep, numbers
    finite, integers within :data:`MAX_INT`, strings without NUL that UTF-8 can
    encode (JSON's ``"\\ud800"``, a lone surrogate, cannot be). After it: each
    field's length (:data:`MAX_LEN`), seconds within :data:`MAX_SECONDS`, the
    shape of every list. So nothing a peer sends can exhaust the parser's stack,
    or reach the journal as a value that cannot be written back (``1e999`` is
    infinity, which JSON cannot carry; a surrogate, which SQLite cannot store).
    """
    if len(frame) > limit:  # not parsed; its seq, if it comes first as our encoder writes it, is echoed
        seq = _LEADING_SEQ.match(frame[:200])
        what = "request" if limit <= MAX_MESSAGE_BYTES else "message"
        raise ProtocolError("too_large", f"{what} too large: {len(frame)} bytes > {limit // 1024} KiB",
                            int(seq.group(1)) if seq else None)
    if frame.count(b"[") + frame.count(b"{") > MAX_DEPTH and json_depth(frame) > MAX_DEPTH:
        raise ProtocolError("malformed", f"JSON nested more than {MAX_DEPTH} levels deep")
    try:
        env = json.loads(frame.decode("utf-8"), parse_constant=no_constant, parse_float=finite_float)
    except (UnicodeDecodeError, json.JSONDecodeError, ValueError, RecursionError) as e:
        raise ProtocolError("malformed", f"not a UTF-8 JSON object: {e}"[:500]) from None
    bad = bad_value(env)
    if bad:
        seq = env.get("seq") if isinstance(env, dict) and is_type(env.get("seq"), INT) else None
        raise ProtocolError("bad_field", bad, seq)
    check_envelope(env, len(frame))
    if env["type"] in REQUESTS:
        return _request(env)
    return Message(env["type"], env["seq"], env.get("job_id"), env.get("body") or {}, env["v"])


_LEADING_SEQ = re.compile(rb'\{"v":\s*1,\s*"type":\s*"[a-z_]{1,32}",\s*"seq":\s*(\d{1,15})[,}]')


def reply(request: Message | Request, type_: str = "ok", **body: Any) -> Message:
    return Message(type_, request.seq, request.job_id, body)


def error_reply(code: str, message: str, seq: int = 0, job_id: int | None = None) -> Message:
    return Message("error", seq, job_id, {"code": code, "message": message[:2000]})
