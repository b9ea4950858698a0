"""Per-user limits on submissions: jobs waiting to run, and submissions per second.

A user who is not an admin (``scheduler.service.handlers.is_admin``) may have
at most ``max_queued`` jobs queued or waiting, and may submit ``rate`` jobs
per second on average, ``burst`` at once (a token bucket). A submission over
either limit is refused with ``error`` ``over_limit`` naming the limit and
the option that sets it (``reshape daemon --max-queued-per-user``,
``--submit-rate``, ``--submit-burst``); a refused submission costs nothing.
Counting a user's waiting jobs costs the jobs that user submitted, not the
queue: each user's not-yet-started jobs are kept in a set, pruned at the next
submission (the set is built from the job table the first time a user submits
after a restart).
"""

from __future__ import annotations

from scheduler.core.job import JobState
from scheduler.core.state import ClusterState, StateError

__all__ = ["Quota"]

_WAITING = (JobState.QUEUED, JobState.WAITING)


class Quota:
    def __init__(self, max_queued: int = 1000, rate: float = 20.0, burst: int = 200):
        self.max_queued, self.rate, self.burst = max_queued, rate, burst
        self._pending: dict[str | None, set[int]] = {}
        self._tokens: dict[str | None, tuple[float, float]] = {}  # who -> (tokens, when)
        self.refused = 0

    def admit(self, state: ClusterState, who: str | None, now: float) -> None:
        """Raise ``StateError('over_limit')`` if ``who`` may not submit one more job now."""
        mine = self._pending.get(who)
        if mine is None:
            mine = self._pending[who] = {j.job_id for j in state.jobs.values()
                                        if j.owner == who and j.state in _WAITING}
        else:
            mine -= {i for i in mine if (j := state.jobs.get(i)) is None or j.state not in _WAITING}
        if len(mine) >= self.max_queued:
            self.refused += 1
            raise StateError("over_limit", f"{who} has {len(mine)} jobs queued or waiting: the limit per user is "
                                           f"{self.max_queued} (reshape daemon --max-queued-per-user)")
        tokens, then = self._tokens.get(who, (float(self.burst), now))
        tokens = min(float(self.burst), tokens + max(0.0, now - then) * self.rate)
        if tokens < 1.0:
            self.refused += 1
            raise StateError("over_limit", f"{who} submits faster than the limit of {self.rate:g} jobs per second "
                                           f"(burst {self.burst}; reshape daemon --submit-rate, --submit-burst)")
        self._tokens[who] = (tokens - 1.0, now)

    def note(self, who: str | None, job_id: int) -> None:
        """A job ``who`` submitted (admitted by :meth:`admit`)."""
        self._pending.setdefault(who, set()).add(job_id)
