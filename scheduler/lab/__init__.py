"""Trace-driven simulator running the daemon's own policy objects on a virtual clock."""

from scheduler.core.actions import Decision, PolicyError
from scheduler.core.metrics import JobRecord
from scheduler.lab.emumodel import AmdahlOverheadModel, EmuRedistModel
from scheduler.lab.jobmodel import JobModel, RedistCost, RedistModel, SimInput, downey_speedup, from_trace
from scheduler.lab.simulator import SimResult, Simulator, simulate

__all__ = [
    "AmdahlOverheadModel",
    "Decision",
    "EmuRedistModel",
    "JobModel",
    "JobRecord",
    "PolicyError",
    "RedistCost",
    "RedistModel",
    "SimInput",
    "SimResult",
    "Simulator",
    "downey_speedup",
    "from_trace",
    "simulate",
]
