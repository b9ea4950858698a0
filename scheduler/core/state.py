"""The daemon's core, sans I/O: jobs, queue, pool and profiles; events in, actions out.

Every method takes the event and ``now`` (seconds, caller's clock), updates
the state and returns the :class:`Launch` / :class:`Kill` actions the shell
(``scheduler.daemon.loop``) must perform. Nothing here touches a socket, a
process, a file or a clock, so the same object runs in tests without any.

:class:`ClusterState` is a façade over explicit parts, each given at
construction the parts it uses and nothing else: the job table
(``scheduler.core.jobtable``), the nodes (``nodestate``), the policy checks
(``checks``), the resize handshake (``resizes``), the scheduling pass
(``passes``), restarts (``restarts``), kills node monitors confirm
(``kills``), a job's run and its ends (``runs``) and the views (``views``).
One table (:data:`ROUTES`) says which part answers each request; the typed
events of jobs and node monitors (the core's own, ``scheduler.core.events``;
the daemon converts the protocol's at its edge) go through
:meth:`ClusterState.handle`. A resource manager (``scheduler.rm``) is given
only :class:`ManagerPort` (``ClusterState.port``): node events in, its jobs'
requests (:data:`PORT`), read-only views of jobs and nodes.

Job states: ``waiting`` (submitted with an arrival delay) -> ``queued`` ->
``running`` -> ``done`` | ``failed`` | ``cancelled`` | ``lost`` (the process
vanished without saying it finished).

Ending a job run on a node. A cancel ends a job the daemon runs itself at once
(the shell kills its processes before it replies). A job whose ``mpiexec`` a
node monitor runs (``runner``) cannot be killed from here: the kill is an
order in that monitor's next heartbeat reply. Such a job becomes
``cancelling`` and keeps its slots, as a shrink keeps the dropped ranks' slots
until the job confirms it, so no other job is placed on ranks that may still
run; it becomes ``cancelled`` (slots freed) when the monitor confirms the run
ended (:meth:`ClusterState.kill_confirmed`): its ``job_ended`` for that
attempt, or a heartbeat that lists the job neither among its runs nor among
the jobs its process scan sees. If that node goes down first, the job is
``cancelled`` with an ``error`` saying the kill was never confirmed. Every
other end the daemon decides for such a job goes the same way (walltime, a
node of it down, a stuck resize, a restart after a loss): the job is
``ending``, holding its slots, and becomes ``failed`` (or, for a restart,
``queued`` again) once the monitor confirms (``Job.then`` says which). A
runner whose own node went down cannot confirm: the monitors of the job's
other nodes then kill what is left of it there, each node's slots freed as it
confirms (``scheduler.core.kills``).

Resize handshake (Sudarsan & Ribbens 2007 §3.1, §3.2.1): at a resize point the Remap
Scheduler's decision becomes a *pending* resize; an expansion reserves its
new slots at once, a shrink releases the dropped ranks' slots when the job
confirms with ``resized``. If the confirmation is lost (daemon restarted),
the next resize point reconciles: the size the job reports is the truth.
A resize is bounded: the job's runtime aborts it after the job file's
``resize_timeout`` (reporting why), and a pending resize still unconfirmed
:data:`RESIZE_GRACE` later (5 s + 10%) fails and kills the job
(:meth:`ClusterState.check_resizes`), so no job holds slots with a pending
action forever. A job that fails mid-resize says so in its ``error``.

Nodes (Sudarsan & Ribbens 2007 §3.1, System Monitor): a pool node is ``unmonitored`` until
a node monitor registers it (or ``down`` from the start when monitors are
required), then ``up`` while its heartbeats come, and ``down`` when they
stop for ``node_timeout`` seconds (:meth:`ClusterState.check_nodes`). A node
that goes down leaves the pool; every running job with a rank on it is
*failed* and killed (an MPI job does not survive losing ranks: the MPICH
here has no fault-tolerant communicators, so shrinking around a dead node
is not offered), a pending expansion onto it is abandoned (the job keeps its
size), and the other jobs continue. A monitor that registers again (a new
*incarnation*) brings the node back. Only the monitor on a job's first node
reports the job's end (``job_ended``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from scheduler.core.actions import Kill, Launch, StateError
from scheduler.core.checks import PolicyChecks
from scheduler.core.events import (
    NODE_EVENTS,
    Advice,
    Event,
    Finished,
    Heartbeat,
    Hello,
    JobEnded,
    LeaseEnded,
    Lost,
    NodeDown,
    NodeDraining,
    NodeEvent,
    NodeGranted,
    NodeRegister,
    NodeReleased,
    Resized,
    ResizePoint,
)
from scheduler.core.jobtable import Job, JobTable
from scheduler.core.kills import Kills
from scheduler.core.nodestate import NodeRecord, NodeTable
from scheduler.core.passes import Passes
from scheduler.core.policy import AppPolicy, RemapPolicy
from scheduler.core.pool import Pool
from scheduler.core.resizes import RESIZE_GRACE, Resizes
from scheduler.core.restarts import Restarts
from scheduler.core.runs import Runs
from scheduler.core.views import Views
from scheduler.core.walltime import LIMITS

__all__ = ["PORT", "RESIZE_GRACE", "ROUTES", "ClusterState", "Job", "Kill", "Launch", "ManagerPort", "NodeRecord",
           "StateError"]

# The one dispatch table: each request of the daemon, the simulator, the resource managers and the tests
# -> the part that answers it, and its name there when it differs. Fields (state the callers read or set)
# are listed apart from methods.
ROUTES: dict[str, dict[str, str]] = {
    "table": {"queue": "", "running": "", "killing": "", "snapshot": "", "forget": "", "restore": ""},
    "node_table": {"node_heartbeat": "heartbeat", "restore_nodes": "restore", "node_rows": "rows", "not_ours": ""},
    "passes": {"submit": "", "adopt": "", "pass_needed": "", "check_admissible": "", "tick": "", "schedule": "",
               "overdue": ""},
    "resizes": {"hello": "", "handle_resize_point": "", "would_expand": "", "request_shrink": ""},
    "restarts": {"restart_here": "", "requeued": "", "resume_here": "", "not_resumed": "", "why_not": ""},
    "kills": {"kill_confirmed": "", "runs_seen": ""},
    "runs": {"launched": "", "run_on": "", "output_base": "", "run_started": "", "output_received": "",
             "exited": "", "finished": "", "job_ended": "", "ended_on_node": "", "cancel": "", "expire": "",
             "check_resizes": "", "check_nodes": "", "node_down": ""},
    "views": {"status": "", "validate": ""},
}
FIELDS: dict[str, tuple[str, ...]] = {
    "table": ("jobs", "next_id", "events", "dirty", "live", "recent", "decisions"),
    "node_table": ("nodes", "node_events", "dirty_nodes", "suspect", "node_timeout"),
    "checks": ("policy_errors", "policy_error_count", "strict"),
    "passes": ("app", "remap", "limits", "late_starts", "late_start_count", "limit_extensions", "defer_passes"),
    "runs": ("walltime_kills",),
}


class _Field:
    """A field of a part, read and set through the façade."""

    def __init__(self, part: str, name: str):
        self.part, self.name = part, name

    def __get__(self, obj: Any, cls: type | None = None) -> Any:
        return self if obj is None else getattr(getattr(obj, self.part), self.name)

    def __set__(self, obj: Any, value: Any) -> None:
        setattr(getattr(obj, self.part), self.name, value)


class _Method:
    """A request a part answers (:data:`ROUTES`); each instance binds it to its part at construction."""

    def __init__(self, part: str, name: str, func: Callable):
        self.part, self.name, self.__doc__ = part, name, func.__doc__

    def __get__(self, obj: Any, cls: type | None = None) -> Any:
        return self if obj is None else getattr(getattr(obj, self.part), self.name)


class ClusterState:
    """Queue, running jobs, pool and profiles, driven by events (see module docstring).

    ``strict``: a policy decision that cannot be applied raises :class:`PolicyError` (the simulator);
    otherwise it is skipped and counted in ``policy_errors`` (the daemon), by the same rules
    (``scheduler.core.checks``). ``record``: keep every applied decision in ``decisions``. ``limits``:
    how a start's time limit is set (:data:`scheduler.core.walltime.LIMITS`).
    """

    def __init__(self, pool: Pool, app: AppPolicy, remap: RemapPolicy, node_timeout: float = 5.0,
                 require_monitors: bool = False, strict: bool = False, record: bool = False,
                 limits: str = "wall-clock"):
        if limits not in LIMITS:
            raise ValueError(f"limits must be one of {', '.join(LIMITS)}, got {limits!r}")
        self.pool = pool
        self.table = JobTable(pool, record)
        self.node_table = NodeTable(pool, node_timeout, require_monitors)
        self.checks = PolicyChecks(self.table, pool, app, remap, strict)
        self.resizes = Resizes(self.table, pool, self.checks, remap)
        self.passes = Passes(self.table, pool, self.checks, self.resizes, app, remap, limits)
        schedule = self.passes.schedule
        self.restarts = Restarts(self.table, self.node_table, pool, self.checks, schedule)
        self.kills = Kills(self.table, self.node_table, pool, self.restarts, schedule)
        self.runs = Runs(self.table, self.node_table, pool, self.resizes, self.restarts, self.kills, schedule)
        self.views = Views(self.table, self.node_table, pool)
        for part, names in ROUTES.items():  # bound once: a request costs one lookup, as a method would
            for name, there in names.items():
                setattr(self, name, getattr(getattr(self, part), there or name))
        self.port = ManagerPort(self)  # all a resource manager is given

    # ---------------------------------------------------------------- requests of several parts
    def node_register(self, host: str, incarnation: str, now: float,
                      monitor: dict[str, Any] | None = None) -> list[Launch | Kill]:
        """A node monitor (re)starts: the node is up (back in the pool if it was down)."""
        return self.passes.schedule(now) if self.node_table.register(host, incarnation, now, monitor) else []

    def node_granted(self, host: str, now: float, detail: str, lease: str | None = None) -> list[Launch | Kill]:
        """A resource manager gave ``host`` to the pool (e.g. a Slurm expander job started on it);
        ``lease``: only jobs of that allocation may use it (:meth:`scheduler.core.pool.Pool.lease`)."""
        return self.passes.schedule(now) if self.node_table.grant(host, now, detail, lease) else []

    def node_released(self, host: str, now: float, detail: str) -> bool:
        """``host`` goes back to the resource manager; only a node no job uses can (False otherwise)."""
        expanding = any(j.pending and host in j.pending.hosts for j in self.table.running())
        return self.node_table.release(host, now, detail, expanding)

    def resized(self, job_id: int, old: int, new: int, seconds: float, error: str | None,
                now: float) -> list[Launch | Kill]:
        """The job confirms the resize it was advised (:meth:`scheduler.core.resizes.Resizes.resized`)."""
        self.resizes.resized(job_id, old, new, seconds, error, now)
        return self.passes.schedule(now)

    def lost(self, job_id: int, old: int, new: int, ranks: tuple[int, ...], reason: str,
             now: float) -> list[Launch | Kill]:
        """The job goes on without ``ranks`` (:meth:`scheduler.core.resizes.Resizes.lost`)."""
        self.resizes.lost(job_id, old, new, ranks, reason, now)
        return self.passes.schedule(now)

    # ---------------------------------------------------------------- typed events
    def handle(self, event: Event | NodeEvent, now: float) -> tuple[Advice | bool | None, list[Launch | Kill]]:
        """One event from a job, a node monitor or a resource manager (:mod:`scheduler.core.events`) ->
        (result, actions): the :class:`Advice` for a :class:`ResizePoint`, whether the node changed for a
        :class:`NodeReleased` or :class:`NodeDraining`, None for the others."""
        on = _EVENTS.get(type(event))
        if on is None:
            raise StateError("unexpected", f"{type(event).__name__} is not an event of the scheduler core")
        return on(self, event, now)


# the requests a resource manager may make of the core, besides node events: ClusterState's of the same name
PORT: tuple[str, ...] = ("running", "would_expand", "request_shrink", "not_ours", "adopt", "exited", "requeued",
                         "not_resumed", "resume_here", "restart_here", "why_not")


class ManagerPort:
    """The core as a resource manager sees it (``scheduler.rm``): it changes nodes only by reporting node events
    (:meth:`report`), makes the requests :data:`PORT` names, and reads jobs and nodes; it never holds the pool
    or a part of the state."""

    def __init__(self, state: ClusterState):
        self._state, self._pool = state, state.pool
        for name in PORT:
            setattr(self, name, getattr(state, name))

    def report(self, event: NodeEvent, now: float) -> tuple[bool | None, list[Launch | Kill]]:
        """A node granted, released, down, draining, or an allocation's leases ended -> (result, actions)
        (:meth:`ClusterState.handle`)."""
        if type(event) not in NODE_EVENTS:
            raise StateError("unexpected", f"{type(event).__name__} is not a node event")
        return self._state.handle(event, now)  # type: ignore[return-value]

    @property
    def jobs(self) -> Mapping[int, Job]:
        return MappingProxyType(self._state.jobs)

    @property
    def live(self) -> Mapping[int, Job]:
        """The jobs not in a final state."""
        return MappingProxyType(self._state.live)

    @property
    def hosts(self) -> tuple[str, ...]:
        """Every node of the pool, in its order."""
        return tuple(n.host for n in self._pool.nodes)

    @property
    def capacity(self) -> int:
        return self._pool.capacity

    def has(self, host: str) -> bool:
        return self._pool.has(host)

    def used(self, host: str) -> int:
        """Slots of ``host`` that jobs hold."""
        return self._pool.used[host]

    def is_down(self, host: str) -> bool:
        """Whether ``host``'s slots are out of the pool (down, released, or not ours)."""
        return host in self._pool.down


