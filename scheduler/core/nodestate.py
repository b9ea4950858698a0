"""NodeTable as the System Monitor sees them (Sudarsan & Ribbens 2007 §3.1), the node half of the scheduler core.

:class:`NodeTable` holds a record per pool node: node monitors register and
heartbeat, silent nodes go down, a resource manager grants and takes back
nodes (``scheduler.rm``), and the nodes of a lost attempt are suspect until
they heartbeat again. It knows no job: what a node's loss does to the jobs on
it is ``scheduler.core.runs``'s. Like the rest of the core it is sans I/O. The
rules are in ``scheduler.core.state``'s module docstring.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from scheduler.core.actions import StateError

if TYPE_CHECKING:
    from scheduler.core.pool import Pool

__all__ = ["NodeRecord", "NodeTable"]


@dataclass
class NodeRecord:
    """A pool node as the System Monitor sees it (``last_seen`` is not journaled)."""

    host: str
    state: str = "unmonitored"  # unmonitored | up | down
    incarnation: str | None = None  # of the registered monitor
    since: float | None = None
    reason: str = ""
    monitor: dict[str, Any] = field(default_factory=dict)  # pid, host of the monitor
    jobs: list[int] = field(default_factory=list)  # jobs whose first node this is, per the monitor
    last_seen: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"host": self.host, "state": self.state, "incarnation": self.incarnation, "since": self.since,
                "reason": self.reason, "monitor": self.monitor, "jobs": self.jobs}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> NodeRecord:
        return cls(**{k: v for k, v in d.items() if k != "last_seen"})


class NodeTable:
    """The pool's nodes as the System Monitor sees them. ``pool``: their slots (a node down leaves it);
    ``node_timeout``: seconds of silence after which a monitored node is down; ``require_monitors``:
    every node is down until its monitor registers. ``node_events`` (node history) and ``dirty_nodes``
    are the journal's; ``suspect``: host -> when an attempt on it was lost (no placement until it
    heartbeats)."""

    def __init__(self, pool: Pool, node_timeout: float = 5.0, require_monitors: bool = False):
        self.pool = pool
        self.node_timeout = node_timeout
        self.nodes: dict[str, NodeRecord] = {n.host: NodeRecord(n.host) for n in pool.nodes}
        self.node_events: list[dict[str, Any]] = []  # node history, appended to the journal
        self.dirty_nodes: set[str] = set()
        self.suspect: dict[str, float] = {}
        self._last_check: float | None = None
        if require_monitors:
            for rec in self.nodes.values():
                rec.state, rec.reason = "down", "no node monitor yet"
                pool.set_down(rec.host)

    def event(self, now: float, rec: NodeRecord, kind: str, detail: str = "") -> None:
        self.dirty_nodes.add(rec.host)
        self.node_events.append({"t": now, "host": rec.host, "kind": kind, "detail": detail,
                                 "total": self.pool.total})

    def node(self, host: str) -> NodeRecord:
        if host not in self.nodes:
            raise StateError("unknown_node", f"no node {host!r} in the pool ({', '.join(self.nodes)})")
        return self.nodes[host]

    def up(self, host: str | None, monitored: bool = False) -> bool:
        """Whether ``host`` is up (``monitored``: under a registered monitor)."""
        rec = self.nodes.get(host) if host is not None else None
        return rec is not None and rec.state == "up" and (not monitored or rec.incarnation is not None)

    def register(self, host: str, incarnation: str, now: float, monitor: dict[str, Any] | None = None) -> bool:
        """A node monitor (re)starts: the node is up (back in the pool if it was down). False: the same
        monitor again (its first reply was lost), nothing changed; True: a scheduling pass is due."""
        rec = self.node(host)
        old = rec.incarnation
        was = rec.state
        rec.incarnation, rec.monitor, rec.last_seen, rec.jobs = incarnation, dict(monitor or {}), now, []
        rec.state, rec.reason = "up", ""
        if was != "up":
            rec.since = now
        self.suspect.pop(host, None)
        self.pool.set_up(host)
        if was == "up" and old == incarnation:
            return False
        # down: lost (rejoin), or never registered yet while monitors are required (up)
        kind = "monitor_restart" if was == "up" else "rejoin" if old is not None else "up"
        self.event(now, rec, kind, f"monitor {incarnation}")
        return True

    def heartbeat(self, host: str, incarnation: str, jobs: list[int], now: float) -> None:
        """A heartbeat of the registered monitor; any other gets ``not_registered`` (it registers again)."""
        rec = self.node(host)
        if rec.state != "up" or rec.incarnation != incarnation:
            raise StateError("not_registered", f"node {host!r} is {rec.state}; monitor {incarnation} "
                             f"must register (node_register)")
        rec.last_seen = now
        self.cleared(host, now)
        if jobs != rec.jobs:
            rec.jobs = list(jobs)
            self.dirty_nodes.add(host)

    def silent(self, now: float) -> Iterator[tuple[str, str]]:
        """The nodes whose heartbeats stopped for ``node_timeout`` seconds, with why, as the caller takes
        them down (each is checked after the previous one went down).

        Silence is counted on the daemon's side only while the daemon was
        listening: when the previous check is more than a second ago (the
        daemon was stalled, e.g. starved of CPU, and heartbeats queued or were
        dropped by monitors that timed out), that gap is credited to every
        node, so a stalled daemon does not write off nodes that were fine.
        """
        gap = 0.0 if self._last_check is None else now - self._last_check
        self._last_check = now
        if gap > 1.0:
            for rec in self.nodes.values():
                if rec.last_seen is not None:
                    rec.last_seen += gap
        for rec in self.nodes.values():
            if rec.state == "up" and rec.last_seen is not None and now - rec.last_seen > self.node_timeout:
                yield rec.host, f"no heartbeat for {now - rec.last_seen:.1f} s"

    def set_down(self, host: str, now: float, reason: str) -> bool:
        """``host`` is gone: its slots leave the pool. False: it was down already."""
        rec = self.node(host)
        if rec.state == "down":
            return False
        rec.state, rec.since, rec.reason = "down", now, reason
        self.suspect.pop(host, None)
        self.pool.set_down(host)
        self.event(now, rec, "down", reason)
        return True

    def grant(self, host: str, now: float, detail: str, lease: str | None = None) -> bool:
        """A resource manager gave ``host`` to the pool (``lease``: only jobs of that allocation may use it,
        :meth:`scheduler.core.pool.Pool.lease`). True: it came up (a scheduling pass is due)."""
        rec = self.node(host)
        self.pool.lease(host, lease)
        if rec.state == "up":
            return False
        rec.state, rec.since, rec.reason, rec.last_seen = "up", now, detail, None  # no heartbeats expected
        self.pool.set_up(host)
        self.event(now, rec, "granted", detail)
        return True

    def release(self, host: str, now: float, detail: str, expanding: bool) -> bool:
        """``host`` goes back to the resource manager; only a node no job uses can (False otherwise).
        ``expanding``: a pending expansion of a job is onto it."""
        rec = self.node(host)
        if rec.state == "down" or self.pool.used[host] or expanding:
            return False
        rec.state, rec.since, rec.reason = "down", now, detail
        self.pool.set_down(host)
        self.pool.lease(host, None)
        self.event(now, rec, "released", detail)
        return True

    def drain(self, host: str, now: float, why: str, on: bool = True) -> bool:
        """A resource manager says ``host`` is about to go (``on``) or is offered again: whether it changed
        (a node down or not in the pool is left as it is)."""
        rec = self.nodes.get(host)
        if rec is None or host in self.pool.down or (host in self.pool.draining) == on:
            return False
        self.pool.set_draining(host, on)
        self.event(now, rec, "draining" if on else "undrained", why)
        return True

    def unlease(self, host: str) -> None:
        """``host``'s allocation ended while a job still uses it: its free slots are everyone's until released."""
        self.pool.lease(host, None)

    def not_ours(self, host: str, detail: str) -> None:
        """``host`` is in the pool's config but another resource manager holds it (down, no event)."""
        rec = self.node(host)
        rec.state, rec.reason = "down", detail
        self.pool.set_down(host)

    def suspect_hosts(self, hosts: list[str], now: float) -> None:
        """The monitored nodes of a lost attempt take nothing new until each heartbeats again: a node that
        died is only known down after the node timeout, and a restart placed on it meanwhile would be lost too."""
        for h in set(hosts):
            rec = self.nodes.get(h)
            if rec is not None and rec.state == "up" and rec.last_seen is not None and h not in self.pool.draining:
                self.suspect[h] = now
                self.pool.set_draining(h)

    def cleared(self, host: str, now: float) -> None:
        """``host`` heartbeated (or registered, or went down): no longer suspect."""
        t = self.suspect.get(host)
        if t is not None and now > t:
            del self.suspect[host]
            self.pool.set_draining(host, False)

    def restore(self, records: list[NodeRecord], now: float) -> None:
        """Journaled node states; nodes that were up under a monitor get one timeout from ``now`` to
        heartbeat again (a node a resource manager granted has no monitor and expects no heartbeat)."""
        for r in records:
            if r.host not in self.nodes:
                continue  # no longer in the pool config
            r.last_seen = now if r.state == "up" and r.incarnation is not None else None
            self.nodes[r.host] = r
            if r.state == "down":
                self.pool.set_down(r.host)
            else:
                self.pool.set_up(r.host)

    def rows(self, now: float) -> list[dict[str, Any]]:
        rows = []
        for d in self.pool.describe():
            rec = self.nodes[d["host"]]
            draining = d["host"] in self.pool.draining and rec.state != "down"
            # suspect: a lost attempt ran there, nothing new is placed until it heartbeats (core.restarts)
            state = "suspect" if d["host"] in self.suspect else "draining" if draining else rec.state
            d |= {"state": state, "since": rec.since, "reason": rec.reason,
                  "monitor": rec.monitor,
                  "seen_ago": None if rec.last_seen is None else round(now - rec.last_seen, 3),
                  "jobs": rec.jobs}
            rows.append(d)
        return rows
