"""The daemon's requests: who may send what, and one handler per request type (docs/protocol.md).

A request arrives decoded and validated (a :class:`reshape.joblink.protocol.Request`
event); :func:`answer` checks access, looks its type up in :data:`HANDLERS`
and returns the reply and the core's actions. Job and node events go to the
core as its own event types (:func:`core_event`, ``ClusterState.handle``), its
advice comes back as the protocol's; the control requests (submit,
status, cancel, history, log, stop, register) are answered here. Errors the core or
the job file raise become ``error`` replies; anything else is logged and
answered ``internal``: a bug costs one request, never the daemon.

``cancel`` answers the job's ``state``: ``cancelled``, or ``cancelling`` with the
``runner`` node when a node monitor runs the job's ``mpiexec`` (the kill rides on that
monitor's next heartbeat reply, and the job is cancelled when the monitor confirms it:
``scheduler.core.state``, "Ending a job run on a node"). A heartbeat's reply carries the
monitor's orders; the heartbeat itself may confirm such kills.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any, Protocol

from reshape.joblink import protocol as P
from scheduler.core import events as C
from scheduler.core.job import JobState
from scheduler.core.jobfile import JobFileError, validate_job
from scheduler.core.state import ClusterState, StateError
from scheduler.daemon.accounts import Accounts
from scheduler.daemon.journal import Journal
from scheduler.daemon.peers import UNIDENTIFIED
from scheduler.daemon.retention import JobLimits
from scheduler.daemon.startup import tag_prefix
from scheduler.daemon.supervisor import Supervisor
from scheduler.observe.loopstats import LoopStats
from scheduler.rm.base import ResourceManager

# ---------------------------------------------------------------------- per-user limits on submissions
_WAITING = (JobState.QUEUED, JobState.WAITING)


class Quota:
    """Per-user limits on submissions: jobs waiting to run, and submissions per second.

    A user who is not an admin (``Accounts.is_admin``) may have at most ``max_queued`` jobs queued or
    waiting, and may submit ``rate`` jobs per second on average, ``burst`` at once (a token
    bucket). A submission over either is refused with ``error`` ``over_limit`` naming the limit
    and the option that sets it (``reshape daemon --max-queued-per-user``, ``--submit-rate``,
    ``--submit-burst``). Counting a user's waiting jobs costs the jobs that user submitted, not
    the queue: each user's not-yet-started jobs are kept in a set, pruned at the next submission
    (built from the job table the first time a user submits after a restart).

    A ``register`` (a site controller's: each is checked with Slurm, ``scontrol show job``, inside the
    daemon's loop) takes a token of the same bucket (:meth:`take`), before anything is checked: a flood
    of registrations costs the loop at most ``burst`` checks at once and ``rate`` a second after."""

    def __init__(self, max_queued: int = 1000, rate: float = 20.0, burst: int = 200):
        self.max_queued, self.rate, self.burst = max_queued, rate, burst
        self._pending: dict[str | None, set[int]] = {}
        self._tokens: dict[str | None, tuple[float, float]] = {}  # who -> (tokens, when)
        self.refused = 0

    def admit(self, state: ClusterState, who: str | None, now: float) -> None:
        """Raise ``StateError('over_limit')`` if ``who`` may not submit one more job now."""
        mine = self._pending.get(who)
        if mine is None:
            mine = self._pending[who] = {j.job_id for j in state.jobs.values()
                                        if j.owner == who and j.state in _WAITING}
        else:
            mine -= {i for i in mine if (j := state.jobs.get(i)) is None or j.state not in _WAITING}
        if len(mine) >= self.max_queued:
            self.refused += 1
            raise StateError("over_limit", f"{who} has {len(mine)} jobs queued or waiting: the limit per user is "
                                           f"{self.max_queued} (reshape daemon --max-queued-per-user)")
        self.take(who, now)

    def take(self, who: str | None, now: float, what: str = "submits") -> None:
        """One token of ``who``'s submission bucket, or ``StateError('over_limit')``; ``what`` the
        sender does (``submits``, ``registers``), as the refusal says."""
        tokens, then = self._tokens.get(who, (float(self.burst), now))
        tokens = min(float(self.burst), tokens + max(0.0, now - then) * self.rate)
        if tokens < 1.0:
            self.refused += 1
            raise StateError("over_limit", f"{who} {what} faster than the limit of {self.rate:g} jobs per second "
                                           f"(burst {self.burst}; reshape daemon --submit-rate, --submit-burst)")
        self._tokens[who] = (tokens - 1.0, now)

    def note(self, who: str | None, job_id: int) -> None:
        """A job ``who`` submitted (admitted by :meth:`admit`)."""
        self._pending.setdefault(who, set()).add(job_id)


class Daemon(Protocol):
    """What the handlers use of the daemon (``scheduler.daemon.loop.Daemon``)."""

    state: ClusterState
    rm: ResourceManager
    supervisor: Supervisor
    journal: Journal
    loop: LoopStats
    stopping: bool
    kill_on_stop: bool
    quota: Quota
    endpoint: str
    accounts: Accounts
    job_limits: JobLimits

    def service_stats(self, loop: bool = False) -> dict[str, Any]: ...

__all__ = ["HANDLERS", "READS", "Quota", "answer"]

# read-only requests, answered after the turn's other requests (their replies can take milliseconds
# to build and encode: a status page; nothing else in the turn waits for them)
READS = frozenset({"status", "history", "log"})

Handler = Callable[[Daemon, Any, float, "str | None"], "tuple[P.Reply, list]"]


def check_access(d: Daemon, ev: P.Request, who: str | None) -> None:
    """Ownership (docs/cluster.md, "Who may do what"): a job's owner or an admin (root, the daemon's
    user, a key whose account is one of them: ``scheduler.daemon.accounts``) may cancel it, read its
    log and speak for it; only an admin stops the daemon; only an admin or that node's key
    (``node-HOST``) speaks for a node. Anyone identified may ping and read status; submit and
    register as the accounts rules say. A peer the daemon cannot identify (a TCP socket without
    CURVE, and not a local peer on loopback) may only ping and read status and history: nothing it
    sends is run, nor speaks for a job or a node."""
    if who == UNIDENTIFIED and not isinstance(ev, P.Ping | P.Status | P.History):
        raise StateError("forbidden", f"{ev.type!r} from a peer the daemon cannot identify on {d.endpoint} "
                                      "(use its ipc:// socket, a loopback address, or CURVE keys)")
    if d.accounts.is_admin(who) or isinstance(ev, P.Ping | P.Status | P.History):
        return
    if isinstance(ev, P.Submit | P.Register):
        d.accounts.check_job(who, "job" if isinstance(ev, P.Submit) else "registration")
        return
    if isinstance(ev, P.Stop):
        raise StateError("forbidden", f"{who} may not stop the daemon (an admin may: root or the daemon's user)")
    if ev.type in P.NODE_TYPES:
        node = ev.node  # type: ignore[attr-defined]  # every node message names its node
        if who == f"key:node-{node}":
            return
        raise StateError("forbidden", f"{who} may not speak for node {node!r} (its node key may)")
    jid = ev.target if isinstance(ev, P.Cancel | P.Log) else ev.job_id
    j = d.state.jobs.get(jid) if jid is not None else None
    if j is not None and j.owner != who:
        raise StateError("forbidden", f"job {jid} belongs to {j.owner or 'nobody known'}, not {who}")


def answer(d: Daemon, ev: P.Request, now: float, who: str | None = None,
           frame: bytes = b"") -> tuple[P.Reply, list]:
    """The reply to a decoded request and its actions (never raises)."""
    t0 = time.perf_counter()
    try:
        check_access(d, ev, who)
        return HANDLERS[type(ev)](d, ev, now, who)
    except StateError as e:
        return P.error_reply(e.code, e.message, ev.seq, ev.job_id), []
    except JobFileError as e:
        return P.error_reply("bad_job", str(e), ev.seq, ev.job_id), []
    except Exception as e:  # a bug must cost one request, never the daemon
        print(f"reshape daemon: internal error on {frame[:300] or ev!r}:\n{traceback.format_exc()}",
              file=sys.stderr, flush=True)
        return P.error_reply("internal", f"{type(e).__name__}: {e}", ev.seq, ev.job_id), []
    finally:
        d.loop.request(ev.type, time.perf_counter() - t0)


# ---------------------------------------------------------------------- job and node events: the core
# a job's or a node monitor's request -> the core's event of the same name (scheduler.core.events)
_CORE_EVENTS: dict[type, type] = {getattr(P, c.__name__): c for c in C.EVENTS}


def core_event(ev: P.Request) -> C.Event:
    """The core's event for a decoded, checked request of a job or a node monitor: its fields by name."""
    cls = _CORE_EVENTS[type(ev)]
    return cls(**{f.name: getattr(ev, f.name) for f in dataclasses.fields(cls)})


