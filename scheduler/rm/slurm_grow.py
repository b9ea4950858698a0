"""Slurm as the resource manager of one job's daemon (``reshape daemon --slurm-grow``; docs/slurm.md).

``reshape submit --slurm`` runs a daemon inside the job's own allocation. The
pool is the partition's nodes; the ones Slurm gave us are up, the others
down ("not ours"). The Remap Scheduler decides as everywhere; :class:`Broker`
(pure) turns what it would do into Slurm operations, :class:`SlurmGrow`
applies them to the core and queues them for the Slurm thread
(:class:`scheduler.rm.slurm_view.SlurmEdge`):

* *grow*: when a running job would expand with more nodes
  (``ClusterState.would_grow``), no other user's job is pending and Slurm
  has an idle node, submit an **expander job** (``-N k``, named
  ``reshape-expand-<our job id>``, its script only waits while our job runs).
  When it runs, its nodes join the pool and the job expands onto them at its
  next resize point, its new ranks started as steps of the expander job
  (``slurm-launch``). If Slurm grants nothing within ``grant_timeout`` the
  request is cancelled, the jobs keep their sizes, and nothing is asked for
  three more grant timeouts. This is the DMR/MaM mechanism; Slurm 22.05 has
  no way to grow a running job in place.
* *shrink*: when another user's job is pending, whole nodes no job uses go
  back to Slurm (``scontrol update JobId=N NodeList=<kept>`` on the job that
  holds them, our allocation or an expander; ``scancel`` of an expander left
  with no node), and if that is not enough the job holding the last nodes is
  asked to shrink off them (``request_shrink``) so that Slurm can start the
  pending job there. A granted node unused for ``idle_release`` seconds is
  returned too.

The node our batch script runs on (the daemon's) is never released.
"""

from __future__ import annotations

import collections
import os
import queue
import socket
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from scheduler.core.pool import Pool
from scheduler.rm.base import ResourceManager
from scheduler.rm.fixed import allocation_pool
from scheduler.rm.slurm_view import (
    SlurmEdge,
    SlurmError,
    SlurmJob,
    expander_name,
    partition_args,
    partition_pool,
    run,
)

if TYPE_CHECKING:
    from scheduler.core.state import ClusterState

__all__ = ["AskShrink", "Broker", "Cancel", "Drain", "Grant", "Lost", "Release", "SlurmGrow", "Submit"]

WAITING_FOR_NODES = ("Resources", "Priority")  # pending reasons that mean "needs nodes"


# ---------------------------------------------------------------------- broker (pure)
@dataclass(frozen=True)
class Submit:
    """Ask Slurm for ``nodes`` more nodes (one expander job)."""

    nodes: int = 1


@dataclass(frozen=True)
class Grant:
    host: str
    job: str
    waited: float = 0.0  # seconds from the expander's submission to seeing it run


@dataclass(frozen=True)
class Release:
    host: str
    job: str
    why: str


@dataclass(frozen=True)
class Lost:
    host: str
    why: str


@dataclass(frozen=True)
class Drain:
    """Place nothing new on ``host`` (``on``), or offer it again (not ``on``)."""

    host: str
    on: bool = True


@dataclass(frozen=True)
class Cancel:
    job: str
    why: str


@dataclass(frozen=True)
class AskShrink:
    job_id: int
    nprocs: int
    why: str
    drop: tuple[str, ...] = ()


