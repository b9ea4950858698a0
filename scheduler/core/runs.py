"""A job's run, the core's half: its launch, its processes' reports, and every way it ends.

:class:`Runs` takes the System Monitor's reports of a running job (launched, run on a node, its output,
its exit, its node monitor's ``job_ended``, the job's own ``finished``) and the ends the daemon decides:
a cancel, a walltime past (``expire``), a resize never confirmed (``check_resizes``), a node down
(``node_down``, ``check_nodes``). A job lost with checkpoints is restarted (``scheduler.core.restarts``);
a job a node monitor runs is killed through it (``scheduler.core.kills``). The rules are in
``scheduler.core.state``'s module docstring.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from scheduler.core.actions import Kill, Launch, StateError
from scheduler.core.job import Job, JobState
from scheduler.core.jobtable import FINAL, KILLING
from scheduler.core.resizes import RESIZE_GRACE
from scheduler.core.walltime import clock_time, kill_time

if TYPE_CHECKING:
    from scheduler.core.jobtable import JobTable
    from scheduler.core.kills import Kills
    from scheduler.core.nodestate import NodeTable
    from scheduler.core.pool import Pool
    from scheduler.core.resizes import Resizes
    from scheduler.core.restarts import Restarts

__all__ = ["Runs", "resize_name"]


def resize_name(j: Job) -> str:
    """The resize under way, in words ("expand 4->8"), or ""."""
    return str(j.pending) if j.pending else ""


class Runs:
    """The runs of ``table``'s jobs on ``pool``'s slots and ``nodes``: a resize of a job that ends is
    abandoned by ``resizes``, a lost job restarted by ``restarts``, a job a node monitor runs killed through
    ``kills``; ``schedule`` (the scheduling pass) runs after an end frees slots."""

    def __init__(self, table: JobTable, nodes: NodeTable, pool: Pool, resizes: Resizes, restarts: Restarts,
                 kills: Kills, schedule: Callable[[float], list[Launch | Kill]]):
        self.table, self.nodes, self.pool, self.resizes = table, nodes, pool, resizes
        self.restarts, self.kills, self.schedule = restarts, kills, schedule
        self.walltime_kills = 0

    def launched(self, job_id: int, sid: int) -> None:
        j = self.table.job(job_id)
        j.sid = sid
        self.table.mark(j)

    def run_on(self, job_id: int, node: str, log_size: int = 0) -> None:
        """The job's ``mpiexec`` is to run on ``node``, started by its monitor (not by the daemon); its log
        holds ``log_size`` bytes before this attempt's output (:meth:`output_base`)."""
        j = self.table.job(job_id)
        j.runner = node
        j.out_base = log_size
        self.table.mark(j)

    def output_base(self, job_id: int, base: int) -> None:
        """The job's log holds this attempt's output from byte ``base`` on (its size when the attempt was
        ordered to start): what the log holds of the attempt is its size less ``base``."""
        j = self.table.job(job_id)
        if base != j.out_base:
            j.out_base = base
            self.table.mark(j)

    def run_started(self, job_id: int, node: str, attempt: int, pid: int) -> bool:
        """The monitor of ``node`` runs this attempt's ``mpiexec`` as ``pid``: the launch is confirmed.
        False when that is not this job's current run (ended, restarted, or run elsewhere): kill it."""
        j = self.table.jobs.get(job_id)
        if j is None or j.state != JobState.RUNNING or j.restarts != attempt or j.runner != node:
            return False
        if j.sid is None:
            j.sid = pid
            self.table.mark(j)
        return True

    def output_received(self, job_id: int, upto: int) -> None:
        """The daemon holds the first ``upto`` bytes of the current attempt's output (as the status shows it;
        the log file's size is the truth: :meth:`output_base`)."""
        j = self.table.job(job_id)
        if upto != j.out_at:
            j.out_at = upto
            self.table.mark(j)

    def exited(self, job_id: int, code: int | None, now: float, error: str | None = None) -> list[Launch | Kill]:
        """The job's processes are gone (exit code, or None if it vanished); its slots return.

        A job that fails with a resize under way says so in its error.
        """
        j = self.table.job(job_id)
        if j.state != JobState.RUNNING:
            return []
        during = f" during {resize_name(j)}" if j.pending else ""
        ok = self._ended_well(j, None if code is None else code == 0)
        if not ok and self.restarts.restartable(j, code):
            how = j.error or (f"exit code {code}" if code is not None else "process vanished")
            if code == 0:
                how += " without a done report"
            return self.restarts.restart(j, now, f"{how}{during}")
        self.table.release_all(j)
        j.exit_code = code
        if ok:
            self.table.end(j, JobState.DONE, now)
        else:
            self.table.end(j, JobState.LOST if code is None else JobState.FAILED, now)
            how = f"exit code {code}" if code is not None else "process vanished"
            if code == 0 and during:  # Hydra sometimes exits 0 after a rank of the job was killed
                how = "mpiexec exited 0 but the job never confirmed its resize"
            elif code == 0:
                how = "mpiexec exited 0 but the job never reported done"
            if error or not j.error:
                j.error = f"{error or how}{during}"
            else:  # the job's own report (e.g. the runtime's abort reason) comes first
                j.error = f"{j.error} ({how})"
        self.table.event(now, j, "end", j.state if j.state == JobState.DONE else f"{j.state}: {j.error}")
        return self.schedule(now)

    @staticmethod
    def _ended_well(j: Job, clean: bool | None) -> bool:
        """Done or not. ``clean``: the exit looked clean (exit 0, the monitor's ``end``), did not,
        or is unknown (None: only the job's own ``done`` counts then). A clean exit with a resize
        under way and no ``done`` from the job is a failure: Hydra has exited 0 after one of the
        job's ranks was killed mid-resize; so is one of a job with checkpoints that reached a resize
        point (its runtime reports ``done`` at any normal exit,
        :meth:`reshape.runtime.ending.Ending.done_at_exit`). After a loss recovered in place (``lost``)
        the job's own ``done`` counts whatever the exit: Open MPI's launcher exits 1 or 137 once a rank
        died or a new one left without ``MPI_Finalize`` (docs/mpi.md)."""
        if j.reported == "done" and j.lost_in_place:
            return True
        if j.reported == "error" or clean is False:
            return False
        if clean is None:
            return j.reported == "done"
        if j.reported is None and j.desc.checkpoint and j.iterations:
            return False  # the runtime says done at every normal exit: this one was a rank killed (Hydra exits 0)
        return j.reported == "done" or not j.pending

    def _restart_killed(self, j: Job, now: float, why: str, known_cause: bool = False) -> list[Launch | Kill]:
        """Restart ``j``, whose processes still run (a node down, a stuck resize): where a node monitor runs its
        ``mpiexec`` the job is ``ending``, holding its slots, until that monitor confirms the kill (module
        docstring of ``scheduler.core.state``), and restarts then; else its attempt is killed and it is queued."""
        if self.kills.confirms_kill(j):
            return self.kills.kill_on_node(j, now, {"why": why, "restart": True, "known_cause": known_cause},
                                           f"to restart after: {why}")
        return self.restarts.restart(j, now, why, attempt_killed=True, known_cause=known_cause)

    def kill_failed(self, j: Job, now: float, error: str, detail: str) -> list[Launch | Kill]:
        """End a running job as failed (slots freed, ``error`` kept, ``end`` event); its processes must die.
        A job a node monitor runs is ``ending`` until that monitor confirms the kill (module docstring)."""
        if self.kills.confirms_kill(j):
            return self.kills.kill_on_node(j, now, {"why": detail, "error": error, "detail": detail}, detail)
        self.table.release_all(j)
        self.table.end(j, JobState.FAILED, now)
        j.error = error
        self.table.event(now, j, "end", f"failed: {detail}")
        return [Kill(j.job_id)]

    def finished(self, job_id: int, status: str, error: str | None, now: float) -> None:
        j = self.table.job(job_id)
        if j.state != JobState.RUNNING:
            raise StateError("not_running", f"job {job_id} is {j.state}, not running")
        if j.reported != "error":  # a job that said it failed stays failed (its batch script may say done)
            j.reported = status
        if error and not j.error:  # the first report is the cause; ranks aborting after it say less
            j.error = error
        self.table.mark(j)

    def job_ended(self, job_id: int, host: str, status: str, detail: str | None, now: float,
                  attempt: int = 0, code: int | None = None) -> list[Launch | Kill]:
        """The monitor of the job's first node saw its processes there end (``status`` end or error);
        ``attempt``: of which attempt (an earlier one's end settles nothing: ``scheduler.core.restarts``);
        ``code``: the exit status of the job's ``mpiexec``, from the monitor that ran it (``runner``).
        For a ``cancelling`` or ``ending`` job, its runner's report confirms the kill."""
        j = self.table.job(job_id)
        if j.state in KILLING and attempt == j.restarts and host == j.runner:
            how = f"mpiexec on {host} exited with status {code}" if code is not None else (detail or status)
            return self.kills.kill_confirmed(job_id, host, now, how)
        j = self.table.running_job(job_id)
        if attempt != j.restarts:
            return []
        first = j.hosts[0] if j.hosts else None
        if code is not None and host != j.runner:
            raise StateError("not_first_node", f"job {job_id}'s mpiexec runs on {j.runner or 'the head'}, not "
                             f"{host!r}: only its monitor reports its exit status")
        if host != first and host != j.runner:
            raise StateError("not_first_node", f"job {job_id}'s first node is {first!r}, not {host!r} "
                             "(only the first node's monitor reports a job)")
        if j.node_report is None or (code is not None and "code" not in j.node_report):
            j.node_report = {"status": status, "t": now, "node": host, "detail": detail,
                             **({"code": code} if code is not None else {})}
            self.table.mark(j)
        return []

    def ended_on_node(self, job_id: int, now: float, why: str | None = None) -> list[Launch | Kill]:
        """Settle a job by its monitor's report (its ``mpiexec`` cannot be watched or did not exit).

        ``end`` is done unless the job said it failed; ``error`` is failed, and
        so is a job whose ``mpiexec`` did not exit (``why`` says so). The job's
        remaining processes, if any, are killed.
        """
        j = self.table.job(job_id)
        if j.state != JobState.RUNNING or j.node_report is None:
            return []
        r = j.node_report
        ok = self._ended_well(j, r["status"] == "end" and why is None)
        self.table.release_all(j)
        if ok:
            self.table.end(j, JobState.DONE, now)
        else:
            self.table.end(j, JobState.FAILED, now)
            j.error = why or j.error or f"monitor of {r['node']}: {r.get('detail') or r['status']}"
        self.table.event(now, j, "end", f"{j.state} (reported by the monitor of {r['node']})")
        return [Kill(job_id), *self.schedule(now)]

    def cancel(self, job_id: int, now: float, reschedule: bool = True) -> list[Launch | Kill]:
        """End a queued or running job; ``reschedule=False`` (daemon stopping) starts nothing new."""
        j = self.table.job(job_id)
        if j.state in FINAL:
            raise StateError("not_active", f"job {job_id} already {j.state}")
        if j.state == JobState.CANCELLING:
            return [Kill(job_id)]  # still not confirmed (its monitor gets the kill order while it lists the run)
        if j.state == JobState.ENDING:  # its kill is ordered already: once confirmed it is cancelled, not what
            j.then = None               # the daemon had decided (a restart, a failure)
            self.table.set(j, JobState.CANCELLING)
            self.table.event(now, j, "cancelling", self.kills.ordered(j))
            return [Kill(job_id)]
        out: list[Launch | Kill] = []
        if j.state == JobState.RUNNING:
            if self.kills.confirms_kill(j):  # its monitor kills it: cancelled once it confirms (module docstring)
                return self.kills.kill_on_node(j, now, None, "")
            out.append(Kill(job_id))
            self.table.release_all(j)
        self.table.end(j, JobState.CANCELLED, now)
        self.table.event(now, j, "cancel")
        return out + self.schedule(now) if reschedule else out

    def expire(self, now: float, grace: float = 0.0) -> list[Launch | Kill]:
        """Kill every running job past its deadline plus ``grace`` (:mod:`scheduler.core.walltime`)."""
        out: list[Launch | Kill] = []
        for j in self.table.running():
            if j.deadline is not None and now >= kill_time(j.deadline, grace):
                why = (f"walltime exceeded: limit {j.spec.walltime:g} s at {j.spec.nprocs} slots, "
                       f"deadline {clock_time(j.deadline)} (now {j.nprocs} slots)")
                self.walltime_kills += 1
                out += self.kill_failed(j, now, why, "walltime exceeded")
        return out + (self.schedule(now) if out else [])

    def check_resizes(self, now: float) -> list[Launch | Kill]:
        """Resizes not confirmed within the job's ``resize_timeout`` plus :data:`RESIZE_GRACE` (5 s + 10%).

        The job's own watchdog (``reshape.runtime.watchdog``) aborts it at
        ``resize_timeout`` and reports why; this is the daemon's bound for a
        job that could not: it is killed and failed, its slots freed. No job
        stays running with a pending resize for longer.
        """
        out: list[Launch | Kill] = []
        for j in self.table.running():
            p = j.pending
            if p is None or p.t is None:
                continue
            timeout = j.desc.resize_timeout
            limit = timeout + RESIZE_GRACE[0] + RESIZE_GRACE[1] * timeout
            if now - p.t > limit and self.restarts.restartable(j, None, loss=True):
                out += self._restart_killed(j, now, f"{resize_name(j)} not confirmed within {limit:g} s")
            elif now - p.t > limit:
                why = f"{resize_name(j)} not confirmed within {limit:g} s; job killed"
                out += self.kill_failed(j, now, why if not j.error else f"{j.error}; {why}", why)
        return out + (self.schedule(now) if out else [])

    def check_nodes(self, now: float) -> list[Launch | Kill]:
        """NodeTable whose heartbeats stopped for ``node_timeout`` seconds go down
        (:meth:`scheduler.core.nodestate.NodeTable.silent`)."""
        out: list[Launch | Kill] = []
        for host, why in self.nodes.silent(now):
            out += self.node_down(host, now, why)
        return out

    def node_down(self, host: str, now: float, reason: str) -> list[Launch | Kill]:
        """``host`` is gone: its slots leave the pool, its jobs fail, expansions onto it are abandoned."""
        if not self.nodes.set_down(host, now, reason):
            return []
        out: list[Launch | Kill] = []
        why = f"node {host} down ({reason})"
        for j in self.table.running():
            if host not in j.hosts:
                if j.pending and j.pending.expands and host in j.pending.hosts:
                    self.resizes.abandon_resize(j, now, f"node {host} down")
            elif j.allocation is not None and self.restarts.restartable(j, None, loss=True, here=True):
                self.table.event(now, j, "node_lost", f"{why}: its allocation restarts it")  # its batch script does
            elif self.restarts.restartable(j, None, loss=True):
                out += self._restart_killed(j, now, why, known_cause=True)
            else:
                out += self.kill_failed(j, now, why, f"node {host} down")
        out += self.kills.node_lost_kills(host, reason, now)  # kills it was to confirm (scheduler.core.kills)
        return out + self.schedule(now)
