"""What the core shows and checks of itself: the status view and the invariants.

:class:`Views` reads the job table, the nodes and the pool (given at construction) and changes
nothing: the ``status`` reply the protocol pages, and the invariants the tests check after every event.
"""

from __future__ import annotations

import collections
import itertools
from typing import TYPE_CHECKING, Any

from scheduler.core.job import JobState
from scheduler.core.jobtable import FINAL, KILLING, Job, JobTable
from scheduler.core.kills import awaited, confirmers

if TYPE_CHECKING:
    from scheduler.core.nodestate import NodeTable
    from scheduler.core.pool import Pool

__all__ = ["Views"]


def _row(j: Job) -> dict[str, Any]:
    return {"job_id": j.job_id, "name": j.desc.name, "state": j.state, "nprocs": j.nprocs,
            "requested": j.desc.nprocs, "hosts": sorted(set(j.hosts)),
            "submit_time": j.submit_time, "start_time": j.start_time,
            "iterations": j.iterations, "connected": j.connected,
            "pending": None if not j.pending else f"{j.pending.action} {j.pending.new}",
            "parked": dict(sorted(collections.Counter(j.parked).items())), "allocation": j.allocation,
            "restarts": j.restarts, "resumed_at": j.resumed_at, "iterations_lost": j.iterations_lost}


class Views:
    """The status view and the invariants of the core's ``table``, ``nodes`` and ``pool``."""

    def __init__(self, table: JobTable, nodes: NodeTable, pool: Pool):
        self.table, self.nodes, self.pool = table, nodes, pool

    def status(self, now: float | None = None, limit: int | None = None,
               running_limit: int | None = None) -> dict[str, Any]:
        """Pool, running jobs, queue (the first ``limit`` queued and waiting jobs and the first
        ``running_limit`` running ones; the totals are ``queued_total``/``waiting_total``/
        ``running_total``), recently ended jobs and nodes. Costs the jobs listed, not the queue's
        length. The protocol's ``status`` pages all three with its ``limit``."""
        def ending(j: Job) -> dict[str, Any]:
            since = f" {max(0.0, now - j.cancel_time):.1f} s ago" if now is not None and j.cancel_time else ""
            why = f"{j.then['why']}: " if j.then else ""
            return _row(j) | {"detail": f"{why}kill ordered{since}, not yet confirmed by {confirmers(j)}"}

        t = self.table
        waiting = list(t.waiting.values()) if limit is None else \
            list(itertools.islice(t.waiting.values(), max(0, limit)))
        return {"total_slots": self.pool.total, "free_slots": self.pool.free,
                "capacity_slots": self.pool.capacity,
                # cancelling and ending jobs hold their slots: listed with the running ones, their state says which
                "running": [_row(j) for j in (t.started.values() if running_limit is None
                                              else itertools.islice(t.started.values(), max(0, running_limit)))]
                           + [ending(j) for j in t.unconfirmed.values()],
                "running_total": len(t.started) + len(t.unconfirmed),
                "queue": [_row(j) for j in t.queue(limit)], "queued_total": len(t.queued),
                "waiting": [_row(j) for j in waiting], "waiting_total": len(t.waiting),
                "ended": [{"job_id": j.job_id, "name": j.desc.name, "state": j.state,
                           "end_time": j.end_time, "sizes": list(j.profile.history), "error": j.error}
                          for j in (t.jobs[i] for i in reversed(t.recent))],
                "nodes": self.nodes.rows(0.0 if now is None else now)}

    def validate(self) -> None:
        """Invariants (tests call this after every event)."""
        t, pool = self.table, self.pool
        used = sum(len(j.hosts) + (len(j.pending.hosts) if j.pending and j.pending.expands else 0)
                   for j in t.running()) + sum(len(j.hosts) for j in t.killing())
        assert used == sum(pool.used.values()), (used, dict(pool.used))
        assert pool.free == sum(max(0, n.slots - pool.used[n.host]) for n in pool.nodes
                                if n.host not in pool.down and n.host not in pool.draining)
        for rec in self.nodes.nodes.values():
            assert (rec.state == "down") == (rec.host in pool.down), rec
            if rec.state == "down":
                assert not any(rec.host in j.hosts for j in t.running()), rec
        t.check()
        for j in t.jobs.values():
            assert (j.state not in FINAL) == (j.job_id in t.live), (j.job_id, j.state)
            if j.state == JobState.RUNNING:
                assert j.nprocs == len(j.hosts) >= 1
            elif j.state in KILLING:
                assert j.runner is not None and j.nprocs == len(j.hosts) and j.pending is None
                assert (j.then is None) == (j.state == JobState.CANCELLING), (j.job_id, j.state, j.then)
                assert not j.kill_on or (set(j.hosts) <= set(awaited(j)) and awaited(j)), (j.job_id, j.kill_on)
            else:
                assert not j.hosts and j.pending is None
            if j.state not in KILLING:
                assert not j.kill_on, (j.job_id, j.state, j.kill_on)
