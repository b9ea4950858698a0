"""What a daemon keeps of the jobs that ended, and how fast a job may make it keep more.

A daemon serves for months; a loop of submissions and cancels at the per-user quota ends
some 17 jobs a second. Without limits every ended job would stay in its memory and in its
journal for ever. Two retentions bound them (``reshape daemon --retain-jobs``,
``--retain-days``):

* **Memory**: the last ``retain_jobs`` ended jobs stay in the core (``status``,
  ``history``, ``log``, ``cancel``'s answer name them); older ones are dropped from memory
  (:meth:`scheduler.core.state.ClusterState.forget`) once journaled.
* **Journal**: jobs that ended more than ``retain_days`` ago are deleted from it with
  their events (:meth:`scheduler.daemon.journal.Journal.prune`, a bounded batch every
  :data:`PRUNE_EVERY` seconds), so its size follows the retained period, not the
  daemon's age.

:class:`JobLimits` bounds what one job's own messages can add between those: ``lost``
and ``resized`` (each journals an event) at most ``rate`` per second on average, the
output a node monitor streams for it at most ``output_rate`` bytes per second; beyond,
``lost``/``resized`` get ``over_limit`` and the output waits (the monitor sends it again).
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field

from scheduler.core.job import FINAL
from scheduler.core.state import ClusterState
from scheduler.daemon.journal import Journal

__all__ = ["PRUNE_EVERY", "JobLimits", "Retention"]

PRUNE_EVERY = 10.0  # seconds between two journal prunes
DAY = 86400.0


@dataclass
class Retention:
    """Ended jobs kept in memory (``retain_jobs``) and in the journal (``retain_days``; 0: for ever)."""

    retain_jobs: int = 10_000
    retain_days: float = 30.0
    ended: collections.deque[int] = field(default_factory=collections.deque)  # oldest end first
    _seen: set[int] = field(default_factory=set)
    forgotten: int = 0
    pruned: int = 0

    def restored(self, state: ClusterState) -> list[int]:
        """After the journal is loaded: its ended jobs, oldest first; those beyond the count leave memory."""
        done = sorted((j.end_time or 0.0, j.job_id) for j in state.jobs.values() if j.state in FINAL)
        return self.note([jid for _, jid in done], state)

    def note(self, ended: list[int], state: ClusterState) -> list[int]:
        """Jobs that ended (journaled already); the ids dropped from memory now (the oldest beyond the count)."""
        for jid in ended:
            if jid not in self._seen:
                self._seen.add(jid)
                self.ended.append(jid)
        out = []
        while len(self.ended) > self.retain_jobs:
            jid = self.ended.popleft()
            self._seen.discard(jid)
            j = state.jobs.get(jid)
            if j is not None and j.state in FINAL:
                state.forget(jid)
                out.append(jid)
        self.forgotten += len(out)
        return out

    def prune(self, journal: Journal, now: float) -> None:
        """Delete from the journal what ended more than ``retain_days`` ago (a batch at a time)."""
        if self.retain_days > 0:
            self.pruned += journal.prune(now - self.retain_days * DAY)

    def info(self) -> dict:
        return {"retain_jobs": self.retain_jobs, "retain_days": self.retain_days, "in_memory": len(self.ended),
                "forgotten": self.forgotten, "pruned": self.pruned}


class JobLimits:
    """Token buckets per job (module docstring): messages that journal an event, and output bytes."""

    def __init__(self, rate: float = 2.0, burst: int = 20, output_rate: float = 1 << 20,
                 output_burst: int = 8 << 20):
        self.rate, self.burst = rate, burst
        self.output_rate, self.output_burst = output_rate, output_burst
        self._msgs: dict[int, tuple[float, float]] = {}  # job -> (tokens, when)
        self._bytes: dict[int, tuple[float, float]] = {}
        self.refused = 0  # lost/resized refused
        self.deferred = 0  # chunks of output not taken (the monitor sends them again)

    @staticmethod
    def _take(buckets: dict[int, tuple[float, float]], job_id: int, cost: float, rate: float, burst: float,
              now: float) -> bool:
        tokens, then = buckets.get(job_id, (burst, now))
        tokens = min(burst, tokens + max(0.0, now - then) * rate)
        if tokens < cost:
            buckets[job_id] = (tokens, now)
            return False
        buckets[job_id] = (tokens - cost, now)
        return True

    def message(self, job_id: int, now: float) -> bool:
        """May the job journal one more ``lost``/``resized`` now?"""
        ok = self._take(self._msgs, job_id, 1.0, self.rate, self.burst, now)
        self.refused += not ok
        return ok

    def output(self, job_id: int, size: int, now: float) -> bool:
        """May ``size`` more bytes of the job's output be written now?"""
        ok = self._take(self._bytes, job_id, float(size), self.output_rate, self.output_burst, now)
        self.deferred += not ok
        return ok

    def forget(self, job_ids: list[int]) -> None:
        for jid in job_ids:
            self._msgs.pop(jid, None)
            self._bytes.pop(jid, None)
