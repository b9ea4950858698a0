"""What the scheduler core returns and raises: :class:`Launch` and :class:`Kill` actions for the
shell to perform, and :class:`StateError` for an event that does not apply (``scheduler.state``)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Kill", "Launch", "StateError"]


class StateError(ValueError):
    """An event that does not apply to the current state; ``code`` goes into the error reply."""

    def __init__(self, code: str, message: str):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


@dataclass(frozen=True)
class Launch:
    job_id: int


@dataclass(frozen=True)
class Kill:
    job_id: int
