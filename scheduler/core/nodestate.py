"""Nodes as the System Monitor sees them (Sudarsan & Ribbens 2007 §3.1), the node half of the scheduler core.

:class:`NodeStates` is mixed into ``scheduler.core.state.ClusterState``: node
monitors register and heartbeat, silent nodes go down (their jobs fail), a
resource manager grants and takes back nodes (``scheduler.rm``). Like the
rest of the core it is sans I/O: events and ``now`` in, actions out. The
rules are in ``scheduler.core.state``'s module docstring.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from scheduler.core.actions import Kill, Launch, StateError

if TYPE_CHECKING:
    from scheduler.core.pool import Pool

__all__ = ["NodeRecord", "NodeStates"]


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


class NodeStates:
    """The node events of the core; expects ``pool``, ``nodes``, ``node_events``, ``dirty_nodes``,
    ``node_timeout`` and the job helpers of ``ClusterState``."""

    pool: Pool
    nodes: dict[str, NodeRecord]
    node_timeout: float

    def _node_event(self, now: float, rec: NodeRecord, kind: str, detail: str = "") -> None:
        self.dirty_nodes.add(rec.host)
        self.node_events.append({"t": now, "host": rec.host, "kind": kind, "detail": detail,
                                 "total": self.pool.total})

    def _node(self, host: str) -> NodeRecord:
        if host not in self.nodes:
            raise StateError("unknown_node", f"no node {host!r} in the pool ({', '.join(self.nodes)})")
        return self.nodes[host]

    def node_register(self, host: str, incarnation: str, now: float,
                      monitor: dict[str, Any] | None = None) -> list[Launch | Kill]:
        """A node monitor (re)starts: the node is up (back in the pool if it was down)."""
        rec = self._node(host)
        old = rec.incarnation
        was = rec.state
        rec.incarnation, rec.monitor, rec.last_seen, rec.jobs = incarnation, dict(monitor or {}), now, []
        rec.state, rec.reason = "up", ""
        if was != "up":
            rec.since = now
        self.suspect.pop(host, None)
        self.pool.set_up(host)
        if was == "up" and old == incarnation:
            return []  # the same monitor again (its first reply was lost)
        # down: lost (rejoin), or never registered yet while monitors are required (up)
        kind = "monitor_restart" if was == "up" else "rejoin" if old is not None else "up"
        self._node_event(now, rec, kind, f"monitor {incarnation}")
        return self.schedule(now)

    def node_heartbeat(self, host: str, incarnation: str, jobs: list[int], now: float) -> None:
        """A heartbeat of the registered monitor; any other gets ``not_registered`` (it registers again)."""
        rec = self._node(host)
        if rec.state != "up" or rec.incarnation != incarnation:
            raise StateError("not_registered", f"node {host!r} is {rec.state}; monitor {incarnation} "
                             f"must register (node_register)")
        rec.last_seen = now
        self.cleared(host, now)
        if jobs != rec.jobs:
            rec.jobs = list(jobs)
            self.dirty_nodes.add(host)

    def check_nodes(self, now: float) -> list[Launch | Kill]:
        """Nodes whose heartbeats stopped for ``node_timeout`` seconds go down.

        Silence is counted on the daemon's side only while the daemon was
        listening: when the previous check is more than a second ago (the
        daemon was stalled, e.g. starved of CPU, and heartbeats queued or were
        dropped by monitors that timed out), that gap is credited to every
        node, so a stalled daemon does not write off nodes that were fine.
        """
        out: list[Launch | Kill] = []
        gap = 0.0 if self._last_node_check is None else now - self._last_node_check
        self._last_node_check = now
        if gap > 1.0:
            for rec in self.nodes.values():
                if rec.last_seen is not None:
                    rec.last_seen += gap
        for rec in self.nodes.values():
            if rec.state == "up" and rec.last_seen is not None and now - rec.last_seen > self.node_timeout:
                out += self.node_down(rec.host, now, f"no heartbeat for {now - rec.last_seen:.1f} s")
        return out

    def node_down(self, host: str, now: float, reason: str) -> list[Launch | Kill]:
        """``host`` is gone: its slots leave the pool, its jobs fail, expansions onto it are abandoned."""
        rec = self._node(host)
        if rec.state == "down":
            return []
        rec.state, rec.since, rec.reason = "down", now, reason
        self.suspect.pop(host, None)
        self.pool.set_down(host)
        self._node_event(now, rec, "down", reason)
        out: list[Launch | Kill] = []
        why = f"node {host} down ({reason})"
        for j in self.running():
            if host not in j.hosts:
                if j.pending and j.pending.expands and host in j.pending.hosts:
                    self._abandon_resize(j, now, f"node {host} down")
            elif j.allocation is not None and self.restartable(j, None, loss=True, here=True):
                self._event(now, j, "node_lost", f"{why}: its allocation restarts it")  # its batch script does
            elif self.restartable(j, None, loss=True):
                out += self.restart(j, now, why, attempt_killed=True, known_cause=True)
            else:
                out += self._kill_failed(j, now, why, f"node {host} down")
        out += self.node_lost_kills(host, reason, now)  # kills it was to confirm (scheduler.core.kills)
        return out + self.schedule(now)

    def node_granted(self, host: str, now: float, detail: str, lease: str | None = None) -> list[Launch | Kill]:
        """A resource manager gave ``host`` to the pool (e.g. a Slurm expander job started on it);
        ``lease``: only jobs of that allocation may use it (:meth:`scheduler.core.pool.Pool.lease`)."""
        rec = self._node(host)
        self.pool.lease(host, lease)
        if rec.state == "up":
            return []
        rec.state, rec.since, rec.reason, rec.last_seen = "up", now, detail, None  # no heartbeats expected
        self.pool.set_up(host)
        self._node_event(now, rec, "granted", detail)
        return self.schedule(now)

    def node_released(self, host: str, now: float, detail: str) -> bool:
        """``host`` goes back to the resource manager; only a node no job uses can (False otherwise)."""
        rec = self._node(host)
        if rec.state == "down" or self.pool.used[host] or any(
                j.pending and host in j.pending.hosts for j in self.running()):
            return False
        rec.state, rec.since, rec.reason = "down", now, detail
        self.pool.set_down(host)
        self.pool.lease(host, None)
        self._node_event(now, rec, "released", detail)
        return True

    def not_ours(self, host: str, detail: str) -> None:
        """``host`` is in the pool's config but another resource manager holds it (down, no event)."""
        rec = self._node(host)
        rec.state, rec.reason = "down", detail
        self.pool.set_down(host)

    def restore_nodes(self, records: list[NodeRecord], now: float) -> None:
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

    def node_rows(self, now: float) -> list[dict[str, Any]]:
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