def _core(d: Daemon, ev: P.Request, now: float, who: str | None) -> tuple[P.Reply, list]:
    _, acts = d.state.handle(core_event(ev), now)
    return P.answer(ev, P.Ok()), acts


def _limited(d: Daemon, ev: P.Lost | P.Resized, now: float, who: str | None) -> tuple[P.Reply, list]:
    """``lost`` and ``resized`` journal an event each: a job sends them at most at its limit's rate."""
    if ev.job_id in d.state.live and not d.job_limits.message(ev.job_id, now):
        lim = d.job_limits
        raise StateError("over_limit", f"job {ev.job_id} sends {ev.type!r} faster than {lim.rate:g} per second "
                                       f"(at most {lim.burst} at once): not recorded")
    return _core(d, ev, now, who)


def _resize_point(d: Daemon, ev: P.ResizePoint, now: float, who: str | None) -> tuple[P.Advice, list]:
    adv, acts = d.state.handle(core_event(ev), now)
    return P.answer(ev, P.Advice(action=adv.action, nprocs=adv.nprocs, hosts=adv.hosts, reason=adv.reason)), acts


def _node_register(d: Daemon, ev: P.NodeRegister, now: float, who: str | None) -> tuple[P.Reply, list]:
    _, acts = d.state.handle(core_event(ev), now)
    timeout = d.state.node_timeout
    beat = min(5.0, max(0.05, timeout / 4))
    if d.supervisor.on_nodes:  # its heartbeats' replies carry the orders to start and kill jobs: often
        beat = min(beat, 0.5)
    return P.answer(ev, P.NodeWelcome(node=ev.node, heartbeat=beat, timeout=timeout,
                                       tag=tag_prefix(d.supervisor.state_dir))), acts


