"""What the core shows and checks of itself: the status view, journal restore, invariants.

:class:`StateViews` is mixed into ``scheduler.core.state.ClusterState``: the ``status`` reply the
protocol pages, dropping an ended job's record (the simulator), reloading journaled jobs after a
daemon restart, and the invariants the tests check after every event.
"""

from __future__ import annotations

import collections
import itertools
from typing import Any

from scheduler.core.actions import StateError
from scheduler.core.job import JobState
from scheduler.core.jobtable import FINAL, KILLING, RECENT, Job
from scheduler.core.kills import awaited, confirmers
from scheduler.core.policy import RunningJob

__all__ = ["StateViews"]


class StateViews:
    """Views and restore of ``ClusterState``; expects its job table, nodes and pool."""

    def status(self, now: float | None = None, limit: int | None = None,
               running_limit: int | None = None) -> dict[str, Any]:
        """Pool, running jobs, queue (the first ``limit`` queued and waiting jobs and the first
        ``running_limit`` running ones; the totals are ``queued_total``/``waiting_total``/
        ``running_total``), recently ended jobs and nodes. Costs the jobs listed, not the queue's
        length. The protocol's ``status`` pages all three with its ``limit``."""
        def row(j: Job) -> dict[str, Any]:
            return {"job_id": j.job_id, "name": j.desc["name"], "state": j.state, "nprocs": j.nprocs,
                    "requested": j.desc["nprocs"], "hosts": sorted(set(j.hosts)),
                    "submit_time": j.submit_time, "start_time": j.start_time,
                    "iterations": j.iterations, "connected": j.connected,
                    "pending": None if not j.pending else f"{j.pending.action} {j.pending.new}",
                    "parked": dict(sorted(collections.Counter(j.parked).items())), "allocation": j.allocation,
                    "restarts": j.restarts, "resumed_at": j.resumed_at, "iterations_lost": j.iterations_lost}

        def ending(j: Job) -> dict[str, Any]:
            since = f" {max(0.0, now - j.cancel_time):.1f} s ago" if now is not None and j.cancel_time else ""
            why = f"{j.then['why']}: " if j.then else ""
            return row(j) | {"detail": f"{why}kill ordered{since}, not yet confirmed by {confirmers(j)}"}

        waiting = list(self._waiting.values()) if limit is None else \
            list(itertools.islice(self._waiting.values(), max(0, limit)))
        return {"total_slots": self.pool.total, "free_slots": self.pool.free,
                "capacity_slots": self.pool.capacity,
                # cancelling and ending jobs hold their slots: listed with the running ones, their state says which
                "running": [row(j) for j in (self._run.values() if running_limit is None
                                             else itertools.islice(self._run.values(), max(0, running_limit)))]
                           + [ending(j) for j in self._killing.values()],
                "running_total": len(self._run) + len(self._killing),
                "queue": [row(j) for j in self.queue(limit)], "queued_total": len(self._queued),
                "waiting": [row(j) for j in waiting], "waiting_total": len(self._waiting),
                "ended": [{"job_id": j.job_id, "name": j.desc["name"], "state": j.state,
                           "end_time": j.end_time, "sizes": list(j.profile.history), "error": j.error}
                          for j in (self.jobs[i] for i in reversed(self.recent))],
                "nodes": self.node_rows(0.0 if now is None else now)}

    def forget(self, job_id: int) -> None:
        """Drop an ended job's record (the simulator, once it recorded the job, keeps memory flat this way)."""
        j = self.jobs.get(job_id)
        if j is None or j.state not in FINAL:
            raise StateError("not_ended", f"job {job_id} has not ended")
        del self.jobs[job_id]
        self.dirty.discard(job_id)
        if job_id in self.recent:
            self.recent.remove(job_id)

    def restore(self, jobs: list[Job], next_id: int) -> None:
        """Reload journaled jobs; running jobs get their slots back and must reconnect."""
        ended = sorted((j for j in jobs if j.state in FINAL and j.end_time is not None), key=lambda j: j.end_time)
        self.recent.extend(j.job_id for j in ended[-RECENT:])
        for j in jobs:
            j.connected = False
            self.jobs[j.job_id] = j
            self._index(j)
            if j.state == JobState.RUNNING or j.state in KILLING:
                self.pool.claim(j.hosts)
                if j.pending and j.pending.expands:
                    self.pool.claim(j.pending.hosts)
        self.next_id = max([next_id, *(j.job_id + 1 for j in jobs)])

    def validate(self) -> None:
        """Invariants (tests call this after every event)."""
        used = sum(len(j.hosts) + (len(j.pending.hosts) if j.pending and j.pending.expands else 0)
                   for j in self.running()) + sum(len(j.hosts) for j in self.killing())
        assert used == sum(self.pool.used.values()), (used, dict(self.pool.used))
        assert self.pool.free == sum(max(0, n.slots - self.pool.used[n.host]) for n in self.pool.nodes
                                     if n.host not in self.pool.down and n.host not in self.pool.draining)
        for rec in self.nodes.values():
            assert (rec.state == "down") == (rec.host in self.pool.down), rec
            if rec.state == "down":
                assert not any(rec.host in j.hosts for j in self.running()), rec
        queued = (j for j in self.live.values() if j.state == JobState.QUEUED)
        assert self._queued == sorted((j.arrival_time, j.job_id) for j in queued)
        assert self._queued_specs == [self.jobs[i].spec for _, i in self._queued]
        assert set(self._by_id) == {i for _, i in self._queued}
        assert sorted(k for lst in self._sized.by_size.values() for k in lst) == self._queued
        assert self._sized.sizes == sorted(self._sized.by_size) and all(self._sized.by_size.values())
        assert all(self._by_id[i].nprocs == n for n, lst in self._sized.by_size.items() for _, i in lst)
        assert list(self._run) == [i for i in self._run if self.jobs[i].state == JobState.RUNNING]
        assert set(self._run) == {i for i, j in self.live.items() if j.state == JobState.RUNNING}
        assert set(self._waiting) == {i for i, j in self.live.items() if j.state == JobState.WAITING}
        assert set(self._killing) == {i for i, j in self.live.items() if j.state in KILLING}
        assert list(self._views) == list(self._run) and self._stale <= set(self._run)
        assert self._pos is None or self._pos == {i: k for k, i in enumerate(self._run)}
        if self._run_t is not None:  # the cached view is the fresh one
            assert self._run_t == tuple(RunningJob(j.spec, j.nprocs, j.start_time, j.profile.frozen(), j.iterations,
                                                   self._pending_shrink(j), j.deadline, j.point_time)
                                        for j in self._run.values())
        for j in self.jobs.values():
            assert (j.state not in FINAL) == (j.job_id in self.live), (j.job_id, j.state)
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
