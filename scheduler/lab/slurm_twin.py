"""The simulator's twin of the Slurm experiment (``benchmarks.slurm_workload``): the same jobs, the same controller.

A run of the benchmark is two runs of one workload on a 16-node Slurm partition: plain Slurm
(every job an ``sbatch`` at its size) and Slurm with the reshape site controller. The twin
replays both on a virtual clock with what decides the outcome there:

* **Slurm** (:class:`scheduler.lab.slurm_sim.SimSlurm`): whole nodes, first come first served,
  backfill planned with time limits in whole minutes (a job is planned to end at its limit,
  not when it will), a pass at every submission and end and once a second, expanders at the
  lowest priority with the minutes left before their deadline, the 30-s time-limit check;
* **the controller itself**: the real :class:`scheduler.rm.slurm.site.SlurmSite` and the core
  (:class:`scheduler.core.state.ClusterState`, the daemon's default policies), looking at the
  simulated ``squeue`` once a second; its Slurm commands (expanders, ``scancel``, ``scontrol
  update``) are carried out on the simulated Slurm as they are queued;
* **the jobs**: rigid jobs sleep their run time; a malleable job is the emulated application
  (``apps.emujob``'s model: each iteration its time at its size, a resize point after each, a
  resize costing ``redist * (1 + min/max)``), started ``static_app`` seconds after Slurm starts
  it (plain Slurm) or registered ``register`` seconds after (``reshape slurm-run``'s start) and
  iterating ``app`` seconds later; its Slurm job ends ``end`` seconds after its last iteration.

The latencies (:class:`Latencies`) are those measured on the emulated cluster (submit to the
application running: 0.47 s with ``sbatch``, 2.19 s through the controller, median of the first
run of the default workload; docs/slurm.md).
Not modelled: the controller's restart (a few seconds without decisions), Slurm's choice of
which free nodes a job gets (lowest-numbered here), a node's seconds in ``COMPLETING`` after its
job ends. By default nothing varies (the *point twin*); with ``jitter``/``iter_jitter`` each latency
and iteration time is drawn around its value and the look's and Slurm's pass's phases are drawn, so
that runs with several seeds give the spread one real run may land anywhere in: the order in which
two near-simultaneous events come decides who grows or shrinks next, and one such decision moves
the rest of the run. :func:`run` returns a run in the schema of ``benchmarks.slurm_driver``'s result,
so the benchmark's summary reads both alike.
"""

from __future__ import annotations

import heapq
import itertools
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from reshape.joblink.emulated import resize_time, table_time
from scheduler.core import events as C
from scheduler.core.actions import Kill, StateError
from scheduler.core.jobfile import JobDesc
from scheduler.core.policy import app_policy, preset, remap_policy
from scheduler.core.pool import Node, Pool
from scheduler.core.state import ClusterState
from scheduler.lab.slurm_sim import SimSlurm, Sjob
from scheduler.rm.slurm.edge import CancelJob, EndJob, KeepNodes, SubmitExpanders, UpdateJob
from scheduler.rm.slurm.site import SlurmSite
from scheduler.rm.slurm.view import expander_minutes, expander_name, malleable_comment

__all__ = ["Latencies", "TwinJob", "run"]


@dataclass(frozen=True)
class TwinJob:
    name: str
    arrival: float
    nodes: int
    seconds: float  # a rigid job's sleep
    limit_min: int
    malleable: bool = False
    times: tuple[tuple[int, float], ...] = ()  # an application's seconds per iteration by CPUs
    iterations: int = 0
    redist: float = 0.0
    desc: JobDesc | None = None  # the job description a malleable job registers with (validated)
    sbatch_nodes: tuple[int, int] | None = None  # a node range asked of Slurm (MIN, MAX), if not ``nodes``


