"""Performance Profiler (Sudarsan & Ribbens 2007 §3.1): what each job ran at and how fast.

Per job: every processor configuration it ran on with its latest and its
fastest iteration time there, the measured redistribution cost between
configurations, the order of sizes it ran at, and (derived) its shrink
points with the expected degradation. Policies see the frozen :class:`scheduler.core.policy.Profile`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from scheduler.core.policy import Profile

__all__ = ["JobProfile"]


@dataclass
class JobProfile:
    iter_time: dict[int, float] = field(default_factory=dict)
    redist_time: dict[tuple[int, int], float] = field(default_factory=dict)
    history: list[int] = field(default_factory=list)
    points: int = 0  # resize points seen
    best_time: dict[int, float] = field(default_factory=dict)  # fastest iteration per size
    _frozen: Profile | None = field(default=None, init=False, repr=False, compare=False)

    def _changed(self) -> None:
        self._frozen = None

    def record_iteration(self, nprocs: int, seconds: float) -> None:
        """Latest and fastest iteration time at ``nprocs`` (the history is :meth:`ran_at`'s)."""
        t = float(seconds)
        best = self.best_time.get(nprocs)
        if self.iter_time.get(nprocs) != t or best is None or t < best:  # else nothing changes
            self.iter_time[nprocs] = t
            self.best_time[nprocs] = t if best is None else min(t, best)
            self._changed()  # the frozen copy is rebuilt only when a time changed
        self.points += 1

    def record_redistribution(self, src: int, dst: int, seconds: float) -> None:
        self.redist_time[(src, dst)] = float(seconds)
        self._changed()

    def ran_at(self, nprocs: int) -> None:
        """The job now runs at ``nprocs`` (start or confirmed resize): the one place sizes join the history."""
        self.history.append(nprocs)
        self._changed()

    def frozen(self) -> Profile:
        if self._frozen is None:
            self._frozen = Profile(dict(self.iter_time), dict(self.redist_time), tuple(self.history),
                                   dict(self.best_time))
        return self._frozen

    def shrink_points(self, current: int) -> list[tuple[int, float]]:
        return self.frozen().shrink_points(current)

    def to_dict(self) -> dict[str, Any]:
        return {"iter_time": {str(k): v for k, v in self.iter_time.items()},
                "redist_time": [[p, q, s] for (p, q), s in self.redist_time.items()],
                "history": list(self.history), "points": self.points,
                "best_time": {str(k): v for k, v in self.best_time.items()}}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> JobProfile:
        return cls({int(k): float(v) for k, v in d.get("iter_time", {}).items()},
                   {(int(p), int(q)): float(s) for p, q, s in d.get("redist_time", [])},
                   [int(x) for x in d.get("history", [])], int(d.get("points", 0)),
                   {int(k): float(v) for k, v in d.get("best_time", {}).items()})
