"""Resource pool: nodes with slots, from a TOML config file or one local machine.

Config file (``reshape daemon --config pool.toml``)::

    launcher = "ssh"   # optional: local | ssh | netns | slurm (reshape.joblink.launchers)

    [[node]]
    host = "node01"
    slots = 8
    speed = 1.0        # optional, relative speed
    memory_gb = 16     # optional
    disk_gb = 100      # optional

Allocation fills nodes in config order (the first node with free slots
first), so a job's ranks are packed onto as few nodes as possible.

A node can be *down* (its monitor stopped heartbeating, ``scheduler.core.nodestate``):
its slots leave the pool (``total`` and ``free`` count only nodes that are
up, ``capacity`` counts all) and nothing is allocated on it until it is up
again. A *draining* node is up for the jobs on it, but its free slots are
not offered (``free``) and nothing new is allocated there: it is about to be
given back to a resource manager (``scheduler.rm``).

A node may be *leased* to one allocation of a resource manager (e.g. the Slurm
job, or its expander, that holds it for one malleable job: ``scheduler.rm.slurm.site``):
its free slots are then offered only to jobs of that allocation
(:meth:`Pool.free_for`, ``allocate(lease=)``). Without leases every free slot
is everyone's, as in the papers.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from reshape.joblink.jobenv import LAUNCHER_NAMES
from scheduler.core.tomlfile import read_toml

__all__ = ["Node", "Pool", "PoolError", "default_pool", "load_pool"]


class PoolError(ValueError):
    """A bad pool config, or an allocation that cannot be satisfied."""


@dataclass(frozen=True)
class Node:
    host: str
    slots: int
    speed: float = 1.0
    memory_gb: float | None = None
    disk_gb: float | None = None


class Pool:
    """Slots per node; ``allocate(n)`` returns one host name per slot."""

    def __init__(self, nodes: list[Node], down: Iterable[str] = ()):
        """``down``: hosts whose slots are not in the pool yet (held by another resource manager)."""
        if not nodes:
            raise PoolError("a pool needs at least one node")
        hosts = [n.host for n in nodes]
        if len(set(hosts)) != len(hosts):
            raise PoolError(f"duplicate host names in pool: {hosts}")
        self.nodes = list(nodes)
        self.launcher: str | None = None  # the config's launcher name, if it names one
        self.used: Counter[str] = Counter()
        self.down: set[str] = set(down)
        if self.down - set(hosts):
            raise PoolError(f"down hosts not in the pool: {sorted(self.down - set(hosts))}")
        self.draining: set[str] = set()  # up, but nothing new is placed there (about to be given back)
        self.leases: dict[str, str] = {}  # host -> the allocation it is leased to (its free slots are its own)
        self._sums: tuple[int, int] | None = None  # (total, free), cached between changes
        # (``used``, ``down`` and ``draining`` change only through the methods below)

    @property
    def capacity(self) -> int:
        """Slots of every configured node, up or down."""
        return sum(n.slots for n in self.nodes)

    def _count(self) -> tuple[int, int]:
        if self._sums is None:
            up = [n for n in self.nodes if n.host not in self.down]
            self._sums = (sum(n.slots for n in up), sum(max(0, n.slots - self.used[n.host]) for n in up
                                                        if n.host not in self.draining))
        return self._sums

    @property
    def total(self) -> int:
        """Slots of the nodes that are up."""
        return (self._sums or self._count())[0]

    @property
    def free(self) -> int:
        """Free slots on nodes that are up and not draining."""
        return (self._sums or self._count())[1]

    def has(self, host: str) -> bool:
        return any(n.host == host for n in self.nodes)

    def set_down(self, host: str) -> None:
        """Take ``host``'s slots out of the pool (the caller releases what jobs held there)."""
        if not self.has(host):
            raise PoolError(f"no node {host!r} in the pool")
        self.down.add(host)
        self.draining.discard(host)
        self._sums = None

    def set_up(self, host: str) -> None:
        if not self.has(host):
            raise PoolError(f"no node {host!r} in the pool")
        self.down.discard(host)
        self.draining.discard(host)
        self._sums = None

    def set_draining(self, host: str, on: bool = True) -> None:
        """Keep ``host`` up for the jobs on it, but allocate nothing new there."""
        if not self.has(host):
            raise PoolError(f"no node {host!r} in the pool")
        (self.draining.add if on else self.draining.discard)(host)
        self._sums = None

    def lease(self, host: str, allocation: str | None) -> None:
        """Offer ``host``'s free slots only to jobs of ``allocation`` (None: to every job)."""
        if not self.has(host):
            raise PoolError(f"no node {host!r} in the pool")
        if allocation is None:
            self.leases.pop(host, None)
        else:
            self.leases[host] = allocation

    def _offered(self, host: str, lease: str | None) -> bool:
        return host not in self.down and host not in self.draining and self.leases.get(host, lease) == lease

    def free_for(self, lease: str | None) -> int:
        """Free slots a job of allocation ``lease`` may take: on up, undrained nodes leased to it or to none."""
        if not self.leases:
            return self.free
        return sum(max(0, n.slots - self.used[n.host]) for n in self.nodes if self._offered(n.host, lease))

    def allocate(self, n: int, prefer: Iterable[str] = (), lease: str | None = None) -> list[str]:
        """``n`` free slots, one host name per slot: first on the ``prefer`` hosts (one entry per
        slot wanted there; names not in the pool are ignored), then first fit in node order.
        ``lease``: the allocation the job runs in (only nodes leased to it or to none)."""
        free = self.free_for(lease)
        if n < 1 or n > free:
            raise PoolError(f"cannot allocate {n} slots ({free} free of {self.total})")
        self._sums = None
        out: list[str] = []
        for want in (Counter(prefer), None):
            for node in self.nodes:
                if not self._offered(node.host, lease):
                    continue
                cap = n - len(out) if want is None else min(want[node.host], n - len(out))
                take = min(node.slots - self.used[node.host], cap)
                if take > 0:
                    out += [node.host] * take
                    self.used[node.host] += take
                if len(out) == n:
                    return out
        return out

    def claim(self, hosts: list[str]) -> None:
        """Mark ``hosts`` (one entry per slot) busy again, e.g. when reloading the journal."""
        need = Counter(hosts)
        by_host = {n.host: n for n in self.nodes}
        for h, k in need.items():
            if h not in by_host or self.used[h] + k > by_host[h].slots:
                raise PoolError(f"cannot claim {k} slots on {h!r}")
        self.used.update(need)
        self._sums = None

    def release(self, hosts: list[str]) -> None:
        self._sums = None
        if len(self.nodes) == 1:  # one node (the simulator's): count its slots without a Counter
            h = self.nodes[0].host
            k = hosts.count(h)
            if k == len(hosts):
                self.used[h] = max(0, self.used[h] - k)
                return
        for h, k in Counter(hosts).items():  # one update per host, not per slot
            self.used[h] = max(0, self.used[h] - k)

    def describe(self) -> list[dict]:
        return [{"host": n.host, "slots": n.slots, "used": self.used[n.host], "speed": n.speed,
                 "memory_gb": n.memory_gb, "disk_gb": n.disk_gb, "up": n.host not in self.down}
                for n in self.nodes]


