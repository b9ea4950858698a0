"""Work the daemon's loop does on a clock rather than on a request: a small scheduler of periodic tasks.

Each task has a name (the loop phase it is timed under, ``scheduler.observe.loopstats``),
a period, and a function of ``now`` returning the core actions it produced
(launches, kills: the loop performs them in the same turn as a request's).
:meth:`Periodic.run` runs the tasks whose time came, in the order they were
added, and times each. A period of 0 runs a task at every turn.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from scheduler.observe.loopstats import LoopStats

__all__ = ["Periodic", "Task"]


@dataclass
class Task:
    name: str
    every: float  # seconds; 0: every turn
    run: Callable[[float], list | None]
    last: float = float("-inf")


class Periodic:
    """Tasks run by the loop when due; their time goes to ``stats`` under each task's name."""

    def __init__(self, stats: LoopStats):
        self.stats = stats
        self.tasks: list[Task] = []

    def every(self, seconds: float, name: str, fn: Callable[[float], list | None]) -> Task:
        task = Task(name, seconds, fn)
        self.tasks.append(task)
        return task

    def due(self, task: Task, now: float) -> bool:
        return now - task.last >= task.every

    def run(self, now: float, names: tuple[str, ...] | None = None) -> list:
        """Run the due tasks (of ``names``, if given); the actions they return, in order."""
        acts: list = []
        for task in self.tasks:
            if (names is not None and task.name not in names) or not self.due(task, now):
                continue
            task.last = now
            t0 = time.perf_counter()
            acts += task.run(now) or []
            self.stats.add(task.name, time.perf_counter() - t0)
        return acts