def _hello(s: ClusterState, ev: Hello, now: float) -> tuple[Any, list]:
    s.resizes.hello(ev.job_id, ev.nprocs, now, ev.sizes)
    return None, []


def _finished(s: ClusterState, ev: Finished, now: float) -> tuple[Any, list]:
    s.runs.finished(ev.job_id, ev.status, ev.error, now)
    return None, []


def _node_register(s: ClusterState, ev: NodeRegister, now: float) -> tuple[Any, list]:
    monitor = {k: v for k, v in (("pid", ev.pid), ("host", ev.host)) if v is not None}
    return None, s.node_register(ev.node, ev.incarnation, now, monitor)


def _heartbeat(s: ClusterState, ev: Heartbeat, now: float) -> tuple[Any, list]:
    s.node_table.heartbeat(ev.node, ev.incarnation, list(ev.jobs), now)
    return None, s.kills.runs_seen(ev.node, list(ev.jobs), list(ev.runs or ()), now, list(ev.killed or ()))


def _lease_ended(s: ClusterState, ev: LeaseEnded, now: float) -> tuple[Any, list]:
    for h in [h for h, lease in s.pool.leases.items() if lease == ev.allocation]:
        if not s.node_released(h, now, ev.why):
            s.node_table.unlease(h)
    return None, []


