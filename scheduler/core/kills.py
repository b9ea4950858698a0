"""Ending a job run on a node, the core's half: a kill the daemon orders and a node monitor confirms.

:class:`Kills` is one of the parts ``scheduler.core.state.ClusterState`` composes (its module docstring,
"Ending a job run on a node", gives the rules). A job whose ``mpiexec`` a node monitor runs (``runner``) is killed by
that monitor: the job is ``cancelling`` (a cancel) or ``ending`` (an end the daemon decided: walltime, a
node down, a restart; ``Job.then`` says what it becomes), every slot held, until the runner's monitor
confirms the run ended (its ``job_ended`` for that attempt, or a heartbeat that lists the job neither among
its runs nor among the jobs its scan sees).

The runner's own node lost. Its monitor can confirm nothing, and the job's ranks on its other nodes are
orphans that no monitor reports (only a job's first node's monitor reports it). The daemon then orders a
kill, by the job's tag, to the monitor of each other node of the job (``Job.kill_on``: node -> ``""``
while it has not confirmed, ``killed`` once it has, or why it went down first) and frees each node's
slots when that node confirms, in a heartbeat's ``killed`` (no process of that attempt left there). The
lost node's slots leave with it, as every down node's; a node that goes down before it confirms is
declared dead by the node timeout as any other, its slots leaving with it; one that is only silent
confirms nothing and keeps its slots out of the pool meanwhile. Once no node is left to confirm, the job
becomes what its end decided.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from scheduler.core.actions import Kill, Launch
from scheduler.core.job import Job, JobState
from scheduler.core.jobtable import KILLING

if TYPE_CHECKING:
    from scheduler.core.jobtable import JobTable
    from scheduler.core.nodestate import NodeTable
    from scheduler.core.pool import Pool
    from scheduler.core.restarts import Restarts

__all__ = ["KILLED", "Kills", "awaited", "confirmers"]

KILLED = "killed"  # Job.kill_on: that node's monitor confirmed no process of the attempt is left there


def awaited(j: Job) -> list[str]:
    """The nodes whose monitors have yet to confirm ``j``'s kill: its runner's, or (that node lost) its others'."""
    if j.kill_on:
        return [h for h, s in j.kill_on.items() if s == ""]
    return [j.runner] if j.runner is not None else []


def _monitors(nodes: list[str]) -> str:
    return f"the monitor{'s' * (len(nodes) > 1)} of {', '.join(nodes)}"


def confirmers(j: Job) -> str:
    """Who is to confirm ``j``'s kill, in words: "the monitor of n2 (its mpiexec's node n1 is down)"."""
    lost = f" (its mpiexec's node {j.runner} is down)" if j.kill_on else ""
    return f"{_monitors(awaited(j))}{lost}"


