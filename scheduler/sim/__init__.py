"""Trace-driven simulator running the daemon's own policy objects on a virtual clock."""

from scheduler.actions import Decision, PolicyError
from scheduler.metrics import JobRecord
from scheduler.sim.emumodel import AmdahlOverheadModel, EmuRedistModel
from scheduler.sim.engine import SimResult, Simulator, simulate
from scheduler.sim.jobmodel import JobModel, RedistCost, RedistModel, SimInput, downey_speedup, from_trace

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
