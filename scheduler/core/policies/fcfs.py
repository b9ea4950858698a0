"""First Come First Served application scheduling (Sudarsan & Ribbens 2007 §3.1, Application Scheduler)."""

from __future__ import annotations

from scheduler.core.policy import AppPolicy, Snapshot, Start, register_app_policy

__all__ = ["FCFS"]


@register_app_policy("fcfs")
class FCFS(AppPolicy):
    """Start queued jobs in arrival order at their requested size; stop at the first that does not fit."""

    name = "fcfs"

    def schedule(self, snap: Snapshot) -> list[Start]:
        free = snap.free_slots
        out = []
        for spec in snap.queue:
            if spec.nprocs > free:
                break
            out.append(Start(spec.job_id, spec.nprocs))
            free -= spec.nprocs
        return out
