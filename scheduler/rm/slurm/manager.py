"""Slurm as the resource manager: the broker's operations applied to the core and to Slurm.

:class:`SlurmManager` is what both Slurm modes share: the Slurm thread
(:class:`scheduler.rm.slurm.edge.SlurmEdge`) looks at the partition every
second; at each tick the newest look, the core's malleable jobs and the
Remap Scheduler's what-if go through the pure
:class:`scheduler.rm.slurm.broker.Broker`, whose operations change the pool
through the core's node events (granted, released, down, draining, a
lease ended: ``scheduler.core.events``) and shrink requests, or are queued
for the Slurm thread (``sbatch`` an expander, ``scancel``, ``scontrol
update ... NodeList=``).

:class:`SlurmGrow` is the mode of ``reshape submit --slurm`` without a site
controller (``reshape daemon --slurm-grow``, started by ``reshape slurm-run``
inside the job's own allocation): one group, the daemon's own Slurm job,
whose jobs the daemon launches itself; the site mode is
:mod:`scheduler.rm.slurm.site`. docs/slurm.md describes both.
"""

from __future__ import annotations

import collections
import os
import queue
import socket
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from reshape.joblink import jobenv as E
from reshape.joblink.protocol import printable
from scheduler.core.events import NodeDown, NodeDraining, NodeGranted, NodeReleased
from scheduler.core.job import Job
from scheduler.core.policy import legal_sizes
from scheduler.core.pool import Pool
from scheduler.rm.base import ResourceManager
from scheduler.rm.fixed import allocation_pool
from scheduler.rm.slurm.admit import Tenant
from scheduler.rm.slurm.broker import Broker
from scheduler.rm.slurm.edge import (
    CancelJob,
    KeepNodes,
    KeepRefused,
    Look,
    SlurmEdge,
    SlurmFailed,
    SubmitExpanders,
    Submitted,
    UpdateJob,
)
from scheduler.rm.slurm.limits import slurm_ends
from scheduler.rm.slurm.ops import AskShrink, Cancel, Drain, Ended, Fail, Forget, Grant, Lost, Release, Submit, Update
from scheduler.rm.slurm.view import SlurmError, partition_args, partition_pool, resizes_once, run

if TYPE_CHECKING:
    from scheduler.core.jobfile import JobDesc
    from scheduler.core.state import ManagerPort

__all__ = ["SlurmGrow", "SlurmManager"]


def new_sizes(desc: JobDesc) -> bool:
    """Whether a job may shrink to sizes it has not run at: it says so (``RESHAPE_ALLOW_NEW_SIZES=1`` in its
    environment: the resize runtime then accepts them), or it is one process emulating its size."""
    return desc.env.get(E.ALLOW_NEW_SIZES) == "1" or desc.launch == "single"


