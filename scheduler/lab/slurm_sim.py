"""A simulated Slurm partition for the twin of the Slurm experiment (``scheduler.lab.slurm_twin``).

What the controller and the benchmark see of Slurm, on a virtual clock: whole nodes
(``select/linear``), first-come-first-served priority with ``--nice`` jobs after all others
(``priority/basic``), Slurm's backfill plan (:func:`scheduler.rm.slurm.plan.plan`: time limits in
whole minutes, a job planned to end at its limit, a deadline job given the minutes left) run at
every submission, every end and once a second (``bf_interval=1``), and the commands the
controller uses: ``sbatch`` (:meth:`SimSlurm.submit`), ``scancel``, ``scontrol update``
(``NodeList=`` of a running job, once without accounting, ``TimeLimit=``, ``NumNodes=`` of a
pending one) and ``squeue``
(:meth:`SimSlurm.view`: the controller's :class:`~scheduler.rm.slurm.view.SlurmJob` rows, with
the predicted starts and the reasons ``Resources``/``Priority``). A job past its limit is ended
(``TIMEOUT``) by the periodic check Slurm runs every 30 s, plus ``KillWait``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from scheduler.rm.slurm.plan import NO_LIMIT, Pending, plan
from scheduler.rm.slurm.view import SlurmJob

__all__ = ["LIMIT_CHECK", "SimSlurm", "Sjob"]

LIMIT_CHECK = (30.0, 5.0)  # slurmctld's time-limit check period and KillWait (docker/slurm/slurm.conf)
LIVE = ("RUNNING",)


@dataclass
class Sjob:
    id: str
    name: str
    nodes: int  # at least
    max_nodes: int
    limit: float | None  # seconds; None: none (or the deadline's minutes once started)
    deadline: float | None
    nice: bool
    submit: float
    seq: int
    state: str = "PENDING"
    hosts: tuple[str, ...] = ()
    start: float | None = None
    end: float | None = None  # when it left the queue
    predicted: float | None = None
    info: dict = field(default_factory=dict)  # the twin's own notes (what runs in it)

    @property
    def limit_end(self) -> float:
        return (self.start or 0.0) + (NO_LIMIT if self.limit is None else self.limit)


class SimSlurm:
    """One partition of ``nodes`` (names in Slurm's order), as the twin's Slurm (module docstring)."""

    def __init__(self, nodes: list[str], accounting: bool = False):
        """``accounting``: with an accounting database, Slurm updates a shrunk job again; without (the
        emulated cluster's), it refuses every update of a job after its first shrink."""
        self.nodes = list(nodes)
        self.accounting = accounting
        self.jobs: dict[str, Sjob] = {}
        self._next = 1
        self.started: list[Sjob] = []  # started since the twin last looked (it takes them)
        self.ended: list[Sjob] = []  # ended by Slurm itself (time limit) since the twin last looked

    # ------------------------------------------------------------------ commands
    def submit(self, name: str, nodes: int, limit_min: int | None, now: float, *, max_nodes: int | None = None,
               deadline: float | None = None, nice: bool = False, **info) -> str:
        jid = str(self._next)
        self._next += 1
        limit = None if limit_min is None else 60.0 * limit_min
        self.jobs[jid] = Sjob(jid, name, nodes, max_nodes or nodes, limit, deadline, nice, now, int(jid), info=info)
        return jid

    def cancel(self, jid: str, now: float, state: str = "CANCELLED") -> None:
        j = self.jobs.get(jid)
        if j is not None and j.state in ("PENDING", "RUNNING"):
            j.state, j.end = state, now

    def cancel_name(self, name: str, now: float) -> None:
        for j in list(self.jobs.values()):
            if j.name == name:
                self.cancel(j.id, now)

    def finish(self, jid: str, now: float, ok: bool = True) -> None:
        """The job's batch script exited (0: ``COMPLETED``)."""
        j = self.jobs.get(jid)
        if j is not None and j.state == "RUNNING":
            j.state, j.end = ("COMPLETED" if ok else "FAILED"), now

    def keep(self, jid: str, hosts: list[str]) -> bool:
        """``scontrol update JobId=jid NodeList=hosts``: False (refused) for a node it does not hold or
        without its batch host (its first node), as Slurm refuses."""
        j = self.jobs.get(jid)
        if (j is None or j.state != "RUNNING" or not set(hosts) <= set(j.hosts) or not hosts
                or j.hosts[0] not in hosts or j.info.get("resized")):
            return False
        j.hosts = tuple(h for h in j.hosts if h in hosts)
        j.info["resized"] = not self.accounting
        return True

    def set_limit(self, jid: str, minutes: int, after_keep: bool = False) -> bool:
        """``scontrol update JobId=jid TimeLimit=minutes`` (``after_keep``: in the same update as a shrink)."""
        j = self.jobs.get(jid)
        if j is None or j.state not in ("PENDING", "RUNNING") or minutes < 1 or (j.info.get("resized")
                                                                                  and not after_keep):
            return False
        j.limit = 60.0 * minutes
        return True

    def set_nodes(self, jid: str, nodes: int) -> bool:
        """``scontrol update JobId=jid NumNodes=nodes`` of a pending job."""
        j = self.jobs.get(jid)
        if j is None or j.state != "PENDING" or not 1 <= nodes <= len(self.nodes):
            return False
        j.nodes = j.max_nodes = nodes
        return True

    # ------------------------------------------------------------------ scheduling
    def running(self) -> list[Sjob]:
        return [j for j in self.jobs.values() if j.state in LIVE]

    def pending(self) -> list[Sjob]:
        return sorted((j for j in self.jobs.values() if j.state == "PENDING"), key=lambda j: (j.nice, j.seq))

    def idle(self) -> list[str]:
        used = {h for j in self.running() for h in j.hosts}
        return [h for h in self.nodes if h not in used]

    def schedule(self, now: float) -> list[Sjob]:
        """One pass: the jobs it starts (also kept in :attr:`started`); every other pending job's
        predicted start updated. Jobs past their limit (after the periodic check) end first."""
        for j in self.running():
            if j.limit is not None and now >= self._killed_at(j):
                j.state, j.end = "TIMEOUT", now
                self.ended.append(j)
        pend = self.pending()
        got = plan(now, self.nodes, [(j.hosts, j.limit_end) for j in self.running()],
                   [Pending(j.id, j.nodes, j.limit, j.max_nodes, j.deadline) for j in pend])
        out = []
        for j in pend:
            p = got.get(j.id)
            j.predicted = None if p is None else p.start
            if p is not None and p.start <= now:
                j.state, j.start, j.hosts = "RUNNING", now, p.nodes
                if j.deadline is not None:
                    j.limit = p.limit
                out.append(j)
            elif j.deadline is not None and now > j.deadline - 60:
                j.state, j.end = "DEADLINE", now
        self.started += out
        return out

    @staticmethod
    def _killed_at(j: Sjob) -> float:
        """When slurmctld's periodic check (every 30 s, from the start) sees it over, plus KillWait."""
        over = j.limit_end
        period, wait = LIMIT_CHECK
        return (j.start or 0.0) + period * math.ceil((over - (j.start or 0.0)) / period) + wait

    # ------------------------------------------------------------------ squeue
    def view(self, now: float) -> tuple[list[SlurmJob], int]:
        """``squeue`` as the controller reads it, and the idle node count (``sinfo -t idle``)."""
        rows = []
        first = True
        for j in [*self.running(), *self.pending()]:
            if j.state == "PENDING":
                reason = "Resources" if first and not j.nice else "Priority"
                first = first and j.nice
                start = j.predicted
                end = None
            else:
                reason, start, end = "None", j.start, (None if j.limit is None else j.limit_end)
            rows.append(SlurmJob(j.id, j.name, j.state, "root", len(j.hosts) or j.nodes, j.hosts, reason,
                                 10**9 - j.seq - (10**6 if j.nice else 0), start, end, j.submit, j.limit,
                                 j.info.get("comment", "")))
        return rows, len(self.idle())

    def final(self, jid: str) -> SlurmJob | None:
        """``squeue -t all -j jid``: an ended job with its final state."""
        j = self.jobs.get(jid)
        if j is None:
            return None
        return SlurmJob(j.id, j.name, j.state, "root", len(j.hosts), j.hosts, "None", 0, j.start, j.end, j.submit)