@dataclass(frozen=True)
class Latencies:
    register: float = 1.3  # Slurm starts the batch script -> registered with the controller
    app: float = 0.9  # registered -> the application's first iteration begins
    static_app: float = 0.5  # Slurm starts a plain sbatch job -> its application begins
    end: float = 0.4  # the last iteration -> the Slurm job ends
    look: float = 1.0  # the controller's look at squeue
    sched: float = 1.0  # Slurm's backfill interval
    expander_exit: float = 6.0  # an expander whose job ended exits by itself (three missed looks)
    jitter: float = 0.0  # each latency above drawn from [1 - jitter, 1 + jitter] times it; the look's and
    # Slurm's pass's phases drawn too (0: none, the point twin)
    iter_jitter: float = 0.0  # each iteration's time drawn from [1 - iter_jitter, 1 + iter_jitter] times its table's
    seed: int = 0  # of the draws


@dataclass
class _App:
    job: TwinJob
    sid: str
    p: int = 0
    k: int = 0  # iterations done
    job_id: int | None = None
    dead: bool = False
    redist_from: int | None = None
    redist_t: float | None = None


@dataclass
class _Clock:
    now: float = 0.0
    heap: list = field(default_factory=list)
    seq: itertools.count = field(default_factory=itertools.count)

    def at(self, t: float, fn: Callable, *args) -> None:
        heapq.heappush(self.heap, (t, next(self.seq), fn, args))


