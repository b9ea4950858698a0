"""What the scheduler core returns, records and raises (``scheduler.core.state``).

* :class:`Launch` and :class:`Kill`: actions for the shell to perform (the
  daemon starts or kills processes; the simulator schedules virtual events);
* :class:`Decision`: one applied scheduling decision (a start, an expansion or
  shrink advised at a resize point), recorded when the core is asked to;
* :class:`StateError`: an event that does not apply to the current state;
* :class:`PolicyError`: a policy returned a decision that cannot be applied
  (raised by a strict core, the simulator's; the daemon's skips and counts it).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Decision", "Kill", "Launch", "PolicyError", "StateError"]


class StateError(ValueError):
    """An event that does not apply to the current state; ``code`` goes into the error reply."""

    def __init__(self, code: str, message: str):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


class PolicyError(RuntimeError):
    """A policy decision that cannot be applied, or a policy that leaves jobs waiting forever."""


@dataclass(frozen=True, slots=True)
class Launch:
    job_id: int


@dataclass(frozen=True, slots=True)
class Kill:
    job_id: int
    attempt: int | None = None  # the attempt whose processes end (None: the running one; scheduler.core.restarts)


@dataclass(frozen=True, slots=True)
class Decision:
    """One applied decision: ``kind`` is ``start``, ``expand`` or ``shrink`` (at the advice)."""

    time: float
    kind: str
    job_id: int
    nprocs: int