@dataclass
class Broker:
    """Slurm's view plus the daemon's, in; pool changes and Slurm operations, out (module docstring)."""

    main: str
    main_nodes: list[str]
    batch_host: str
    grant_timeout: float = 10.0
    idle_release: float = 30.0
    held: dict[str, str] = field(default_factory=dict)      # host -> the Slurm job holding it for us
    requested: dict[str, float] = field(default_factory=dict)  # pending expander id -> submitted at
    submitting: bool = False
    idle_since: dict[str, float] = field(default_factory=dict)
    draining: set[str] = field(default_factory=set)  # held hosts promised back to Slurm
    given: dict[str, int] = field(default_factory=dict)  # waiting Slurm job -> nodes given back for it
    quiet_until: float = 0.0  # after a request Slurm did not grant, ask again only after 3 grant timeouts

    def __post_init__(self) -> None:
        for h in self.main_nodes:
            self.held.setdefault(h, self.main)

    def submitted(self, job: str | None, now: float) -> None:
        self.submitting = False
        if job:
            self.requested[job] = now

    def released(self, host: str) -> None:
        self.held.pop(host, None)
        self.idle_since.pop(host, None)
        self.draining.discard(host)

    def kept(self, job: str) -> list[str]:
        """The hosts Slurm job ``job`` still holds for us (empty: cancel it, it holds nothing we use)."""
        return [h for h, j in self.held.items() if j == job]

    def step(self, now: float, jobs: list[SlurmJob], idle_nodes: int, used: Mapping[str, int],
             grow_nodes: int, running: list[tuple[int, int, int, list[str]]]) -> list:
        """One look at Slurm. ``used``: slots in use per held host; ``grow_nodes``: nodes more the
        Remap Scheduler would expand a job onto if Slurm's idle nodes were ours (0: none);
        ``running``: (job id, nprocs, min_procs, hosts) of resizable jobs."""
        ops: list = []
        name = expander_name(self.main)
        mine = {j.id: j for j in jobs if j.name == name}
        for j in mine.values():
            if j.state == "RUNNING" and j.id in self.requested:
                waited = now - self.requested.pop(j.id)
                for h in j.nodes:
                    self.held[h] = j.id
                    ops.append(Grant(h, j.id, waited))
            elif j.state == "PENDING" and j.id in self.requested and now - self.requested[j.id] > self.grant_timeout:
                del self.requested[j.id]
                self.quiet_until = now + 3 * self.grant_timeout
                ops.append(Cancel(j.id, f"Slurm granted no node in {self.grant_timeout:g} s ({j.reason})"))
        for jid in [k for k in self.requested if k not in mine]:
            del self.requested[jid]  # cancelled or failed outside our control
        for h, jid in list(self.held.items()):
            if jid != self.main and (jid not in mine or mine[jid].state != "RUNNING"):
                del self.held[h]
                ops.append(Lost(h, f"expander job {jid} ended"))
        free = [h for h, jid in self.held.items() if not used.get(h) and h != self.batch_host]
        for h in list(self.idle_since):
            if h not in free:
                del self.idle_since[h]
        for h in free:
            self.idle_since.setdefault(h, now)
        waiting = [j for j in jobs if j.state == "PENDING" and j.name != name and j.reason in WAITING_FOR_NODES]
        self.draining &= set(self.held)
        if not waiting:
            ops += [Drain(h, False) for h in sorted(self.draining)]
            self.draining.clear()
            self.given.clear()
        else:
            w = waiting[0]
            self.given = {w.id: self.given.get(w.id, 0)}  # nodes given for a job that started count no more
            want = w.num_nodes - self.given[w.id]
            why = f"Slurm job {w.id} is waiting for {w.num_nodes} node(s)"
            ops += [Cancel(jid, why) for jid in self.requested]
            self.requested.clear()
            # the nodes promised back: free ones first, then the last nodes of the jobs asked to shrink
            for h in free:
                if len(self.draining) >= want:
                    break
                self.draining.add(h)
                ops.append(Drain(h))
            short = want - len(self.draining)
            if short > 0:
                for op in self._shrinks(short, running, why):
                    ops.append(op)
                    for h in op.drop:
                        if h not in self.draining:
                            self.draining.add(h)
                            ops.append(Drain(h))
            out = [h for h in sorted(self.draining) if h in free]
            self.given[w.id] += len(out)
            ops += [Release(h, self.held[h], why) for h in out]
            return ops
        for h in free:
            if now - self.idle_since[h] > self.idle_release and not grow_nodes:
                ops.append(Release(h, self.held[h], f"unused for {self.idle_release:g} s"))
        if (grow_nodes > 0 and not free and not self.requested and not self.submitting and idle_nodes > 0
                and now >= self.quiet_until):
            self.submitting = True
            ops.append(Submit(min(grow_nodes, idle_nodes)))
        return ops

    def _shrinks(self, nodes: int, running, why: str) -> list[AskShrink]:
        """Ask the jobs holding the last nodes to give up ``nodes`` whole nodes (retired ranks are the last)."""
        out = []
        for job_id, nprocs, min_procs, hosts in sorted(running, key=lambda r: -r[1]):
            order = list(dict.fromkeys(hosts))
            drop = [h for h in reversed(order) if h != self.batch_host and h in self.held][:nodes]
            k = nprocs  # the ranks on the dropped hosts must be the job's last ranks
            while k > 0 and hosts[k - 1] in drop:
                k -= 1
            if drop and min_procs <= k < nprocs:
                gone = tuple(dict.fromkeys(hosts[k:]))
                out.append(AskShrink(job_id, k, why, gone))
                nodes -= len(gone)
            if nodes <= 0:
                break
        return out


