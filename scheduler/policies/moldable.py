"""EASY backfill that squeezes a resizable queue head into the free slots (seed 001 §1).

Seed 001's motivation for resizing: "it is common to see jobs stuck in the
queue because they require just a few more processors than are currently
available. With resizing, the scheduler may be able to start (i.e.
back-fill) them earlier, squeezing them into processors that are available,
and then adding more processors later." This policy is the daemon's EASY
backfill (:class:`scheduler.policies.easy.EasyBackfill`, unchanged) plus
that one rule: when the head still does not fit after EASY's starts and it
is resizable, it starts at the free slot count if that is at least its
``min_procs`` (the remap policy grows it later). Name: ``"easy-squeeze"``.
"""

from __future__ import annotations

from scheduler.policies.easy import EasyBackfill
from scheduler.policy import Snapshot, Start, legal_sizes, register_app_policy

__all__ = ["EasySqueeze"]


@register_app_policy("easy-squeeze")
class EasySqueeze(EasyBackfill):
    name = "easy-squeeze"

    def schedule(self, snap: Snapshot) -> list[Start]:
        out = super().schedule(snap)
        started = {s.job_id for s in out}
        free = snap.free_slots - sum(s.nprocs for s in out)
        head = next((q for q in snap.queue if q.job_id not in started), None)
        if head is None or not head.resizable or free < head.min_procs:
            return out
        fits = [p for p in legal_sizes(head, snap.total_slots) if p <= min(free, head.nprocs)]
        if fits:
            out.append(Start(head.job_id, fits[-1]))
        return out
