"""The daemon's core, sans I/O: jobs, queue, pool and profiles; events in, actions out.

Every method takes the event and ``now`` (seconds, caller's clock), updates
the state and returns the :class:`Launch` / :class:`Kill` actions the shell
(``scheduler.daemon``) must perform. Nothing here touches a socket, a
process, a file or a clock, so the same object runs in tests without any.

Job states: ``waiting`` (submitted with an arrival delay) -> ``queued`` ->
``running`` -> ``done`` | ``failed`` | ``cancelled`` | ``lost`` (the process
vanished without saying it finished).

Resize handshake (seed 001 §3.1, §3.2.1): at a resize point the Remap
Scheduler's decision becomes a *pending* resize; an expansion reserves its
new slots at once, a shrink releases the dropped ranks' slots when the job
confirms with ``resized``. If the confirmation is lost (daemon restarted),
the next resize point reconciles: the size the job reports is the truth.
A resize is bounded: the job's runtime aborts it after the job file's
``resize_timeout`` (reporting why), and a pending resize still unconfirmed
:data:`RESIZE_GRACE` later (5 s + 10%) fails and kills the job
(:meth:`ClusterState.check_resizes`), so no job holds slots with a pending
action forever. A job that fails mid-resize says so in its ``error``.

Nodes (seed 001 §3.1, System Monitor): a pool node is ``unmonitored`` until
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

import collections
from dataclasses import dataclass, field
from typing import Any

from reshape.advice import Advice

from .actions import Kill, Launch, StateError
from .jobfile import resize_timeout_of, spec_from_dict
from .nodestate import NodeRecord, NodeStates
from .policy import (
    AppPolicy,
    Expand,
    JobSpec,
    RemapPolicy,
    RunningJob,
    Shrink,
    Snapshot,
)
from .pool import Pool
from .profiler import JobProfile

__all__ = ["RESIZE_GRACE", "ClusterState", "Job", "Kill", "Launch", "NodeRecord", "StateError"]

FINAL = ("done", "failed", "cancelled", "lost")
RECENT = 10  # ended jobs listed by ``status``
RESIZE_GRACE = (5.0, 0.1)  # the daemon kills a job stuck in a resize 5 s + 10% past its resize_timeout


@dataclass
class Job:
    job_id: int
    desc: dict[str, Any]  # validated job description (scheduler.jobfile)
    submit_time: float
    state: str = "queued"
    nprocs: int = 0
    hosts: list[str] = field(default_factory=list)
    start_time: float | None = None
    end_time: float | None = None
    sid: int | None = None  # session id (= pid) of the job's mpiexec
    profile: JobProfile = field(default_factory=JobProfile)
    pending: dict[str, Any] | None = None  # {"action", "old", "new", "hosts"}
    shrink_request: int | None = None  # target of a RemapPolicy.shrink_requests entry
    iterations: int = 0
    connected: bool = False
    exit_code: int | None = None
    error: str | None = None
    reported: str | None = None  # status from the job's own ``finished``
    owner: str | None = None  # who submitted it (``uid:N`` or ``key:NAME``; None: unauthenticated)
    node_report: dict[str, Any] | None = None  # the first node's monitor: {"status", "t", "node", "detail"}
    # caches for snapshots (one per request): the immutable spec, the last policy view
    _spec: JobSpec | None = field(default=None, init=False, repr=False, compare=False)
    _view: tuple[tuple, RunningJob] | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def arrival_time(self) -> float:
        return self.submit_time + self.desc.get("arrival_delay", 0.0)

    @property
    def spec(self) -> JobSpec:
        if self._spec is None:
            self._spec = spec_from_dict(self.job_id, self.arrival_time, self.desc)
        return self._spec

    def to_dict(self) -> dict[str, Any]:
        return {"job_id": self.job_id, "desc": self.desc, "submit_time": self.submit_time,
                "state": self.state, "nprocs": self.nprocs, "hosts": self.hosts,
                "start_time": self.start_time, "end_time": self.end_time, "sid": self.sid,
                "profile": self.profile.to_dict(), "pending": self.pending,
                "shrink_request": self.shrink_request,
                "iterations": self.iterations, "exit_code": self.exit_code, "error": self.error,
                "reported": self.reported, "node_report": self.node_report, "owner": self.owner}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Job:
        d = dict(d)
        d["profile"] = JobProfile.from_dict(d.get("profile", {}))
        return cls(**d)


class ClusterState(NodeStates):
    """Queue, running jobs, pool and profiles, driven by events (see module docstring)."""

    def __init__(self, pool: Pool, app: AppPolicy, remap: RemapPolicy, node_timeout: float = 5.0,
                 require_monitors: bool = False):
        self.pool = pool
        self.app = app
        self.remap = remap
        self.jobs: dict[int, Job] = {}
        self.next_id = 1
        self.events: list[dict[str, Any]] = []  # allocation history, appended to the journal
        self.dirty: set[int] = set()
        self.live: dict[int, Job] = {}  # jobs not in a final state (finished ones are not scanned)
        self.node_timeout = node_timeout
        self.nodes: dict[str, NodeRecord] = {n.host: NodeRecord(n.host) for n in pool.nodes}
        self.node_events: list[dict[str, Any]] = []  # node history, appended to the journal
        self.dirty_nodes: set[str] = set()
        self._last_node_check: float | None = None
        self.recent: collections.deque[int] = collections.deque(maxlen=RECENT)  # last ended jobs, newest last
        if require_monitors:
            for rec in self.nodes.values():
                rec.state, rec.reason = "down", "no node monitor yet"
                pool.set_down(rec.host)

    # ---------------------------------------------------------------- helpers
    def _job(self, job_id: int) -> Job:
        if job_id not in self.jobs:
            raise StateError("unknown_job", f"no job {job_id}")
        return self.jobs[job_id]

    def _running(self, job_id: int) -> Job:
        j = self._job(job_id)
        if j.state != "running":
            raise StateError("not_running", f"job {job_id} is {j.state}, not running")
        return j

    def _event(self, now: float, job: Job, kind: str, detail: str = "") -> None:
        self.dirty.add(job.job_id)
        self.events.append({"t": now, "job_id": job.job_id, "kind": kind, "nprocs": job.nprocs,
                            "busy": self.pool.total - self.pool.free, "detail": detail})

    def busy(self) -> int:
        return self.pool.total - self.pool.free

    def queue(self) -> list[Job]:
        return sorted((j for j in self.live.values() if j.state == "queued"),
                      key=lambda j: (j.arrival_time, j.job_id))

    def running(self) -> list[Job]:
        return [j for j in self.live.values() if j.state == "running"]

    def _end(self, j: Job, state: str, now: float) -> None:
        j.state = state
        j.end_time = now
        self.live.pop(j.job_id, None)
        self.recent.append(j.job_id)

    @staticmethod
    def _pending_shrink(j: Job) -> int | None:
        """A shrink under way (advised, not confirmed), else a requested one."""
        if j.pending and j.pending["action"] == "shrink":
            return j.pending["new"]
        return j.shrink_request

    def _view(self, j: Job, now: float) -> RunningJob:
        """The policy's frozen view of a running job, rebuilt only when the job changed."""
        start = now if j.start_time is None else j.start_time
        key = (j.nprocs, start, j.iterations, self._pending_shrink(j), j.profile.version)
        if j._view is None or j._view[0] != key:
            j._view = (key, RunningJob(j.spec, j.nprocs, start, j.profile.frozen(), j.iterations, key[3]))
        return j._view[1]

    def snapshot(self, now: float) -> Snapshot:
        run = tuple(self._view(j, now) for j in self.running())
        return Snapshot(now, self.pool.total, self.pool.free, tuple(j.spec for j in self.queue()), run)

    # ---------------------------------------------------------------- submission / queue
    def submit(self, desc: dict[str, Any], now: float, owner: str | None = None) -> int:
        """Add a validated job; it joins the queue at ``now + arrival_delay``."""
        if desc["nprocs"] > self.pool.capacity:
            raise StateError("bad_job", f"nprocs {desc['nprocs']} exceeds the pool ({self.pool.capacity})")
        job = Job(self.next_id, desc, now, owner=owner)
        self.next_id += 1
        job.state = "waiting" if desc.get("arrival_delay", 0) > 0 else "queued"
        self.jobs[job.job_id] = job
        self.live[job.job_id] = job
        self._event(now, job, "submit")
        return job.job_id

    def tick(self, now: float) -> list[Launch | Kill]:
        """Time passed: admit arrived jobs and run the Application Scheduler."""
        for j in self.live.values():
            if j.state == "waiting" and j.arrival_time <= now:
                j.state = "queued"
                self._event(now, j, "arrive")
        return self.schedule(now)

    def schedule(self, now: float) -> list[Launch | Kill]:
        out: list[Launch | Kill] = []
        if not any(j.state == "queued" for j in self.live.values()):
            return out
        for start in self.app.schedule(self.snapshot(now)):
            j = self.jobs.get(start.job_id)
            if j is None or j.state != "queued" or start.nprocs > self.pool.free:
                continue  # a policy bug must not corrupt the pool
            j.hosts = self.pool.allocate(start.nprocs)
            j.nprocs = start.nprocs
            j.state = "running"
            j.start_time = now
            j.profile.ran_at(start.nprocs)
            self._event(now, j, "start")
            out.append(Launch(j.job_id))
        if any(j.state == "queued" for j in self.live.values()):
            self._request_shrinks(now)
        return out

    def _request_shrinks(self, now: float) -> None:
        """Remap Scheduler: jobs to shrink at their next resize point to admit queued jobs.

        As in the simulator (``scheduler.sim.engine``), each request becomes the
        job's ``pending_shrink`` until its next resize point, where the policy
        decides with it in view and the request is dropped. Requests for a job
        with a resize under way are ignored (the simulator drops them when that
        resize ends); an invalid request (not running, static, outside
        ``[min_procs, nprocs)``) is ignored: a policy bug must not corrupt a job.
        """
        for sh in self.remap.shrink_requests(self.snapshot(now)):
            self.request_shrink(sh.job_id, sh.nprocs, sh.reason, now)

    def request_shrink(self, job_id: int, nprocs: int, reason: str, now: float) -> bool:
        """Ask a running job to shrink to ``nprocs`` at its next resize point; False if it cannot."""
        j = self.jobs.get(job_id)
        if (j is None or j.state != "running" or not j.desc["resizable"] or j.pending
                or not j.desc.get("min_procs", 1) <= nprocs < j.nprocs):
            return False
        if j.shrink_request != nprocs:
            j.shrink_request = nprocs
            self._event(now, j, "shrink_request", f"{j.nprocs}->{nprocs}: {reason}")
        return True

    def would_grow(self, extra: int, now: float) -> dict[int, int]:
        """Running jobs the Remap Scheduler would expand if ``extra`` more slots were free, and to
        what size (a what-if over the pure policy: nothing changes). Used to decide whether asking a
        resource manager for nodes is worth it, and for how many."""
        snap = self.snapshot(now)
        snap = Snapshot(snap.now, snap.total_slots + extra, snap.free_slots + extra, snap.queue, snap.running)
        out = {}
        for j in self.running():
            if j.desc["resizable"] and not j.pending and j.nprocs < j.desc.get("max_procs", j.nprocs):
                d = self.remap.at_resize_point(snap, j.job_id)
                if isinstance(d, Expand) and d.nprocs > j.nprocs:
                    out[j.job_id] = d.nprocs - j.nprocs
        return out

    def cancel(self, job_id: int, now: float, reschedule: bool = True) -> list[Launch | Kill]:
        """End a queued or running job; ``reschedule=False`` (daemon stopping) starts nothing new."""
        j = self._job(job_id)
        if j.state in FINAL:
            raise StateError("not_active", f"job {job_id} already {j.state}")
        out: list[Launch | Kill] = []
        if j.state == "running":
            out.append(Kill(job_id))
            self._release_all(j)
        self._end(j, "cancelled", now)
        self._event(now, j, "cancel")
        return out + self.schedule(now) if reschedule else out

    # ---------------------------------------------------------------- System Monitor
    def launched(self, job_id: int, sid: int) -> None:
        j = self._job(job_id)
        j.sid = sid
        self.dirty.add(job_id)

    def exited(self, job_id: int, code: int | None, now: float, error: str | None = None) -> list[Launch | Kill]:
        """The job's processes are gone (exit code, or None if it vanished); its slots return.

        A job that fails with a resize under way says so in its error.
        """
        j = self._job(job_id)
        if j.state != "running":
            return []
        during = f" during {self._resize_name(j)}" if j.pending else ""
        ok = self._ended_well(j, None if code is None else code == 0)
        self._release_all(j)
        j.exit_code = code
        if ok:
            self._end(j, "done", now)
        else:
            self._end(j, "lost" if code is None else "failed", now)
            how = f"exit code {code}" if code is not None else "process vanished"
            if code == 0 and during:  # Hydra sometimes exits 0 after a rank of the job was killed
                how = "mpiexec exited 0 but the job never confirmed its resize"
            if error or not j.error:
                j.error = f"{error or how}{during}"
            else:  # the job's own report (e.g. the runtime's abort reason) comes first
                j.error = f"{j.error} ({how})"
        self._event(now, j, "end", j.state if j.state == "done" else f"{j.state}: {j.error}")
        return self.schedule(now)

    @staticmethod
    def _ended_well(j: Job, clean: bool | None) -> bool:
        """Done or not. ``clean``: the exit looked clean (exit 0, the monitor's ``end``), did not,
        or is unknown (None: only the job's own ``done`` counts then). A clean exit with a resize
        under way and no ``done`` from the job is a failure: Hydra has exited 0 after one of the
        job's ranks was killed mid-resize."""
        if j.reported == "error" or clean is False:
            return False
        if clean is None:
            return j.reported == "done"
        return j.reported == "done" or not j.pending

    @staticmethod
    def _resize_name(j: Job) -> str:
        p = j.pending
        return f"{p['action']} {p['old']}->{p['new']}" if p else ""

    def check_resizes(self, now: float) -> list[Launch | Kill]:
        """Resizes not confirmed within the job's ``resize_timeout`` plus :data:`RESIZE_GRACE` (5 s + 10%).

        The job's own watchdog (``reshape.watchdog``) aborts it at
        ``resize_timeout`` and reports why; this is the daemon's bound for a
        job that could not: it is killed and failed, its slots freed. No job
        stays running with a pending resize for longer.
        """
        out: list[Launch | Kill] = []
        for j in self.running():
            p = j.pending
            if p is None or "t" not in p:
                continue
            timeout = resize_timeout_of(j.desc)
            limit = timeout + RESIZE_GRACE[0] + RESIZE_GRACE[1] * timeout
            if now - p["t"] > limit:
                why = f"{self._resize_name(j)} not confirmed within {limit:g} s; job killed"
                out.append(self._kill_failed(j, now, why if not j.error else f"{j.error}; {why}", why))
        return out + (self.schedule(now) if out else [])

    def _kill_failed(self, j: Job, now: float, error: str, detail: str) -> Kill:
        """End a running job as failed (slots freed, ``error`` kept, ``end`` event); its processes must die."""
        self._release_all(j)
        self._end(j, "failed", now)
        j.error = error
        self._event(now, j, "end", f"failed: {detail}")
        return Kill(j.job_id)

    def _release_all(self, j: Job) -> None:
        self.pool.release(j.hosts)
        if j.pending and j.pending["action"] == "expand":
            self.pool.release(j.pending["hosts"])
        j.pending = None
        j.shrink_request = None
        j.hosts = []
        j.nprocs = 0

    # ---------------------------------------------------------------- Remap Scheduler handshake
    def hello(self, job_id: int, nprocs: int, now: float) -> None:
        j = self._running(job_id)
        j.connected = True
        self._reconcile(j, nprocs, now)
        self.dirty.add(job_id)

    def _reconcile(self, j: Job, nprocs: int, now: float) -> None:
        """A lost ``resized``: the size the job reports decides whether the resize happened."""
        if j.pending and nprocs == j.pending["new"]:
            self._apply_resize(j, j.pending["old"], j.pending["new"], None, now)
        elif j.pending and nprocs == j.pending["old"]:
            self._abandon_resize(j, now, "not confirmed")

    def resize_point(self, job_id: int, body: dict[str, Any], now: float) -> Advice:
        """Performance Profiler update, then the Remap Scheduler's advice."""
        j = self._running(job_id)
        j.connected = True
        n = body["nprocs"]
        self._reconcile(j, n, now)
        if n != j.nprocs:
            raise StateError("bad_size", f"job {job_id} reports {n} processes, scheduler has {j.nprocs}")
        j.iterations = max(j.iterations, body["iteration"])
        j.profile.record_iteration(n, body["iter_time"])
        if body.get("redist_time") is not None and body.get("redist_from"):
            j.profile.record_redistribution(body["redist_from"], n, body["redist_time"])
        self.dirty.add(job_id)
        if not j.desc["resizable"]:
            return Advice("continue", n, reason="static job")
        d = self.remap.at_resize_point(self.snapshot(now), job_id)
        j.shrink_request = None  # the policy has seen it (as in the simulator)
        if isinstance(d, Expand) and d.nprocs > n and d.nprocs - n <= self.pool.free:
            hosts = self.pool.allocate(d.nprocs - n)
            j.pending = {"action": "expand", "old": n, "new": d.nprocs, "hosts": hosts, "t": now}
            self._event(now, j, "advise", f"expand {n}->{d.nprocs}: {d.reason}")
            return Advice("expand", d.nprocs, tuple(hosts), d.reason)
        if isinstance(d, Shrink) and d.nprocs < n:
            j.pending = {"action": "shrink", "old": n, "new": d.nprocs, "hosts": j.hosts[d.nprocs:], "t": now}
            self._event(now, j, "advise", f"shrink {n}->{d.nprocs}: {d.reason}")
            return Advice("shrink", d.nprocs, (), d.reason)
        return Advice("continue", n, reason=getattr(d, "reason", ""))

    def resized(self, job_id: int, old: int, new: int, seconds: float, error: str | None,
                now: float) -> list[Launch | Kill]:
        j = self._running(job_id)
        p = j.pending
        if p is None:
            raise StateError("out_of_order", f"job {job_id} sent 'resized' without a pending resize")
        if old != p["old"]:
            raise StateError("out_of_order", f"job {job_id}: resized from {old}, advised from {p['old']}")
        if error or new == old:
            self._abandon_resize(j, now, error or "no change")
        elif new == p["new"]:
            self._apply_resize(j, old, new, seconds, now)
        else:
            raise StateError("out_of_order", f"job {job_id}: resized to {new}, advised {p['new']}")
        return self.schedule(now)

    def _apply_resize(self, j: Job, old: int, new: int, seconds: float | None, now: float) -> None:
        p = j.pending
        assert p is not None
        if p["action"] == "expand":
            j.hosts = j.hosts + p["hosts"]
        else:
            self.pool.release(j.hosts[new:])
            j.hosts = j.hosts[:new]
        j.nprocs = new
        j.pending = None
        j.profile.ran_at(new)
        if seconds is not None:
            j.profile.record_redistribution(old, new, seconds)
        self._event(now, j, p["action"], f"{old}->{new}")

    def _abandon_resize(self, j: Job, now: float, why: str) -> None:
        p = j.pending
        assert p is not None
        if p["action"] == "expand":
            self.pool.release(p["hosts"])
        j.pending = None
        self._event(now, j, "resize_failed", why)

    def finished(self, job_id: int, status: str, error: str | None, now: float) -> None:
        j = self._job(job_id)
        if j.state != "running":
            raise StateError("not_running", f"job {job_id} is {j.state}, not running")
        j.reported = status
        if error and not j.error:  # the first report is the cause; ranks aborting after it say less
            j.error = error
        self.dirty.add(job_id)

    def job_ended(self, job_id: int, host: str, status: str, detail: str | None, now: float) -> None:
        """The monitor of the job's first node saw its processes there end (``status`` end or error)."""
        j = self._running(job_id)
        first = j.hosts[0] if j.hosts else None
        if host != first:
            raise StateError("not_first_node", f"job {job_id}'s first node is {first!r}, not {host!r} "
                             "(only the first node's monitor reports a job)")
        if j.node_report is None:
            j.node_report = {"status": status, "t": now, "node": host, "detail": detail}
            self.dirty.add(job_id)

    def ended_on_node(self, job_id: int, now: float, why: str | None = None) -> list[Launch | Kill]:
        """Settle a job by its monitor's report (its ``mpiexec`` cannot be watched or did not exit).

        ``end`` is done unless the job said it failed; ``error`` is failed, and
        so is a job whose ``mpiexec`` did not exit (``why`` says so). The job's
        remaining processes, if any, are killed.
        """
        j = self._job(job_id)
        if j.state != "running" or j.node_report is None:
            return []
        r = j.node_report
        ok = self._ended_well(j, r["status"] == "end" and why is None)
        self._release_all(j)
        if ok:
            self._end(j, "done", now)
        else:
            self._end(j, "failed", now)
            j.error = why or j.error or f"monitor of {r['node']}: {r.get('detail') or r['status']}"
        self._event(now, j, "end", f"{j.state} (reported by the monitor of {r['node']})")
        return [Kill(job_id), *self.schedule(now)]

    # ---------------------------------------------------------------- views / restore
    def status(self, now: float | None = None, limit: int | None = None) -> dict[str, Any]:
        """Pool, running jobs, queue (the first ``limit`` queued and waiting jobs; the totals are
        ``queued_total``/``waiting_total``), recently ended jobs and nodes."""
        def row(j: Job) -> dict[str, Any]:
            return {"job_id": j.job_id, "name": j.desc["name"], "state": j.state, "nprocs": j.nprocs,
                    "requested": j.desc["nprocs"], "hosts": sorted(set(j.hosts)),
                    "submit_time": j.submit_time, "start_time": j.start_time,
                    "iterations": j.iterations, "connected": j.connected,
                    "pending": None if not j.pending else f"{j.pending['action']} {j.pending['new']}"}

        queue = self.queue()
        waiting = [j for j in self.live.values() if j.state == "waiting"]
        return {"total_slots": self.pool.total, "free_slots": self.pool.free,
                "capacity_slots": self.pool.capacity,
                "running": [row(j) for j in self.running()],
                "queue": [row(j) for j in queue[:limit]], "queued_total": len(queue),
                "waiting": [row(j) for j in waiting[:limit]], "waiting_total": len(waiting),
                "ended": [{"job_id": j.job_id, "name": j.desc["name"], "state": j.state,
                           "end_time": j.end_time, "sizes": list(j.profile.history), "error": j.error}
                          for j in (self.jobs[i] for i in reversed(self.recent))],
                "nodes": self.node_rows(0.0 if now is None else now)}

    def restore(self, jobs: list[Job], next_id: int) -> None:
        """Reload journaled jobs; running jobs get their slots back and must reconnect."""
        ended = sorted((j for j in jobs if j.state in FINAL and j.end_time is not None), key=lambda j: j.end_time)
        self.recent.extend(j.job_id for j in ended[-RECENT:])
        for j in jobs:
            j.connected = False
            self.jobs[j.job_id] = j
            if j.state not in FINAL:
                self.live[j.job_id] = j
            if j.state == "running":
                self.pool.claim(j.hosts)
                if j.pending and j.pending["action"] == "expand":
                    self.pool.claim(j.pending["hosts"])
        self.next_id = max([next_id, *(j.job_id + 1 for j in jobs)])

    def validate(self) -> None:
        """Invariants (tests call this after every event)."""
        used = sum(len(j.hosts) + (len(j.pending["hosts"]) if j.pending and j.pending["action"] == "expand" else 0)
                   for j in self.running())
        assert used == sum(self.pool.used.values()), (used, dict(self.pool.used))
        assert self.pool.free == sum(max(0, n.slots - self.pool.used[n.host]) for n in self.pool.nodes
                                     if n.host not in self.pool.down and n.host not in self.pool.draining)
        for rec in self.nodes.values():
            assert (rec.state == "down") == (rec.host in self.pool.down), rec
            if rec.state == "down":
                assert not any(rec.host in j.hosts for j in self.running()), rec
        for j in self.jobs.values():
            assert (j.state not in FINAL) == (j.job_id in self.live), (j.job_id, j.state)
            if j.state == "running":
                assert j.nprocs == len(j.hosts) >= 1
            else:
                assert not j.hosts and j.pending is None
