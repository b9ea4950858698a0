"""The scheduler daemon: a ZeroMQ ROUTER loop around :class:`scheduler.core.state.ClusterState`.

One turn of the loop: a batch of requests is decoded into typed events and
answered through the handler table (``scheduler.daemon.handlers``); the
periodic work that is due runs (the System Monitor's poll, the scheduler's
tick, the resource manager's step: ``scheduler.daemon.periodic``); kills
are performed; one journal commit; the replies go out; launches are performed.
The edges are parts of their own: the jobs' processes
(``scheduler.daemon.supervisor``), the nodes (a resource manager,
``scheduler.rm``), the journal, the dashboard. When the daemon listens beyond
loopback (or is given keys), every peer must authenticate with CURVE
(``reshape.joblink.auth``, ``scheduler.daemon.gatekeeper``); on loopback TCP without keys
the kernel names each sender's uid, and connections are limited per user
(``scheduler.daemon.peers``). The state directory is checked before use and kept private
(``scheduler.daemon.statedir``).
"""

from __future__ import annotations

import collections
import contextlib
import errno
import faulthandler
import gc
import os
import signal
import sys
import time
from dataclasses import dataclass, field
from typing import Any

import zmq

from reshape.joblink import protocol as P
from reshape.joblink.auth import ACCOUNTS_FILE, keys_dir_for, load_client_keys, load_server_keys
from reshape.joblink.launchers import choose, is_local
from scheduler.core.job import FINAL
from scheduler.core.kills import awaited
from scheduler.core.policy import app_policy, remap_policy
from scheduler.core.pool import Pool
from scheduler.core.state import ClusterState, Kill, Launch
from scheduler.daemon import statedir
from scheduler.daemon.accounts import Accounts
from scheduler.daemon.endpoint import DEFAULT_ENDPOINT, bind, job_endpoint, user_id
from scheduler.daemon.gatekeeper import Gatekeeper
from scheduler.daemon.handlers import READS, Quota, answer
from scheduler.daemon.journal import Journal
from scheduler.daemon.periodic import Periodic
from scheduler.daemon.retention import PRUNE_EVERY, JobLimits, Retention
from scheduler.daemon.supervisor import ON_NODES, Supervisor
from scheduler.observe.dashboard import Dashboard, parse_bind
from scheduler.observe.dashboard_view import LatencyHistogram, snapshot
from scheduler.observe.loopstats import LoopStats, ServiceWindow
from scheduler.rm.base import ResourceManager
from scheduler.rm.fixed import fixed_pool

__all__ = ["DEFAULT_ENDPOINT", "Daemon", "Settings", "job_endpoint", "mpiexec_on"]

DASH_EVENTS = 5000  # allocation events the dashboard keeps for its charts and decision log
FREEZE_EVERY = 1000  # jobs submitted between two gc.freeze() calls of the loop
BATCH = 512  # requests read in one turn at most
KILL_CONFIRM_GRACE = 3.0  # seconds beyond the node timeout a stop --kill-jobs waits for monitors to confirm kills


def _policy(make, name: str, params: dict[str, Any] | None):
    """A policy from the registry; unknown parameters become a ValueError naming the policy."""
    try:
        return make(name, **(params or {}))
    except TypeError as e:
        raise ValueError(f"policy {name!r}: bad parameters {params}: {e}") from None


def mpiexec_on(chosen: str | None, hosts: list[str]) -> tuple[str, str]:
    """Where jobs' ``mpiexec`` runs (``reshape daemon --mpiexec-on``), and why: as ``chosen``, else on each job's
    first node where the pool has hosts other than this machine (a job then outlives a restart of the head:
    docs/daemon.md, "Failures"), else here (one machine: there is no other node to run it on)."""
    if chosen is not None:
        return chosen, "chosen"
    if any(not is_local(h) for h in hosts):
        return "first-node", "the pool has hosts other than this machine"
    return "head", "every pool host is this machine"


