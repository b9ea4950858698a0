"""The scheduler daemon: a ZeroMQ ROUTER loop around :class:`scheduler.core.state.ClusterState`.

decode -> state event -> journal commit -> reply, then perform the actions
(Job Startup launches, kills). The System Monitor part polls the jobs'
processes: a job whose ``mpiexec`` exited (or, for jobs adopted after a
restart, whose session has no process left) returns its slots to the pool.
Node monitors (``scheduler.service.nodemon``) register their nodes and heartbeat;
a node whose heartbeats stop for ``node_timeout`` seconds goes down (its
slots leave the pool, its jobs fail: ``scheduler.core.state``). When the daemon
listens beyond loopback (or is given keys), every peer must authenticate
with CURVE (``reshape.joblink.auth``, ``scheduler.service.gatekeeper``).
"""

from __future__ import annotations

import collections
import contextlib
import errno
import faulthandler
import gc
import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
from typing import Any

import psutil
import zmq

from reshape.joblink import jobenv as E
from reshape.joblink import protocol as P
from reshape.joblink.auth import ENV_KEYS, keys_dir_for, load_client_keys, load_server_keys
from reshape.joblink.launch import sweep_ipc
from reshape.joblink.launchers import choose
from scheduler.core.jobfile import JobFileError, validate_job
from scheduler.core.policy import app_policy, remap_policy
from scheduler.core.pool import Pool, default_pool
from scheduler.core.state import ClusterState, Kill, Launch, StateError
from scheduler.service.dashboard import Dashboard, parse_bind
from scheduler.service.dashboard_view import LatencyHistogram, snapshot
from scheduler.service.gatekeeper import Gatekeeper
from scheduler.service.journal import Journal
from scheduler.service.loopstats import LoopStats, ServiceWindow
from scheduler.service.slurm import (
    AskShrink,
    Broker,
    Cancel,
    Drain,
    Grant,
    Lost,
    Release,
    SlurmEdge,
    SlurmError,
    Submit,
    allocation_pool,
    growing_pool,
)
from scheduler.service.startup import job_tag, kill_job, kill_jobs, read_exit_status, start_job

__all__ = ["DEFAULT_ENDPOINT", "Daemon", "job_endpoint"]

# a Unix socket in the state directory: local peers only, each identified by its uid (docs/cluster.md)
DEFAULT_ENDPOINT = "ipc://" + os.path.join(E.default_state_dir(), "daemon.sock")
HARD_MAX_BYTES = 1 << 20  # zmq.MAXMSGSIZE: larger frames drop the connection, smaller get an error reply
DASH_EVENTS = 5000  # allocation events the dashboard keeps for its charts and decision log
_ERROR_LINE = re.compile(r"^[\w.]*(Error|Exception|Exit)\b.*: ")  # Python's last traceback line
FREEZE_EVERY = 1000  # jobs submitted between two gc.freeze() calls of the loop
# read-only requests, answered after the turn's other requests (their replies can take milliseconds
# to build and encode: a status page; nothing else in the turn waits for them)
READS = frozenset({"status", "history", "log"})
MONITOR_GRACE = 3.0  # seconds a watched mpiexec gets to exit after its first node's monitor saw the job end


def job_endpoint(endpoint: str) -> str:
    """The address jobs connect to (a wildcard bind becomes this host's name)."""
    for wild in ("tcp://*:", "tcp://0.0.0.0:"):
        if endpoint.startswith(wild):
            return "tcp://" + socket.gethostname() + ":" + endpoint[len(wild):]
    return endpoint


