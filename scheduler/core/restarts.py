"""Recovery from lost processes (the core's half): a job with checkpoints that loses a rank, a node or its
``mpiexec`` is queued again and resumes from its last checkpoint, at a size that fits the live nodes.

:class:`Restarts` is one of the parts ``scheduler.core.state.ClusterState`` composes. A failure is a *loss* (the job is
restarted, up to its job file's ``max_restarts``) when the job has ``checkpoint`` set and:

* the job reported ``lost`` (``finished``: its runtime aborted a resize a process of it could not finish), or
* it reported nothing and its ``mpiexec`` ended by a signal that kills from outside (``KILLED``: SIGKILL or
  SIGTERM as Hydra reports a killed rank, the signal number; those and SIGHUP, SIGINT as a shell reports a
  killed ``mpiexec``, 128 + the number; 255, Hydra's "process manager error" when a spawned rank is lost),
  or ended with a resize under way (any exit status, 0 too: a spawned rank lost mid-resize can leave Hydra
  exiting 0), or exited 0 without reporting ``done`` after reaching a resize point (the runtime reports
  ``done`` at every normal exit; Hydra can exit 0 after a rank was killed), or vanished (adopted after a
  restart of the daemon, no exit status), or
* its node went down, or a resize of it was never confirmed.

A job a resource manager started (``allocation``: a Slurm job under the site controller) is never queued
again here: its batch script runs each attempt inside its allocation and asks for the next one
(:meth:`Restarts.restart_here`, by the same criteria, on the hosts it still holds). Where its allocation
goes back to the resource manager's queue (Slurm requeues the job: its batch host lost, too few CPUs left), the
job waits, holding nothing, and resumes from its checkpoint when the allocation registers it again
(:meth:`Restarts.requeued`, :meth:`Restarts.resume_here`).

A job that reported ``error`` (its program failed), ended with another status (a program's own exit code, a
crash such as SIGSEGV), ran past its walltime or was cancelled is not restarted. Each attempt has its own
process tag (``scheduler.daemon.startup.job_tag``), so what is left of a lost attempt is killed without
touching the next one, and a node monitor's report of an attempt that ended settles only that attempt.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from scheduler.core.actions import Kill, Launch, StateError
from scheduler.core.job import Job, JobState
from scheduler.core.walltime import start_deadline

if TYPE_CHECKING:
    from scheduler.core.checks import PolicyChecks
    from scheduler.core.jobtable import JobTable
    from scheduler.core.nodestate import NodeTable
    from scheduler.core.pool import Pool

__all__ = ["KILLED", "Restarts", "resumed"]

# SIGKILL, SIGTERM as Hydra reports a killed rank (the signal number), and with SIGHUP, SIGINT as a shell reports
# a killed mpiexec (128 + n); not 1 and 2, which programs exit with themselves; 255: Hydra's own "process manager
# error", when a process it manages (a spawned rank) is lost
KILLED = frozenset({9, 15, 129, 130, 137, 143, 255})


def resumed(j: Job, iteration: int) -> None:
    """The first resize point after a restart: the job resumed at ``iteration`` (completed ones
    before it); the iterations done since the last checkpoint are counted as lost."""
    if j.iterations_lost_at is not None:
        j.resumed_at = max(0, iteration - 1)
        j.iterations_lost += max(0, j.iterations_lost_at - j.resumed_at)
        j.iterations_lost_at = None


class Restarts:
    """Restarts of ``table``'s jobs on ``pool``'s slots: the nodes of a lost attempt are made suspect in
    ``nodes``, the size it restarts at is legal by ``checks``, and ``schedule`` (the scheduling pass)
    runs once a job is queued again."""

    def __init__(self, table: JobTable, nodes: NodeTable, pool: Pool, checks: PolicyChecks,
                 schedule: Callable[[float], list[Launch | Kill]]):
        self.table, self.nodes, self.pool, self.checks, self.schedule = table, nodes, pool, checks, schedule

    @staticmethod
    def restartable(j: Job, code: int | None, loss: bool = False, here: bool = False) -> bool:
        """Whether ``j``'s end is a loss it recovers from (module docstring). ``loss``: a node went down
        or a resize was never confirmed. ``here``: asked by the job's own allocation (:meth:`restart_here`)."""
        if not j.desc.checkpoint or j.restarts >= j.desc.max_restarts or \
                (j.allocation is not None and not here):
            return False  # (a job a resource manager started is restarted there: restart_here)
        if j.reported == "lost":
            return True
        if j.reported is not None:
            return False  # done, or the program's own error
        return loss or code is None or code in KILLED or j.pending is not None or (code == 0 and j.iterations > 0)

    def restart(self, j: Job, now: float, why: str, attempt_killed: bool = False,
                known_cause: bool = False) -> list[Launch | Kill]:
        """Queue ``j`` again to resume from its last checkpoint; its slots return. ``attempt_killed``:
        its processes still run (a node down, a stuck resize): a kill of this attempt comes first (where a
        node monitor runs its ``mpiexec``, the caller orders the kill through it first and restarts the job
        once it is confirmed: ``scheduler.core.runs``). ``known_cause``: the node lost is known (down), the
        others are not suspect."""
        out: list[Launch | Kill] = [Kill(j.job_id, j.restarts)] if attempt_killed else []
        if not known_cause:
            self.nodes.suspect_hosts(j.hosts, now)
        self._next_attempt(j, why)
        fits = [p for p in range(min(j.spec.nprocs, self.pool.total), 0, -1) if self.checks.legal(j.spec, p)]
        if fits and fits[0] < j.spec.nprocs:  # nodes were lost: start at the largest legal size that fits
            j.restart_at(fits[0])
        self.table.set(j, JobState.QUEUED)
        self.table.event(now, j, "restart", f"attempt {j.restarts + 1} after: {why}")
        return out + self.schedule(now)

    def restart_here(self, j: Job, hosts: list[str], code: int | None, lost: list[str], now: float) -> int:
        """The next attempt of ``j``, a job its allocation runs (a Slurm job under the site controller), on
        ``hosts`` (one per slot, the nodes of the allocation still alive, already leased to it): its
        ``mpiexec`` exited with ``code`` and ``lost`` are the job's nodes found dead (a loss). Runs at the
        largest legal size that fits, at most its requested one; returns that size. StateError
        ``not_restartable`` (one line: why) when the end is not a loss it recovers from, ``too_few`` when
        too few slots are left for its smallest size (its allocation may be requeued: :meth:`requeued`);
        the job stays as it was (its report ends it)."""
        if j.state != JobState.RUNNING:
            raise StateError("not_running", f"job {j.job_id} is {j.state}, not running")
        why = self.why_not(j, code, bool(lost))
        if why is not None:
            raise StateError("not_restartable", why)
        fits = self._fits(j, hosts)
        if not fits:
            raise StateError("too_few", f"{len(hosts)} CPU(s) left in its allocation (lost: {', '.join(lost) or 'none'}"
                                        f"), its smallest size is {max(1, j.spec.min_procs)}")
        self._leased_to(j, hosts)
        what = f"exit code {code}" if code is not None else "mpiexec vanished"
        cause = f"{what}, node(s) {', '.join(lost)} lost" if lost else what
        for h in lost:  # nothing new is placed there: the job's Slurm jobs give them back (its own nodes only)
            if self.pool.has(h) and h not in self.pool.down and self.pool.leases.get(h) == j.allocation:
                self.pool.set_draining(h)
        self._next_attempt(j, cause)
        self._run_here(j, hosts[:fits[0]], now)
        self.table.event(now, j, "restart", f"attempt {j.restarts + 1} in its allocation at {j.nprocs} after: {cause}")
        return j.nprocs

    def requeued(self, j: Job, why: str, now: float) -> None:
        """``j``'s allocation went back to its resource manager's queue (Slurm requeued the job): this attempt is
        lost, its slots return and the restart is counted; ``j`` waits, holding nothing, until the allocation
        runs again and registers (:meth:`resume_here`). StateError ``not_restartable`` (why) when it cannot
        resume from a checkpoint; the job stays as it was."""
        if j.state != JobState.RUNNING or j.allocation is None:
            raise StateError("not_running", f"job {j.job_id} is {j.state}, not running in an allocation")
        bad = self.why_not(j, None, True)
        if bad is not None:
            raise StateError("not_restartable", bad)
        self._next_attempt(j, why)
        self.table.set(j, JobState.WAITING)  # never admitted here (tick): its allocation registers it again
        self.table.event(now, j, "restart", f"attempt {j.restarts + 1} waits for its allocation after: {why}")

    def resume_here(self, j: Job, hosts: list[str], now: float) -> int:
        """``j``, requeued (:meth:`requeued`), runs again in its allocation on ``hosts`` (one per slot, leased to
        it), at the largest legal size that fits, from its last checkpoint; returns that size. StateError
        ``too_few`` when they are fewer than its smallest size."""
        if j.state != JobState.WAITING or j.allocation is None:
            raise StateError("not_running", f"job {j.job_id} is {j.state}, not waiting for its allocation")
        fits = self._fits(j, hosts)
        if not fits:
            raise StateError("too_few", f"its allocation has {len(hosts)} CPU(s), its smallest size is "
                                        f"{max(1, j.spec.min_procs)}")
        self._leased_to(j, hosts)
        self._run_here(j, hosts[:fits[0]], now)
        self.table.event(now, j, "start", f"attempt {j.restarts + 1} in its allocation at {j.nprocs}")
        return j.nprocs

    def not_resumed(self, j: Job, why: str, now: float) -> None:
        """``j``, waiting for its requeued allocation (:meth:`requeued`), will not run again: it fails with ``why``."""
        if j.state == JobState.WAITING and j.allocation is not None:
            j.error = why
            self.table.end(j, JobState.FAILED, now)
            self.table.event(now, j, "end", f"failed: {why}")

    def _fits(self, j: Job, hosts: list[str]) -> list[int]:
        return [p for p in range(min(j.spec.nprocs, len(hosts)), 0, -1) if self.checks.legal(j.spec, p)]

    def _leased_to(self, j: Job, hosts: list[str]) -> None:
        for h in set(hosts):
            if not self.pool.has(h) or h in self.pool.down or self.pool.leases.get(h) != j.allocation:
                raise StateError("bad_hosts", f"{h!r} is not a node of allocation {j.allocation} in this pool")

    def _run_here(self, j: Job, hosts: list[str], now: float) -> None:
        """``j``'s next attempt runs on ``hosts`` of its allocation (checked: :meth:`_leased_to`)."""
        self.pool.claim(hosts)  # leased to its allocation: no other job holds them
        if j.state != JobState.RUNNING:
            self.table.set(j, JobState.RUNNING)
        j.hosts, j.nprocs = list(hosts), len(hosts)
        j.start_time = j.point_time = now
        j.deadline = start_deadline(j.spec.walltime, j.spec.nprocs, j.nprocs, now)
        j.profile.ran_at(j.nprocs)
        self.table.mark(j)

    def why_not(self, j: Job, code: int | None, loss: bool) -> str | None:
        """Why ``j``'s end is not a loss it recovers from in its allocation, or None (:meth:`restartable`)."""
        if self.restartable(j, code, loss, here=True):
            return None
        if not j.desc.checkpoint:
            return "it has no checkpoint setting ('checkpoint' in its job file) to resume from"
        if j.restarts >= j.desc.max_restarts:
            return f"it was restarted {j.restarts} time(s), its max_restarts"
        if j.reported == "done":
            return "it finished"
        if j.reported == "error":
            return f"the program failed: {j.error or 'its own error'}"
        return f"its mpiexec exited with status {code}: the program's own failure, not a lost rank or node"

    def _next_attempt(self, j: Job, why: str) -> None:
        """Forget ``j``'s lost attempt (its slots return; the iterations since its last checkpoint are lost)."""
        self.table.release_all(j)
        j.failures = [*j.failures, why]
        j.iterations_lost_at = j.iterations
        j.restarts += 1
        j.sid = j.reported = j.node_report = j.error = j.exit_code = j.runner = j.then = j.cancel_time = None
        j.out_at = 0
        j.out_base = None
        j.start_time = j.deadline = j.reservation = j.point_time = None
        j.connected, j.iterations, j.parked, j.lost_in_place = False, 0, [], 0