@dataclass(frozen=True)
class Settings:
    """How a daemon schedules and serves (``reshape daemon --help`` documents each)."""

    app: str = "easy"
    remap: str = "reshape"
    app_params: dict[str, Any] = field(default_factory=dict)
    remap_params: dict[str, Any] = field(default_factory=dict)
    tick: float = 0.1  # seconds between two scheduler passes when no request comes
    workdir: str | None = None
    node_timeout: float = 5.0
    require_monitors: bool = False
    keys: str | None = None
    launcher: str | None = None
    overtime: float = 30.0
    dashboard: str | None = None
    checkpoint_root: str | None = None  # where jobs with checkpoint write theirs (default STATE_DIR/checkpoints)
    # "head", or "first-node": run by the job's first node's monitor (supervisor.ON_NODES); None: first-node where
    # the pool has hosts other than this machine, head otherwise (:func:`mpiexec_on`)
    mpiexec_on: str | None = None
    max_peers: int | None = None  # connections held at most (None: endpoint.MAX_PEERS, at most half the file limit)
    max_peers_per_user: int | None = None  # connections one user (not an admin) holds at most
    max_queued_per_user: int = 1000  # queued and waiting jobs one user (not an admin) may have
    submit_rate: float = 20.0  # submissions per second one user (not an admin) may make, on average
    submit_burst: int = 200  # submissions one user may make at once before the rate applies
    accept_users: tuple[str, ...] = ()  # a daemon not running as root: accounts besides its own it runs jobs for
    retain_jobs: int = 10_000  # ended jobs kept in memory (scheduler.daemon.retention)
    retain_days: float = 30.0  # ended jobs kept in the journal, in days (0: for ever)

    def check(self) -> None:
        if not self.node_timeout > 0:
            raise ValueError(f"node timeout must be > 0 seconds, got {self.node_timeout}")
        if not 0 <= self.overtime < float("inf"):
            raise ValueError(f"overtime must be >= 0 seconds, got {self.overtime}")
        for name in ("max_peers", "max_peers_per_user"):
            v = getattr(self, name)
            if v is not None and v < 1:
                raise ValueError(f"{name.replace('_', '-')} must be >= 1, got {v}")
        if self.max_queued_per_user < 1 or self.submit_burst < 1 or not 0 < self.submit_rate < float("inf"):
            raise ValueError(f"per-user limits must be positive: max-queued-per-user {self.max_queued_per_user}, "
                             f"submit-rate {self.submit_rate}, submit-burst {self.submit_burst}")
        if self.retain_jobs < 1 or not 0 <= self.retain_days < float("inf"):
            raise ValueError(f"retain-jobs must be >= 1 and retain-days a number of days >= 0, got "
                             f"{self.retain_jobs} and {self.retain_days}")
        if self.mpiexec_on is not None and self.mpiexec_on not in ON_NODES:
            raise ValueError(f"mpiexec-on must be one of {', '.join(ON_NODES)}, got {self.mpiexec_on!r}")
        if self.dashboard is not None:
            parse_bind(self.dashboard)  # a bad address fails before anything is created


