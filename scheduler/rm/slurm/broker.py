"""The Slurm broker (pure): Slurm's view and the malleable jobs' in, node operations out.

One broker serves every malleable job of a controller: the jobs of one
daemon inside its own allocation (``--slurm-grow``: one *group*, the
daemon's Slurm job) or every ``reshape submit --slurm`` job of a site
(``--slurm-site``: one group per job's Slurm job). A group is a *main*
Slurm job and the **expander jobs** it grows with (named
:func:`~scheduler.rm.slurm.view.expander_name`; DMR/MaM's mechanism, since
Slurm 22.05 cannot grow a running job in place). Each call of :meth:`Broker.step`
takes one look at Slurm and returns operations, applied by the adapters
(``scheduler.rm.slurm.manager``, ``scheduler.rm.slurm.site``):

1. **Holdings.** The nodes of every running main job and expander are ours, each held by the Slurm
   job it came from: new ones are :class:`Grant`\\ed to their group, vanished ones (an expander
   cancelled by hand or at its time limit) are :class:`Lost`, a main job gone from two looks has :class:`Ended`.
2. **Starting waiting jobs earlier.** Jobs waiting in Slurm's queue for nodes are served in Slurm's priority
   order: the idle nodes are theirs first, then those we gave back that Slurm does not count idle yet;
   where those do not suffice, a waiting job is started now with our free nodes and nodes our jobs free by
   shrinking (:class:`AskShrink`; a malleable job not started yet possibly on fewer nodes, :class:`Update`
   ``NumNodes``) when that pays and delays no other waiting job (:mod:`scheduler.rm.slurm.admit`:
   SD-Policy's criterion, Slurm's plan); the shortfall is promised (:class:`Drain`) per waiting job, the
   nodes chosen by the least seconds lost per node, never below ``min_procs`` nor a group's batch host.
   Starts later than Slurm's first prediction (``squeue %S``, by over ``late_tolerance``) are :attr:`late`.
3. **Growth.** Idle nodes left after the waiting jobs' share go to the jobs the Remap Scheduler would
   expand (its what-if, per job), largest measured gain per processor first, one request per group in
   flight, sized to the policy's next step; idle nodes Slurm keeps for a waiting job that cannot start
   yet are *borrowed* until the start Slurm predicts for it (Sudarsan & Ribbens' (2007) idle processors
   within EASY's shadow time, as ``reshape-plus``'s ``borrow``), and (2) takes them back once it could
   start. An expander has the lowest priority (``--nice``) and a ``--deadline`` at its main job's end,
   so Slurm's backfill starts it only where it delays no waiting job; one not started after
   ``grant_timeout`` is cancelled, and its group asks again only after three grant timeouts.
4. **Give back.** A granted node no rank used for ``idle_release`` seconds goes back; an expander whose
   end comes within ``expire_margin`` is vacated (its job asked to shrink off it) before Slurm ends it.
5. **Time limits.** Each job's Slurm limit is kept at the end it has at its size
   (:mod:`scheduler.rm.slurm.limits`; :class:`Update` ``TimeLimit``), its expanders'
   brought down to it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from scheduler.rm.slurm.admit import (
    LIVE,
    Tenant,
    delays,
    loss_weight,
    moldable_limit,
    own_cost,
    planned_start,
    shrink_off,
)
from scheduler.rm.slurm.limits import kept_minutes, limit_updates, with_limits
from scheduler.rm.slurm.ops import (
    AskShrink,
    Cancel,
    Drain,
    Ended,
    Fail,
    Forget,
    Grant,
    Lost,
    Release,
    Submit,
    Update,
    batch_last,
)
from scheduler.rm.slurm.view import SlurmJob, expander_name

__all__ = ["WAITING_FOR_NODES", "AskShrink", "Broker", "Cancel", "Drain", "Ended", "Fail", "Forget", "Grant",
           "Lost", "Release", "Submit", "Tenant", "Update", "shrink_off"]

WAITING_FOR_NODES = ("Resources", "Priority")  # pending reasons that mean "needs nodes"


Want = Callable[[int, int], "int | None"]  # (job id, extra slots) -> size it would expand to, or None


@dataclass
class _Group:
    main: str
    batch_host: str
    since: float  # registered at: a look taken before this cannot say it ended


@dataclass
class Broker:
    """Slurm's view plus the controller's, in; node operations out (module docstring)."""

    grant_timeout: float = 10.0
    idle_release: float = 30.0
    expire_margin: float = 60.0
    late_tolerance: float = 5.0
    node_slots: int = 1
    moldable: bool = True  # start a waiting malleable job on fewer nodes when that pays (admit)
    shrink_to_start: bool = True  # shrink running jobs for a waiting one only when that pays and delays no one
    time_limits: str = "charge"  # keep each job's Slurm time limit at its end: "charge", "measured" or "off"
    nodes: tuple[str, ...] = ()  # the partition's nodes, in Slurm's order (the backfill plan's)
    resizes_once: bool = False  # Slurm refuses any update of a job after its first shrink (no accounting)
    max_stretch: float = 3.0  # no shrink makes a job run longer than this times its run at its requested size
    regrow: bool = False  # a moldable start's own cost assumes it grows back when Slurm would have started it
    criterion: str = "slowdown"  # what a shrink to start weighs: seconds ("turnaround") or "slowdown" (admit)
    _now: float = 0.0
    groups: dict[str, _Group] = field(default_factory=dict)
    held: dict[str, str] = field(default_factory=dict)  # host -> Slurm job holding it for us
    owner: dict[str, str] = field(default_factory=dict)  # Slurm job (main or expander) -> its group's main
    requested: dict[str, float] = field(default_factory=dict)  # pending expander id -> submitted at
    submitting: dict[str, int] = field(default_factory=dict)  # group -> expanders asked for, sbatch not answered
    quiet_until: dict[str, float] = field(default_factory=dict)  # group -> no request before this
    short: dict[str, float] = field(default_factory=dict)  # group -> when an expander of its request timed out
    idle_since: dict[str, float] = field(default_factory=dict)
    draining: dict[str, str] = field(default_factory=dict)  # host -> why (promised to a job, expiring, lost)
    promised: dict[str, set[str]] = field(default_factory=dict)  # waiting Slurm job -> hosts promised to it
    released: dict[str, str] = field(default_factory=dict)  # host we gave back -> the Slurm job it left
    gone: dict[str, str] = field(default_factory=dict)  # hosts Slurm took back while in use -> why
    missing: dict[str, int] = field(default_factory=dict)  # main job absent from the last look
    predicted: dict[str, float] = field(default_factory=dict)  # pending job -> first start Slurm predicted
    late: list[dict] = field(default_factory=list)  # starts later than predicted (job, predicted, started)
    checked: set[str] = field(default_factory=set)  # jobs whose start was checked against the prediction
    limits: dict[str, int] = field(default_factory=dict)  # Slurm job -> the time limit we last set (minutes)
    frozen: set[str] = field(default_factory=set)  # jobs shrunk once where Slurm takes no further update
    fixed: set[str] = field(default_factory=set)  # jobs no shrink may touch in this look (step)

    # ------------------------------------------------------------------ bookkeeping from the adapters
    def add_group(self, main: str, batch_host: str, now: float, hosts: Sequence[str] = ()) -> None:
        """Group ``main`` runs with its batch script on ``batch_host``; ``hosts``: the nodes its job holds, which
        no job uses (the adapter checked): a job that was to leave one (``gone``) has, and that is settled
        here, so the next look does not take the new job for the one that must leave (it would fail there)."""
        self.groups.setdefault(main, _Group(main, batch_host, now))
        self.owner[main] = main
        self.held.update(dict.fromkeys(hosts, main))
        for h in hosts:
            self.gone.pop(h, None)

    def drain(self, host: str, why: str) -> None:
        self.draining[host] = why

    def let_go(self, host: str) -> None:
        """Slurm no longer holds ``host`` for us."""
        for d in (self.held, self.draining, self.idle_since):
            d.pop(host, None)

    def in_use(self, host: str, why: str) -> None:
        """Slurm took ``host`` back while a job still uses it: the job must leave it (``gone``)."""
        self.gone[host] = why

    def submitted(self, main: str, job: str | None, now: float) -> list[Cancel]:
        """``sbatch`` answered for group ``main``: expander ``job`` (None: it failed). One whose group ended
        while it was submitted is nobody's (nothing would ever cancel it): cancelled."""
        left = self.submitting.pop(main, 0) - 1
        if not job:  # the rest of the request was not submitted either
            return []
        if left > 0:
            self.submitting[main] = left
        if main not in self.groups:
            return [Cancel(job, f"its job {main} ended while it was submitted")]
        self.requested[job] = now
        self.owner[job] = main
        return []

    def released_host(self, host: str) -> None:
        job = self.held.pop(host, None)
        self.idle_since.pop(host, None)
        self.draining.pop(host, None)
        if job is not None:
            self.released[host] = job

    def freeze(self, jobs: set[str]) -> None:
        """Slurm takes no further update of these jobs (resized once, without accounting)."""
        self.frozen |= jobs

    def refused(self, job: str) -> None:
        """Slurm refused to shrink ``job`` (without accounting, one resized before): it takes no update any more,
        and the nodes given back are still its own: the next look grants them back (to grow into again)."""
        self.frozen.add(job)
        back = {h for h, j in self.released.items() if j == job}
        self.released = {h: j for h, j in self.released.items() if h not in back}
        for hosts in self.promised.values():
            hosts -= back

    def kept(self, job: str) -> list[str]:
        """The hosts Slurm job ``job`` still holds for us (empty: cancel it, it holds nothing we use)."""
        return [h for h, j in self.held.items() if j == job]

    def group_of(self, host: str) -> str | None:
        j = self.held.get(host)
        return self.owner.get(j) if j is not None else None

    def _batch(self, host: str) -> bool:
        g = self.groups.get(self.group_of(host) or "")
        return g is not None and g.batch_host == host

    # ------------------------------------------------------------------ one look at Slurm
    def step(self, now: float, jobs: Sequence[SlurmJob], idle_nodes: int, used: Mapping[str, int],
             tenants: Sequence[Tenant], want: Want, seen: float | None = None) -> list:
        """One look (taken at ``seen``, default ``now``): every job in the partition, its idle node
        count, slots used per host, the malleable jobs, and the policy's what-if (:data:`Want`)."""
        seen = now if seen is None else seen
        self._now = now
        by_id = {j.id: j for j in jobs}
        ops = self._ended(by_id, seen)
        ops += self._holdings(now, by_id, seen)
        free = [h for h in self.held if not used.get(h) and not self._batch(h) and h not in self.draining
                and self.held[h] not in self.frozen]
        self.idle_since = {h: self.idle_since.get(h, now) for h in free}
        ops += self._vacate_gone(tenants, used)
        ops += self._expiring(now, by_id, tenants, used)
        self._watch_starts(jobs)
        # no shrink touches a job Slurm takes no update of nor, where it takes one (resizes_once), one with nodes
        # on their way back from an earlier look: a second shrink's nodes could never go back (seen on real Slurm)
        back_soon = {self.held[h] for h in self.draining if h in self.held} if self.resizes_once else set()
        self.fixed = self.frozen | back_soon
        idle_left, served, borrow = self._serve_waiting(now, jobs, idle_nodes, free, tenants, used, ops)
        back = [Release(h, self.held[h], why) for h, why in sorted(self.draining.items())
                if h in self.held and not used.get(h) and not self._batch(h) and self.held[h] not in self.frozen]
        if not served:
            ops += self._grow(now, by_id, idle_left, borrow, tenants, used, want)
        ops += self._own_limits(batch_last(back + self._idle_release(now, free, tenants, want), by_id, self.kept),
                                by_id, tenants)
        if self.time_limits != "off":
            ops += self._limits(by_id, tenants)
        return ops

    def _own_limits(self, releases: list[Release], by_id: Mapping[str, SlurmJob],
                    tenants: Sequence[Tenant]) -> list[Release]:
        """A job's own allocation shrunk: its new time limit goes with the same update (rule 5), and where
        Slurm takes no further update of a shrunk job (:attr:`resizes_once`) it is not shrunk again."""
        out, shrunk = with_limits(releases, by_id, tenants, set(self.groups), self.time_limits != "off")
        if self.resizes_once:
            self.frozen |= shrunk
        return out

    def _ended(self, by_id: Mapping[str, SlurmJob], seen: float) -> list:
        ops: list = []
        for main, g in list(self.groups.items()):
            j = by_id.get(main)
            if j is None and seen > g.since and self.missing.get(main, 0) < 1:
                self.missing[main] = 1  # gone from one look: ended only if the next look agrees
                continue
            if j is not None or seen <= g.since:
                self.missing.pop(main, None)
            if (j is None or j.state not in LIVE) and seen > g.since:
                ops += self.end_group(main, j.state if j is not None else "GONE", by_id)
        return ops

    def end_group(self, main: str, state: str, by_id: Mapping[str, SlurmJob] | None = None) -> list:
        """Group ``main``'s Slurm job is over (``state``): :class:`Ended`, its expanders cancelled
        (those in ``by_id`` or requested; all of them without a look), its nodes no longer ours."""
        ops: list = [Ended(main, state)]
        self.missing.pop(main, None)
        for jid in [k for k, m in self.owner.items() if m == main and k != main]:
            if by_id is None or jid in by_id or jid in self.requested:
                ops.append(Cancel(jid, f"its job {main} ended"))
            self.requested.pop(jid, None)
        for h in [h for h in self.held if self.owner.get(self.held[h]) == main]:
            self.held.pop(h)
            self.gone.pop(h, None)
            self.draining.pop(h, None)
            self.idle_since.pop(h, None)
        self.owner = {k: m for k, m in self.owner.items() if m != main}
        self.groups.pop(main, None)
        self.submitting.pop(main, None)
        self.quiet_until.pop(main, None)
        return ops

    def _holdings(self, now: float, by_id: Mapping[str, SlurmJob], seen: float) -> list:
        """Grants and losses: the nodes of our running main jobs and expanders against the last look (taken
        at ``seen``: a main job registered after it keeps its nodes, which the look may not show yet)."""
        ops: list = []
        names = {expander_name(m): m for m in self.groups}
        now_held: dict[str, str] = {}
        for j in by_id.values():
            main = j.id if j.id in self.groups else names.get(j.name)
            if main is None:
                continue
            self.owner.setdefault(j.id, main)
            if j.state in LIVE:
                for h in j.nodes:
                    now_held[h] = j.id
            elif j.state == "PENDING" and j.id in self.requested and now - self.requested[j.id] > self.grant_timeout:
                del self.requested[j.id]
                self.quiet_until[main] = now + 3 * self.grant_timeout
                self.short[main] = now
                ops.append(Cancel(j.id, f"Slurm granted no node in {self.grant_timeout:g} s ({j.reason})"))
        for h, jid in self.held.items():
            # a main job missing from one look keeps its nodes until the next; one registered after the look,
            # and one completing (Slurm lists only its nodes still completing), keep theirs while it runs
            g, j = self.groups.get(jid), by_id.get(jid)
            completing = j is not None and j.state == "COMPLETING"
            if jid in self.missing or (g is not None and (seen <= g.since or completing)):
                now_held.setdefault(h, jid)
        for jid in [k for k in self.requested if k not in by_id]:
            del self.requested[jid]  # cancelled or failed outside our control
        waited = {jid: now - t for jid, t in self.requested.items() if by_id[jid].state in LIVE}
        for jid in waited:
            del self.requested[jid]
        # a host given back is listed by its old holder until Slurm has taken it: not ours, not lost
        self.released = {h: j for h, j in self.released.items() if now_held.get(h) == j}
        for h, jid in now_held.items():
            if h not in self.held and h not in self.released:
                ops.append(Grant(h, jid, self.owner[jid], waited.get(jid, 0.0)))
        for h, jid in self.held.items():
            if h not in now_held:
                why = f"Slurm job {jid} no longer holds it"
                ops.append(Lost(h, self.owner.get(jid, jid), why))
                self.draining.pop(h, None)
                self.gone[h] = why
        self.held = {h: j for h, j in now_held.items() if h not in self.released}
        return ops

    def _vacate_gone(self, tenants: Sequence[Tenant], used: Mapping[str, int]) -> list:
        """Nodes Slurm took back while ranks were on them: their jobs shrink off them (:class:`Forget`
        once vacated), or fail where they cannot (:class:`Fail`: below ``min_procs``, a resize under way)."""
        ops: list = []
        for h, why in list(self.gone.items()):
            if not used.get(h):
                ops.append(Forget(h, why))
                continue
            on = [t for t in tenants if h in t.hosts]
            asks = self._ask_off(on, {h}, why)
            if any(shrink_off(t, {h}) is None for t in on if not t.busy):
                ops.append(Fail(h, f"{why}, and its job cannot shrink off it"))
                del self.gone[h]
            else:
                ops += asks
        return ops

    def forgotten(self, host: str) -> None:
        self.gone.pop(host, None)

    def _expiring(self, now: float, by_id: Mapping[str, SlurmJob], tenants: Sequence[Tenant],
                  used: Mapping[str, int]) -> list:
        """Vacate expanders whose time limit comes within ``expire_margin``, before Slurm ends them."""
        ops: list = []
        for h, jid in self.held.items():
            j = by_id.get(jid)
            if j is None or jid in self.groups or j.end is None or j.end - now > self.expire_margin:
                continue
            if h not in self.draining:
                self.draining[h] = f"expander job {jid} ends at its time limit in {max(0.0, j.end - now):.0f} s"
                ops.append(Drain(h))
            if used.get(h):
                ops += self._ask_off(tenants, {h}, self.draining[h])
        return ops

    def _ask_off(self, tenants: Sequence[Tenant], drop: set[str], why: str) -> list:
        ops: list = []
        for t in tenants:
            if t.busy or not drop & set(t.hosts):
                continue
            q = shrink_off(t, drop)
            if q is not None:
                ops.append(AskShrink(t.job_id, q, why, tuple(dict.fromkeys(t.hosts[q:]))))
        return ops

    # ------------------------------------------------------------------ rigid jobs
    def _watch_starts(self, jobs: Sequence[SlurmJob]) -> None:
        for j in jobs:
            if j.id in self.owner or j.name.startswith("reshape-expand-"):
                continue
            if j.state == "PENDING" and j.start is not None and j.id not in self.predicted:
                self.predicted[j.id] = j.start
            elif j.state in LIVE and j.id in self.predicted and j.id not in self.checked and j.start is not None:
                self.checked.add(j.id)
                if j.start > self.predicted[j.id] + self.late_tolerance:
                    self.late.append({"job": j.id, "predicted": self.predicted[j.id], "started": j.start,
                                      "late": j.start - self.predicted[j.id]})

    def _serve_waiting(self, now: float, jobs: Sequence[SlurmJob], idle: int, free: list[str],
                       tenants: Sequence[Tenant], used: Mapping[str, int], ops: list) -> tuple[int, bool, tuple]:
        """Promise nodes to the jobs waiting for them (module docstring, 2); returns the idle nodes
        left for growth, whether any waiting job was given nodes, and the idle nodes kept for jobs that
        cannot start yet with the earliest start Slurm predicts for them (borrowable until then)."""
        waiting = sorted((j for j in jobs if j.state == "PENDING" and j.id not in self.owner
                          and not j.name.startswith("reshape-expand-") and j.reason in WAITING_FOR_NODES),
                         key=lambda j: (-j.priority, j.submit or 0.0, j.id))
        ids = {j.id for j in waiting}
        for w in [w for w in self.promised if w not in ids]:  # started or gone: its promises lapse
            for h in self.promised.pop(w):
                if self.draining.get(h, "").startswith(f"Slurm job {w} "):
                    del self.draining[h]
                    ops.append(Drain(h, False))
        firsts = {j.nodes[0] for j in jobs if j.nodes}  # batch hosts: given back last (ops.batch_last)
        spare = sorted((h for h in free if h not in self.draining), key=lambda h: h in firsts)
        # given back (idle release, a cancelled expander) and not yet idle in Slurm's eyes, promised to no one:
        # on their way to the waiting jobs, so no job shrinks for what they will cover
        claimed = set().union(*self.promised.values())
        coming = sorted(h for h in self.released if h not in claimed)
        plans: dict[int, tuple[int, tuple[str, ...], str]] = {}  # job id -> (size, hosts it leaves, why)
        served = False
        kept, until = 0, math.inf  # idle nodes Slurm keeps for jobs that cannot start yet, and until when
        for w in waiting:
            # promised and still ours, or given back and not yet idle in Slurm's eyes (idle ones are counted there)
            mine = {h for h in self.promised.get(w.id, set()) if h in self.held or h in self.released}
            got = self._admit(now, jobs, w, idle, mine, coming, spare, tenants, plans)
            if got is None:  # cannot start it now (or it does not pay): release nothing for it
                use = min(idle, w.num_nodes - len(mine))
                idle -= use
                soon, coming = coming[:w.num_nodes - len(mine) - use], coming[w.num_nodes - len(mine) - use:]
                self.promised.setdefault(w.id, set()).update(soon)
                if len(mine) + use + len(soon) < w.num_nodes:
                    kept, until = kept + use, min(until, w.start if w.start is not None else -math.inf)
                continue
            k, use, nsoon, take, dropped, tried = got
            idle -= use
            soon, coming = coming[:nsoon], coming[nsoon:]
            self.promised.setdefault(w.id, set()).update(soon)
            if not take and not dropped and k == w.num_nodes:
                continue  # idle nodes and those on their way suffice: Slurm starts it
            why = f"Slurm job {w.id} is waiting for {w.num_nodes} node(s)"
            served, plans, spare = served or bool(take or dropped), tried, [h for h in spare if h not in take]
            # a shrink frees whole steps of a job's sizes: what it frees beyond the need stays the job's
            for h in [*take, *dropped]:
                self.draining[h] = why
                self.promised.setdefault(w.id, set()).add(h)
                ops.append(Drain(h))
            if k < w.num_nodes:
                ops.append(Update(w.id, nodes=k, minutes=moldable_limit(w.limit, w.num_nodes, k),
                                  why=f"started on {k} of its {w.num_nodes} node(s)"))
        ops += [AskShrink(j, q, why, gone) for j, (q, gone, why) in plans.items()]
        ops += self._surplus(plans)
        return idle, served, (kept, until)

    def _surplus(self, plans: Mapping[int, tuple[int, tuple[str, ...], str]]) -> list[Drain]:
        """The nodes a planned shrink frees beyond what the waiting jobs were promised (a job's sizes step by
        more than the need): given back with the others, promised to no one, so Slurm's backfill starts
        whichever waiting job fits them (kept, they idle until the job ends where Slurm takes no further
        update of a shrunk job, :attr:`resizes_once`)."""
        ops = []
        for _, gone, why in plans.values():
            for h in gone:
                if h in self.held and h not in self.draining and not self._batch(h):
                    self.draining[h] = f"freed beyond the need by a shrink ({why})"
                    ops.append(Drain(h))
        return ops

    def _admit(self, now: float, jobs: Sequence[SlurmJob], w: SlurmJob, idle: int, mine: set[str],
               coming: list[str], spare: list[str], tenants: Sequence[Tenant], plans: dict) -> tuple | None:
        """How waiting job ``w`` starts now, if it can and that pays (``scheduler.rm.slurm.admit``): ``(nodes,
        idle nodes it takes, nodes on their way it takes, our free nodes given back, nodes shrinks free,
        the shrink plans)``; None where it cannot (or, with ``shrink_to_start``, where no way pays)."""
        n = w.num_nodes
        sizes = [n]
        if self.moldable and self.shrink_to_start:
            sizes += sorted({q // self.node_slots for q in w.malleable_sizes() if q % self.node_slots == 0
                             and 0 < q // self.node_slots < n}, reverse=True)
        why = f"Slurm job {w.id} is waiting for {n} node(s)"
        start = w.start if w.start is not None or not self.nodes else planned_start(now, self.nodes, jobs, w.id)
        saving = None if start is None else max(0.0, start - now)
        best = None
        for k in sizes:
            a = min(idle, max(0, k - len(mine)))
            b = min(len(coming), k - len(mine) - a)
            take = spare[:max(0, k - len(mine) - a - b)]
            d = k - len(mine) - a - b - len(take)
            tried = dict(plans)
            dropped = self._least_loss(d, tenants, tried, why, w.limit) if d > 0 else []
            if len(dropped) < d:
                continue
            if not self.shrink_to_start:  # the earlier rule: every waiting job served whenever it can start
                return k, a, b, take, dropped[:d], tried
            by_id = {t.job_id: t for t in tenants}
            cost = own_cost(w.limit, n, k, saving if self.regrow else None) + sum(
                loss_weight(self.criterion, w.limit, by_id[j].run)
                * (by_id[j].loss(q) - by_id[j].loss(plans.get(j, (by_id[j].nprocs,))[0]))
                for j, (q, _, _) in tried.items())
            if cost > 0 and (saving is None or cost >= saving):
                continue
            if (take or dropped or k < n) and self.nodes:
                # the ends Slurm will plan with: the limits rule 5 gives the shrunk jobs (whole minutes)
                ends = {m.id: m.start + 60.0 * self._limit(m, by_id[j].ends[q]) for j, (q, _, _) in tried.items()
                        if self.time_limits != "off" and q in by_id[j].ends
                        and (m := next((x for x in jobs if x.id == by_id[j].main), None)) is not None
                        and m.start is not None and m.id not in self.frozen}
                lim = moldable_limit(w.limit, n, k)
                freed = {*take, *dropped, *(h for _, gone, _ in tried.values() for h in gone if not self._batch(h))}
                if delays(now, self.nodes, jobs, w.id, k, None if lim is None else 60.0 * lim,
                          freed, ends, promised=self.predicted):
                    continue
            gain = (saving or 0.0) - cost
            if best is None or gain > best[0]:
                best = (gain, (k, a, b, take, dropped[:d], tried))
        return None if best is None else best[1]

    def _least_loss(self, nodes: int, tenants: Sequence[Tenant], plans: dict, why: str,
                    limit: float | None = None) -> list[str]:
        """Extend ``plans`` (job id -> (size, hosts left, why)) by shrinks that free ``nodes`` more whole
        nodes at the least loss per node (weighed by :attr:`criterion` for a waiting job with time limit
        ``limit``); the nodes freed (fewer if no shrink can)."""
        freed: list[str] = []
        if nodes <= 0:
            return freed
        live = [t for t in tenants if not t.busy]
        while len(freed) < nodes:
            best = None
            for t in live:
                q0, left, _ = plans.get(t.job_id, (t.nprocs, (), why))
                order = [h for h in dict.fromkeys(reversed(t.hosts[:q0])) if not self._batch(h)
                         and h not in self.draining and h in self.held and self.held[h] not in self.fixed]
                if not order:
                    continue
                q = shrink_off(t, {*left, order[0]})
                if q is None or not t.within(q, self._now, self.max_stretch):
                    continue  # below min_procs or its points, or it would run past max_stretch its own run
                gone = tuple(h for h in dict.fromkeys(t.hosts[q:]) if not self._batch(h))
                # the last first: the first node of a Slurm job (its batch host) is the last it gives back
                new = [h for h in reversed(gone) if h not in left and h not in self.draining and h not in freed
                       and self.held.get(h) not in self.fixed]
                if not new:
                    continue
                cost = loss_weight(self.criterion, limit, t.run) * (t.loss(q) - t.loss(q0)) / len(new)
                if best is None or cost < best[0]:
                    best = (cost, t.job_id, q, gone, new)
            if best is None:
                return freed
            _, jid, q, gone, new = best
            plans[jid] = (q, gone, plans.get(jid, (0, (), why))[2])
            freed += new
        return freed

    # ------------------------------------------------------------------ growth and give-back
    @property
    def _min_window(self) -> float:
        """The least time before its deadline an expander is worth asking for: Slurm gives it whole minutes
        (at least one), and it is vacated ``expire_margin`` before they end."""
        return 60.0 + self.expire_margin

    def _grow(self, now: float, by_id: Mapping[str, SlurmJob], idle: int, borrow: tuple[int, float],
              tenants: Sequence[Tenant], used: Mapping[str, int], want: Want) -> list:
        """Expander requests for the jobs the policy would expand, largest gain first: onto idle nodes
        (until the job's end), then onto idle nodes Slurm keeps for a job that cannot start yet,
        *borrowed* until the start Slurm predicts for it (``--deadline``; vacated before)."""
        ops: list = []
        kept, until = borrow
        if until - now < self._min_window:
            kept = 0  # too short to be worth an expander (Slurm counts whole minutes), or no prediction
        # expanders asked for and not started take these nodes first: counted again, a second group would ask
        # for the same node and one of the two groups get part of its step (of no use to it) after a timeout
        ahead = sum(self.submitting.values()) + sum(by_id[j].num_nodes for j in self.requested
                                                    if j in by_id and by_id[j].state == "PENDING")
        idle, kept = max(0, idle - ahead), max(0, kept - max(0, ahead - idle))
        for t in sorted(tenants, key=lambda t: -t.gain()):
            g = t.main
            main = by_id.get(g)  # not running in this look (missing from it: perhaps ended): nothing asked for it
            if (idle + kept <= 0 or t.busy or g not in self.groups or g in self.submitting or main is None
                    or main.state not in LIVE or now < self.quiet_until.get(g, 0)
                    or any(self.owner.get(j) == g for j in self.requested)
                    or any(self.group_of(h) == g for h in self.draining)):
                continue
            own = sum(self.node_slots - used.get(h, 0) for h in self.held
                      if self.group_of(h) == g and h not in self.draining and used.get(h, 0) < self.node_slots)
            target = want(t.job_id, (idle + kept) * self.node_slots)
            if target is None or target - t.nprocs <= own:
                continue
            nodes = math.ceil((target - t.nprocs - own) / self.node_slots)
            if nodes > idle + kept:
                continue
            end = main.end
            if nodes > idle:  # borrowed: back before the waiting job's predicted start
                end = until if end is None else min(end, until)
            if end is not None and end - now < self._min_window:
                continue  # it ends before an expander would be worth it (Slurm counts whole minutes)
            self.submitting[g] = nodes
            kept -= max(0, nodes - idle)
            idle = max(0, idle - nodes)
            ops.append(Submit(g, nodes, end))
        return ops

    def _have(self, main: SlurmJob) -> int | None:
        """The time limit (minutes) Slurm job ``main`` has now, as last set."""
        return self.limits.get(main.id, None if main.limit is None else round(main.limit / 60.0))

    def _limit(self, main: SlurmJob, end: float) -> int:
        """The time limit (minutes) rule 5 keeps running Slurm job ``main`` at for a job ending at ``end``."""
        return kept_minutes(main, end, self._have(main))

    def _limits(self, by_id: Mapping[str, SlurmJob], tenants: Sequence[Tenant]) -> list:
        """Rule 5's updates (``scheduler.rm.slurm.limits.limit_updates``), recorded as set."""
        return limit_updates(tenants, by_id, self.held, self.owner, self.limits, self.frozen, self._have)

    def _idle_release(self, now: float, free: list[str], tenants: Sequence[Tenant], want: Want) -> list:
        """Free nodes no rank used for ``idle_release`` seconds go back, and at once those of a group whose request
        Slurm granted only in part that its job cannot use (free since an earlier look, no resize pending)."""
        ops: list = []
        wanting = {t.main for t in tenants if not t.busy and want(t.job_id, 0) is not None}
        busy = {t.main for t in tenants if t.busy}
        self.short = {g: t for g, t in self.short.items() if now - t <= self.idle_release and g in self.groups}
        for h in free:
            g = self.group_of(h)
            part = g in self.short and g not in busy and self.idle_since[h] < now
            if h in self.draining or g in wanting or (now - self.idle_since[h] <= self.idle_release and not part):
                continue
            why = (f"unused for {self.idle_release:g} s" if not part else
                   f"unused, the rest of its request not granted in {self.grant_timeout:g} s")
            ops.append(Release(h, self.held[h], why))
        return ops