class Twin:
    """One run (static or with the controller) of a workload's jobs (module docstring)."""

    def __init__(self, jobs: list[TwinJob], nodes: int, cpus: int, site: bool,
                 params: Mapping[str, float] | None = None, lat: Latencies = Latencies(), policy: str = "reshape"):
        self.jobs, self.cpus, self.site, self.lat = jobs, cpus, site, lat
        self.rng = random.Random(lat.seed)
        names = [f"node{i}" for i in range(1, nodes + 1)]
        self.slurm = SimSlurm(names)
        self.clock = _Clock()
        self.apps: dict[str, _App] = {}  # Slurm id of a main job -> its application
        self.submitted: dict[str, float] = {}
        self.app_start: dict[str, float] = {}
        self.predicted: dict[str, float] = {}
        self.ids: dict[str, str] = {}
        if site:
            pool = Pool([Node(h, cpus) for h in names])
            for h in names:
                pool.set_down(h)
            self.rm = SlurmSite("batch", {"grant_timeout": 10.0, "idle_release": 30.0, "expire_margin": 30.0,
                                          "resizes_once": not self.slurm.accounting, **(params or {})}, pool=pool)
            self.rm.note = lambda text: None
            self.rm.final_state = lambda main: (lambda f: f.state if f else "GONE")(self.slurm.final(main))
            pre = preset(policy)
            self.state = ClusterState(pool, app_policy(pre.app, **pre.app_params),
                                      remap_policy(pre.remap, **pre.remap_params))
            for h in names:
                self.state.not_ours(h, "held by Slurm")

    # ------------------------------------------------------------------ the loop
    def run(self) -> dict:
        c = self.clock
        for j in self.jobs:
            c.at(j.arrival, self._arrive, j)
        c.at(self.rng.uniform(0.0, self.lat.sched) if self.lat.jitter else 0.0, self._tick)
        if self.site:
            c.at(self.rng.uniform(0.0, self.lat.look) if self.lat.jitter else 0.5, self._look)
        while c.heap:
            t, _, fn, args = heapq.heappop(c.heap)
            c.now = t
            fn(*args)
            if len(self.submitted) == len(self.jobs) and all(
                    self.slurm.jobs[self.ids[j.name]].state not in ("PENDING", "RUNNING") for j in self.jobs):
                break
        return self._result()

    def _tick(self) -> None:
        self._schedule()
        self.clock.at(self.clock.now + self.lat.sched, self._tick)

    def _schedule(self) -> None:
        now = self.clock.now
        for s in self.slurm.schedule(now):
            self._started(s)
        for s in self.slurm.ended:
            self._gone(s.id)
        self.slurm.ended.clear()
        for s in self.slurm.pending():
            if s.info.get("rigid") and s.predicted is not None:
                self.predicted.setdefault(s.id, s.predicted)

    def _arrive(self, j: TwinJob) -> None:
        now = self.clock.now
        self.submitted[j.name] = now
        lo, hi = j.sbatch_nodes or (j.nodes, j.nodes)
        kind = "app" if j.malleable else "rigid"
        extra = {"comment": malleable_comment(j.desc)} if j.malleable and self.site else {}
        self.ids[j.name] = sid = self.slurm.submit(j.name, lo, j.limit_min, now, max_nodes=hi, kind=kind,
                                                   job=j, rigid=not j.malleable, **extra)
        if j.malleable:
            self.apps[sid] = _App(j, sid)
        self._schedule()

    def _started(self, s: Sjob) -> None:
        now, lat = self.clock.now, self.lat
        if s.info.get("kind") == "rigid":
            self.clock.at(now + s.info["job"].seconds, self._finish, s.id)
        elif s.info.get("kind") == "app" and not self.site:
            a = self.apps[s.id]
            a.p = a.job.nodes * self.cpus
            self.clock.at(now + self._d(lat.static_app), self._app_start, a)
        elif s.info.get("kind") == "app":
            self.clock.at(now + self._d(lat.register), self._register, self.apps[s.id])

    def _finish(self, sid: str, ok: bool = True) -> None:
        self.slurm.finish(sid, self.clock.now, ok)
        self._gone(sid)
        self._schedule()

    def _gone(self, sid: str) -> None:
        a = self.apps.get(sid)
        if a is not None:
            a.dead = True
        if self.site:  # its expanders exit by themselves a few looks later
            self.clock.at(self.clock.now + self.lat.expander_exit, self.slurm.cancel_name, expander_name(sid),
                          self.clock.now + self.lat.expander_exit)

    # ------------------------------------------------------------------ the emulated application
    def _register(self, a: _App) -> None:
        s = self.slurm.jobs[a.sid]
        if a.dead or s.state != "RUNNING":
            return
        slots = [h for h in s.hosts for _ in range(self.cpus)]
        legal = [q for q in (a.job.desc.sizes or [a.job.nodes * self.cpus]) if q <= len(slots)]
        a.p = min(a.job.nodes * self.cpus, max(legal, default=len(slots)))
        try:
            a.job_id = self.rm.adopt(self.state.port, a.job.desc, a.sid, slots[:a.p], self.clock.now, None)
        except StateError as e:
            if e.code == "node_busy":
                self.clock.at(self.clock.now + 1.0, self._register, a)
            else:
                self._finish(a.sid, ok=False)
            return
        self.clock.at(self.clock.now + self._d(self.lat.app), self._app_start, a)

    def _d(self, x: float, by: float | None = None) -> float:
        """``x`` drawn from ``[1 - by, 1 + by] * x`` (``by``: :attr:`Latencies.jitter` unless given)."""
        by = self.lat.jitter if by is None else by
        return x * self.rng.uniform(1.0 - by, 1.0 + by) if by else x

    def _iteration(self, a: _App) -> float:
        return self._d(table_time(a.p, a.job.times), self.lat.iter_jitter)

    def _app_start(self, a: _App) -> None:
        if a.dead:
            return
        self.app_start[a.sid] = self.clock.now
        self.clock.at(self.clock.now + self._iteration(a), self._iterated, a)

    def _iterated(self, a: _App) -> None:
        if a.dead:
            return
        now = self.clock.now
        a.k += 1
        t = self._iteration(a)
        if a.k >= a.job.iterations:
            if a.job_id is not None:
                self._core(C.Finished(job_id=a.job_id, status="done"))
            self.clock.at(now + self._d(self.lat.end), self._finish, a.sid)
            return
        q = a.p
        if a.job_id is not None:
            adv = self._core(C.ResizePoint(job_id=a.job_id, iteration=a.k, nprocs=a.p, iter_time=t,
                                           redist_time=a.redist_t, redist_from=a.redist_from,
                                           total=a.job.iterations))
            a.redist_t = a.redist_from = None
            if adv is not None and adv.action in ("expand", "shrink"):
                q = adv.nprocs
        if q == a.p:
            self.clock.at(now + t, self._iterated, a)
            return
        cost = resize_time(a.job.redist, a.p, q)
        self.clock.at(now + cost, self._resized, a, q, cost)

    def _resized(self, a: _App, q: int, cost: float) -> None:
        if a.dead:
            return
        self._core(C.Resized(job_id=a.job_id, old=a.p, new=q, seconds=cost))
        a.redist_t, a.redist_from, a.p = cost, a.p, q
        self.clock.at(self.clock.now + self._iteration(a), self._iterated, a)

    def _core(self, ev: C.Event):
        try:
            rep, acts = self.state.handle(ev, self.clock.now)
        except StateError:
            return None
        self._actions(acts)
        return rep

    # ------------------------------------------------------------------ the controller
    def _look(self) -> None:
        now = self.clock.now
        jobs, idle = self.slurm.view(now)
        listed = {j.id for j in jobs}
        jobs += [f for i in self.rm.edge.watch if i not in listed for f in [self.slurm.final(i)] if f]
        self._actions(self.rm.apply(self.state.port, now, jobs, idle, now))
        self._actions(self.rm.step(self.state.port, now) if self.rm.pending_actions else [])
        self.clock.at(now + self.lat.look, self._look)

    def _actions(self, acts: list) -> None:
        kills = [a.job_id for a in acts if isinstance(a, Kill)]
        if kills:
            self.rm.kill(self.state.port, kills)
        self._commands()

    def _commands(self) -> None:
        """The Slurm commands the controller queued, carried out now."""
        now, out = self.clock.now, self.rm.edge.outbox
        changed = False
        while not out.empty():
            op = out.get()
            if isinstance(op, SubmitExpanders):  # one expander job per node, as the controller's Slurm thread
                minutes = None if op.deadline is None else expander_minutes(op.deadline, now)
                if op.deadline is not None and minutes is None:  # sbatch refused, as the real Slurm thread's
                    self.rm.submitted(op.main, None, now)
                    continue
                for _ in range(op.nodes):
                    sid = self.slurm.submit(expander_name(op.main), 1, minutes, now, deadline=op.deadline, nice=True,
                                            kind="expander")
                    self.rm.submitted(op.main, sid, now)
            elif isinstance(op, CancelJob):
                self.slurm.cancel(op.job, now)
                self._gone(op.job)
            elif isinstance(op, EndJob):
                self.slurm.cancel(op.main, now)
                self.slurm.cancel_name(expander_name(op.main), now)
                self._gone(op.main)
            elif isinstance(op, KeepNodes):
                if not self.slurm.keep(op.job, list(op.hosts)):
                    self.rm.broker.refused(op.job)  # as the real Slurm thread reports a refused update
                elif op.minutes:
                    self.slurm.set_limit(op.job, op.minutes, after_keep=True)
            elif isinstance(op, UpdateJob):
                if "NumNodes" in op.fields:
                    self.slurm.set_nodes(op.job, op.fields["NumNodes"])
                if "TimeLimit" in op.fields:
                    self.slurm.set_limit(op.job, op.fields["TimeLimit"])
            changed = True
        if changed:
            self._schedule()

    # ------------------------------------------------------------------ the record
    def _result(self) -> dict:
        jobs = {}
        for j in self.jobs:
            s = self.slurm.jobs[self.ids[j.name]]
            jobs[j.name] = {"slurm_id": s.id, "state": s.state, "submit": s.submit, "start": s.start or s.submit,
                            "end": s.end or s.submit, "nodes": j.nodes, "rigid": not j.malleable,
                            "submitted_at": self.submitted[j.name], "app_start": self.app_start.get(s.id)}
        late = [{"job": sid, "predicted": p, "started": self.slurm.jobs[sid].start} for sid, p in self.predicted.items()
                if (self.slurm.jobs[sid].start or 0) > p + 5.0]
        out = {"jobs": jobs, "late_starts": late, "restarts": 0}
        if self.site:
            st = self.state
            out["history"] = {"events": list(st.events), "node_events": list(st.node_events),
                              "jobs": [{"job_id": j.job_id, "name": j.desc.name, "allocation": j.allocation,
                                        "state": str(j.state)} for j in st.jobs.values()]}
        return out


def run(jobs: list[TwinJob], nodes: int, cpus: int, site: bool, params: Mapping[str, float] | None = None,
        lat: Latencies = Latencies(), policy: str = "reshape") -> dict:
    """One twin run of ``jobs`` (plain Slurm, or with the controller: ``site``, under the daemon's ``policy``
    preset)."""
    return Twin(jobs, nodes, cpus, site, params, lat, policy).run()