def _claim_socket(path: str) -> None:
    """Make ``path`` free for binding: refuse if a daemon listens there (binding would take its
    place silently), remove a stale socket left by one that died."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    if not os.path.exists(path):
        return
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(path)
    except OSError:
        os.unlink(path)  # nobody listens: left by a daemon that was killed
        return
    finally:
        probe.close()
    raise OSError(f"a daemon already listens on ipc://{path} (stop it, or choose another --endpoint)")


def _user_id(frame: zmq.Frame) -> str | None:
    """The authenticated sender of a frame (the ZAP handler's User-Id), if any."""
    try:
        return frame.get("User-Id") or None
    except (zmq.ZMQError, KeyError):
        return None


def _alive(pid: int | None) -> bool:
    """Is the (adopted) job's ``mpiexec`` still running?"""
    if not pid:
        return False
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _policy(make, name: str, params: dict[str, Any] | None):
    """A policy from the registry; unknown parameters become a ValueError naming the policy."""
    try:
        return make(name, **(params or {}))
    except TypeError as e:
        raise ValueError(f"policy {name!r}: bad parameters {params}: {e}") from None


class Daemon:
    poll_all_up_to = 64  # with more running jobs, the kernel names the exited ones (:meth:`_exited`)

    def __init__(self, state_dir: str, endpoint: str = DEFAULT_ENDPOINT, pool: Pool | None = None,
                 app: str = "easy", remap: str = "reshape", tick: float = 0.1,
                 workdir: str | None = None, app_params: dict[str, Any] | None = None,
                 remap_params: dict[str, Any] | None = None, node_timeout: float = 5.0,
                 require_monitors: bool = False, keys: str | None = None, launcher: str | None = None,
                 slurm_grow: dict[str, float] | None = None, overtime: float = 30.0, listen: bool = False,
                 dashboard: str | None = None):
        """``listen``: bind the endpoint (:meth:`listen`), and the dashboard's address when
        ``dashboard`` is given, before creating anything in ``state_dir``."""
        # policies and keys first: a bad name, parameter or key fails before anything is created
        app_pol, remap_pol = _policy(app_policy, app, app_params), _policy(remap_policy, remap, remap_params)
        if not node_timeout > 0:
            raise ValueError(f"node timeout must be > 0 seconds, got {node_timeout}")
        if not 0 <= overtime < float("inf"):
            raise ValueError(f"overtime must be >= 0 seconds, got {overtime}")
        self.overtime = overtime
        self.dashboard_bind = dashboard
        if dashboard is not None:
            parse_bind(dashboard)  # a bad address fails before anything is created
        self.keys_dir = keys_dir_for(endpoint, keys)
        self.server_keys = load_server_keys(self.keys_dir) if self.keys_dir else None
        self.keys_dir = os.path.abspath(self.keys_dir) if self.keys_dir else None
        self.endpoint = endpoint
        self.gate: Gatekeeper | None = None
        self._ctx: zmq.Context | None = None
        self._sock: zmq.Socket | None = None
        self.dash: Dashboard | None = None
        if listen:
            self.listen()
            if dashboard is not None:
                self._bind_dashboard()
        self.state_dir = os.path.abspath(state_dir)
        os.makedirs(os.path.join(self.state_dir, "logs"), exist_ok=True)
        self.tick_every = tick
        self.workdir = workdir or os.getcwd()
        self.journal = Journal(os.path.join(self.state_dir, "journal.sqlite"))
        jobs, meta = self.journal.load()
        self.pool_source = "the pool given (--config or --slots)"
        self.slurm: SlurmEdge | None = None
        self.broker: Broker | None = None
        if slurm_grow is not None:
            try:
                pool, self.broker, self.slurm, self.pool_source = growing_pool(slurm_grow)
            except SlurmError as e:
                raise ValueError(str(e)) from None
        elif pool is None and os.environ.get("SLURM_JOB_NODELIST"):
            pool = allocation_pool()
            self.pool_source = f"Slurm allocation {os.environ.get('SLURM_JOB_ID', '?')}"
        if pool is None:
            pool = default_pool(meta.get("slots"))
            self.pool_source = "this machine"
        self.state = ClusterState(pool, app_pol, remap_pol, node_timeout, require_monitors)
        self.launcher, why = choose(launcher or pool.launcher, [n.host for n in pool.nodes])
        if not launcher and pool.launcher:
            why = "named in the pool config"
        self.launcher_why = why
        if self.broker is not None:
            for h in sorted(pool.down):
                self.state.not_ours(h, "held by Slurm, not by this job")
        self.params = {"app": dict(app_params or {}), "remap": dict(remap_params or {})}
        now = time.time()
        self.state.restore_nodes(self.journal.load_nodes(), now)
        self.state.restore(jobs, meta.get("next_id", 1))
        for j in self.state.running():
            if j.sid is None:  # the previous daemon died between allocating and recording the launch
                kill_job(job_tag(self.state_dir, j.job_id), grace=0.5)  # in case it was launched
                self.state.exited(j.job_id, None, now, "daemon restarted before the job was launched")
        self.procs: dict[int, subprocess.Popen] = {}
        self._reap: list[subprocess.Popen] = []  # killed jobs' mpiexec not yet reaped
        self._strays: queue.SimpleQueue[str | None] = queue.SimpleQueue()  # tags for the reaper thread
        self.served = 0
        self._told_errors = 0  # policy errors already printed
        self.max_gap = 0.0  # longest time between two turns of the loop (seconds)
        self.service = ServiceWindow(8192)  # seconds, recv -> reply, of the last 8,192 requests
        self.latency = LatencyHistogram()  # every request since the start (the dashboard's /metrics)
        self.loop = LoopStats()  # where the loop's time goes (status -> daemon.loop)
        self.recent_events: collections.deque[dict[str, Any]] = collections.deque(maxlen=DASH_EVENTS)
        self.resize_counts = {"expand": 0, "shrink": 0}  # confirmed resizes since the start
        self._dash_stats: tuple[float, dict[str, Any]] = (0.0, {})  # (when, service_stats()) for the dashboard
        self.stopping = False
        self.kill_on_stop = False  # ``stop --kill-jobs``: nothing may be left running, nothing launched
        self._last_adopted_check = 0.0
        self.warnings: list[str] = [f"journal record set aside (table quarantine): {q}"
                                    for q in self.journal.quarantined]
        self.slurm_error: str | None = None  # the last failed Slurm command (status shows it)
        self.slurm_notes: collections.deque[str] = collections.deque(maxlen=10)  # requests and cancels
        if self.keys_dir:
            try:
                load_client_keys(self.keys_dir)
            except ValueError as e:
                self.warnings.append(f"jobs will not reach the daemon: {e}")

    def slurm_step(self, now: float) -> list:
        """Apply what the Slurm thread saw and did; queue the operations the broker decides."""
        assert self.slurm is not None and self.broker is not None
        b, s, view, acts = self.broker, self.state, None, []
        while True:
            try:
                msg = self.slurm.inbox.get_nowait()
            except queue.Empty:
                break
            if msg[0] == "view":
                view = msg
            elif msg[0] == "submitted":
                b.submitted(msg[1], msg[2])
                if msg[3]:
                    self.slurm_error = msg[3]
            elif msg[0] == "error":
                self.slurm_error = msg[1]
        if view is None:
            return acts
        node_slots = max(n.slots for n in s.pool.nodes)
        grow = s.would_grow(node_slots * view[2], now) if view[2] else {}
        grow_nodes = max((-(-(k - s.pool.free) // node_slots) for k in grow.values()), default=0)
        running = [(j.job_id, j.nprocs, j.desc.get("min_procs", 1), list(j.hosts))
                   for j in s.running() if j.desc["resizable"]]
        used = {h: s.pool.used[h] for h in b.held}
        for op in b.step(now, view[1], view[2], used, grow_nodes, running):
            if isinstance(op, Grant):
                acts += s.node_granted(op.host, now, f"granted by Slurm job {op.job} in {op.waited:.1f} s")
            elif isinstance(op, Lost):
                acts += s.node_down(op.host, now, op.why)
            elif isinstance(op, Release):
                if s.node_released(op.host, now, f"released to Slurm: {op.why}"):
                    b.released(op.host)
                    kept = b.kept(op.job)
                    self.slurm.outbox.put(("keep", op.job, kept) if kept else ("cancel", op.job))
            elif isinstance(op, Cancel):
                self.slurm.outbox.put(("cancel", op.job))
                self.slurm_notes.append(f"{time.strftime('%H:%M:%S')} expander job {op.job} cancelled: {op.why}")
                print(f"reshape daemon: {self.slurm_notes[-1]}", flush=True)
            elif isinstance(op, Drain):
                s.pool.set_draining(op.host, op.on)
            elif isinstance(op, AskShrink):
                s.request_shrink(op.job_id, op.nprocs, op.why, now)
            elif isinstance(op, Submit):
                self.slurm.outbox.put(("submit", op.nodes))
                self.slurm_notes.append(f"{time.strftime('%H:%M:%S')} asked Slurm for {op.nodes} node(s)")
        return acts

    # ------------------------------------------------------------------ paths
    def log_path(self, job_id: int) -> str:
        return os.path.join(self.state_dir, "logs", f"job-{job_id}.log")

    def exit_path(self, job_id: int) -> str:
        return os.path.join(self.state_dir, "logs", f"job-{job_id}.exit")

    # ------------------------------------------------------------------ message handling
    def handle(self, frame: bytes, now: float, who: str | None = None,
               reads: list[P.Message] | None = None) -> tuple[P.Message | None, list]:
        """One request frame from ``who`` -> (reply, actions). Never raises on bad input.

        ``who``: the authenticated sender (``uid:N`` on an ``ipc://`` endpoint, ``key:NAME`` with
        CURVE), or None on an endpoint without authentication (loopback TCP: every local user
        is trusted there). :meth:`_check_access` says who may do what. ``reads``: a read-only
        request (:data:`READS`) is appended there and answered later (:meth:`answer`), reply None."""
        try:
            msg = P.decode(frame)
        except P.ProtocolError as e:
            return P.error_reply(e.code, e.message, e.seq if e.seq and e.seq > 0 else 0), []
        if msg.type in P.REPLY_TYPES:
            return P.error_reply("unexpected", f"{msg.type!r} is a reply type", msg.seq, msg.job_id), []
        if reads is not None and msg.type in READS:
            reads.append(msg)
            return None, []
        return self.answer(msg, now, who, frame)

    def answer(self, msg: P.Message, now: float, who: str | None = None,
               frame: bytes = b"") -> tuple[P.Message, list]:
        """The reply to a decoded request and its actions (see :meth:`handle`)."""
        t0 = time.perf_counter()
        try:
            self._check_access(msg, who)
            return self._dispatch(msg, now, who)
        except StateError as e:
            return P.error_reply(e.code, e.message, msg.seq, msg.job_id), []
        except JobFileError as e:
            return P.error_reply("bad_job", str(e), msg.seq, msg.job_id), []
        except Exception as e:  # a bug must cost one request, never the daemon
            print(f"reshape daemon: internal error on {frame[:300] or msg!r}:\n{traceback.format_exc()}",
                  file=sys.stderr, flush=True)
            return P.error_reply("internal", f"{type(e).__name__}: {e}", msg.seq, msg.job_id), []
        finally:
            self.loop.request(msg.type, time.perf_counter() - t0)

    @staticmethod
    def _encode(rep: P.Message) -> bytes:
        """The reply's frame; a reply that cannot be encoded becomes an ``internal`` error (logged)."""
        try:
            return P.encode(rep)
        except (ValueError, TypeError) as e:
            print(f"reshape daemon: cannot encode reply {str(rep)[:300]}: {e}", file=sys.stderr, flush=True)
            seq = rep.seq if isinstance(rep.seq, int) and rep.seq >= 0 else 0
            return P.encode(P.error_reply("internal", f"reply not encodable: {e}", seq))

    @staticmethod
    def run_as(j) -> int | None:
        """The uid to run a job as: its owner's, when the daemon runs as root and the owner is a
        local user other than root (a CURVE key names no local account: the daemon's user)."""
        if os.geteuid() != 0 or not (j.owner or "").startswith("uid:"):
            return None
        uid = int(j.owner[4:])
        return uid or None

    def is_admin(self, who: str | None) -> bool:
        """Unauthenticated endpoints trust everyone; else root, the daemon's own user, and CURVE keys
        other than per-user (``user-*``) and per-node (``node-*``) ones (the cluster's shared keys)."""
        if who is None:
            return True
        if who.startswith("uid:"):
            return who[4:] in ("0", str(os.geteuid()))
        return who.startswith("key:") and not who[4:].startswith(("user-", "node-"))

    def _check_access(self, msg: P.Message, who: str | None) -> None:
        """Ownership (docs/cluster.md, "Access"): a job's owner or an admin may cancel it, read its
        log and speak for it; only an admin stops the daemon; only an admin or that node's key
        (``node-HOST``) speaks for a node. Anyone authenticated may submit, ping, and read status."""
        if self.is_admin(who):
            return
        t, b = msg.type, msg.body
        if t in ("submit", "ping", "status", "history"):
            return
        if t == "stop":
            raise StateError("forbidden", f"{who} may not stop the daemon (an admin may: root or the daemon's user)")
        if t in P.NODE_TYPES:
            if who == f"key:node-{b.get('node')}":
                return
            raise StateError("forbidden", f"{who} may not speak for node {b.get('node')!r} (its node key may)")
        jid = b.get("job_id") if t in ("cancel", "log") else msg.job_id
        j = self.state.jobs.get(jid) if jid is not None else None
        if j is not None and j.owner != who:
            raise StateError("forbidden", f"job {jid} belongs to {j.owner or 'nobody known'}, not {who}")

    def _dispatch(self, msg: P.Message, now: float, who: str | None = None) -> tuple[P.Message, list]:
        s, b, jid = self.state, msg.body, msg.job_id
        t = msg.type
        if t == "resize_point":
            adv = s.resize_point(jid, b, now)
            return P.reply(msg, "advice", action=adv.action, nprocs=adv.nprocs,
                           hosts=list(adv.hosts), reason=adv.reason), []
        if t == "hello":
            s.hello(jid, b["nprocs"], now, b.get("sizes"))
            return P.reply(msg), []
        if t == "resized":
            acts = s.resized(jid, b["old"], b["new"], b["seconds"], b.get("error"), now)
            return P.reply(msg), acts
        if t == "finished":
            s.finished(jid, b["status"], b.get("error"), now)
            return P.reply(msg), []
        if t == "heartbeat":
            s.node_heartbeat(b["node"], b["incarnation"], b.get("jobs", []), now)
            return P.reply(msg), []
        if t == "node_register":
            acts = s.node_register(b["node"], b["incarnation"], now,
                                   {k: b[k] for k in ("pid", "host") if k in b})
            beat = min(5.0, max(0.05, s.node_timeout / 4))
            return P.reply(msg, node=b["node"], heartbeat=beat, timeout=s.node_timeout,
                           tag=job_tag(self.state_dir, 0)[:-1]), acts
        if t == "job_ended":
            s.job_ended(jid, b["node"], b["status"], b.get("detail"), now)
            return P.reply(msg), []
        if t == "ping":
            return P.reply(msg, now=now, version=P.VERSION), []
        if t == "submit":
            desc = validate_job(b["job"], s.pool.capacity)
            job_id = s.submit(desc, now, owner=who)
            # a job that cannot start now (not the head, its smallest size above the free slots) waits
            # for the next tick's pass: a submission costs no pass over a full machine (10,000 queued jobs)
            return P.reply(msg, job_id=job_id), s.tick(now) if s.pass_needed(job_id) else []
        if t == "status":
            page = b.get("limit")  # pages running, queued and waiting jobs alike
            return P.reply(msg, now=now, daemon=self.service_stats(loop=True), **s.status(now, page, page)), []
        if t == "cancel":
            acts = s.cancel(b["job_id"], now)
            return P.reply(msg, job_id=b["job_id"]), acts
        if t == "history":
            return P.reply(msg, **self._history(now, b.get("limit"), b.get("since"))), []
        if t == "log":
            return P.reply(msg, job_id=b["job_id"], text=self._log_tail(b["job_id"], b.get("tail", 200))), []
        if t == "stop":
            self.stopping = True
            self.kill_on_stop = self.kill_on_stop or bool(b.get("kill_jobs"))
            return P.reply(msg), []
        raise StateError("unknown_type", t)  # unreachable: decode knows every type

    def _history(self, now: float, limit: int | None, since: float | None) -> dict[str, Any]:
        """Jobs with their events: all, or the last ``limit`` jobs, or those active at or after the
        time ``since`` (both: the last ``limit`` of those); node events likewise from ``since``."""
        s = self.state
        sel = [j for j in s.jobs.values() if since is None or j.end_time is None or j.end_time >= since]
        if limit is not None:
            sel = sorted(sel, key=lambda j: j.job_id)[-limit:] if limit else []
        ids = {j.job_id for j in sel}
        events = [e for e in self.journal.history() + s.events
                  if e["job_id"] in ids and (since is None or e["t"] >= since)]
        nodes = [e for e in self.journal.node_history() + s.node_events if since is None or e["t"] >= since]
        jobs = [{k: v for k, v in j.to_dict().items() if k != "desc"} | {"name": j.desc["name"],
                 "requested": j.desc["nprocs"], "arrival_time": j.arrival_time} for j in sel]
        return {"total_slots": s.pool.capacity, "now": now, "jobs": jobs, "events": events,
                "node_events": nodes, "jobs_total": len(s.jobs)}

    def _last_words(self, job_id: int, rc: int) -> str | None:
        """A failed job's reason when it reported none: its exit code and the error its log ends with."""
        if rc == 0:
            return None
        try:
            with open(self.log_path(job_id), "rb") as f:
                f.seek(0, os.SEEK_END)
                f.seek(max(0, f.tell() - 8192))
                lines = [ln.strip() for ln in f.read().decode("utf-8", "replace").splitlines() if ln.strip()]
        except OSError:
            return None
        errors = [ln for ln in lines if _ERROR_LINE.match(ln)]
        last = (errors or lines or [""])[-1]
        return f"exit code {rc}: {last[:200]}" if last else None

    def _log_tail(self, job_id: int, tail: int) -> str:
        if job_id not in self.state.jobs:
            raise StateError("unknown_job", f"no job {job_id}")
        try:
            with open(self.log_path(job_id), "rb") as f:
                f.seek(0, os.SEEK_END)
                f.seek(max(0, f.tell() - 32768))
                lines = f.read().decode("utf-8", "replace").splitlines()
        except FileNotFoundError:
            return ""
        return "\n".join(lines[-tail:] if tail else lines)

    # ------------------------------------------------------------------ actions (I/O edge)
    def perform(self, actions: list, now: float) -> None:
        kills = [a.job_id for a in actions if isinstance(a, Kill)]
        if kills:  # all at once: one grace period, whatever the number of jobs
            kill_jobs([job_tag(self.state_dir, jid) for jid in kills])
            self._strays.put("")  # and sweep, off the loop, what ranks killed earlier left
            for jid in kills:
                p = self.procs.pop(jid, None)
                if p:  # reap it; a stray one is reaped by the System Monitor's poll later
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        p.wait(timeout=1.0)
                    if p.returncode is None:
                        self._reap.append(p)
        pending = [a for a in actions if isinstance(a, Launch)]
        while pending:
            a = pending.pop(0)
            if isinstance(a, Launch):
                j = self.state.jobs[a.job_id]
                if j.state != "running" or j.job_id in self.procs:
                    continue  # cancelled in the same batch, before its launch
                desc = j.desc
                if self.keys_dir:  # what the job's client needs to authenticate
                    desc = {**desc, "env": {**desc.get("env", {}), ENV_KEYS: self.keys_dir}}
                try:
                    p = start_job(j.job_id, desc, j.hosts, job_endpoint(self.endpoint), self.launcher,
                                  self.log_path(j.job_id), job_tag(self.state_dir, j.job_id),
                                  cwd=self.workdir, exit_path=self.exit_path(j.job_id), run_as=self.run_as(j))
                except (OSError, ValueError) as e:  # ValueError: what the OS cannot take (e.g. NUL)
                    pending += self.state.exited(j.job_id, 127, now, f"cannot start: {e}")
                    continue
                self.procs[j.job_id] = p
                self.state.launched(j.job_id, p.pid)

    def monitor(self, now: float) -> list:
        """System Monitor: jobs whose processes ended give their slots back.

        Killing a crashed job's stray ranks needs process-table scans (tens of
        milliseconds, more when ``/proc`` reads stall); the reaper thread does
        them so the loop keeps answering requests.
        """
        acts: list = []
        self._reap = [p for p in self._reap if p.poll() is None]
        for jid in self._exited():
            rc = self.procs[jid].returncode
            del self.procs[jid]
            self._strays.put(job_tag(self.state_dir, jid))  # stray ranks of a crashed job
            j = self.state.jobs.get(jid)
            acts += self.state.exited(jid, rc, now, self._last_words(jid, rc) if j and not j.error else None)
        acts += self.state.check_nodes(now)
        acts += self.state.check_resizes(now)
        acts += self.state.expire(now, self.overtime)
        for j in self.state.running():
            r = j.node_report
            if r is None:
                continue
            if j.job_id not in self.procs:  # not our child (adopted): the monitor's word settles it
                acts += self.state.ended_on_node(j.job_id, now)
            elif now - r["t"] > MONITOR_GRACE:  # our mpiexec should have exited by now
                acts += self.state.ended_on_node(
                    j.job_id, now, f"its processes on {r['node']} ended, mpiexec did not exit within "
                                   f"{MONITOR_GRACE:.0f} s")
        if now - self._last_adopted_check >= 0.5:
            self._last_adopted_check = now
            for j in self.state.running():
                # sid None: started by this daemon in this batch, not launched yet
                if j.job_id not in self.procs and j.sid is not None and not _alive(j.sid):
                    self._strays.put(job_tag(self.state_dir, j.job_id))
                    # adopted: not our child, but its wrapper wrote how it ended (None: killed)
                    acts += self.state.exited(j.job_id, read_exit_status(self.exit_path(j.job_id)), now)
        return acts

    def _exited(self) -> list[int]:
        """Jobs whose ``mpiexec`` exited (reaped here). Few jobs: each is polled; many: the kernel
        says which children exited (``waitid`` without reaping), so a tick costs the jobs that ended,
        not every running job; a child that is not a job's ``mpiexec`` falls back to polling all."""
        if len(self.procs) > self.poll_all_up_to and hasattr(os, "waitid"):
            by_pid = {p.pid: jid for jid, p in self.procs.items()}
            out: list[int] = []
            while True:
                try:
                    info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
                except ChildProcessError:
                    return out
                if info is None:
                    return out
                jid = by_pid.get(info.si_pid)
                if jid is None or jid in out or self.procs[jid].poll() is None:
                    break  # not a job's mpiexec (or not reaped): poll them all
                out.append(jid)
        return [jid for jid, p in self.procs.items() if p.poll() is not None]

    def _on_sigterm(self, *_) -> None:
        """Stop; growing through Slurm, the allocation is ending (scancel): the jobs end with it."""
        self.stopping = True
        if self.broker is not None:
            self.kill_on_stop = True

    def batch_actions(self, acts: list, now: float, tick: bool) -> list:
        """The actions a batch of requests ends with: its own, plus the System Monitor's and
        the scheduler's when a tick is due. A stopping daemon schedules nothing; after
        ``stop --kill-jobs`` every job allocated so far, launched or not, is ended and
        nothing is launched (a queued job must not start on the slots the kills free)."""
        if self.kill_on_stop:
            acts = [a for a in acts if not isinstance(a, Launch)]
            for j in self.state.running():
                acts += self.state.cancel(j.job_id, now, reschedule=False)
            return acts
        if tick and not self.stopping:
            acts += self.monitor(now)
            acts += self.state.tick(now)
            if self.slurm is not None:
                acts += self.slurm_step(now)
        return acts

    def _reaper(self) -> None:
        while (tag := self._strays.get()) is not None:
            with contextlib.suppress(Exception):
                if tag:  # "": only the sweep
                    kill_job(tag, grace=0.5)
                sweep_ipc()  # shared memory of ranks killed before anyone could collect it

    def flush(self) -> None:
        s = self.state
        new = s.policy_error_count - self._told_errors  # decisions the core skipped: say so once each
        for msg in list(s.policy_errors)[-new:] if new > 0 else []:
            print(f"reshape daemon: policy error (decision skipped): {msg}", file=sys.stderr, flush=True)
        self._told_errors = s.policy_error_count
        jobs = [s.jobs[i] for i in sorted(s.dirty)]
        meta = {"next_id": s.next_id, "slots": s.pool.capacity}
        nodes = [s.nodes[h] for h in sorted(s.dirty_nodes)]
        self.journal.save(jobs, s.events, meta, nodes, s.node_events)
        for e in s.events:
            if e["kind"] in self.resize_counts:
                self.resize_counts[e["kind"]] += 1
        if self.dash is not None:
            self.recent_events.extend(s.events)
        s.dirty.clear()
        s.events = []
        s.dirty_nodes.clear()
        s.node_events = []

    # ------------------------------------------------------------------ loop
    def listen(self) -> None:
        """Bind the daemon's socket; OSError saying why when the endpoint is taken or unusable.

        ``reshape daemon`` calls this (``listen=True``) before anything is written to the state
        directory, so a second daemon on a busy endpoint leaves no trace; :meth:`serve` otherwise.
        """
        ctx = zmq.Context()
        sock = ctx.socket(zmq.ROUTER)
        sock.setsockopt(zmq.MAXMSGSIZE, HARD_MAX_BYTES)
        sock.setsockopt(zmq.LINGER, 1000)
        sock.setsockopt(zmq.ROUTER_MANDATORY, 0)
        local = self.endpoint.startswith("ipc://")
        try:
            if local:
                _claim_socket(self.endpoint[len("ipc://"):])
            if self.server_keys is not None or local:  # CURVE keys, or the kernel's word on local peers
                self.gate = Gatekeeper(ctx, sock, self.server_keys)
            sock.bind(self.endpoint)
        except (OSError, zmq.ZMQError) as e:
            if self.gate is not None:
                self.gate.close()
                self.gate = None
            sock.close(linger=0)
            ctx.term()
            why = "address already in use (another daemon? stop it, or choose another --endpoint)" \
                if getattr(e, "errno", None) == zmq.EADDRINUSE else str(e)
            raise OSError(f"cannot listen on {self.endpoint}: {why}") from None
        if local and self.server_keys is None:  # every local user may connect, and is identified
            with contextlib.suppress(OSError):
                os.chmod(self.endpoint[len("ipc://"):], 0o666)
        self._ctx, self._sock = ctx, sock

    def serve(self) -> None:
        """The loop: a batch of requests -> one journal commit -> the replies -> launches.

        Kills (cancel, ``stop --kill-jobs``) are done before the reply, so a
        cancelled job is gone when its requester hears back; launches (a fork
        and exec each) after the replies, so nobody waits for them. The state
        they depend on (allocations) is committed before any reply; their
        session ids are committed after. ``SIGUSR1`` dumps every thread's stack
        to the daemon's stderr (for a daemon that seems stuck).
        """
        if self._sock is None:
            self.listen()
        ctx, sock = self._ctx, self._sock
        if self.dashboard_bind is not None:
            if self.dash is None:
                self._bind_dashboard()
            self._start_dashboard()
        with open(os.path.join(self.state_dir, "daemon.pid"), "w") as f:
            f.write(f"{os.getpid()}\n{self.endpoint}\n")
        signal.signal(signal.SIGTERM, self._on_sigterm)
        with contextlib.suppress(ValueError, OSError, AttributeError):
            faulthandler.register(signal.SIGUSR1, file=sys.stderr, all_threads=True)
        reaper = threading.Thread(target=self._reaper, name="reaper", daemon=True)
        reaper.start()
        if self.slurm is not None:
            self.slurm.start()
        now = time.time()
        # settle jobs that ended while no daemon ran before the first reply, then schedule
        self.perform(self.monitor(now) + self.state.tick(now), now)
        self.flush()
        last_tick = last_loop = now
        gc.freeze()  # startup objects are never garbage: keep them out of the collector's scans
        frozen_jobs = len(self.state.jobs)
        clock = time.perf_counter
        stats = self.loop
        stats.watch_gc()
        try:
            while not self.stopping:
                replies: list[tuple[bytes, bytes, float]] = []
                deferred: list[tuple[bytes, P.Message, str | None, float]] = []
                acts: list = []
                if sock.poll(int(self.tick_every * 1000)):
                    t0 = clock()
                    stats.begin()
                    handled = 0.0
                    reads: list[P.Message] = []
                    for _ in range(512):
                        try:
                            parts = sock.recv_multipart(zmq.NOBLOCK, copy=False)
                        except zmq.Again:
                            break
                        t_in = clock()
                        now = time.time()
                        who = _user_id(parts[-1]) if self.gate is not None else None
                        frames = [f.bytes for f in parts]
                        if len(frames) != 2:
                            rep, a = P.error_reply("malformed", "expected exactly one frame per message"), []
                        else:
                            rep, a = self.handle(frames[1], now, who, reads)
                        handled += clock() - t_in
                        if rep is None:  # read-only: answered after the others, below
                            deferred.append((frames[0], reads.pop(), who, t_in))
                            continue
                        replies.append((frames[0], self._encode(rep), t_in))
                        acts += a
                    t1 = clock()
                    stats.add("handle", handled)
                    stats.add("recv", t1 - t0 - handled)
                else:
                    t0 = t1 = clock()
                    stats.begin()
                now = time.time()
                self.max_gap = max(self.max_gap, now - last_loop)
                last_loop = now
                tick = now - last_tick >= self.tick_every
                if tick:
                    last_tick = now
                acts = self.batch_actions(acts, now, tick)
                t2 = clock()
                stats.add("tick", t2 - t1)
                kills = [a for a in acts if isinstance(a, Kill)]
                if kills:
                    self.perform(kills, now)
                t3 = clock()
                stats.add("kill", t3 - t2)
                self.flush()  # group commit: everything acknowledged below is on disk
                t4 = clock()
                stats.add("commit", t4 - t3)
                for ident, data, t_in in replies:
                    with contextlib.suppress(zmq.ZMQError):  # the peer went away
                        sock.send_multipart([ident, data], zmq.NOBLOCK)
                    self.service.append(dt := clock() - t_in)
                    self.latency.observe(dt)
                for ident, msg, who, t_in in deferred:  # status, history, log: after everyone else
                    rep, _ = self.answer(msg, time.time(), who)
                    data = self._encode(rep)
                    with contextlib.suppress(zmq.ZMQError):
                        sock.send_multipart([ident, data], zmq.NOBLOCK)
                    self.service.append(dt := clock() - t_in)
                    self.latency.observe(dt)
                self.served += len(replies) + len(deferred)
                t5 = clock()
                stats.add("send", t5 - t4)
                launches = [a for a in acts if isinstance(a, Launch)]
                if launches:
                    self.perform(launches, now)
                    self.flush()
                t6 = clock()
                stats.add("launch", t6 - t5)
                self.journal.idle(force=bool(replies or deferred))  # rewind the WAL when nobody waits
                t7 = clock()
                stats.add("wal", t7 - t6)
                if len(self.state.jobs) >= frozen_jobs + FREEZE_EVERY:
                    # jobs are kept for the daemon's life: out of the collector's full scans, which cost
                    # ~20 ms of the loop at 10,000 queued jobs and ~100 ms at 50,000 (benchmarks.scale)
                    gc.freeze()
                    frozen_jobs = len(self.state.jobs)
                t8 = clock()
                stats.add("freeze", t8 - t7)
                if self.dash is not None and self.dash.due(now):
                    self.publish_dashboard(now)
                t9 = clock()
                stats.add("dashboard", t9 - t8)
                if replies or deferred or tick:  # not a poll that timed out between two ticks
                    stats.end(t9 - t0, len(replies) + len(deferred))
        finally:
            stats.unwatch_gc()
            self.flush()
            if self.dash is not None:
                self.dash.close()
            if self.gate is not None:
                self.gate.close()
            sock.close(linger=500)
            ctx.term()
            self._strays.put(None)
            reaper.join(timeout=3.0)
            if self.slurm is not None:  # expanders outlive a daemon only while jobs run on them
                self.slurm.stop(cancel_expanders=self.kill_on_stop or not self.state.running())
            self.journal.close()
            # running jobs keep running: a restarted daemon adopts them

    def _bind_dashboard(self) -> None:
        """Bind the dashboard's address (nothing is written yet); a taken or bad one fails naming it,
        and the daemon's own socket is closed again."""
        try:
            # the protocol's rule (docs/protocol.md, "Access"): beyond loopback or with keys, authenticate
            self.dash = Dashboard(self.dashboard_bind, require_token=self.keys_dir is not None)
        except OSError as e:
            if self.gate is not None:
                self.gate.close()
                self.gate = None
            if self._sock is not None:
                self._sock.close(linger=0)
                self._ctx.term()
                self._ctx = self._sock = None
            why = "address already in use" if e.errno == errno.EADDRINUSE else (e.strerror or str(e))
            raise OSError(e.errno, f"cannot serve the dashboard on {self.dashboard_bind}: {why}") from None

    def _start_dashboard(self) -> None:
        """The dashboard's first snapshot, its token file (if any) and its thread."""
        assert self.dash is not None
        self.recent_events.extend(self.journal.history()[-DASH_EVENTS:])
        self.publish_dashboard(time.time())
        self.dash.start(self.state_dir)
        where = f"token in {self.dash.token_path}" if self.dash.token else "loopback only"
        print(f"reshape daemon: dashboard on {self.dash.url} ({where}); Prometheus metrics at "
              f"{self.dash.url}metrics", flush=True)

    def publish_dashboard(self, now: float) -> None:
        """A new snapshot for the dashboard's readers (built here, in the loop: the core is not shared)."""
        assert self.dash is not None
        info = {"endpoint": self.endpoint, "app": self.state.app.name, "remap": self.state.remap.name,
                "pool": self.pool_source}
        if now - self._dash_stats[0] >= 5.0:  # sorting 8192 service times takes a millisecond of the loop
            self._dash_stats = (now, self.service_stats())
        self.dash.publish(snapshot(self.state, self.recent_events, now, self._dash_stats[1], self.latency,
                                   self.resize_counts, info))

    def service_stats(self, loop: bool = False) -> dict[str, Any]:
        """Requests served and the service time (request received -> reply sent) of recent ones;
        ``loop``: with the loop's statistics (:class:`scheduler.service.loopstats.LoopStats`)."""
        got = self.service.stats()
        access = {"auth": "curve" if self.gate else "none", "refused": self.gate.refused if self.gate else 0,
                  "max_loop_gap_ms": round(1e3 * self.max_gap, 1),
                  "policy_errors": self.state.policy_error_count,
                  "late_starts": self.state.late_start_count, "walltime_kills": self.state.walltime_kills,
                  "last_policy_errors": list(self.state.policy_errors)[-3:]}
        if loop:
            access["loop"] = self.loop.to_dict()
        if self.slurm is not None:
            access["slurm"] = {"notes": list(self.slurm_notes), "error": self.slurm_error}
        if got is None:
            return {"served": self.served, "window": 0, "p50_ms": None, "p99_ms": None, "max_ms": None} | access
        return {"served": self.served, "window": len(self.service), "p50_ms": 1e3 * got[0], "p99_ms": 1e3 * got[1],
                "max_ms": 1e3 * got[2]} | access

    def describe(self) -> dict[str, Any]:
        return {"endpoint": self.endpoint, "state_dir": self.state_dir, "pool": self.pool_source,
                "launcher": self.launcher.name, "launcher_why": self.launcher_why,
                "slots": self.state.pool.capacity, "app": self.state.app.name,
                "remap": self.state.remap.name, "params": self.params,
                "keys": self.keys_dir, "node_timeout": self.state.node_timeout, "warnings": self.warnings}