class SlurmGrow(ResourceManager):
    """Slurm as the resource manager of the daemon of one ``reshape submit --slurm`` job (module docstring)."""

    kind = "slurm-grow"
    jobs_end_with_daemon = True  # scancel of the job: the allocation ends, the jobs with it

    def __init__(self, params: Mapping[str, float], env: Mapping[str, str] = os.environ):
        """``params``: the broker's ``grant_timeout`` and ``idle_release``. Raises ValueError outside a Slurm job."""
        main = env.get("SLURM_JOB_ID")
        if not main:
            raise ValueError("--slurm-grow needs to run inside a Slurm job (no SLURM_JOB_ID)")
        try:
            ours = [n.host for n in allocation_pool(env).nodes]
            part = env.get("SLURM_JOB_PARTITION")
            self._pool = partition_pool(run(["sinfo", "-h", "-N", *partition_args(part), "-o", "%N %c"]), set(ours))
        except SlurmError as e:
            raise ValueError(str(e)) from None
        batch = env.get("SLURMD_NODENAME") or socket.gethostname()
        self.broker = Broker(main, ours, batch if batch in ours else ours[0], **params)
        self.edge = SlurmEdge(main, part)
        self.source = (f"Slurm partition {part or '(default)'}, growing through Slurm from allocation {main} "
                       f"({','.join(ours)})")
        self.error: str | None = None  # the last failed Slurm command (status shows it)
        self.notes: collections.deque[str] = collections.deque(maxlen=10)  # requests and cancels

    def pool(self, saved_slots: int | None) -> Pool:
        return self._pool

    @property
    def launcher(self) -> str | None:
        return "slurm"

    def attach(self, state: ClusterState, now: float) -> None:
        for h in sorted(self._pool.down):
            state.not_ours(h, "held by Slurm, not by this job")

    def start(self) -> None:
        self.edge.start()

    def stop(self, jobs_running: bool, killing: bool) -> None:
        # expanders outlive a daemon only while jobs run on them
        self.edge.stop(cancel_expanders=killing or not jobs_running)

    def info(self) -> dict[str, Any]:
        return {**super().info(), "notes": list(self.notes), "error": self.error}

    def _note(self, text: str) -> None:
        self.notes.append(f"{time.strftime('%H:%M:%S')} {text}")
        print(f"reshape daemon: {self.notes[-1]}", flush=True)

    def _drain_inbox(self) -> tuple | None:
        """What the Slurm thread saw and did since the last step: the newest view of Slurm, if any."""
        view = None
        while True:
            try:
                msg = self.edge.inbox.get_nowait()
            except queue.Empty:
                return view
            if msg[0] == "view":
                view = msg
            elif msg[0] == "submitted":
                self.broker.submitted(msg[1], msg[2])
                if msg[3]:
                    self.error = msg[3]
            elif msg[0] == "error":
                self.error = msg[1]

    def step(self, state: ClusterState, now: float) -> list:
        """Apply what the Slurm thread saw; queue the operations the broker decides."""
        view = self._drain_inbox()
        if view is None:
            return []
        s, b = state, self.broker
        node_slots = max(n.slots for n in s.pool.nodes)
        grow = s.would_grow(node_slots * view[2], now) if view[2] else {}
        grow_nodes = max((-(-(k - s.pool.free) // node_slots) for k in grow.values()), default=0)
        running = [(j.job_id, j.nprocs, j.spec.min_procs, list(j.hosts)) for j in s.running() if j.spec.resizable]
        used = {h: s.pool.used[h] for h in b.held}
        acts: list = []
        for op in b.step(now, view[1], view[2], used, grow_nodes, running):
            acts += self._apply(op, s, now)
        return acts

    def _apply(self, op: Any, s: ClusterState, now: float) -> list:
        """One broker operation: on the core now, or queued for the Slurm thread."""
        out = self.edge.outbox
        if isinstance(op, Grant):
            return s.node_granted(op.host, now, f"granted by Slurm job {op.job} in {op.waited:.1f} s")
        if isinstance(op, Lost):
            return s.node_down(op.host, now, op.why)
        if isinstance(op, Release):
            if s.node_released(op.host, now, f"released to Slurm: {op.why}"):
                self.broker.released(op.host)
                kept = self.broker.kept(op.job)
                out.put(("keep", op.job, kept) if kept else ("cancel", op.job))
        elif isinstance(op, Cancel):
            out.put(("cancel", op.job))
            self._note(f"expander job {op.job} cancelled: {op.why}")
        elif isinstance(op, Drain):
            s.pool.set_draining(op.host, op.on)
        elif isinstance(op, AskShrink):
            s.request_shrink(op.job_id, op.nprocs, op.why, now)
        elif isinstance(op, Submit):
            out.put(("submit", op.nodes))
            self._note(f"asked Slurm for {op.nodes} node(s)")
        return []