def _heartbeat(d: Daemon, ev: P.Heartbeat, now: float, who: str | None) -> tuple[P.Reply, list]:
    """A monitor's heartbeat; its reply carries the monitor's orders (jobs on nodes: start, kill)."""
    _, acts = d.state.handle(core_event(ev), now)
    orders = d.supervisor.node_orders(ev.node, list(ev.runs or ()), now, list(ev.jobs))
    return P.answer(ev, P.Orders(orders=tuple(orders) or None)), acts


def _job_output(d: Daemon, ev: P.JobOutput, now: float, who: str | None) -> tuple[P.Reply, list]:
    try:
        data = base64.b64decode(ev.data, validate=True)
    except (binascii.Error, ValueError):
        raise StateError("bad_field", "job_output: 'data' is not base64") from None
    if len(data) > P.MAX_OUTPUT_BYTES:
        raise StateError("bad_field", f"job_output: 'data' holds {len(data)} bytes > {P.MAX_OUTPUT_BYTES}")
    if ev.job_id in d.state.live and not d.job_limits.output(ev.job_id, len(data), now):
        data = b""  # over the job's output rate: nothing written now; the reply says how much is held
    return P.answer(ev, P.OutputAt(at=d.supervisor.output(ev.job_id, ev.node, ev.attempt, ev.offset, data))), []


# ---------------------------------------------------------------------- control requests
def _ping(d: Daemon, ev: P.Ping, now: float, who: str | None) -> tuple[P.Reply, list]:
    return P.answer(ev, P.Pong(now=now, version=P.VERSION)), []


def _submit(d: Daemon, ev: P.Submit, now: float, who: str | None) -> tuple[P.Reply, list]:
    s = d.state
    desc = validate_job(ev.job, s.pool.capacity)
    d.rm.check_submit(desc)
    d.supervisor.check_program(desc, who)
    admin = d.accounts.is_admin(who)
    if not admin:
        d.quota.admit(s, who, now)  # per-user limits (:class:`Quota`)
    job_id = s.submit(desc, now, owner=who)
    if not admin:
        d.quota.note(who, job_id)
    # a job that cannot start now (not the head, its smallest size above the free slots) waits
    # for the next tick's pass: a submission costs no pass over a full machine
    return P.answer(ev, P.Accepted(target=job_id)), s.tick(now) if s.pass_needed(job_id) else []


