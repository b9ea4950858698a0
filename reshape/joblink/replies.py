"""The daemon's replies (docs/protocol.md, "Daemon → requester"), one class per kind.

``advice`` (:class:`Advice`) answers a resize point and ``error`` (:class:`Error`) any refused
request. Every other request is answered ``ok`` with a body that depends on the request: one class
here for each such body (:class:`Ok` when it is empty), named by the request's ``reply_type``
(:mod:`reshape.joblink.protocol`). The wire type of all of them is ``ok``; a client decodes the reply
to a request into the class its request names. Fields are declared with
:func:`~reshape.joblink.wireschema.wire` like the requests': the classes are the schema.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

from reshape.joblink.wireschema import (
    ADVICE_ACTIONS,
    MAX_HOST,
    MAX_SECONDS,
    Typed,
    is_type,
    objects,
    one_of,
    wire,
)

__all__ = ["OK_REPLIES", "Accepted", "Advice", "Cancelled", "Error", "HistoryView", "LogText", "NodeWelcome",
           "Ok", "Orders", "OutputAt", "Pong", "Reply", "StatusView"]

_ID = {"key": "job_id", "lo": 0}  # a body's ``job_id``: ``target`` here (the envelope's is ``job_id``)
_COUNT = {"lo": 0}
_PERIOD = {"lo": 0, "hi": MAX_SECONDS}


@dataclass(frozen=True, kw_only=True, slots=True)
class Reply(Typed):
    """A decoded, validated reply: :class:`Advice`, :class:`Error`, or one of the ``ok`` bodies."""


@dataclass(frozen=True, slots=True)
class Advice(Reply):
    """The answer to a resize point (``advice``): expand or shrink to ``nprocs`` processes, or continue.

    For an expansion ``hosts`` lists one host name per new rank (repeats allowed);
    empty means "spawn on the job's own hosts" (one machine, or the hostfile).
    """

    type: ClassVar[str] = "advice"
    action: Literal["expand", "shrink", "continue"] = wire(
        check=one_of("action", ADVICE_ACTIONS, f"one of {ADVICE_ACTIONS}"))
    nprocs: int = wire(lo=1)
    hosts: tuple[str, ...] = wire((), check=lambda hs: None if all(is_type(h, (str,)) for h in hs)
                                  else "'hosts' must be strings")
    reason: str = wire("")

    def decision(self) -> Advice:
        """This advice without its envelope (what an advisor returns)."""
        return Advice(self.action, self.nprocs, self.hosts, self.reason)


@dataclass(frozen=True, kw_only=True, slots=True)
class Error(Reply):
    """A request refused: ``code`` names the rule (docs/protocol.md, "Errors")."""

    type: ClassVar[str] = "error"
    code: str = wire()
    message: str = wire()


# ---------------------------------------------------------------------- ok: one body per request
@dataclass(frozen=True, kw_only=True, slots=True)
class Ok(Reply):
    """Done, nothing to say (``hello``, ``resized``, ``lost``, ``finished``, ``job_ended``, ``stop``)."""

    type: ClassVar[str] = "ok"


@dataclass(frozen=True, kw_only=True, slots=True)
class Pong(Ok):
    """``ping``: the daemon's clock and protocol version."""

    now: float = wire()
    version: int = wire(lo=1)


@dataclass(frozen=True, kw_only=True, slots=True)
class Accepted(Ok):
    """``submit``, ``register``: the job's id (``target``; ``job_id`` in the body)."""

    target: int = wire(**_ID)


@dataclass(frozen=True, kw_only=True, slots=True)
class Cancelled(Ok):
    """``cancel``: the job's ``state`` (``cancelled``; or ``cancelling`` until the monitor of ``runner``,
    the node that runs its ``mpiexec``, confirms the kill)."""

    target: int = wire(**_ID)
    state: str = wire(max_len=16)
    runner: str | None = wire(None, max_len=MAX_HOST)


@dataclass(frozen=True, kw_only=True, slots=True)
class LogText(Ok):
    """``log``: the tail of the job's output."""

    target: int = wire(**_ID)
    text: str = wire()


@dataclass(frozen=True, kw_only=True, slots=True)
class NodeWelcome(Ok):
    """``node_register``: the heartbeat period expected, the timeout after which a silent node is
    down (seconds), and the prefix of the tags of this daemon's jobs."""

    node: str = wire(max_len=MAX_HOST)
    heartbeat: float = wire(**_PERIOD)
    timeout: float = wire(**_PERIOD)
    tag: str = wire()


@dataclass(frozen=True, kw_only=True, slots=True)
class Orders(Ok):
    """``heartbeat``: the monitor's orders (docs/protocol.md, "Jobs on nodes"), when there are any."""

    orders: tuple[dict, ...] | None = wire(None, check=objects("orders"))


@dataclass(frozen=True, kw_only=True, slots=True)
class OutputAt(Ok):
    """``job_output``: how many bytes of the attempt's output the daemon holds."""

    at: int = wire(**_COUNT)


@dataclass(frozen=True, kw_only=True, slots=True)
class StatusView(Ok):
    """``status``: slots, the jobs running (cancelling and ending ones with them), queued, waiting and
    recently ended (a page each, with the totals), the nodes and the daemon's own figures; each job
    and node an object (docs/protocol.md, "Control client → daemon")."""

    now: float = wire()
    daemon: dict = wire()
    total_slots: int = wire(**_COUNT)
    free_slots: int = wire()
    capacity_slots: int = wire(**_COUNT)
    running: tuple[dict, ...] = wire(check=objects("running"))
    running_total: int = wire(**_COUNT)
    queue: tuple[dict, ...] = wire(check=objects("queue"))
    queued_total: int = wire(**_COUNT)
    waiting: tuple[dict, ...] = wire(check=objects("waiting"))
    waiting_total: int = wire(**_COUNT)
    ended: tuple[dict, ...] = wire(check=objects("ended"))
    nodes: tuple[dict, ...] = wire(check=objects("nodes"))


@dataclass(frozen=True, kw_only=True, slots=True)
class HistoryView(Ok):
    """``history``: the jobs listed with their events, the node events, and how many jobs there are."""

    total_slots: int = wire(**_COUNT)
    now: float = wire()
    jobs: tuple[dict, ...] = wire(check=objects("jobs"))
    events: tuple[dict, ...] = wire(check=objects("events"))
    node_events: tuple[dict, ...] = wire(check=objects("node_events"))
    jobs_total: int = wire(**_COUNT)


# the ``ok`` bodies, tried in this order on a reply read without its request (none takes another's body
# but :class:`Ok`'s empty one, which :class:`Orders` takes too)
OK_REPLIES: tuple[type[Ok], ...] = (Ok, Pong, Accepted, Cancelled, LogText, NodeWelcome, Orders, OutputAt,
                                    StatusView, HistoryView)
