"""A job as the scheduler core keeps it: :class:`Job`, its :class:`JobState` and a :class:`PendingResize`.

States: ``waiting`` (submitted with an arrival delay) -> ``queued`` ->
``running`` -> ``done`` | ``failed`` | ``cancelled`` | ``lost`` (the process
vanished without saying it finished); ``new`` only while a submission is
being recorded. A cancelled job whose ``mpiexec`` a node monitor runs is
``cancelling`` (holding its slots) until that monitor confirms its run ended,
then ``cancelled`` (``scheduler.core.state.ClusterState.cancel``); such a job the
daemon ends itself (walltime, a node down, a restart) is ``ending`` until then, and
becomes what that end decided (``failed``, or ``queued`` again for a restart).
The submitted description (``desc``, validated by
:func:`scheduler.core.jobfile.validate_job`) is never rewritten: what the job
announces later (the sizes its program accepts, ``hello``) is a field of its
own, and the policies see both through :attr:`Job.spec`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from scheduler.core.jobfile import JobDesc
from scheduler.core.policy import JobSpec, RunningJob
from scheduler.core.profiler import JobProfile

__all__ = ["FINAL", "Job", "JobState", "PendingResize"]


class JobState(StrEnum):
    """A job's state; a ``str`` (journal records, replies and comparisons use the plain names)."""

    NEW = "new"
    WAITING = "waiting"
    QUEUED = "queued"
    RUNNING = "running"
    CANCELLING = "cancelling"  # kill ordered to the node monitor that runs it, not yet confirmed
    ENDING = "ending"  # likewise, for an end the daemon decided (walltime, node down, restart): ``Job.then``
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"
    LOST = "lost"


FINAL = (JobState.DONE, JobState.FAILED, JobState.CANCELLED, JobState.LOST)


@dataclass(slots=True)
class PendingResize:
    """A resize advised at a resize point and not yet confirmed (Sudarsan & Ribbens 2007 §3.2.1).

    ``hosts``: an expansion's reserved slots (one host per new rank), or a
    shrink's dropped ones; ``t``: when it was advised; ``budget``: the
    walltime budget left then (:mod:`scheduler.core.walltime`), if any.
    """

    action: str  # "expand" | "shrink"
    old: int
    new: int
    hosts: list[str]
    t: float | None = None
    budget: float | None = None

    @property
    def expands(self) -> bool:
        return self.action == "expand"

    def to_dict(self) -> dict[str, Any]:
        d = {"action": self.action, "old": self.old, "new": self.new, "hosts": list(self.hosts), "t": self.t}
        return d if self.budget is None else {**d, "budget": self.budget}

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> PendingResize | None:
        if d is None:
            return None
        return cls(d["action"], d["old"], d["new"], list(d["hosts"]), d.get("t"), d.get("budget"))

    def __str__(self) -> str:
        return f"{self.action} {self.old}->{self.new}"