def _register(d: Daemon, ev: P.Register, now: float, who: str | None) -> tuple[P.Reply, list]:
    if not d.accounts.is_admin(who):  # the site controller asks Slurm about each, in this loop (:class:`Quota`)
        d.quota.take(who, now, "registers")
    desc = validate_job(ev.job, d.state.pool.capacity)
    again = (ev.code, list(ev.lost)) if ev.restart else None
    return P.answer(ev, P.Accepted(target=d.rm.adopt(d.state.port, desc, ev.allocation, list(ev.hosts), now, who,
                                                      again))), []


def _status(d: Daemon, ev: P.Status, now: float, who: str | None) -> tuple[P.Reply, list]:
    page = ev.limit  # pages running, queued and waiting jobs alike
    return P.answer(ev, P.StatusView(now=now, daemon=d.service_stats(loop=True), **d.state.status(now, page, page))), []


def _cancel(d: Daemon, ev: P.Cancel, now: float, who: str | None) -> tuple[P.Reply, list]:
    acts = d.state.cancel(ev.target, now)
    j = d.state.jobs[ev.target]  # cancelled, or cancelling: its node's monitor has the kill to confirm
    runner = j.runner if j.state == JobState.CANCELLING else None
    return P.answer(ev, P.Cancelled(target=ev.target, state=str(j.state), runner=runner)), acts


def _history(d: Daemon, ev: P.History, now: float, who: str | None) -> tuple[P.Reply, list]:
    return P.answer(ev, history(d, now, ev.limit, ev.since, ev.after)), []


def _log(d: Daemon, ev: P.Log, now: float, who: str | None) -> tuple[P.Reply, list]:
    if ev.target not in d.state.jobs:
        raise StateError("unknown_job", f"no job {ev.target}")
    text = d.supervisor.log_tail(ev.target, 200 if ev.tail is None else ev.tail)
    return P.answer(ev, P.LogText(target=ev.target, text=text)), []


def _stop(d: Daemon, ev: P.Stop, now: float, who: str | None) -> tuple[P.Reply, list]:
    d.stopping = True
    d.kill_on_stop = d.kill_on_stop or bool(ev.kill_jobs)
    return P.answer(ev, P.Ok()), []


def history(d: Daemon, now: float, limit: int | None, since: float | None,
            after: int | None = None) -> P.HistoryView:
    """Jobs with their events: all, or the last ``limit`` jobs, or those active at or after the
    time ``since`` (both: the last ``limit`` of those); node events likewise from ``since``.
    ``after``: a page, the first ``limit`` of those jobs with a larger id (node events on the
    first page only, ``after`` 0), so a client reads any history in replies of bounded size."""
    s = d.state
    def active(j) -> bool:
        return since is None or j.end_time is None or j.end_time >= since

    if after is not None:  # a page costs its jobs, not the journal: ids ascend from ``after``
        sel = []
        for i in range(after + 1, s.next_id):
            j = s.jobs.get(i)
            if j is not None and active(j):
                sel.append(j)
                if limit is not None and len(sel) >= limit:
                    break
    else:
        sel = [j for j in s.jobs.values() if active(j)]
    if after is None and limit is not None:
        sel = sorted(sel, key=lambda j: j.job_id)[-limit:] if limit else []
    ids = {j.job_id for j in sel}
    span = (min(ids), max(ids)) if ids else None  # only the listed jobs' events are read (an index on job_id)
    events = [e for e in (d.journal.history(span) if ids else []) + s.events
              if e["job_id"] in ids and (since is None or e["t"] >= since)]
    nodes = [] if after else [e for e in d.journal.node_history() + s.node_events
                              if since is None or e["t"] >= since]
    jobs = [{k: v for k, v in j.to_dict().items() if k != "desc"} | {"name": j.desc.name,
             "requested": j.desc.nprocs, "arrival_time": j.arrival_time} for j in sel]
    return P.HistoryView(total_slots=s.pool.capacity, now=now, jobs=jobs, events=events, node_events=nodes,
                         jobs_total=len(s.jobs))


HANDLERS: dict[type[P.Request], Handler] = {
    P.ResizePoint: _resize_point, P.Hello: _core, P.Resized: _limited, P.Lost: _limited, P.Finished: _core,
    P.JobEnded: _core, P.Heartbeat: _heartbeat, P.JobOutput: _job_output, P.NodeRegister: _node_register,
    P.Ping: _ping, P.Submit: _submit, P.Status: _status, P.Cancel: _cancel, P.History: _history,
    P.Log: _log, P.Stop: _stop, P.Register: _register,
}
