"""The Remap Scheduler's half of the core (Sudarsan & Ribbens 2007 §3.1, §3.2.1): resize points, the resize handshake,
shrink requests and what-ifs. :class:`Resizes` is one of the parts ``scheduler.core.state.ClusterState``
composes; the rules are in that module's docstring. A resize confirmed or abandoned frees slots: the
caller runs the scheduling pass after it (``resized``, ``lost``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from scheduler.core.actions import StateError
from scheduler.core.events import Advice, ResizePoint
from scheduler.core.job import Job, JobState, PendingResize
from scheduler.core.jobfile import JobFileError, narrow_spec
from scheduler.core.policy import Expand, RemapPolicy, Snapshot
from scheduler.core.restarts import resumed
from scheduler.core.walltime import budget_left, deadline_after, rate

if TYPE_CHECKING:
    from scheduler.core.checks import PolicyChecks
    from scheduler.core.jobtable import JobTable
    from scheduler.core.pool import Pool

__all__ = ["RESIZE_GRACE", "Resizes"]

RESIZE_GRACE = (5.0, 0.1)  # the daemon kills a job stuck in a resize 5 s + 10% past its resize_timeout


class Resizes:
    """The resize handshake of ``table``'s running jobs over ``pool``'s slots: ``remap`` advises at each
    resize point, ``checks`` vets its advice."""

    def __init__(self, table: JobTable, pool: Pool, checks: PolicyChecks, remap: RemapPolicy):
        self.table, self.pool, self.checks, self.remap = table, pool, checks, remap

    def request_shrink(self, job_id: int, nprocs: int, reason: str, now: float) -> bool:
        """Ask a running job to shrink to ``nprocs`` at its next resize point; False if it cannot."""
        j = self.table.jobs.get(job_id)
        if (j is None or j.state != JobState.RUNNING or not j.spec.resizable or j.pending
                or not j.spec.min_procs <= nprocs < j.nprocs):
            return False
        if j.shrink_request != nprocs:
            j.shrink_request = nprocs
            self.table.event(now, j, "shrink_request", f"{j.nprocs}->{nprocs}: {reason}")
        return True

    def _snapshot_for(self, j: Job, now: float) -> Snapshot:
        """The policies' view at ``j``'s resize point: with leased nodes, the free slots are those it may take."""
        snap = self.table.snapshot(now)
        if self.pool.leases:
            snap = replace(snap, free_slots=self.pool.free_for(j.allocation))
        return snap

    def would_expand(self, job_id: int, extra: int, now: float) -> int | None:
        """The size running job ``job_id`` would expand to at its next resize point if ``extra`` more
        slots were its own (a what-if over the pure policy: nothing changes); None: it would not."""
        j = self.table.jobs.get(job_id)
        if j is None or j.state != JobState.RUNNING or not j.spec.resizable or j.pending:
            return None
        snap = self._snapshot_for(j, now)
        snap = replace(snap, total_slots=snap.total_slots + extra, free_slots=snap.free_slots + extra)
        d = self.remap.at_resize_point(snap, job_id)
        return d.nprocs if isinstance(d, Expand) and d.nprocs > j.nprocs else None

    # ---------------------------------------------------------------- Remap Scheduler handshake
    def hello(self, job_id: int, nprocs: int, now: float, sizes: Sequence[int] | None = None) -> None:
        """The job (re)connected at ``nprocs``; ``sizes``: every size its program accepts (its
        runtime's own rules: arrays' layouts, a ``sizes`` test), which narrow its legal sizes
        from then on (:func:`scheduler.core.jobfile.narrow_spec`; kept in the journal with the job)."""
        j = self.table.running_job(job_id)
        if sizes:
            try:
                narrowed = narrow_spec(j.spec, sizes, nprocs)
            except JobFileError as e:
                raise StateError("bad_sizes", str(e)) from None
            j.announce(narrowed.sizes)
        j.connected = True
        self._reconcile(j, nprocs, now)
        self.table.mark(j)

    def _reconcile(self, j: Job, nprocs: int, now: float) -> None:
        """A lost ``resized``: the size the job reports decides whether the resize happened."""
        if j.pending and nprocs == j.pending.new:
            self._apply_resize(j, j.pending.old, j.pending.new, None, now)
        elif j.pending and nprocs == j.pending.old:
            self.abandon_resize(j, now, "not confirmed")

    def resize_point(self, ev: ResizePoint, now: float) -> Advice:
        """Performance Profiler update, then the Remap Scheduler's advice."""
        action, q, hosts, reason = self.handle_resize_point(ev.job_id, ev.nprocs, ev.iteration, ev.iter_time, now,
                                                        ev.total, ev.parked, ev.redist_time, ev.redist_from)
        return Advice(action, q, hosts, reason)

    def handle_resize_point(self, job_id: int, n: int, iteration: int, iter_time: float, now: float,
                        total: int | None = None, parked: Sequence[str] | None = None,
                        redist_time: float | None = None, redist_from: int | None = None,
                        ) -> tuple[str, int, tuple[str, ...], str]:
        """:meth:`resize_point` with the event's fields as arguments (the simulator's call: no event
        or advice object per resize point); returns the advice's ``(action, nprocs, hosts, reason)``."""
        j = self.table.running_job(job_id)
        j.connected = True
        self._reconcile(j, n, now)
        if n != j.nprocs:
            raise StateError("bad_size", f"job {job_id} reports {n} processes, scheduler has {j.nprocs}")
        resumed(j, iteration)
        j.iterations = max(j.iterations, iteration)
        if total is not None:
            j.report_total(total)
        j.point_time = now
        j.parked = list(parked or ())  # processes it keeps on those hosts beyond its slots
        j.profile.record_iteration(n, iter_time)
        if redist_time is not None and redist_from:
            j.profile.record_redistribution(redist_from, n, redist_time)
        self.table.mark(j)
        if not j.spec.resizable:
            return "continue", n, (), "static job"
        d = self.remap.at_resize_point(self._snapshot_for(j, now), job_id)
        if j.shrink_request is not None:
            j.shrink_request = None  # the policy has seen it
            self.table.mark(j)
        q = self.checks.remap_size(d, j, now)
        if q > n:
            hosts = self.pool.allocate(q - n, prefer=j.parked, lease=j.allocation)  # where parked ranks are
            j.pending = PendingResize("expand", n, q, hosts, now)
            self._start_resize(j, n, q, now)
            self.table.event(now, j, "advise", f"expand {n}->{q}: {d.reason}")
            self.table.decided(now, "expand", job_id, q)
            return "expand", q, tuple(hosts), d.reason
        if q < n:
            j.pending = PendingResize("shrink", n, q, j.hosts[q:], now)
            self._start_resize(j, n, q, now)
            self.table.event(now, j, "advise", f"shrink {n}->{q}: {d.reason}")
            self.table.decided(now, "shrink", job_id, q)
            return "shrink", q, (), d.reason
        return "continue", n, (), getattr(d, "reason", "")

    def resized(self, job_id: int, old: int, new: int, seconds: float, error: str | None, now: float) -> None:
        """The job confirms the resize it was advised (or says it failed or changed nothing)."""
        j = self.table.running_job(job_id)
        p = j.pending
        if p is None:
            raise StateError("out_of_order", f"job {job_id} sent 'resized' without a pending resize")
        if old != p.old:
            raise StateError("out_of_order", f"job {job_id}: resized from {old}, advised from {p.old}")
        if error or new == old:
            self.abandon_resize(j, now, error or "no change")
        elif new == p.new:
            self._apply_resize(j, old, new, seconds, now)
        else:
            raise StateError("out_of_order", f"job {job_id}: resized to {new}, advised {p.new}")

    def lost(self, job_id: int, old: int, new: int, ranks: tuple[int, ...], reason: str, now: float) -> None:
        """The job lost ``ranks`` (of its ``old``) and carries on, in place, on ``new`` survivors
        (``reshape.runtime.inplace``): a resize under way is abandoned, the lost ranks' slots are
        freed, the reason is recorded, and the freed slots go to whoever the policies pick (the job
        too, at a later resize point)."""
        j = self.table.running_job(job_id)
        self._reconcile(j, old, now)  # a resize the job made (or not) before the loss, unconfirmed
        if j.pending is not None:
            self.abandon_resize(j, now, f"a rank was lost: {reason}")
        if old != j.nprocs or not 1 <= new <= old - len(set(ranks)) or not all(0 <= r < old for r in ranks):
            raise StateError("bad_size", f"job {job_id} reports losing ranks {list(ranks)[:16]} of {old} and "
                                         f"going on at {new}: the scheduler has it at {j.nprocs}")
        gone = set(ranks)
        keep = [h for r, h in enumerate(j.hosts) if r not in gone]
        free = [h for r, h in enumerate(j.hosts) if r in gone] + keep[new:]
        self.pool.release(free)
        j.hosts = keep[:new]
        j.nprocs = new
        j.point_time = now
        j.lost_in_place += len(gone)
        j.profile.ran_at(new)
        self.table.event(now, j, "lost", f"{old}->{new}: {reason}")

    def _start_resize(self, j: Job, p: int, q: int, now: float) -> None:
        """A resize ``p -> q`` starts: the budget left now, and the deadline's bound while it runs."""
        if j.deadline is not None:
            j.pending.budget = budget_left(j.deadline, j.spec.nprocs, p, now)
            j.deadline = deadline_after(j.deadline, j.spec.nprocs, p, q, now)

    @staticmethod
    def _end_resize(j: Job, size: int, now: float) -> None:
        """The resize ended at ``size`` (new or old): the time it took is charged in full, and the
        job's next iteration starts now."""
        j.point_time = now
        p = j.pending
        if j.deadline is not None and p and p.budget is not None:
            left = max(0.0, p.budget - max(0.0, now - (now if p.t is None else p.t)))
            j.deadline = min(j.deadline, now + left / rate(j.spec.nprocs, size))

    def _apply_resize(self, j: Job, old: int, new: int, seconds: float | None, now: float) -> None:
        p = j.pending
        assert p is not None
        self._end_resize(j, new, now)
        if p.expands:
            j.hosts = j.hosts + p.hosts
        else:
            self.pool.release(j.hosts[new:])
            j.hosts = j.hosts[:new]
        j.nprocs = new
        j.pending = None
        j.profile.ran_at(new)
        j.resizes += 1
        if seconds is not None:
            j.profile.record_redistribution(old, new, seconds)
            j.redist_seconds += seconds
        self.table.event(now, j, p.action, f"{old}->{new}")

    def abandon_resize(self, j: Job, now: float, why: str) -> None:
        p = j.pending
        assert p is not None
        if p.expands:
            self.pool.release(p.hosts)
        self._end_resize(j, p.old, now)
        j.pending = None
        self.table.event(now, j, "resize_failed", why)