class Daemon:
    def __init__(self, state_dir: str, endpoint: str = DEFAULT_ENDPOINT, pool: Pool | None = None,
                 settings: Settings | None = None, rm: ResourceManager | None = None, listen: bool = False):
        """``pool``: the nodes (else the resource manager's: ``rm``, default :func:`scheduler.rm.fixed.fixed_pool`).
        ``listen``: bind the endpoint (:meth:`listen`), and the dashboard's address when
        ``settings.dashboard`` is given, before creating anything in ``state_dir``."""
        cfg = self.settings = settings or Settings()
        # policies, settings and keys first: a bad name, parameter or key fails before anything is created
        app_pol, remap_pol = _policy(app_policy, cfg.app, cfg.app_params), _policy(remap_policy, cfg.remap,
                                                                                    cfg.remap_params)
        cfg.check()
        self.rm = rm if rm is not None else fixed_pool(pool)
        keys_dir = keys_dir_for(endpoint, cfg.keys)
        self.server_keys = load_server_keys(keys_dir) if keys_dir else None
        self.keys_dir = os.path.abspath(keys_dir) if keys_dir else None
        self.accounts = Accounts(self.server_keys.accounts if self.server_keys else {}, frozenset(cfg.accept_users),
                                 os.path.join(self.keys_dir or "KEYS", ACCOUNTS_FILE))
        self.rm.accounts = self.accounts  # a site controller checks a registration's sender against Slurm
        self.endpoint, self.dashboard_bind = endpoint, cfg.dashboard
        self.gate: Gatekeeper | None = None
        self.quota = Quota(cfg.max_queued_per_user, cfg.submit_rate, cfg.submit_burst)
        self._ctx: zmq.Context | None = None
        self._sock: zmq.Socket | None = None
        self.dash: Dashboard | None = None
        self.state_dir = os.path.abspath(state_dir)
        statedir.check(self.state_dir)  # someone else's, or open to others: refused before anything is bound
        if listen:
            self.listen()
            if cfg.dashboard is not None:
                self._bind_dashboard()
        statedir.prepare(self.state_dir)
        self.journal = Journal(os.path.join(self.state_dir, "journal.sqlite"))
        jobs, meta = self.journal.load()
        pool = self.rm.pool(meta.get("slots"))
        self.state = ClusterState(pool, app_pol, remap_pol, cfg.node_timeout, cfg.require_monitors)
        self.launcher, why = choose(cfg.launcher or self.rm.launcher, [n.host for n in pool.nodes])
        self.launcher_why = "named in the pool config" if not cfg.launcher and pool.launcher else why
        now = time.time()
        self.state.restore_nodes(self.journal.load_nodes(), now)
        self.state.restore(jobs, meta.get("next_id", 1))
        self.rm.attach(self.state.port, now)  # after the journal: the manager reconciles it with what it holds
        self.mpiexec_on, self.mpiexec_on_why = mpiexec_on(cfg.mpiexec_on, [n.host for n in pool.nodes])
        self.supervisor = Supervisor(self.state, self.state_dir, cfg.workdir or os.getcwd(), self.launcher,
                                     job_endpoint(endpoint), self.keys_dir, cfg.overtime, cfg.checkpoint_root,
                                     self.mpiexec_on, self.accounts)
        self.supervisor.settle_unlaunched(now)
        self.retention = Retention(cfg.retain_jobs, cfg.retain_days)
        self.job_limits = JobLimits()  # per job: lost/resized and output (scheduler.daemon.retention)
        self.retention.restored(self.state)  # the journal's oldest ended jobs beyond the count leave memory
        self._init_counters()
        self.warnings: list[str] = [f"journal record set aside (table quarantine): {q}"
                                    for q in self.journal.quarantined]
        if self.keys_dir:
            try:
                load_client_keys(self.keys_dir)
            except ValueError as e:
                self.warnings.append(f"jobs will not reach the daemon: {e}")
            if not self.accounts.keys:
                self.warnings.append(f"no key has a local account ({self.accounts.table}): keys run no job and none "
                                     f"is an admin ('reshape keys --dir {self.keys_dir}' writes the table)")

    def _init_counters(self) -> None:
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
        self._frozen_jobs = 0
        self.periodic = Periodic(self.loop)
        # the scheduler's pass, with the System Monitor's poll and the resource manager's step
        self._tick_task = self.periodic.every(self.settings.tick, "tick", self._tick)
        self.periodic.every(PRUNE_EVERY, "retain", lambda now: self.retention.prune(self.journal, now))

    @property
    def pool_source(self) -> str:
        return self.rm.source

    # ------------------------------------------------------------------ requests
    def handle(self, frame: bytes, now: float, who: str | None = None,
               reads: list[P.Request] | None = None) -> tuple[P.Reply | None, list]:
        """One request frame from ``who`` -> (reply, actions). Never raises on bad input.

        ``who``: the sender (``uid:N`` on an ``ipc://`` endpoint and on loopback TCP, ``key:NAME``
        with CURVE, ``peer:unidentified`` when the daemon cannot tell), or None for a caller in
        this process (trusted); ``scheduler.daemon.handlers`` says who may do what. ``reads``: a read-only
        request (``handlers.READS``) is appended there and answered later (:meth:`answer`), reply None."""
        try:
            ev = P.decode(frame)
        except P.ProtocolError as e:
            return P.error_reply(e.code, e.message, e.seq if e.seq and e.seq > 0 else 0), []
        if not isinstance(ev, P.Request):
            return P.error_reply("unexpected", f"{ev.type!r} is a reply type", ev.seq, ev.job_id), []
        if reads is not None and ev.type in READS:
            reads.append(ev)
            return None, []
        return answer(self, ev, now, who, frame)

    @staticmethod
    def _encode(rep: P.Reply) -> bytes:
        """The reply's frame; a reply that cannot be encoded becomes an ``internal`` error (logged)."""
        try:
            return P.encode(rep)
        except (ValueError, TypeError) as e:
            print(f"reshape daemon: cannot encode reply {str(rep)[:300]}: {e}", file=sys.stderr, flush=True)
            seq = rep.seq if isinstance(rep.seq, int) and rep.seq >= 0 else 0
            return P.encode(P.error_reply("internal", f"reply not encodable: {e}", seq))

    # ------------------------------------------------------------------ periodic work and actions
    def _tick(self, now: float) -> list:
        if self.stopping:
            return []
        return self.monitor(now) + self.state.tick(now) + self.rm.step(self.state.port, now)

    def monitor(self, now: float) -> list:
        """The System Monitor's poll (:meth:`scheduler.daemon.supervisor.Supervisor.monitor`)."""
        return self.supervisor.monitor(now)

    def perform(self, actions: list, now: float) -> None:
        """Kills of jobs the resource manager started are its own; the rest is Job Startup's."""
        kills = [a.job_id for a in actions if isinstance(a, Kill)]
        if kills:
            done = self.rm.kill(self.state.port, kills)
            actions = [a for a in actions if not (isinstance(a, Kill) and a.job_id in done)]
        self.supervisor.perform(actions, now)

    def batch_actions(self, acts: list, now: float, tick: bool) -> list:
        """The actions a batch of requests ends with: its own, plus the periodic work's when
        ``tick``. A stopping daemon schedules nothing; after ``stop --kill-jobs`` every job
        allocated so far, launched or not, is ended and nothing is launched (a queued job must
        not start on the slots the kills free)."""
        if self.kill_on_stop:
            acts = [a for a in acts if not isinstance(a, Launch)]
            for j in self.state.running():
                acts += self.state.cancel(j.job_id, now, reschedule=False)
            return acts
        return acts + (self.periodic.run(now, ("tick",)) if tick else [])

    def _on_sigterm(self, *_) -> None:
        """Stop; where the nodes go with the daemon (an allocation ending), the jobs end with it."""
        self.stopping = True
        if self.rm.jobs_end_with_daemon:
            self.kill_on_stop = True

    def flush(self) -> None:
        """Journal what changed (one commit); policy errors are printed once each."""
        s = self.state
        new = s.policy_error_count - self._told_errors  # decisions the core skipped: say so once each
        for msg in list(s.policy_errors)[-new:] if new > 0 else []:
            print(f"reshape daemon: policy error (decision skipped): {P.printable(msg)}", file=sys.stderr,
                  flush=True)
        self._told_errors = s.policy_error_count
        jobs = [s.jobs[i] for i in sorted(s.dirty)]
        meta = {"next_id": s.next_id, "slots": s.pool.capacity}
        nodes = [s.nodes[h] for h in sorted(s.dirty_nodes)]
        self.journal.save(jobs, s.events, meta, nodes, s.node_events)
        ended = [j.job_id for j in jobs if j.state in FINAL]
        if ended:  # journaled: the oldest ended jobs beyond --retain-jobs leave memory
            self.retention.note(ended, s)
            self.job_limits.forget(ended)
        for e in s.events:
            if e["kind"] in self.resize_counts:
                self.resize_counts[e["kind"]] += 1
        if self.dash is not None:
            self.recent_events.extend(s.events)
        s.dirty.clear()
        s.events = []
        s.dirty_nodes.clear()
        s.node_events = []

    # ------------------------------------------------------------------ socket
    def listen(self) -> None:
        """Bind the daemon's socket (:func:`scheduler.daemon.endpoint.bind`). ``reshape daemon`` calls this
        (``listen=True``) before anything is written to the state directory, so a second daemon on a
        busy endpoint leaves no trace; :meth:`serve` otherwise."""
        cfg = self.settings
        self._ctx, self._sock, self.gate = bind(self.endpoint, self.server_keys, cfg.max_peers,
                                                cfg.max_peers_per_user, self.accounts.is_admin)

    def _close_gate(self) -> None:
        if self.gate is not None:
            self.gate.close()
            self.gate = None

    # ------------------------------------------------------------------ loop
    def serve(self) -> None:
        """The loop: a batch of requests -> one journal commit -> the replies -> launches.

        Kills (cancel, ``stop --kill-jobs``) are done before the reply, so a
        cancelled job is gone when its requester hears back, except a job whose
        ``mpiexec`` a node monitor runs: it is ``cancelling`` until that monitor
        confirms the kill (``scheduler.core.state``), and a ``stop --kill-jobs``
        keeps answering the monitors until every such kill is confirmed, for at
        most the node timeout plus :data:`KILL_CONFIRM_GRACE` seconds, then names
        the kills left unconfirmed on its standard error (those jobs stay
        ``cancelling`` in the journal: a daemon started again settles them from
        the monitors' reports). Launches (a fork
        and exec each) after the replies, so nobody waits for them. The state
        they depend on (allocations) is committed before any reply; their
        session ids are committed after. ``SIGUSR1`` dumps every thread's stack
        to the daemon's stderr (for a daemon that seems stuck).
        """
        self._start()
        try:
            while not self.stopping:
                self._turn()
            self._confirm_kills()
        finally:
            self._shutdown()

    def _start(self) -> None:
        if self._sock is None:
            self.listen()
        if self.dashboard_bind is not None:
            if self.dash is None:
                self._bind_dashboard()
            self._start_dashboard()
            self.periodic.every(0.0, "dashboard", self._publish_if_due)
        fd = statedir.open_private(os.path.join(self.state_dir, "daemon.pid"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC,
                                   0o644)
        with os.fdopen(fd, "w") as f:
            f.write(f"{os.getpid()}\n{self.endpoint}\n")
        signal.signal(signal.SIGTERM, self._on_sigterm)
        with contextlib.suppress(ValueError, OSError, AttributeError):
            faulthandler.register(signal.SIGUSR1, file=sys.stderr, all_threads=True)
        self.supervisor.start()
        self.rm.start()
        now = time.time()
        # settle jobs that ended while no daemon ran before the first reply, then schedule
        self.perform(self.periodic.run(now, ("tick",)), now)
        self.flush()
        self._last_loop = now
        gc.freeze()  # startup objects are never garbage: keep them out of the collector's scans
        self._frozen_jobs = len(self.state.jobs)
        self.loop.watch_gc()

    def _receive(self, stats: LoopStats) -> tuple[list, list, list]:
        """Read up to :data:`BATCH` requests: (replies, deferred reads, actions)."""
        clock, sock = time.perf_counter, self._sock
        t0, handled = clock(), 0.0
        replies: list[tuple[bytes, bytes, float]] = []
        deferred: list[tuple[bytes, P.Request, str | None, float]] = []
        acts: list = []
        reads: list[P.Request] = []
        for _ in range(BATCH):
            try:
                parts = sock.recv_multipart(zmq.NOBLOCK, copy=False)
            except zmq.Again:
                break
            t_in = clock()
            # ZAP's word: uid on ipc and loopback TCP (the kernel's), key with CURVE
            who = user_id(parts[-1]) if self.gate is not None else None
            frames = [f.bytes for f in parts]
            if len(frames) != 2:
                rep, a = P.error_reply("malformed", "expected exactly one frame per message"), []
            else:
                rep, a = self.handle(frames[1], time.time(), who, reads)
            handled += clock() - t_in
            if rep is None:  # read-only: answered after the others (:meth:`_send`)
                deferred.append((frames[0], reads.pop(), who, t_in))
                continue
            replies.append((frames[0], self._encode(rep), t_in))
            acts += a
        stats.add("handle", handled)
        stats.add("recv", clock() - t0 - handled)
        return replies, deferred, acts

    def _send(self, replies: list, deferred: list) -> None:
        """The replies of the batch, then the read-only ones (status, history, log: after everyone else)."""
        clock = time.perf_counter
        for ident, data, t_in in replies:
            with contextlib.suppress(zmq.ZMQError):  # the peer went away
                self._sock.send_multipart([ident, data], zmq.NOBLOCK)
            self.service.append(dt := clock() - t_in)
            self.latency.observe(dt)
        for ident, ev, who, t_in in deferred:
            rep, _ = answer(self, ev, time.time(), who)
            with contextlib.suppress(zmq.ZMQError):
                self._sock.send_multipart([ident, self._encode(rep)], zmq.NOBLOCK)
            self.service.append(dt := clock() - t_in)
            self.latency.observe(dt)
        self.served += len(replies) + len(deferred)

    def _turn(self) -> None:
        """One turn of the loop (:meth:`serve`); each phase timed in :class:`LoopStats`."""
        clock, stats = time.perf_counter, self.loop
        polled = self._sock.poll(int(self.settings.tick * 1000))
        t0 = clock()
        stats.begin()
        replies, deferred, acts = self._receive(stats) if polled else ([], [], [])
        now = time.time()
        self.max_gap = max(self.max_gap, now - self._last_loop)
        self._last_loop = now
        ticked = self.periodic.due(self._tick_task, now)
        acts = self.batch_actions(acts, now, ticked)
        t1 = clock()
        kills = [a for a in acts if isinstance(a, Kill)]
        if kills:
            self.perform(kills, now)
        t2 = clock()
        stats.add("kill", t2 - t1)
        self.flush()  # group commit: everything acknowledged below is on disk
        t3 = clock()
        stats.add("commit", t3 - t2)
        self._send(replies, deferred)
        t4 = clock()
        stats.add("send", t4 - t3)
        launches = [a for a in acts if isinstance(a, Launch)]
        if launches:
            self.perform(launches, now)
            self.flush()
        t5 = clock()
        stats.add("launch", t5 - t4)
        self.journal.idle(force=bool(replies or deferred))  # rewind the WAL when nobody waits
        t6 = clock()
        stats.add("wal", t6 - t5)
        self._freeze()
        stats.add("freeze", clock() - t6)
        self.periodic.run(now, ("dashboard", "retain"))
        if replies or deferred or ticked:  # not a poll that timed out between two ticks
            stats.end(clock() - t0, len(replies) + len(deferred))

    def _confirm_kills(self) -> None:
        """After ``stop --kill-jobs``: serve on until the monitors confirmed every kill ordered to them, for
        a bounded time (:meth:`serve`); say which were not confirmed."""
        if not self.kill_on_stop:
            return
        end = time.monotonic() + self.state.node_timeout + KILL_CONFIRM_GRACE
        while self.state.killing() and time.monotonic() < end:
            self._turn()
        now = time.time()
        for j in self.state.killing():
            print(f"reshape daemon: stopping; job {j.job_id}'s kill was not confirmed by the monitor of "
                  f"{', '.join(awaited(j))} "
                  f"within {now - (j.cancel_time or now):.1f} s: its processes may still run there (the job "
                  f"stays {j.state} until a daemon hears from that monitor)", file=sys.stderr, flush=True)
        if not self.state.killing():
            print("reshape daemon: every kill confirmed; stopping", file=sys.stderr, flush=True)

    def _freeze(self) -> None:
        """Jobs are kept for the daemon's life: out of the collector's full scans, which cost ~20 ms
        of the loop at 10,000 queued jobs and ~100 ms at 50,000."""
        if len(self.state.jobs) >= self._frozen_jobs + FREEZE_EVERY:
            gc.freeze()
            self._frozen_jobs = len(self.state.jobs)

    def _shutdown(self) -> None:
        self.loop.unwatch_gc()
        self.flush()
        if self.dash is not None:
            self.dash.close()
        self._close_gate()
        if self.endpoint.startswith("ipc://"):  # while it still listens, no other daemon can have taken the path
            with contextlib.suppress(OSError):
                os.unlink(self.endpoint[len("ipc://"):])
        self._sock.close(linger=500)
        self._ctx.term()
        self.supervisor.stop()
        self.rm.stop(jobs_running=bool(self.state.running()), killing=self.kill_on_stop)
        self.journal.close()
        self._remove_pid_file()
        # running jobs keep running: a restarted daemon adopts them

    def _remove_pid_file(self) -> None:
        """``daemon.pid`` goes with the daemon (unless another daemon wrote its own since)."""
        path = os.path.join(self.state_dir, "daemon.pid")
        with contextlib.suppress(OSError, ValueError), open(path) as f:
            if int(f.readline()) == os.getpid():
                os.unlink(path)

    # ------------------------------------------------------------------ dashboard
    def _bind_dashboard(self) -> None:
        """Bind the dashboard's address (nothing is written yet); a taken or bad one fails naming it,
        and the daemon's own socket is closed again."""
        try:
            # the protocol's rule (docs/protocol.md, "Access"): beyond loopback or with keys, authenticate
            self.dash = Dashboard(self.dashboard_bind, require_token=self.keys_dir is not None)
        except OSError as e:
            self._close_gate()
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

    def _publish_if_due(self, now: float) -> None:
        if self.dash is not None and self.dash.due(now):
            self.publish_dashboard(now)

    def publish_dashboard(self, now: float) -> None:
        """A new snapshot for the dashboard's readers (built here, in the loop: the core is not shared)."""
        assert self.dash is not None
        info = {"endpoint": self.endpoint, "app": self.state.app.name, "remap": self.state.remap.name,
                "pool": self.pool_source}
        if now - self._dash_stats[0] >= 5.0:  # sorting 8192 service times takes a millisecond of the loop
            self._dash_stats = (now, self.service_stats())
        self.dash.publish(snapshot(self.state, self.recent_events, now, self._dash_stats[1], self.latency,
                                   self.resize_counts, info))

    # ------------------------------------------------------------------ views
    def service_stats(self, loop: bool = False) -> dict[str, Any]:
        """Requests served and the service time (request received -> reply sent) of recent ones;
        ``loop``: with the loop's statistics (:class:`scheduler.observe.loopstats.LoopStats`)."""
        got = self.service.stats()
        access = {"auth": "curve" if self.server_keys else "uid" if self.endpoint.startswith("ipc://") else "none",
                  "refused": self.gate.refused if self.gate else 0,
                  "connections": self.gate.limits.info() if self.gate and self.gate.limits else {},
                  "over_limit": self.quota.refused,
                  "max_loop_gap_ms": round(1e3 * self.max_gap, 1),
                  "policy_errors": self.state.policy_error_count,
                  "late_starts": self.state.late_start_count, "walltime_kills": self.state.walltime_kills,
                  "last_policy_errors": list(self.state.policy_errors)[-3:], "rm": self.rm.info(),
                  "retention": self.retention.info(), "job_messages_refused": self.job_limits.refused,
                  "job_output_deferred": self.job_limits.deferred}
        if self.dash is not None:
            access["dashboard"] = self.dash.url  # the port bound, also when asked for port 0
        if loop:
            access["loop"] = self.loop.to_dict()
        if got is None:
            return {"served": self.served, "window": 0, "p50_ms": None, "p99_ms": None, "max_ms": None} | access
        return {"served": self.served, "window": len(self.service), "p50_ms": 1e3 * got[0], "p99_ms": 1e3 * got[1],
                "max_ms": 1e3 * got[2]} | access

    def describe(self) -> dict[str, Any]:
        cfg = self.settings
        return {"endpoint": self.endpoint, "state_dir": self.state_dir, "pool": self.pool_source,
                "launcher": self.launcher.name, "launcher_why": self.launcher_why,
                "slots": self.state.pool.capacity, "app": self.state.app.name,
                "remap": self.state.remap.name,
                "params": {"app": dict(cfg.app_params), "remap": dict(cfg.remap_params)},
                "keys": self.keys_dir, "node_timeout": self.state.node_timeout, "mpiexec_on": self.mpiexec_on,
                "mpiexec_on_why": self.mpiexec_on_why,
                "warnings": self.warnings}