# the typed events of jobs, node monitors and resource managers -> the part that handles each
_EVENTS: dict[type, Callable[[ClusterState, Any, float], tuple[Any, list]]] = {
    ResizePoint: lambda s, ev, now: (s.resizes.resize_point(ev, now), []),
    Hello: _hello,
    Resized: lambda s, ev, now: (None, s.resized(ev.job_id, ev.old, ev.new, ev.seconds, ev.error, now)),
    Lost: lambda s, ev, now: (None, s.lost(ev.job_id, ev.old, ev.new, tuple(ev.ranks), ev.reason, now)),
    Finished: _finished,
    JobEnded: lambda s, ev, now: (None, s.runs.job_ended(ev.job_id, ev.node, ev.status, ev.detail, now,
                                                         ev.attempt or 0, ev.code)),
    NodeRegister: _node_register,
    Heartbeat: _heartbeat,
    NodeGranted: lambda s, ev, now: (None, s.node_granted(ev.host, now, ev.detail, ev.lease)),
    NodeReleased: lambda s, ev, now: (s.node_released(ev.host, now, ev.detail), []),
    NodeDown: lambda s, ev, now: (None, s.node_down(ev.host, now, ev.why)),
    NodeDraining: lambda s, ev, now: (s.node_table.drain(ev.host, now, ev.why, ev.on), []),
    LeaseEnded: _lease_ended,
}

_PARTS = {"table": JobTable, "node_table": NodeTable, "checks": PolicyChecks, "resizes": Resizes, "passes": Passes,
          "restarts": Restarts, "kills": Kills, "runs": Runs, "views": Views}
for _part, _names in ROUTES.items():
    for _name, _there in _names.items():
        setattr(ClusterState, _name, _Method(_part, _there or _name, getattr(_PARTS[_part], _there or _name)))
for _part, _names in FIELDS.items():
    for _name in _names:
        setattr(ClusterState, _name, _Field(_part, _name))
