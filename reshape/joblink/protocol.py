"""Wire protocol between jobs, the command line and the scheduler daemon (version 1).

``docs/protocol.md`` is the normative description; this module is its only
implementation: its classes are the schema, and :mod:`reshape.joblink.wireschema` holds the
limits and the frame checks derived from them. A message is one ZeroMQ frame holding a
UTF-8 JSON object, the *envelope*::

    {"v": 1, "type": "resize_point", "seq": 7, "job_id": 3, "body": {...}}

``decode`` validates the envelope and the body of every known type (field
names, JSON types, ranges) and raises :class:`ProtocolError` with a stable
``code`` on anything else, so the daemon can answer with an ``error`` message
and carry on serving.

:class:`ResizePoint` and :class:`Advice` are the two sides of a resize point: what a
job reports and what it is told. The runtime's advisors, the daemon's client and the scheduler
core exchange these same records; the dataclasses here and the replies' in
:mod:`reshape.joblink.replies`, their fields declared with their bounds, are the only schema
(:mod:`reshape.joblink.wireschema` derives the validation from them). Each request class names the
class of its reply (``reply_type``), so a client decodes an ``ok`` into its request's answer.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

from reshape.joblink.replies import (
    OK_REPLIES,
    Accepted,
    Advice,
    Cancelled,
    Error,
    HistoryView,
    LogText,
    NodeWelcome,
    Ok,
    Orders,
    OutputAt,
    Pong,
    Reply,
    StatusView,
)
from reshape.joblink.wireschema import (
    FINISHED,
    INT,
    MAX_DEPTH,
    MAX_EPOCH,
    MAX_HOST,
    MAX_MESSAGE_BYTES,
    MAX_OUTPUT_BYTES,
    MAX_REPLY_BYTES,
    MAX_SECONDS,
    MAX_SIZES,
    MAX_TEXT,
    VERSION,
    ProtocolError,
    Typed,
    bad_value,
    check_envelope,
    finite_float,
    host_list,
    is_type,
    json_depth,
    no_constant,
    one_of,
    printable,
    rules,
    sizes_rule,
    wire,
)

__all__ = [
    "CONTROL_TYPES",
    "JOB_TYPES",
    "MAX_DEPTH",
    "MAX_MESSAGE_BYTES",
    "MAX_OUTPUT_BYTES",
    "MAX_REPLY_BYTES",
    "MAX_SECONDS",
    "MAX_SIZES",
    "MAX_TEXT",
    "NODE_TYPES",
    "OK_REPLIES",
    "REPLIES",
    "REPLY_TYPES",
    "REQUESTS",
    "VERSION",
    "Accepted",
    "Advice",
    "Cancel",
    "Cancelled",
    "Error",
    "Finished",
    "Heartbeat",
    "Hello",
    "History",
    "HistoryView",
    "JobEnded",
    "JobOutput",
    "Log",
    "LogText",
    "Lost",
    "Message",
    "NodeRegister",
    "NodeWelcome",
    "Ok",
    "Orders",
    "OutputAt",
    "Ping",
    "Pong",
    "ProtocolError",
    "Register",
    "Reply",
    "Request",
    "ResizePoint",
    "Resized",
    "Status",
    "StatusView",
    "Stop",
    "Submit",
    "Typed",
    "answer",
    "decode",
    "encode",
    "error_reply",
    "printable",
]


@dataclass(frozen=True)
class Message:
    """A message of any type with its ``body`` as a dict: a request a client builds by hand
    (``encode`` validates it all the same as one of the typed classes)."""

    type: str
    seq: int = 0
    job_id: int | None = None
    body: dict[str, Any] = field(default_factory=dict)
    v: int = VERSION


ReplyClass = type[Reply]  # (a class attribute ``type`` hides the builtin in the classes' annotations)


@dataclass(frozen=True, kw_only=True, slots=True)
class Request(Typed):
    """A decoded, validated request; :func:`decode` returns one subclass per request type.
    ``needs_job``: sent by a job (its envelope names it); ``from_node``: sent by a node monitor;
    ``reply_type``: the class of the reply when the request is served (:mod:`reshape.joblink.replies`)."""

    needs_job: ClassVar[bool] = False
    from_node: ClassVar[bool] = False
    reply_type: ClassVar[ReplyClass] = Ok


_TEXT = {"max_len": MAX_TEXT}
_NAME = {"max_len": MAX_HOST, "nonempty": True}  # a node or incarnation name
_SECONDS = {"lo": 0, "hi": MAX_SECONDS}


# ---------------------------------------------------------------------- job requests
@dataclass(frozen=True, kw_only=True, slots=True)
class Hello(Request):
    """A job (re)connects at ``nprocs``; ``sizes``: every size its program accepts."""

    type: ClassVar[str] = "hello"
    needs_job: ClassVar[bool] = True
    nprocs: int = wire(lo=1)
    host: str | None = wire(None, max_len=MAX_HOST)
    pid: int | None = wire(None, lo=0)
    sizes: tuple[int, ...] | None = wire(None, check=sizes_rule)


def _grid(g: list) -> str | None:
    return None if len(g) <= 3 and all(is_type(x, INT) and x >= 1 for x in g) \
        else "'grid' must list 1-3 positive integers"


@dataclass(frozen=True, kw_only=True, slots=True)
class ResizePoint(Request):
    """A job at a resize point (Sudarsan & Ribbens 2007 §3.2.3 ``contact_scheduler``): its iteration
    (completed so far) and its time (seconds, the last iteration's or the mean since the last point).

    ``redist_time``: the previous resize's cost, from ``redist_from`` processes, reported one point
    later; ``parked``: the hosts of its ranks parked for reuse (``reshape.runtime.parking``), one per
    rank; ``total``: the iterations it runs in all, when it knows (``rt.iterations(n)``).
    """

    type: ClassVar[str] = "resize_point"
    reply_type: ClassVar[ReplyClass] = Advice
    needs_job: ClassVar[bool] = True
    iteration: int = wire(lo=0)
    nprocs: int = wire(lo=1)
    grid: tuple[int, ...] | None = wire(None, check=_grid)
    iter_time: float = wire(**_SECONDS)
    redist_time: float | None = wire(None, null=True, **_SECONDS)
    redist_from: int | None = wire(None, null=True, lo=1)
    host: str | None = wire(None, max_len=MAX_HOST)
    parked: tuple[str, ...] | None = wire(None, check=host_list("parked"))
    total: int | None = wire(None, null=True)


@dataclass(frozen=True, kw_only=True, slots=True)
class Resized(Request):
    """The outcome of the resize a job was advised: ``old`` to ``new`` in ``seconds``, or ``error``."""

    type: ClassVar[str] = "resized"
    needs_job: ClassVar[bool] = True
    old: int = wire(lo=1)
    new: int = wire(lo=1)
    seconds: float = wire(**_SECONDS)
    error: str | None = wire(None, null=True, **_TEXT)


@dataclass(frozen=True, kw_only=True, slots=True)
class Finished(Request):
    type: ClassVar[str] = "finished"
    needs_job: ClassVar[bool] = True
    status: str = wire(max_len=16, check=one_of("status", FINISHED, f"one of {', '.join(FINISHED)}"))
    error: str | None = wire(None, null=True, **_TEXT)


def _lost_ranks(body: dict[str, Any]) -> str | None:
    """``lost``: 1 to old-1 distinct ranks in ``[0, old)``, and ``new`` at most the survivors."""
    rs, old = body["ranks"], body["old"]
    if not 0 < len(rs) < old or not all(is_type(r, INT) and 0 <= r < old for r in rs) or len(set(rs)) != len(rs):
        return f"'ranks' must list 1 to old-1 distinct ranks in [0, old) (integers), got {json.dumps(rs)[:100]}"
    if body["new"] > old - len(rs):
        return f"'new' {body['new']} must be at most old - lost = {old - len(rs)}"
    return None


@dataclass(frozen=True, kw_only=True, slots=True)
class Lost(Request):
    """The job lost ranks ``ranks`` (of ``old``) and carried on, in place, on the ``new`` survivors."""

    type: ClassVar[str] = "lost"
    needs_job: ClassVar[bool] = True
    body_rule: ClassVar = staticmethod(_lost_ranks)
    old: int = wire(lo=1)
    new: int = wire(lo=1)
    ranks: tuple[int, ...] = wire()
    reason: str = wire(**_TEXT)
    seconds: float | None = wire(None, null=True, **_SECONDS)


@dataclass(frozen=True, kw_only=True, slots=True)
class JobEnded(Request):
    """The monitor of a job's first node saw its processes there end (Sudarsan & Ribbens 2007 §3.1)."""

    type: ClassVar[str] = "job_ended"
    needs_job: ClassVar[bool] = True
    from_node: ClassVar[bool] = True
    node: str = wire(**_NAME)
    incarnation: str = wire(**_NAME)
    status: str = wire(max_len=16, check=one_of("status", ("end", "error"), "'end' or 'error'"))
    processes: int | None = wire(None, lo=0)
    detail: str | None = wire(None, null=True, **_TEXT)
    attempt: int | None = wire(None, lo=0)  # of a job restarted after a loss (0: the first)
    code: int | None = wire(None)  # the exit status of the job's mpiexec, when this monitor ran it


@dataclass(frozen=True, kw_only=True, slots=True)
class JobOutput(Request):
    """Output of a job's ``mpiexec`` run by the monitor of ``node``: bytes ``offset``.. of this attempt's
    output, base64 in ``data`` (at most :data:`MAX_OUTPUT_BYTES` decoded)."""

    type: ClassVar[str] = "job_output"
    reply_type: ClassVar[ReplyClass] = OutputAt
    needs_job: ClassVar[bool] = True
    from_node: ClassVar[bool] = True
    node: str = wire(**_NAME)
    incarnation: str = wire(**_NAME)
    attempt: int = wire(lo=0)
    offset: int = wire(lo=0)
    data: str = wire(check=lambda d: None if len(d) <= (MAX_OUTPUT_BYTES * 4) // 3 + 4
                     else f"'data' must hold at most {MAX_OUTPUT_BYTES} bytes (base64)")


# ---------------------------------------------------------------------- node monitors' control requests
@dataclass(frozen=True, kw_only=True, slots=True)
class NodeRegister(Request):
    type: ClassVar[str] = "node_register"
    reply_type: ClassVar[ReplyClass] = NodeWelcome
    from_node: ClassVar[bool] = True
    node: str = wire(**_NAME)
    incarnation: str = wire(**_NAME)
    pid: int | None = wire(None, lo=0)
    host: str | None = wire(None, max_len=MAX_HOST)


def _records(*keys: str) -> Any:
    """A check of a list of objects with exactly ``keys``, each a non-negative integer."""
    def check(rs: list) -> str | None:
        if all(isinstance(r, dict) and set(r) == set(keys) and all(is_type(v, INT) and v >= 0 for v in r.values())
               for r in rs):
            return None
        return f"must list objects {{{', '.join(keys)}}} of non-negative integers"
    return check


_RUNS, _KILLED = _records("job_id", "attempt", "pid"), _records("job_id", "attempt")


@dataclass(frozen=True, kw_only=True, slots=True)
class Heartbeat(Request):
    type: ClassVar[str] = "heartbeat"
    reply_type: ClassVar[ReplyClass] = Orders
    from_node: ClassVar[bool] = True
    node: str = wire(**_NAME)
    incarnation: str = wire(**_NAME)
    jobs: tuple[int, ...] = wire((), check=lambda js: None if all(is_type(x, INT) and x >= 0 for x in js)
                                 else "'jobs' must list job ids")
    # the jobs whose mpiexec this monitor runs: {job_id, attempt, pid}
    runs: tuple[dict, ...] | None = wire(None, check=lambda rs: (w := _RUNS(rs)) and f"'runs' {w}")
    # attempts it was ordered to kill by tag, none left: {job_id, attempt}
    killed: tuple[dict, ...] | None = wire(None, check=lambda rs: (w := _KILLED(rs)) and f"'killed' {w}")


# ---------------------------------------------------------------------- control requests
@dataclass(frozen=True, kw_only=True, slots=True)
class Ping(Request):
    type: ClassVar[str] = "ping"
    reply_type: ClassVar[ReplyClass] = Pong


@dataclass(frozen=True, kw_only=True, slots=True)
class Submit(Request):
    type: ClassVar[str] = "submit"
    reply_type: ClassVar[ReplyClass] = Accepted
    job: dict[str, Any] = wire()


@dataclass(frozen=True, kw_only=True, slots=True)
class Status(Request):
    type: ClassVar[str] = "status"
    reply_type: ClassVar[ReplyClass] = StatusView
    limit: int | None = wire(None, lo=0)


@dataclass(frozen=True, kw_only=True, slots=True)
class Cancel(Request):
    type: ClassVar[str] = "cancel"
    reply_type: ClassVar[ReplyClass] = Cancelled
    target: int = wire(key="job_id", lo=0)


@dataclass(frozen=True, kw_only=True, slots=True)
class History(Request):
    type: ClassVar[str] = "history"
    reply_type: ClassVar[ReplyClass] = HistoryView
    limit: int | None = wire(None, lo=0)
    since: float | None = wire(None, lo=0, hi=MAX_EPOCH)
    after: int | None = wire(None, lo=0)  # a page: the first ``limit`` jobs with a larger id


@dataclass(frozen=True, kw_only=True, slots=True)
class Log(Request):
    type: ClassVar[str] = "log"
    reply_type: ClassVar[ReplyClass] = LogText
    target: int = wire(key="job_id", lo=0)
    tail: int | None = wire(None, lo=0)


@dataclass(frozen=True, kw_only=True, slots=True)
class Register(Request):
    """A job started by a resource manager in ``allocation`` on ``hosts`` (one per slot) registers
    with a site controller (docs/slurm.md, "Site mode"); after its mpiexec exited, it asks for its
    next attempt there (``restart``; ``code``: the exit status, None: unknown; ``lost``: its nodes
    found dead)."""

    type: ClassVar[str] = "register"
    reply_type: ClassVar[ReplyClass] = Accepted
    job: dict[str, Any] = wire()
    allocation: str = wire(max_len=64, nonempty=True)
    hosts: tuple[str, ...] = wire(check=host_list("hosts", 1, " (one per slot)"))
    restart: bool | None = wire(None)
    code: int | None = wire(None, null=True)
    lost: tuple[str, ...] = wire((), check=host_list("lost"))


@dataclass(frozen=True, kw_only=True, slots=True)
class Stop(Request):
    type: ClassVar[str] = "stop"
    kill_jobs: bool | None = wire(None)


REQUESTS: dict[str, type[Request]] = {c.type: c for c in (
    Hello, ResizePoint, Resized, Lost, Finished, JobEnded, JobOutput, NodeRegister, Heartbeat,
    Ping, Submit, Status, Cancel, History, Log, Stop, Register)}
# a reply's class by its wire type; ``ok``: one of several, the request's ``reply_type`` says which
REPLIES: dict[str, type[Reply] | tuple[type[Reply], ...]] = {"ok": OK_REPLIES, "advice": Advice, "error": Error}
JOB_TYPES = frozenset(t for t, c in REQUESTS.items() if c.needs_job)
CONTROL_TYPES = frozenset(REQUESTS) - JOB_TYPES
NODE_TYPES = frozenset(t for t, c in REQUESTS.items() if c.from_node)  # sent by node monitors
REPLY_TYPES = frozenset(REPLIES)
_CLASSES = {**REQUESTS, **REPLIES}


def _typed(cls: type[Typed], env: dict[str, Any]) -> Typed:
    body = env.get("body") or {}
    attr = {r.key: r.attr for r in rules(cls)}
    kw = {attr[k]: tuple(v) if isinstance(v, list) else v for k, v in body.items()}
    return cls(seq=env["seq"], job_id=env.get("job_id"), keys=frozenset(body), **kw)


def encode(msg: Message | Typed) -> bytes:
    """The frame for ``msg`` (validated against its class, so a sender cannot emit what a receiver rejects)."""
    env = {"v": msg.v, "type": msg.type, "seq": msg.seq, "job_id": msg.job_id, "body": msg.body}
    data = json.dumps(env, separators=(",", ":"), allow_nan=False).encode()
    check_envelope(env, len(data), {**_CLASSES, msg.type: type(msg)} if isinstance(msg, Typed) else _CLASSES)
    return data


def decode(frame: bytes, limit: int = MAX_MESSAGE_BYTES, answering: type[Request] | None = None) -> Typed:
    """Parse and validate one frame: a typed :class:`Request` (one class per request type) or a typed
    :class:`Reply`; raises :class:`ProtocolError`. ``answering``: the class of the request this frame
    answers, whose ``reply_type`` an ``ok`` must be (``unexpected`` when the request is not answered
    ``ok``); without it, an ``ok`` is the first of :data:`OK_REPLIES` that takes its body.

    Before the schema: at most ``limit`` bytes (a client reading replies passes
    :data:`MAX_REPLY_BYTES`), nesting at most :data:`MAX_DEPTH` deep, numbers
    finite, integers within :data:`MAX_INT`, strings without NUL that UTF-8 can
    encode (JSON's ``"\\ud800"``, a lone surrogate, cannot be). After it: each
    field's declared bounds: its length, seconds within :data:`MAX_SECONDS`, the
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
    classes = _CLASSES
    if answering is not None:
        rt = answering.reply_type
        classes = {**_CLASSES, "ok": (rt,) if rt.type == "ok" else ()}
    return _typed(check_envelope(env, len(frame), classes), env)


_LEADING_SEQ = re.compile(rb'\{"v":\s*1,\s*"type":\s*"[a-z_]{1,32}",\s*"seq":\s*(\d{1,15})[,}]')


def answer(request: Message | Request, rep: Reply) -> Reply:
    """The typed reply ``rep`` (an :class:`Advice`, say) as the answer to ``request``."""
    return replace(rep, seq=request.seq, job_id=request.job_id, keys=None)


def error_reply(code: str, message: str, seq: int = 0, job_id: int | None = None) -> Error:
    return Error(code=code, message=message[:MAX_TEXT], seq=seq, job_id=job_id)
