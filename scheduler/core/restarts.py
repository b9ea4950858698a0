"""Recovery from lost processes (the core's half): a job with checkpoints that loses a rank, a node or its
``mpiexec`` is queued again and resumes from its last checkpoint, at a size that fits the live nodes.

:class:`Restarts` is mixed into ``scheduler.core.state.ClusterState``. A failure is a *loss* (the job is
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

A job that reported ``error`` (its program failed), ended with another status (a program's own exit code, a
crash such as SIGSEGV), ran past its walltime or was cancelled is not restarted. Each attempt has its own
process tag (``scheduler.service.startup.job_tag``), so what is left of a lost attempt is killed without
touching the next one, and a node monitor's report of an attempt that ended settles only that attempt.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scheduler.core.actions import Kill, Launch
from scheduler.core.job import Job, JobState

if TYPE_CHECKING:
    from scheduler.core.pool import Pool

__all__ = ["KILLED", "Restarts"]

# SIGKILL, SIGTERM as Hydra reports a killed rank (the signal number), and with SIGHUP, SIGINT as a shell reports
# a killed mpiexec (128 + n); not 1 and 2, which programs exit with themselves; 255: Hydra's own "process manager
# error", when a process it manages (a spawned rank) is lost
KILLED = frozenset({9, 15, 129, 130, 137, 143, 255})


class Restarts:
    """The restart half of the core; expects ``pool`` and the job helpers of ``ClusterState``."""

    pool: Pool

    @staticmethod
    def restartable(j: Job, code: int | None, loss: bool = False) -> bool:
        """Whether ``j``'s end is a loss it recovers from (module docstring). ``loss``: a node went down
        or a resize was never confirmed."""
        if not j.desc.get("checkpoint") or j.restarts >= j.desc.get("max_restarts", 0) or j.allocation is not None:
            return False  # (a job a resource manager started is restarted there, e.g. by Slurm's requeue)
        if j.reported == "lost":
            return True
        if j.reported is not None:
            return False  # done, or the program's own error
        return loss or code is None or code in KILLED or j.pending is not None or (code == 0 and j.iterations > 0)

    def restart(self, j: Job, now: float, why: str, attempt_killed: bool = False,
                known_cause: bool = False) -> list[Launch | Kill]:
        """Queue ``j`` again to resume from its last checkpoint; its slots return. ``attempt_killed``:
        its processes still run (a node down, a stuck resize): a kill of this attempt comes first, and where
        a node monitor runs its ``mpiexec`` the job is ``ending``, holding its slots, until that monitor
        confirms the kill (``scheduler.core.state``, "Ending a job run on a node"), and restarts then.
        ``known_cause``: the node lost is known (down), the others are not suspect."""
        if attempt_killed and self._confirms_kill(j):
            return self._kill_on_node(j, now, {"why": why, "restart": True, "known_cause": known_cause},
                                      f"to restart after: {why}")
        out: list[Launch | Kill] = [Kill(j.job_id, j.restarts)] if attempt_killed else []
        if not known_cause:
            self._suspect(j.hosts, now)
        self._release_all(j)
        j.failures = [*j.failures, why]
        j.iterations_lost_at = j.iterations
        j.restarts += 1
        j.sid = j.reported = j.node_report = j.error = j.exit_code = j.runner = j.then = j.cancel_time = None
        j.out_at = 0
        j.out_base = None
        j.start_time = j.deadline = j.reservation = j.point_time = None
        j.connected, j.iterations, j.parked = False, 0, []
        fits = [p for p in range(min(j.spec.nprocs, self.pool.total), 0, -1) if self._legal(j.spec, p)]
        if fits and fits[0] < j.spec.nprocs:  # nodes were lost: start at the largest legal size that fits
            j.restart_at(fits[0])
        self._set(j, JobState.QUEUED)
        self._event(now, j, "restart", f"attempt {j.restarts + 1} after: {why}")
        return out + self.schedule(now)

    def _suspect(self, hosts: list[str], now: float) -> None:
        """The monitored nodes of a lost attempt take nothing new until each heartbeats again: a node that
        died is only known down after the node timeout, and a restart placed on it meanwhile would be lost too."""
        for h in set(hosts):
            rec = self.nodes.get(h)
            if rec is not None and rec.state == "up" and rec.last_seen is not None and h not in self.pool.draining:
                self.suspect[h] = now
                self.pool.set_draining(h)

    def cleared(self, host: str, now: float) -> None:
        """``host`` heartbeated (or registered, or went down): no longer suspect."""
        t = self.suspect.get(host)
        if t is not None and now > t:
            del self.suspect[host]
            self.pool.set_draining(host, False)

    def resumed(self, j: Job, iteration: int) -> None:
        """The first resize point after a restart: the job resumed at ``iteration`` (completed ones
        before it); the iterations done since the last checkpoint are counted as lost."""
        if j.iterations_lost_at is not None:
            j.resumed_at = max(0, iteration - 1)
            j.iterations_lost += max(0, j.iterations_lost_at - j.resumed_at)
            j.iterations_lost_at = None