class SlurmManager(ResourceManager):
    """The Slurm edge of a daemon: a broker, the Slurm thread, and the operations applied (module docstring)."""

    def __init__(self, partition: str | None, params: Mapping[str, float]):
        self.partition = partition
        self.part = partition_args(partition)
        self.broker = Broker(**params)
        self.edge = SlurmEdge(partition)
        self.error: str | None = None  # the last failed Slurm command (status shows it)
        self.notes: collections.deque[str] = collections.deque(maxlen=20)  # requests, cancels, losses
        self._keeps: dict[str, int | None] = {}

    @property
    def launcher(self) -> str | None:
        return "slurm"

    def start(self) -> None:
        self.edge.start()

    def info(self) -> dict[str, Any]:
        b = self.broker
        return {**super().info(), "partition": self.partition, "notes": list(self.notes), "error": self.error,
                "groups": sorted(b.groups), "requested": sorted(b.requested), "draining": dict(b.draining),
                "rigid_late_starts": len(b.late), "late_starts": b.late[-10:]}

    def note(self, text: str) -> None:
        self.notes.append(f"{time.strftime('%H:%M:%S')} {printable(text)}")  # names users chose: escaped
        print(f"reshape daemon: {self.notes[-1]}", flush=True)

    # ------------------------------------------------------------------ what the broker sees
    def group_of(self, j: Job) -> str | None:
        """The Slurm job (group) a running job belongs to."""
        raise NotImplementedError

    def lease_of(self, main: str) -> str | None:
        """The pool lease of the nodes granted to group ``main`` (None: every job may use them)."""
        return None

    def tenants(self, state: ManagerPort, now: float) -> list[Tenant]:
        out = []
        for j in state.running():
            g = self.group_of(j)
            if g is None or not j.spec.resizable:
                continue
            prof = j.profile.frozen()
            if new_sizes(j.desc):  # any legal size below its own (SD-Policy's shrink to start needs them)
                points = tuple(p for p in legal_sizes(j.spec, state.capacity) if p < j.nprocs)
            else:  # only sizes it ran at (Sudarsan & Ribbens 2007 §3.1)
                points = tuple(p for p, _ in prof.shrink_points(j.nprocs) if p >= j.spec.min_procs)
            times = {p: t for p in prof.iter_time if (t := prof.best(p)) is not None}
            total = j.spec.iterations or j.total
            out.append(Tenant(j.job_id, g, j.nprocs, tuple(j.hosts), j.spec.min_procs, j.pending is not None,
                              points, times, None if total is None else max(0, total - j.iterations),
                              slurm_ends(j, [*points, j.nprocs], now, self.broker.time_limits == "measured"),
                              *self._run(j, times, total), j.spec.nprocs, total))
        return out

    def _run(self, j: Job, times: Mapping[int, float], total: int | None) -> tuple[float | None, float | None]:
        """The latest end a shrink may push job ``j`` to (``max_stretch`` times its run at its requested size,
        from its start) and that run: its measured time there, else the nearest size measured, scaled linearly."""
        n = j.spec.nprocs
        near = min(times, key=lambda p: abs(p - n), default=None)
        if not total or near is None:
            return None, None
        run = total * times[near] * near / n
        return (None if j.start_time is None else j.start_time + self.broker.max_stretch * run), run

    def _drain_inbox(self) -> Look | None:
        """What the Slurm thread saw and did since the last step: the newest look, if any."""
        view = None
        while True:
            try:
                msg = self.edge.inbox.get_nowait()
            except queue.Empty:
                return view
            if isinstance(msg, Look):
                view = msg
            elif isinstance(msg, Submitted):
                self.submitted(msg.main, msg.job, msg.t0)
                if msg.error:
                    self.error = msg.error
            elif isinstance(msg, KeepRefused):
                self.broker.refused(msg.job)
                self.note(f"Slurm job {msg.job}: shrink refused ({msg.message}); its nodes stay its own")
                self.error = msg.message
            elif isinstance(msg, SlurmFailed):
                self.error = msg.message

    def submitted(self, main: str, job: str | None, t0: float) -> None:
        """Slurm's answer to an expander's ``sbatch`` for group ``main`` (asked at ``t0``): ``job``, or None."""
        for op in self.broker.submitted(main, job, t0):
            self._cancel(op)

    def step(self, state: ManagerPort, now: float) -> list:
        view = self._drain_inbox()
        if view is None:
            return []
        return self.apply(state, now, view.jobs, view.idle, view.seen)

    def apply(self, state: ManagerPort, now: float, jobs: list, idle: int, seen: float) -> list:
        """One look at Slurm through the broker; the core actions that follow."""
        used = {h: state.used(h) for h in state.hosts}
        ops = self.broker.step(now, jobs, idle, used, self.tenants(state, now),
                               lambda jid, extra: state.would_expand(jid, extra, now), seen)
        self.edge.follow(tuple(self.broker.groups))  # a group gone from a look: its final state at the next
        acts: list = []
        self._keeps: dict[str, int | None] = {}  # Slurm job -> limit: one update each for its released nodes
        for op in ops:
            acts += self._apply(op, state, now)
        for job, minutes in self._keeps.items():
            kept = self.broker.kept(job)
            self.edge.outbox.put(KeepNodes(job, kept, minutes) if kept else CancelJob(job))
        return acts

    # ------------------------------------------------------------------ operations
    def _apply(self, op: Any, s: ManagerPort, now: float) -> list:
        out, b = self.edge.outbox, self.broker
        if isinstance(op, Grant):
            return s.report(NodeGranted(op.host, f"granted by Slurm job {op.job} for Slurm job {op.main} in "
                                        f"{op.waited:.1f} s", self.lease_of(op.main)), now)[1]
        if isinstance(op, Release):
            if s.report(NodeReleased(op.host, f"released to Slurm: {op.why}"), now)[0]:
                b.released_host(op.host)
                self._keeps[op.job] = op.minutes or self._keeps.get(op.job)
        elif isinstance(op, Lost):
            self.note(f"{op.host} lost: {op.why}")
            s.report(NodeDraining(op.host, f"lost: {op.why}"), now)
        elif isinstance(op, Forget):
            if s.is_down(op.host) or s.report(NodeReleased(op.host, op.why), now)[0]:
                b.forgotten(op.host)
        elif isinstance(op, Fail):
            b.forgotten(op.host)
            return s.report(NodeDown(op.host, op.why), now)[1]
        elif isinstance(op, Cancel):
            self._cancel(op)
        elif isinstance(op, Drain):
            s.report(NodeDraining(op.host, b.draining.get(op.host, "") if op.on else "", op.on), now)
        elif isinstance(op, AskShrink):
            s.request_shrink(op.job_id, op.nprocs, op.why, now)
        elif isinstance(op, Update):
            cpus = op.nodes * b.node_slots if op.nodes else None  # a job asking tasks: as many as the nodes' CPUs
            fields = {k: v for k, v in (("NumTasks", cpus), ("NumCPUs", cpus), ("NumNodes", op.nodes),
                                        ("TimeLimit", op.minutes)) if v}
            out.put(UpdateJob(op.job, fields))
            self.note(f"Slurm job {op.job}: {' '.join(f'{k}={v}' for k, v in fields.items())} ({op.why})")
        elif isinstance(op, Submit):
            out.put(SubmitExpanders(op.main, op.nodes, op.deadline))
            self.note(f"asked Slurm for {op.nodes} node(s) for job {op.main}")
        elif isinstance(op, Ended):
            return self.ended(s, op, now)
        return []

    def _cancel(self, op: Cancel) -> None:
        self.edge.outbox.put(CancelJob(op.job))
        self.note(f"Slurm job {op.job} cancelled: {op.why}")

    def ended(self, s: ManagerPort, op: Ended, now: float) -> list:
        """Group ``op.main``'s Slurm job is gone."""
        return []


