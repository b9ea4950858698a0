"""What a resize returns: its result, the parts of an expansion, and the error of a refused resize."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["EXPAND_PARTS", "ResizeError", "ResizeResult"]


class ResizeError(RuntimeError):
    """A resize that cannot be done; the job continues at its current size."""


@dataclass(frozen=True)
class ResizeResult:
    """What ``resize()`` did: ``action``, the size before (``old``) and after (``new``), the size it asked for
    (``asked``: a refused step 4 -> 3 is ``action="failed"``, ``old=4``, ``new=4``, ``asked=3``, its ``error``
    saying why), and its costs."""

    action: str  # "expand" | "shrink" | "continue" | "failed"
    old: int
    new: int
    seconds: float = 0.0  # redistribution time (slowest rank), with the hand-over of an expansion
    spawn_seconds: float = 0.0  # spawn + merge
    error: str | None = None
    reason: str = ""
    called_back: int = 0  # of an expansion's new ranks, how many were parked ranks called back (not spawned)
    # the parts of an expansion (rank 0's clock; 0.0 for other actions), see EXPAND_PARTS
    spawn_call_seconds: float = 0.0
    merge_seconds: float = 0.0
    handover_seconds: float = 0.0
    launch_seconds: float = 0.0
    startup_seconds: float = 0.0
    ready_seconds: float = 0.0
    asked: int | None = None  # the size the resize asked for (None given: ``new``); a refused one keeps it here

    def __post_init__(self) -> None:
        if self.asked is None:  # a resize that was done (or a continue): asked for what it got
            object.__setattr__(self, "asked", self.new)


EXPAND_PARTS = {
    "spawn_call_seconds": "MPI_Comm_spawn_multiple on rank 0, until the new ranks are through MPI_Init "
                          "(part of spawn_seconds)",
    "merge_seconds": "waiting for the new ranks' imports, joining all running ranks to them and "
                     "MPI_Intercomm_merge (part of spawn_seconds)",
    "handover_seconds": "the job's state to the new ranks (part of seconds)",
    "launch_seconds": "spawn call -> the last new process started (the process manager)",
    "startup_seconds": "a new process's start -> its runtime.init() (interpreter, imports, MPI_Init); slowest",
    "ready_seconds": "a new process's start -> it calls MPI_Intercomm_merge; slowest",
}