@dataclass
class Job:
    job_id: int
    desc: JobDesc  # the validated job description as submitted (scheduler.core.jobfile)
    submit_time: float
    state: JobState = JobState.QUEUED
    nprocs: int = 0
    hosts: list[str] = field(default_factory=list)
    start_time: float | None = None
    end_time: float | None = None
    sid: int | None = None  # session id (= pid) of the job's mpiexec
    profile: JobProfile = field(default_factory=JobProfile)
    pending: PendingResize | None = None
    shrink_request: int | None = None  # target of a RemapPolicy.shrink_requests entry
    iterations: int = 0
    connected: bool = False
    exit_code: int | None = None
    error: str | None = None
    reported: str | None = None  # status from the job's own ``finished``
    owner: str | None = None  # who submitted it (``uid:N`` or ``key:NAME``; None: unauthenticated)
    node_report: dict[str, Any] | None = None  # the first node's monitor: {"status", "t", "node", "detail"}
    resizes: int = 0  # confirmed resizes
    redist_seconds: float = 0.0  # their measured redistribution time
    deadline: float | None = None  # kill time under the walltime rule (scheduler.core.walltime)
    reservation: float | None = None  # the first start time the Application Scheduler reserved for it
    point_time: float | None = None  # when its current iteration began: start, resize point or resize end
    parked: list[str] = field(default_factory=list)  # hosts of its parked (reuse, standby) ranks, as last reported
    sizes: tuple[int, ...] | None = None  # legal sizes narrowed by what its program announced (hello)
    allocation: str | None = None  # the resource manager's allocation it runs in, if it was started there
    restarts: int = 0  # attempts after a loss (scheduler.core.restarts); the attempt running is restarts + 1
    failures: list[str] = field(default_factory=list)  # why each earlier attempt ended
    iterations_lost: int = 0  # iterations done and lost to failures (redone after resuming from checkpoints)
    iterations_lost_at: int | None = None  # iterations of the attempt that failed, until the next one reports
    resumed_at: int | None = None  # the iteration the last restart resumed at
    lost_in_place: int = 0  # ranks this attempt lost and carried on without (``lost``, reshape.runtime.inplace)
    nprocs_override: int | None = None  # the size a restart starts at, where nodes were lost
    total: int | None = None  # iterations in all, as the program reported (its job file's ``iterations`` wins)
    runner: str | None = None  # the node whose monitor runs this attempt's mpiexec (None: the daemon does)
    out_at: int = 0  # bytes of this attempt's output the daemon holds (jobs run by a node monitor)
    out_base: int | None = None  # size of the job's log when this attempt was ordered to start on its node
    cancel_time: float | None = None  # when a kill was ordered (``cancelling``, ``ending``: not yet confirmed)
    # ``ending``: what the job becomes once the kill is confirmed: {"why", "error", "detail"} (failed) or
    # {"why", "restart": True, "known_cause"} (queued again: scheduler.core.restarts)
    then: dict[str, Any] | None = None
    # its runner's node lost while the kill is under way: node -> "" (to confirm), "killed", or why it went down
    # (scheduler.core.kills)
    kill_on: dict[str, str] = field(default_factory=dict)
    # caches for snapshots (one per request): the immutable spec, the last policy view
    _spec: JobSpec | None = field(default=None, init=False, repr=False, compare=False)
    _view: RunningJob | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def arrival_time(self) -> float:
        return self.submit_time + self.desc.arrival_delay

    @property
    def spec(self) -> JobSpec:
        """The policies' view of the job file, with the announced sizes (if any)."""
        if self._spec is None:
            spec = self.desc.spec(self.job_id, self.arrival_time)
            if self.sizes is not None:
                spec = replace(spec, sizes=self.sizes)
            if spec.iterations is None and self.total is not None:
                spec = replace(spec, iterations=self.total)
            if self.nprocs_override is not None:
                spec = replace(spec, nprocs=self.nprocs_override, min_procs=min(spec.min_procs, self.nprocs_override))
            self._spec = spec
        return self._spec

    def restart_at(self, nprocs: int) -> None:
        """A restart starts at ``nprocs`` (fewer nodes are up than the job asked for)."""
        self.nprocs_override = nprocs
        self._spec = None

    def report_total(self, total: int) -> None:
        """The program's own count of its iterations (``resize_point``'s ``total``)."""
        if total != self.total:
            self.total = total
            self._spec = None

    def announce(self, sizes: tuple[int, ...]) -> None:
        """The sizes the job's program accepts, already narrowed against its job file."""
        self.sizes = tuple(sizes)
        self._spec = None

    def to_dict(self) -> dict[str, Any]:
        return {"job_id": self.job_id, "desc": self.desc.to_dict(), "submit_time": self.submit_time,
                "state": str(self.state), "nprocs": self.nprocs, "hosts": self.hosts,
                "start_time": self.start_time, "end_time": self.end_time, "sid": self.sid,
                "profile": self.profile.to_dict(), "pending": self.pending.to_dict() if self.pending else None,
                "shrink_request": self.shrink_request,
                "iterations": self.iterations, "exit_code": self.exit_code, "error": self.error,
                "reported": self.reported, "node_report": self.node_report, "owner": self.owner,
                "resizes": self.resizes, "redist_seconds": self.redist_seconds,
                "deadline": self.deadline, "reservation": self.reservation, "point_time": self.point_time,
                "parked": self.parked, "sizes": list(self.sizes) if self.sizes is not None else None,
                "allocation": self.allocation, "restarts": self.restarts, "failures": self.failures,
                "iterations_lost": self.iterations_lost, "iterations_lost_at": self.iterations_lost_at,
                "resumed_at": self.resumed_at, "lost_in_place": self.lost_in_place,
                "nprocs_override": self.nprocs_override,
                "runner": self.runner, "out_at": self.out_at, "out_base": self.out_base,
                "cancel_time": self.cancel_time, "then": self.then, "kill_on": self.kill_on}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Job:
        d = dict(d)
        d["desc"] = JobDesc.from_dict(d["desc"])
        d["profile"] = JobProfile.from_dict(d.get("profile", {}))
        d["state"] = JobState(d.get("state", "queued"))
        d["pending"] = PendingResize.from_dict(d.get("pending"))
        if d.get("sizes") is not None:
            d["sizes"] = tuple(d["sizes"])
        return cls(**d)
