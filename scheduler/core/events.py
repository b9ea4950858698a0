"""The core's typed events: a :mod:`reshape.joblink.protocol` request in, (result, actions) out.

:class:`TypedEvents` is mixed into ``scheduler.core.state.ClusterState``: one table maps each request
type of a job or a node monitor to the state method that handles it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from reshape.joblink.protocol import (
    Finished,
    Heartbeat,
    Hello,
    JobEnded,
    Lost,
    NodeRegister,
    Request,
    Resized,
    ResizePoint,
)
from scheduler.core.actions import Kill, Launch, StateError

__all__ = ["TypedEvents"]


class TypedEvents:
    """``handle``: the one entry of typed events into ``ClusterState``."""

    def handle(self, event: Request, now: float) -> tuple[Any, list[Launch | Kill]]:
        """One event from a job or a node monitor (a :mod:`reshape.joblink.protocol` request) -> (result, actions):
        the advice for a ``resize_point``, None for the others."""
        on = _HANDLERS.get(type(event))
        if on is None:
            raise StateError("unexpected", f"{event.type!r} is not an event of the scheduler core")
        return on(self, event, now)


def _hello(s: Any, ev: Hello, now: float) -> tuple[Any, list]:
    s.hello(ev.job_id, ev.nprocs, now, ev.sizes)
    return None, []


def _resized(s: Any, ev: Resized, now: float) -> tuple[Any, list]:
    return None, s.resized(ev.job_id, ev.old, ev.new, ev.seconds, ev.error, now)


def _lost(s: Any, ev: Lost, now: float) -> tuple[Any, list]:
    return None, s.lost(ev.job_id, ev.old, ev.new, tuple(ev.ranks), ev.reason, now)


def _finished(s: Any, ev: Finished, now: float) -> tuple[Any, list]:
    s.finished(ev.job_id, ev.status, ev.error, now)
    return None, []


def _job_ended(s: Any, ev: JobEnded, now: float) -> tuple[Any, list]:
    return None, s.job_ended(ev.job_id, ev.node, ev.status, ev.detail, now, ev.attempt or 0, ev.code)


def _node_register(s: Any, ev: NodeRegister, now: float) -> tuple[Any, list]:
    monitor = {k: v for k, v in (("pid", ev.pid), ("host", ev.host)) if v is not None}
    return None, s.node_register(ev.node, ev.incarnation, now, monitor)


def _heartbeat(s: Any, ev: Heartbeat, now: float) -> tuple[Any, list]:
    s.node_heartbeat(ev.node, ev.incarnation, list(ev.jobs), now)
    return None, s.runs_seen(ev.node, list(ev.jobs), list(ev.runs or ()), now, list(ev.killed or ()))


_HANDLERS: dict[type, Callable[[Any, Any, float], tuple[Any, list]]] = {
    ResizePoint: lambda s, ev, now: (s.resize_point(ev, now), []),
    Hello: _hello, Resized: _resized, Lost: _lost, Finished: _finished, JobEnded: _job_ended,
    NodeRegister: _node_register, Heartbeat: _heartbeat,
}
