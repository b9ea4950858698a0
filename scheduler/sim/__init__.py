"""Trace-driven simulator running the daemon's own policy objects on a virtual clock."""

from scheduler.sim.emumodel import AmdahlOverheadModel, EmuRedistModel
from scheduler.sim.engine import Decision, SimulationError, Simulator, simulate
from scheduler.sim.jobmodel import JobModel, RedistCost, RedistModel, SimInput, downey_speedup, from_trace
from scheduler.sim.metrics import JobRecord, SimResult

__all__ = [
    "AmdahlOverheadModel",
    "Decision",
    "EmuRedistModel",
    "JobModel",
    "JobRecord",
    "RedistCost",
    "RedistModel",
    "SimInput",
    "SimResult",
    "SimulationError",
    "Simulator",
    "downey_speedup",
    "from_trace",
    "simulate",
]