class SlurmGrow(SlurmManager):
    """Slurm as the resource manager of the daemon of one ``reshape submit --slurm`` job (module docstring)."""

    kind = "slurm-grow"
    jobs_end_with_daemon = True  # scancel of the job: the allocation ends, the jobs with it

    def __init__(self, params: Mapping[str, float], env: Mapping[str, str] = os.environ):
        """``params``: the broker's (``grant_timeout``, ``idle_release``, ...). ValueError outside a Slurm job."""
        main = env.get("SLURM_JOB_ID")
        if not main:
            raise ValueError("--slurm-grow needs to run inside a Slurm job (no SLURM_JOB_ID)")
        part = env.get("SLURM_JOB_PARTITION")
        try:
            ours = [n.host for n in allocation_pool(env).nodes]
            self._pool = partition_pool(run(["sinfo", "-h", "-N", *partition_args(part), "-o", "%N %c"]), set(ours))
            once = resizes_once(run(["scontrol", "show", "config"]))
        except SlurmError as e:
            raise ValueError(str(e)) from None
        super().__init__(part, {"node_slots": max(n.slots for n in self._pool.nodes), **params,
                                "resizes_once": once})
        batch = env.get("SLURMD_NODENAME") or socket.gethostname()
        self.main = main
        self.broker.add_group(main, batch if batch in ours else ours[0], 0.0)
        self.source = (f"Slurm partition {part or '(default)'}, growing through Slurm from allocation {main} "
                       f"({','.join(ours)})")

    def pool(self, saved_slots: int | None) -> Pool:
        return self._pool

    def attach(self, state: ManagerPort, now: float) -> None:
        for h in sorted(self._pool.down):
            state.not_ours(h, "held by Slurm, not by this job")

    def group_of(self, j: Job) -> str | None:
        return self.main

    def stop(self, jobs_running: bool, killing: bool) -> None:
        # expanders outlive a daemon only while jobs run on them
        self.edge.stop(cancel_expanders_of=(self.main,) if killing or not jobs_running else ())