class Kills:
    """Kills of ``table``'s jobs that node monitors carry out and confirm, as ``nodes`` says they are up;
    the slots return to ``pool`` as they confirm. A kill confirmed ends the job as its end decided:
    ``restarts`` queues it again, and ``schedule`` (the scheduling pass) runs."""

    def __init__(self, table: JobTable, nodes: NodeTable, pool: Pool, restarts: Restarts,
                 schedule: Callable[[float], list[Launch | Kill]]):
        self.table, self.nodes, self.pool, self.restarts, self.schedule = table, nodes, pool, restarts, schedule

    def _others(self, j: Job) -> list[str]:
        """The nodes of ``j`` besides its runner's with a monitor up: they kill what is left of it if it is lost."""
        hosts = [*j.hosts, *(j.pending.hosts if j.pending and j.pending.expands else ())]
        return sorted({h for h in hosts if h != j.runner and self.nodes.up(h, monitored=True)})

    def confirms_kill(self, j: Job) -> bool:
        """Whether ``j``'s kill waits for node monitors' confirmation: its ``mpiexec`` runs on a node
        (``runner``) whose monitor is up, or that node is down and other nodes of the job have monitors up."""
        return j.runner is not None and (self.nodes.up(j.runner) or bool(self._others(j)))

    def kill_on_node(self, j: Job, now: float, then: dict[str, Any] | None, why: str) -> list[Launch | Kill]:
        """Order the kill of ``j``, whose ``mpiexec`` a node monitor runs, through the monitors (module docstring):
        ``cancelling`` (``then`` None) or ``ending`` (``then``: what it becomes once confirmed), every slot held."""
        self._hold(j)
        if not self.nodes.up(j.runner):
            self._kill_elsewhere(j)
        self.table.set(j, JobState.CANCELLING if then is None else JobState.ENDING)
        j.cancel_time = now
        j.then = then
        ordered = self.ordered(j)
        self.table.event(now, j, str(j.state), f"{why}: {ordered}" if why else ordered)
        return [Kill(j.job_id)]

    def ordered(self, j: Job) -> str:
        return f"kill ordered to {confirmers(j)}, not yet confirmed"

    def _hold(self, j: Job) -> None:
        """A job whose processes may still run keeps every slot it had, a pending expansion's too."""
        if j.pending and j.pending.expands:
            j.hosts = [*j.hosts, *j.pending.hosts]
        j.pending = None
        j.shrink_request = None
        j.nprocs = len(j.hosts)

    def _kill_elsewhere(self, j: Job) -> None:
        """``j``'s runner's node is down: the monitors of its other nodes are to kill what is left of it there
        and confirm; the slots no monitor can speak for (the lost node's) leave with their node now."""
        rec = self.nodes.nodes.get(j.runner or "")
        others = self._others(j)
        j.kill_on = {j.runner or "?": f"down ({rec.reason if rec else 'gone'})", **dict.fromkeys(others, "")}
        self._drop(j, {h for h in j.hosts if h not in others})

    def _drop(self, j: Job, hosts: set[str]) -> None:
        """``j`` holds no slot on ``hosts`` any more."""
        self.pool.release([h for h in j.hosts if h in hosts])
        j.hosts = [h for h in j.hosts if h not in hosts]
        j.nprocs = len(j.hosts)
        self.table.mark(j)

    def killed_on(self, j: Job, node: str, now: float, outcome: str = KILLED) -> list[Launch | Kill]:
        """``node`` will not run anything of ``j`` any more: its monitor confirmed the kill (``killed``), or it
        went down first (``outcome``: why). Its slots are free; once no node is left to confirm, the job ends."""
        if j.state not in KILLING or j.kill_on.get(node) != "":
            return []
        j.kill_on[node] = outcome
        self._drop(j, {node})
        if awaited(j):
            return []
        done = [h for h, s in j.kill_on.items() if s == KILLED]
        lost = {h: s for h, s in j.kill_on.items() if s != KILLED}
        how = f"killed on {', '.join(done)} by {_monitors(done)}" if done else "nothing killed"
        error = "; ".join(f"kill never confirmed on {h}: it went {s[:300]}" for h, s in lost.items())
        return self._settle(j, now, how, error)

    def kill_confirmed(self, job_id: int, node: str, now: float, how: str,
                       error: str | None = None) -> list[Launch | Kill]:
        """The monitor of ``node`` confirmed that the run of a job whose kill it was ordered ended (``how``): a
        cancelling job is cancelled, an ending one what its end decided (failed, or queued again to restart);
        its slots free. ``error``: the kill could not be confirmed (its node went down): the same, saying so.
        A job whose runner's node was lost is confirmed by its other nodes only (:meth:`killed_on`)."""
        j = self.table.job(job_id)
        if j.state not in KILLING or j.runner != node or j.kill_on:
            return []
        return self._settle(j, now, how, error)

    def _settle(self, j: Job, now: float, how: str, error: str | None) -> list[Launch | Kill]:
        then, j.then, j.cancel_time, j.kill_on = j.then, None, None, {}
        story = "; ".join(x for x in (how, error) if x)
        if then is not None and then.get("restart"):  # the restart the daemon decided (its slots return there)
            return self.restarts.restart(j, now, then["why"], known_cause=bool(then.get("known_cause") or error))
        self.table.release_all(j)
        if then is not None:
            self.table.end(j, JobState.FAILED, now)
            j.error = f"{then['error']}; {error}" if error else then["error"]
            self.table.event(now, j, "end", f"failed: {then['detail']} ({story})")
            return self.schedule(now)
        self.table.end(j, JobState.CANCELLED, now)
        if error:
            j.error = error
        self.table.event(now, j, "end", f"cancelled: {story}")
        return self.schedule(now)

    def runs_seen(self, node: str, jobs: list[int], runs: list[dict], now: float,
                  killed: list[dict] = ()) -> list[Launch | Kill]:
        """A heartbeat of ``node``'s monitor: the jobs it runs whose kill it was ordered (cancelling, ending) that
        it lists neither among its runs nor among the jobs of its process scan have ended there. (A monitor
        carries out a reply's orders before its next heartbeat, so a start order sent before the kill shows in
        any heartbeat after it.) ``killed``: the attempts ``{job_id, attempt}`` it was ordered to kill by their
        tag that have no process left there (a job whose runner's node was lost, :meth:`killed_on`)."""
        out: list[Launch | Kill] = []
        if not self.table.unconfirmed:
            return out
        listed = set(jobs) | {r["job_id"] for r in runs}
        gone = {(k["job_id"], k["attempt"]) for k in killed}
        for j in self.table.killing():
            if j.kill_on:
                if (j.job_id, j.restarts) in gone:
                    out += self.killed_on(j, node, now)
            elif j.runner == node and j.job_id not in listed:
                out += self.kill_confirmed(j.job_id, node, now, f"no process of it left on {node}")
        return out

    def node_lost_kills(self, host: str, reason: str, now: float) -> list[Launch | Kill]:
        """``host`` went down: the kills it was to confirm. A job it runs is killed by the monitors of its other
        nodes, if any (else it ends unconfirmed); a job it was to kill what was left of is settled there."""
        out: list[Launch | Kill] = []
        for j in self.table.killing():
            if j.kill_on:
                out += self.killed_on(j, host, now, f"down ({reason})")
            elif j.runner == host and self._others(j):
                self._kill_elsewhere(j)
                self.table.event(now, j, str(j.state), self.ordered(j))
            elif j.runner == host:
                out += self.kill_confirmed(j.job_id, host, now, "", f"kill ordered, never confirmed: node {host} "
                                           f"went down ({reason}) before its monitor reported the run ended")
        return out
