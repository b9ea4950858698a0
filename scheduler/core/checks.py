"""The checks every policy decision passes before the core applies it (Sudarsan & Ribbens 2007 §3.1).

The Application Scheduler's starts, the Remap Scheduler's advice at a resize point and its shrink
requests are pure functions of a snapshot (``scheduler.core.policy``); a decision that cannot be
applied (a start of a job that is not queued, sizes outside the job's range or beyond the free slots,
an expansion of another job, a shrink request for a static job, ...) is a *policy error*.
:class:`PolicyChecks` holds the rules, shared by the scheduling pass (``scheduler.core.passes``), the
resize handshake (``scheduler.core.resizes``) and restarts (``scheduler.core.restarts``), and the
count of errors the daemon reports.
"""

from __future__ import annotations

import collections
from typing import TYPE_CHECKING, Any

from scheduler.core.actions import PolicyError
from scheduler.core.job import Job, JobState
from scheduler.core.policy import AppPolicy, Continue, Expand, JobSpec, RemapPolicy, Shrink, Start, legal_sizes
from scheduler.core.walltime import limit_allowed, moldable_limit

if TYPE_CHECKING:
    from scheduler.core.jobtable import JobTable
    from scheduler.core.pool import Pool

__all__ = ["PolicyChecks"]


class PolicyChecks:
    """The rules a decision of ``app`` or ``remap`` must follow on ``table``'s jobs and ``pool``'s slots.

    ``strict``: a decision that breaks them raises :class:`PolicyError` (the simulator); otherwise it
    is skipped and counted in ``policy_errors`` (the daemon: a policy bug must not corrupt the pool or
    stop the service)."""

    def __init__(self, table: JobTable, pool: Pool, app: AppPolicy, remap: RemapPolicy, strict: bool = False):
        self.table, self.pool, self.app, self.remap, self.strict = table, pool, app, remap, strict
        self.policy_errors: collections.deque[str] = collections.deque(maxlen=100)  # newest last
        self.policy_error_count = 0

    def error(self, who: str, now: float, what: str) -> None:
        msg = f"{who} at t={now:g}: {what}"
        if self.strict:
            raise PolicyError(msg)
        self.policy_error_count += 1
        self.policy_errors.append(msg)

    def hi(self, spec: JobSpec) -> int:
        return spec.max_procs or self.pool.total

    def legal(self, spec: JobSpec, p: int) -> bool:
        return bool(legal_sizes(spec, self.hi(spec), (p,)))

    def start(self, st: Any, free: int, now: float) -> Job | None:
        """The queued job ``st`` starts, if the start is legal and fits ``free`` slots."""
        j = self.table.jobs.get(st.job_id) if isinstance(st, Start) else None
        who = f"application policy {self.app.name!r}"
        if j is None or j.state != JobState.QUEUED:
            self.error(who, now, f"{st!r} does not start a queued job")
        elif not self.legal(j.spec, st.nprocs):
            self.error(who, now, f"start of job {st.job_id} at {st.nprocs} slots, not one of its legal "
                       f"sizes in [{j.spec.min_procs}, {self.hi(j.spec)}]")
        elif st.nprocs > free:
            self.error(who, now, f"start of job {st.job_id} needs {st.nprocs} slots, {free} free")
        elif st.limit is not None and not limit_allowed(j.spec, st):
            self.error(who, now, f"start of job {st.job_id} at {st.nprocs} slots with a time limit of "
                       f"{st.limit!r} s; allowed: more than 0 and at most "
                       f"{moldable_limit(j.spec.walltime, j.spec.nprocs, st.nprocs)} s (walltime "
                       f"{j.spec.walltime} s at {j.spec.nprocs} slots)")
        else:
            return j
        return None

    def remap_size(self, d: Any, j: Job, now: float) -> int:
        """The size job ``j`` goes to by the Remap Scheduler's decision ``d`` (its own: continue)."""
        p, spec = j.nprocs, j.spec
        if isinstance(d, Continue) and d.job_id == j.job_id:
            return p
        if isinstance(d, Expand | Shrink) and d.job_id == j.job_id:
            q = d.nprocs
            if q == p:
                return p
            if self.legal(spec, q) and (
                    (isinstance(d, Expand) and p < q and q - p <= self.pool.free_for(j.allocation))
                    or (isinstance(d, Shrink) and q < p)):
                return q
        self.error(f"remap policy {self.remap.name!r}", now,
                   f"invalid decision {d!r} for job {j.job_id} at {p} slots "
                   f"({self.pool.free_for(j.allocation)} free, "
                   f"legal [{spec.min_procs}, {self.hi(spec)}])")
        return p

    def shrink_request(self, sh: Any, now: float) -> bool:
        j = self.table.jobs.get(sh.job_id) if isinstance(sh, Shrink) else None
        if j is None or j.state != JobState.RUNNING or not j.spec.resizable \
                or not j.spec.min_procs <= sh.nprocs < j.nprocs:
            self.error(f"remap policy {self.remap.name!r}", now, f"invalid shrink request {sh!r}")
            return False
        return True
