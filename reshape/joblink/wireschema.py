"""The wire protocol's limits, its field declarations and the validation of every frame.

The message classes of :mod:`reshape.joblink.protocol` are the schema: each body field is a
dataclass field whose annotation gives its JSON types and whose :func:`wire` declaration gives its
bounds (least value, most seconds, longest text, a shape check). :func:`check_envelope` validates a
frame against them; ``docs/protocol.md`` is the normative description. The limits bound what a peer
may send (sizes, nesting, numbers, text), so that nothing it sends can exhaust the parser or reach
the journal as a value that cannot be written back.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import typing
from collections.abc import Callable, Mapping
from types import UnionType
from typing import Any, ClassVar, Literal

__all__ = [
    "ADVICE_ACTIONS",
    "FINISHED",
    "INT",
    "MAX_DEPTH",
    "MAX_EPOCH",
    "MAX_HOST",
    "MAX_INT",
    "MAX_MESSAGE_BYTES",
    "MAX_OUTPUT_BYTES",
    "MAX_REPLY_BYTES",
    "MAX_SECONDS",
    "MAX_SIZES",
    "MAX_TEXT",
    "VERSION",
    "ProtocolError",
    "Typed",
    "bad_value",
    "check_envelope",
    "finite_float",
    "host_list",
    "is_type",
    "json_depth",
    "no_constant",
    "objects",
    "one_of",
    "printable",
    "rules",
    "sizes_rule",
    "wire",
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
MAX_HOST = 255  # characters of a host, node or incarnation name
MAX_OUTPUT_BYTES = 32 * 1024  # a job_output's data, decoded (base64 makes it 4/3 as long: within a request)
ADVICE_ACTIONS = ("expand", "shrink", "continue")
# done; error: the program failed; lost: a process of the job was lost (a resize could not complete)
FINISHED = ("done", "error", "lost")

INT = (int,)
_JSON = {int: INT, float: (int, float), str: (str,), bool: (bool,), tuple: (list,), dict: (dict,)}
_NONE = type(None)


def wire(default: Any = dataclasses.MISSING, *, key: str | None = None, null: bool = False,
         lo: float | None = None, hi: float | None = None, max_len: int | None = None, nonempty: bool = False,
         check: Callable[[Any], str | None] | None = None) -> Any:
    """A body field of a message class with its bounds: ``key``, its name in the body when not the
    field's; ``null``: JSON null is allowed (else an optional field may only be left out); ``lo``: the
    least value; ``hi``: the most seconds; ``max_len``: the longest text (``nonempty``: and not
    empty); ``check``: why a value that has the right JSON type is refused (or None)."""
    meta = {"key": key, "null": null, "lo": lo, "hi": hi, "max_len": max_len, "nonempty": nonempty,
            "check": check}
    return dataclasses.field(default=default, metadata=meta)


@dataclasses.dataclass(frozen=True)
class Rule:
    """One body field as :func:`check_envelope` checks it (derived from its declaration)."""

    key: str
    attr: str
    types: tuple[type, ...]
    required: bool
    lo: float | None = None
    hi: float | None = None
    max_len: int | None = None
    nonempty: bool = False
    check: Callable[[Any], str | None] | None = None


def _json_types(tp: Any, null: bool) -> tuple[type, ...]:
    """The JSON types a field annotated ``tp`` takes (``X | None``: X's, and null where ``null``)."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, UnionType):
        (inner,) = [a for a in typing.get_args(tp) if a is not _NONE]
        return _json_types(inner, False) + ((_NONE,) if null else ())
    if origin is Literal:
        return _JSON[type(typing.get_args(tp)[0])]
    return _JSON[origin or tp]


@functools.cache
def rules(cls: type) -> tuple[Rule, ...]:
    """The body fields of message class ``cls`` (its dataclass fields declared with :func:`wire`)."""
    hints = typing.get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        if "key" not in f.metadata:
            continue  # an envelope field (seq, job_id) or one that is not sent
        m = f.metadata
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        out.append(Rule(m["key"] or f.name, f.name, _json_types(hints[f.name], m["null"]), required, m["lo"],
                        m["hi"], m["max_len"], m["nonempty"], m["check"]))
    return tuple(out)


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class Typed:
    """A message of a declared type: the envelope's ``seq`` and ``job_id`` plus its body's fields,
    typed (lists become tuples), each declared with :func:`wire`: these declarations are the
    protocol's schema. ``keys``: the body's keys as decoded (so that it encodes back to the same
    JSON); None for one built here, whose fields that are None are left out."""

    type: ClassVar[str] = ""
    v: ClassVar[int] = VERSION
    seq: int = 0
    job_id: int | None = None
    keys: frozenset[str] | None = dataclasses.field(default=None, compare=False, repr=False)

    @property
    def body(self) -> dict[str, Any]:
        """The body as sent."""
        out = {}
        for r in rules(type(self)):
            x = getattr(self, r.attr)
            if (r.key in self.keys) if self.keys is not None else x is not None:
                out[r.key] = list(x) if isinstance(x, tuple) else x
        return out


def one_of(name: str, allowed: tuple[str, ...], said: str) -> Callable[[Any], str | None]:
    """A check that a value is one of ``allowed`` (``said``: how the refusal names them)."""
    return lambda x: None if x in allowed else f"{name} must be {said}"


def objects(name: str) -> Callable[[list], str | None]:
    """A check of a list of JSON objects (their fields are the reader's to check)."""
    return lambda xs: None if all(isinstance(x, dict) for x in xs) else f"{name!r} must list objects"


def host_list(name: str, least: int = 0, note: str = "") -> Callable[[list], str | None]:
    """A check of a list of host names (each of 1-255 characters), ``least`` to :data:`MAX_SIZES` of them."""
    many = f"{least}-{MAX_SIZES}" if least else f"at most {MAX_SIZES}"

    def check(hs: list) -> str | None:
        if not least <= len(hs) <= MAX_SIZES or not all(is_type(h, (str,)) and 0 < len(h) <= MAX_HOST for h in hs):
            return f"{name!r} must list {many} host names{note} of 1-{MAX_HOST} characters"
        return None
    return check


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


def check_envelope(env: Any, size: int, classes: Mapping[str, type | tuple[type, ...]]) -> type:
    """Validate a parsed frame: its envelope, then its body against the class of its type in
    ``classes`` (or the first of several that takes it: the ``ok`` replies); returns that class,
    raises :class:`ProtocolError`."""
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
    if not is_type(t, (str,)):
        raise ProtocolError("malformed", "envelope field 'type' must be a string", seq)
    if seq is None or seq < 0:
        raise ProtocolError("malformed", "envelope field 'seq' must be a non-negative integer", None)
    job_id = env.get("job_id")
    if job_id is not None and (not is_type(job_id, INT) or job_id < 0):
        raise ProtocolError("malformed", "'job_id' must be a non-negative integer or null", seq)
    if t not in classes:
        raise ProtocolError("unknown_type", f"unknown message type {t!r}", seq)
    cands = classes[t] if isinstance(classes[t], tuple) else (classes[t],)
    if not cands:
        raise ProtocolError("unexpected", f"{t!r} does not answer this request", seq)
    if getattr(cands[0], "needs_job", False) and job_id is None:
        raise ProtocolError("malformed", f"{t!r} needs a 'job_id'", seq)
    body = env.get("body", {})
    if body is None:
        body = {}
    if not isinstance(body, dict):
        raise ProtocolError("malformed", "'body' must be a JSON object", seq)
    first = None
    for cls in cands:
        why = _why_not(cls, body)
        if not why:
            return cls
        first = first or why
    raise ProtocolError("bad_field", f"{t}: {first}" if len(cands) == 1 else
                        f"{t}: the body is none of the protocol's {t!r} replies", seq)


def _why_not(cls: type, body: dict[str, Any]) -> str | None:
    """Why ``body`` is not one of ``cls`` (its fields' JSON types, then no other field, then each
    field's bounds in order, then the class's own rule across fields), else None."""
    rs = rules(cls)
    for r in rs:
        if r.key not in body:
            if r.required:
                return f"missing field {r.key!r}"
        elif not is_type(body[r.key], r.types):
            return f"field {r.key!r} must be {'/'.join('null' if x is _NONE else x.__name__ for x in r.types)}"
    extra = set(body) - {r.key for r in rs}
    if extra:
        return f"unknown fields {sorted(extra)}"
    for r in rs:
        x = body.get(r.key)
        if x is not None and (why := _out_of_bounds(r, x)):
            return why
    rule = getattr(cls, "body_rule", None)
    return rule(body) if rule else None


def _out_of_bounds(r: Rule, x: Any) -> str | None:
    """Why value ``x`` (of the right JSON type) breaks the bounds declared for field ``r``, else None."""
    if r.lo is not None and x < r.lo:
        return f"{r.key!r} must be >= {r.lo:g}"
    if r.hi is not None and x > r.hi:
        return f"{r.key!r} must be at most {r.hi:g} seconds, got {x:.6g}"
    if r.max_len is not None and len(x) > r.max_len:
        return f"{r.key!r} must be at most {r.max_len} characters, got {len(x)}"
    if r.nonempty and not x:
        return f"{r.key!r} must be 1-{r.max_len} characters"
    return r.check(x) if r.check else None


def sizes_rule(sizes: list) -> str | None:
    """``hello``'s ``sizes``: 1 to :data:`MAX_SIZES` integers in ``[1, MAX_SIZES]``, strictly ascending."""
    if not sizes or len(sizes) > MAX_SIZES:
        return f"'sizes' must list 1-{MAX_SIZES} sizes, got {len(sizes)}"
    prev = 0
    for i, x in enumerate(sizes):
        if not is_type(x, INT) or not 1 <= x <= MAX_SIZES:
            return f"'sizes'[{i}] must be an integer in [1, {MAX_SIZES}], got {x!r}"[:193]
        if x <= prev:
            return f"'sizes' must be strictly ascending ('sizes'[{i}] = {x} after {prev})"
        prev = x
    return None
