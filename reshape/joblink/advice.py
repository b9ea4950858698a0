"""Where resize decisions come from: the scheduler, a scripted plan, or nobody.

At every resize point rank 0 of a job hands a
:class:`~reshape.joblink.protocol.ResizePoint` to an *advisor* and gets back
an :class:`~reshape.joblink.protocol.Advice` (Sudarsan & Ribbens 2007 §3.2.3,
``contact_scheduler``). After acting it confirms the outcome with
:meth:`Advisor.resized`, and it says goodbye with :meth:`Advisor.finished`.

Advisors:

* :class:`ScriptedPlan`: a fixed sequence of sizes (e.g. ``2,4,6,4``), for
  development and tests without a scheduler; from code or from the
  ``RESHAPE_PLAN`` environment variable.
* :class:`Static`: never resize.
* the ZeroMQ client of the scheduler daemon (``reshape.joblink.client``), chosen when
  the daemon started the job (``RESHAPE_SCHEDULER`` is set).

:func:`advisor_from_env` picks one.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass, field
from typing import Protocol

from reshape.joblink import jobenv as E
from reshape.joblink.protocol import Advice, ResizePoint

__all__ = [
    "Advisor",
    "ScriptedPlan",
    "Static",
    "advisor_from_env",
    "parse_plan",
]

ENV_PLAN = E.PLAN
ENV_PLAN_EVERY = E.PLAN_EVERY
ENV_SCHEDULER = E.SCHEDULER


class Advisor(Protocol):
    def advise(self, report: ResizePoint) -> Advice: ...

    def resized(self, old: int, new: int, seconds: float, error: str | None = None) -> None: ...

    def finished(self, status: str = "done", error: str | None = None) -> None: ...


class Static:
    """Never resize."""

    def advise(self, report: ResizePoint) -> Advice:
        return Advice("continue", report.nprocs, reason="static run")

    def resized(self, old: int, new: int, seconds: float, error: str | None = None) -> None:
        pass

    def finished(self, status: str = "done", error: str | None = None) -> None:
        pass


def parse_plan(text: str, name: str = ENV_PLAN) -> list[int]:
    """Parse ``"2,4,6,4"`` / ``"2->4->6"`` / ``"2 4 6"`` into sizes; ValueError naming ``name`` otherwise.

    An empty entry (``"2,,4"``, a trailing comma) is refused rather than skipped: it is a typo for a size.
    """
    allowed = "expected process counts >= 1 separated by commas, e.g. 2,4,6,4"
    stripped = text.strip()
    if not stripped:
        raise ValueError(f"{name}={text!r}: no sizes; {allowed}")
    parts = re.split(r"\s*(?:,|->|\u2192)\s*|\s+", stripped)
    if "" in parts:
        k = parts.index("")
        where = "at the start" if k == 0 else "at the end" if k == len(parts) - 1 else f"after {parts[k - 1]}"
        raise ValueError(f"{name}={text!r}: an empty entry {where}; {allowed}")
    bad = next((x for x in parts if not x.lstrip("+-").isdigit()), None)
    if bad is not None:
        raise ValueError(f"{name}={text!r}: {bad!r} is not a number; {allowed}")
    sizes = [int(x) for x in parts]
    if any(s < 1 for s in sizes):
        raise ValueError(f"{name}={text!r}: {min(sizes)} is not a process count; {allowed}")
    return sizes


@dataclass
class ScriptedPlan:
    """Walk through ``sizes`` one step per ``every`` resize points.

    ``sizes[0]`` is the starting size (``reshape.init()`` refuses a plan that
    does not start at the job's size); each following entry is the target at
    the next step. When
    the plan is exhausted the job continues at its size.
    """

    sizes: list[int]
    every: int = 1
    step: int = 0
    _points: int = 0
    log: list[str] = field(default_factory=list)

    def advise(self, report: ResizePoint) -> Advice:
        self._points += 1
        if self._points % self.every or self.step + 1 >= len(self.sizes):
            return Advice("continue", report.nprocs, reason="plan")
        self.step += 1
        target = self.sizes[self.step]
        if target == report.nprocs:
            return Advice("continue", target, reason="plan: already at size")
        action = "expand" if target > report.nprocs else "shrink"
        return Advice(action, target, reason=f"plan step {self.step}")

    def resized(self, old: int, new: int, seconds: float, error: str | None = None) -> None:
        """Log the outcome; a success is printed (the runtime prints refusals itself)."""
        self.log.append(f"{old}->{new} {'failed: ' + error if error else f'{seconds:.4f}s'}")
        if not error:
            print(f"[reshape] plan step {self.step}: {'expanded' if new > old else 'shrank'} {old} -> {new} "
                  f"process{'es' * (new > 1)} (redistribution {seconds:.3f} s)", file=sys.stderr, flush=True)

    def finished(self, status: str = "done", error: str | None = None) -> None:
        pass

    def lost(self, old: int, new: int, ranks: list[int], reason: str, seconds: float | None = None) -> None:
        """A lost rank recovered in place (reshape.runtime.inplace): the plan goes on from the new size."""
        self.log.append(f"{old}->{new} lost {ranks}")


def advisor_from_env(env: dict[str, str] | None = None) -> Advisor:
    """The daemon client if the daemon started us, else ``RESHAPE_PLAN``, else static."""
    env = os.environ if env is None else env
    if env.get(ENV_SCHEDULER):
        from reshape.joblink.client import SchedulerClient  # here: zmq is loaded only by jobs the daemon started

        return SchedulerClient.from_env(env)
    if env.get(ENV_PLAN):
        return ScriptedPlan(parse_plan(env[ENV_PLAN]), every=int(env.get(ENV_PLAN_EVERY, "1")))
    return Static()