def default_pool(slots: int | None = None) -> Pool:
    """The embedded default: this machine as ``localhost`` with ``slots`` virtual slots."""
    n = slots if slots is not None else (os.cpu_count() or 1)
    if n < 1:
        raise PoolError("slots must be >= 1")
    return Pool([Node("localhost", n)])


def load_pool(path: str) -> Pool:
    """Read a pool config (TOML, ``[[node]]`` tables); raises PoolError with the file name."""
    data = read_toml(path, PoolError)
    unknown = set(data) - {"node", "launcher"}
    if unknown:
        raise PoolError(f"{path}: unknown keys {sorted(unknown)} (allowed: launcher, [[node]])")
    launcher = data.get("launcher")
    if launcher is not None and launcher not in LAUNCHER_NAMES:
        raise PoolError(f"{path}: launcher {launcher!r} is not one of {', '.join(LAUNCHER_NAMES)}")
    raw = data.get("node")
    if not isinstance(raw, list) or not raw:
        raise PoolError(f"{path}: expected one or more [[node]] tables")
    nodes = []
    for i, t in enumerate(raw):
        unknown = set(t) - {"host", "slots", "speed", "memory_gb", "disk_gb"}
        if unknown:
            raise PoolError(f"{path}: node {i}: unknown keys {sorted(unknown)}")
        host, slots = t.get("host"), t.get("slots")
        if not isinstance(host, str) or not host:
            raise PoolError(f"{path}: node {i}: 'host' must be a non-empty string")
        if not isinstance(slots, int) or isinstance(slots, bool) or slots < 1:
            raise PoolError(f"{path}: node {i} ({host}): 'slots' must be a positive integer")
        extra = {}
        for k in ("speed", "memory_gb", "disk_gb"):
            if k in t:
                v = t[k]
                if not isinstance(v, int | float) or isinstance(v, bool) or v <= 0:
                    raise PoolError(f"{path}: node {i} ({host}): {k!r} must be a positive number")
                extra[k] = float(v)
        nodes.append(Node(host, slots, **extra))
    pool = Pool(nodes)
    pool.launcher = launcher
    return pool
