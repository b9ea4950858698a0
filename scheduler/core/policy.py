"""The policy contract shared by the live daemon and the simulator.

Policies are pure objects over plain data: they receive a frozen
:class:`Snapshot` (the clock arrives inside it; a policy never reads a clock,
a socket or a file) and return decisions. The daemon (``scheduler.daemon.loop``)
and the simulator (``scheduler.lab``) are two shells around the same policy
objects, so a policy measured offline on a trace is the policy that runs
online.

Two kinds of policy (Sudarsan & Ribbens 2007 §3.1):

* :class:`AppPolicy` (the *Application Scheduler*): which queued jobs start
  now, at which size (FCFS, EASY backfill, equi-partitioning, ...). Called
  whenever the queue or the free pool changes.
* :class:`RemapPolicy` (the *Remap Scheduler*): what a running resizable job
  does at a resize point (an iteration boundary where it reported its
  iteration time): expand, shrink or continue. Called once per resize point.
  It may also ask, at any time, that other running jobs shrink at their next
  resize point to admit queued jobs (:meth:`RemapPolicy.shrink_requests`).

Placement of processes on nodes (which hosts) is not a policy decision here:
policies reason in slot counts; the pool (``scheduler.core.pool``) maps counts to hosts.

Registry (one, for every kind of policy): ``register(kind, name)`` adds a
policy class, ``make(kind, name, **params)`` builds one (``app_policy`` /
``remap_policy`` are the two kinds the core runs); ``register_preset`` names
an (application, remap) pair with parameters, which ``--policy NAME`` selects
in the daemon and in the simulator alike. Variants are parameters, never
copied classes. A new policy is one module in ``scheduler/core/policies/`` (it
registers itself on import) plus, if it should have a short name, a preset.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Literal, Protocol

__all__ = [
    "KINDS",
    "AppPolicy",
    "Continue",
    "Expand",
    "JobSpec",
    "Preset",
    "Profile",
    "QueueIndex",
    "RemapDecision",
    "RemapPolicy",
    "Reserve",
    "RunningJob",
    "Shrink",
    "Snapshot",
    "Start",
    "app_policy",
    "app_policy_names",
    "legal_sizes",
    "make",
    "names",
    "preset",
    "presets",
    "register",
    "register_app_policy",
    "register_preset",
    "register_remap_policy",
    "remap_policy",
    "remap_policy_names",
]


# --------------------------------------------------------------------------
# plain data
# --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class JobSpec:
    """What a user submitted (a job file, or an SWF line in the simulator)."""

    job_id: int
    name: str
    submit_time: float
    nprocs: int  # initial (requested) size
    min_procs: int = 1
    max_procs: int | None = None  # None: up to the whole pool
    sizes: tuple[int, ...] | None = None  # explicit legal sizes, if any
    divides: int | None = None  # legal sizes must divide this number (e.g. matrix order)
    topology: Literal["1d", "2d"] = "1d"  # "2d": nearly-square grids, smallest side grows
    resizable: bool = True
    walltime: float | None = None  # user estimate in seconds, for backfill
    command: tuple[str, ...] = ()  # argv run under mpiexec (daemon only)
    iterations: int | None = None  # known iteration count, if any (simulator, reports)


@dataclass(frozen=True, slots=True)
class Profile:
    """Performance Profiler record of one job (Sudarsan & Ribbens 2007 §3.1).

    ``iter_time[p]`` is the latest measured iteration time at ``p`` processes;
    ``redist_time[(p, q)]`` the measured cost of the last redistribution
    from ``p`` to ``q``; ``history`` the sizes the job ran at, in order;
    ``best_time[p]`` the fastest iteration measured at ``p`` (interference
    only slows a run down, so the minimum is the noise-robust evidence the
    sweet-spot rule compares; :meth:`best` falls back to ``iter_time``).
    """

    iter_time: dict[int, float] = field(default_factory=dict)
    redist_time: dict[tuple[int, int], float] = field(default_factory=dict)
    history: tuple[int, ...] = ()
    best_time: dict[int, float] = field(default_factory=dict)

    def best(self, p: int) -> float | None:
        """The fastest iteration time measured at ``p`` (None if never measured)."""
        t = self.best_time.get(p)
        return self.iter_time.get(p) if t is None else t

    def shrink_points(self, current: int) -> list[tuple[int, float]]:
        """``(size, expected iteration-time increase)`` for each smaller size the job ran at.

        A job may only shrink to a configuration it has run on (Sudarsan & Ribbens 2007 §3.1).
        """
        t_now = self.iter_time.get(current)
        out = []
        for p, t in sorted(self.iter_time.items()):
            if p < current:
                out.append((p, (t - t_now) if t_now is not None else float("inf")))
        return out


@dataclass(frozen=True, slots=True)
class RunningJob:
    """A running job as policies see it."""

    spec: JobSpec
    nprocs: int
    start_time: float
    profile: Profile = field(default_factory=Profile)
    iterations_done: int = 0
    pending_shrink: int | None = None  # target already requested by a shrink_request
    deadline: float | None = None  # kill time (scheduler.core.walltime); None: start + walltime rule
    point_time: float | None = None  # when its current iteration began (start, resize point, end of a resize)


class QueueIndex(Protocol):
    """A queue that can skip what cannot fit, for policies that look past its head (EASY's backfill).

    ``fitting(limit, within, short)`` yields the queued jobs of at most
    ``limit`` slots whose walltime is at most ``within`` seconds (``None``
    counts as infinite) or who need at most ``short`` slots, in queue order,
    costing the jobs it yields rather than the queue's length. The core's
    snapshots show the queue as such a sequence (``scheduler.core.jobtable.QueueView``,
    valid while the policy call that received it runs); a plain tuple is
    scanned instead (:meth:`Snapshot.fitting`), so a hand-built or ``replace``-d
    snapshot stays consistent.
    """

    def fitting(self, limit: int, within: float = math.inf, short: int = 0) -> Iterator[JobSpec]: ...


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Everything a policy may look at. ``now`` is seconds on the caller's clock.

    The core's snapshots carry indexes, so that a request costs what it looks
    at rather than the queue's length: the queue can skip what cannot fit
    (:class:`QueueIndex`) and ``positions`` maps a running job's id to its
    index in ``running`` (checked on use; a miss falls back to a scan). A
    hand-built snapshot needs neither.
    """

    now: float
    total_slots: int
    free_slots: int
    queue: tuple[JobSpec, ...]  # waiting jobs, in arrival order
    running: tuple[RunningJob, ...]
    reserved: float | None = None  # the queue head's reservation: the first its Application Scheduler made
    positions: Mapping[int, int] | None = field(default=None, compare=False, repr=False)  # job id -> running[i]
    # (arrival time, slots) of the jobs submitted to arrive later (an arrival delay), soonest first
    announced: tuple[tuple[float, int], ...] = ()

    def job(self, job_id: int) -> RunningJob:
        i = self.positions.get(job_id) if self.positions is not None else None
        if i is not None and i < len(self.running) and self.running[i].spec.job_id == job_id:
            return self.running[i]
        for r in self.running:
            if r.spec.job_id == job_id:
                return r
        raise KeyError(job_id)

    def fits_any(self, limit: int) -> bool:
        """Whether any queued job needs at most ``limit`` slots (the queue's own index when it has one)."""
        own = getattr(self.queue, "fits_any", None)
        if own is not None:
            return own(limit)
        return any(s.nprocs <= limit for s in self.queue)

    def fitting(self, limit: int, within: float = math.inf, short: int = 0) -> Iterator[JobSpec]:
        """The queued jobs of at most ``limit`` slots whose walltime is at most ``within`` seconds (none:
        infinite) or who need at most ``short`` slots, in queue order (through the queue's own
        :class:`QueueIndex` when it has one, else by a scan)."""
        own = getattr(self.queue, "fitting", None)
        if own is not None:
            return own(limit, within, short)
        return (s for s in self.queue if s.nprocs <= limit and (
            s.nprocs <= short or (math.inf if s.walltime is None else s.walltime) <= within))


# --------------------------------------------------------------------------
# decisions
# --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Start:
    """Start the queued job ``job_id`` at ``nprocs`` slots.

    ``limit``: the job's time limit in seconds from its start, when the policy sets one other than
    its requested walltime, as a resource manager does (Slurm's ``scontrol update TimeLimit``): a
    job started below its requested size needs longer. The core refuses a limit over what the
    walltime rule charges the user for (:func:`scheduler.core.walltime.moldable_limit`: the
    slot-seconds the user asked for); without one, a job is killed at its requested walltime
    (:mod:`scheduler.core.walltime`, "Wall-clock limits").
    """

    job_id: int
    nprocs: int
    limit: float | None = None


@dataclass(frozen=True, slots=True)
class Reserve:
    """The queued job ``job_id`` (the head) is guaranteed to start by ``time`` (EASY's shadow
    time). The core keeps the first reservation of each job, shows it to the policies
    (:attr:`Snapshot.reserved`) and counts each start later than it as a violation."""

    job_id: int
    time: float


@dataclass(frozen=True, slots=True)
class Expand:
    job_id: int
    nprocs: int  # new total size
    reason: str = ""


@dataclass(frozen=True, slots=True)
class Shrink:
    job_id: int
    nprocs: int  # new total size
    reason: str = ""


@dataclass(frozen=True, slots=True)
class Continue:
    job_id: int
    reason: str = ""


RemapDecision = Expand | Shrink | Continue


# --------------------------------------------------------------------------
# policy interfaces
# --------------------------------------------------------------------------


class AppPolicy:
    """Application Scheduler: decides which queued jobs start now."""

    name = "abstract"

    def schedule(self, snap: Snapshot) -> list[Start | Reserve]:
        """Jobs to start now, in order; their sizes must fit ``snap.free_slots`` in total. A
        policy that reserves a start time for the queue head (EASY) says so with a :class:`Reserve`."""
        raise NotImplementedError

    def idle_since(self, before: Snapshot, snap: Snapshot) -> bool:
        """Whether :meth:`schedule` would return no :class:`Start` on ``snap``, given that it returned
        none on ``before``, an earlier snapshot of the same core (so that the core may skip that
        pass; nothing else may differ). The default, False, has every pass run; a policy answers
        True only where it is sure (EASY: only the clock moved and running jobs made progress)."""
        return False


class RemapPolicy:
    """Remap Scheduler: decides what a job does at its resize point."""

    name = "abstract"

    def at_resize_point(self, snap: Snapshot, job_id: int) -> RemapDecision:
        """Decision for ``job_id``, which just reported an iteration (``snap`` includes it)."""
        raise NotImplementedError

    def shrink_requests(self, snap: Snapshot) -> list[Shrink]:
        """Running jobs to shrink at their next resize point to admit queued jobs."""
        return []

    @property
    def asks_shrinks(self) -> bool:
        """Whether :meth:`shrink_requests` may return anything (False: the core does not ask it, nor
        build the snapshot for it, after every scheduling pass)."""
        return type(self).shrink_requests is not RemapPolicy.shrink_requests


# --------------------------------------------------------------------------
# helpers every policy needs
# --------------------------------------------------------------------------


def legal_sizes(spec: JobSpec, pool: int,
                among: tuple[int, ...] | list[int] | set[int] | range | None = None) -> list[int]:
    """The sizes ``spec`` may run at in a pool of ``pool`` slots, ascending.

    The one definition of a job's legal sizes: job-file validation
    (:func:`scheduler.core.jobfile.validate_job`), every policy, and the narrowing
    by the sizes a running job announces (:func:`scheduler.core.jobfile.narrow_spec`)
    use it. A size ``p`` is legal when

    * ``min_procs <= p <= min(max_procs, pool)``;
    * ``p`` is one of ``sizes``, if the job lists them;
    * with ``divides = N``: for ``topology="1d"``, ``p`` divides ``N``; for
      ``topology="2d"``, *both sides* of ``p``'s nearly-square grid
      (:func:`reshape.redistribution.layout.nearly_square_grid`, the grid the runtime's
      ``"2d"`` layouts use) divide ``N``, since each side splits one dimension
      of an ``N x N`` problem. For ``N = 12``, 9 (3x3) and 8 (2x4) are legal
      2-D sizes though they do not divide 12; 5 (1x5) is not. ``"2d"``
      without ``divides`` allows every size: any ``p`` has a grid.

    Which legal size a job grows to next is not part of this definition but a
    policy choice: the ReSHAPE remap policy walks the grid, growing its
    smaller side (:func:`scheduler.core.policies.reshape_remap.next_size`), and
    only ever returns sizes this function accepts.

    ``among``: the candidate sizes to test (default every size from
    ``min_procs`` up); ``legal_sizes(spec, pool, [p])`` tests one size without
    listing the range, and ``legal_sizes(spec, pool, announced)`` intersects.
    """
    from reshape.redistribution.layout import nearly_square_grid

    hi = min(spec.max_procs or pool, pool)
    lo = max(spec.min_procs, 1)
    listed = set(spec.sizes) if spec.sizes else None
    n = spec.divides
    if listed is None and not n:  # every size in [lo, hi] is legal (the common case, without a Python loop)
        return list(range(lo, hi + 1)) if among is None else sorted({p for p in among if lo <= p <= hi})
    if among is None:
        among = listed if listed is not None else range(lo, hi + 1)
    out = set()
    for p in among:
        if not lo <= p <= hi or (listed is not None and p not in listed):
            continue
        if n:
            if spec.topology == "2d":
                r, c = nearly_square_grid(p)
                if n % r or n % c:
                    continue
            elif n % p:
                continue
        out.add(p)
    return sorted(out)


# --------------------------------------------------------------------------
# the registry: every policy of every kind, and the named presets
# --------------------------------------------------------------------------

KINDS = ("app", "remap", "net", "gang")  # Application / Remap Scheduler; Lynch 1999 networks; Nakazawa 2005 gangs
_REGISTRY: dict[str, dict[str, Callable[..., object]]] = {k: {} for k in KINDS}


def register(kind: str, name: str):
    """Class (or factory) decorator: make it the ``kind`` policy called ``name``."""
    if kind not in _REGISTRY:
        raise ValueError(f"unknown policy kind {kind!r}; known: {', '.join(KINDS)}")

    def deco(cls):
        _REGISTRY[kind][name] = cls
        return cls

    return deco


def _load_builtin() -> None:
    from scheduler.core import policies  # noqa: F401  (registers the built-in policies and presets)


def make(kind: str, name: str, **params):
    """Build the ``kind`` policy called ``name`` with ``params``; a clear error names what exists."""
    _load_builtin()
    table = _REGISTRY.get(kind)
    if table is None:
        raise ValueError(f"unknown policy kind {kind!r}; known: {', '.join(KINDS)}")
    if name not in table:
        raise ValueError(f"unknown {_LABEL[kind]} {name!r}; known: {', '.join(sorted(table))}")
    return table[name](**params)


def names(kind: str) -> list[str]:
    _load_builtin()
    return sorted(_REGISTRY[kind])


_LABEL = {"app": "application policy", "remap": "remap policy", "net": "network policy",
          "gang": "gang placement mode"}


def register_app_policy(name: str):
    return register("app", name)


def register_remap_policy(name: str):
    return register("remap", name)


def app_policy(name: str, **params) -> AppPolicy:
    return make("app", name, **params)


def remap_policy(name: str, **params) -> RemapPolicy:
    return make("remap", name, **params)


def app_policy_names() -> list[str]:
    return names("app")


def remap_policy_names() -> list[str]:
    return names("remap")


@dataclass(frozen=True, slots=True)
class Preset:
    """A named (Application Scheduler, Remap Scheduler) pair with parameters: what ``--policy NAME``
    means to the daemon and to the simulator alike."""

    name: str
    app: str
    remap: str
    app_params: dict = field(default_factory=dict)
    remap_params: dict = field(default_factory=dict)
    doc: str = ""

    def build(self) -> tuple[AppPolicy, RemapPolicy]:
        return app_policy(self.app, **self.app_params), remap_policy(self.remap, **self.remap_params)

    def describe(self) -> str:
        def one(n, p):
            return n + (f"({', '.join(f'{k}={v}' for k, v in p.items())})" if p else "")

        return f"{one(self.app, self.app_params)} + {one(self.remap, self.remap_params)}"


_PRESETS: dict[str, Preset] = {}


def register_preset(name: str, app: str, remap: str, doc: str = "", app_params: dict | None = None,
                    remap_params: dict | None = None) -> Preset:
    _PRESETS[name] = Preset(name, app, remap, dict(app_params or {}), dict(remap_params or {}), doc)
    return _PRESETS[name]


def preset(name: str) -> Preset:
    """The preset ``name``; ``sp:K`` is static partitioning into K partitions (no resizing)."""
    _load_builtin()
    if name in _PRESETS:
        return _PRESETS[name]
    if name.startswith("sp:"):
        try:
            k = int(name[3:])
        except ValueError:
            k = 0
        if k < 1:
            raise ValueError(f"bad policy {name!r}: sp:K needs a positive integer K")
        return Preset(name, "sp", "static", {"k": k}, {}, f"static partitioning into {k} partitions")
    raise ValueError(f"unknown policy {name!r}; known: {', '.join([*_PRESETS, 'sp:K'])}")


def presets() -> dict[str, Preset]:
    _load_builtin()
    return dict(_PRESETS)
