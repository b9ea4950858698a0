"""Node monitor: one per compute node, reporting to the daemon's System Monitor (Sudarsan & Ribbens 2007 §3.1).

``reshape nodemon --daemon ENDPOINT --node NAME`` registers the node
(``node_register``: the node is up, its slots join the pool), then sends a
``heartbeat`` every ``heartbeat`` seconds (the daemon's value, a quarter of
its node timeout, unless ``--interval``). A daemon that no longer knows this
monitor (it marked the node down, or lost it) answers ``not_registered`` and
the monitor registers again; an unreachable daemon is retried for ever.

Jobs. Each scan lists the application processes (Hydra proxies and ranks,
not ``mpiexec``) of this node (same network namespace as the monitor, so a
namespace cluster on one machine and a container both see only their own)
that carry the daemon's job tag (``RESHAPE_JOB_TAG``, whose
prefix the daemon sends at registration). A job counts as this node's when
the first entry of its ``RESHAPE_HOSTS`` is this node: as in the paper, only
the monitor on a job's first node talks to the System Monitor about it. When
a job seen here has had no process here for two scans in a row, the monitor
sends ``job_ended`` with status ``end``. The monitor cannot see exit codes
(the ranks are not its children), so it never claims ``error`` itself; the
daemon decides done or failed from the job's own ``finished`` report and the
exit status of its ``mpiexec`` (``scheduler.core.state.ClusterState.ended_on_node``).

Which daemon it obeys. A monitor runs what its daemon orders, as root where jobs run as
their owners, so it talks only to its daemon: with CURVE, the daemon whose public key its
key directory holds (``KEYS/server.key``, which must be root's or the monitor's user's and
writable by nobody else), using this node's own key (``KEYS/node-NODE.key_secret`` when
present: it speaks for this node only) rather than the admin key; without CURVE (an
``ipc://`` socket or loopback TCP), the socket it connects to must belong to root or to the
daemon's user (``--daemon-user``, default the monitor's own): the kernel names the owner of
the other end (``SO_PEERCRED``, ``/proc/net/tcp``) before anything is sent, and a socket
never reconnects unchecked (``reshape.joblink.client.Connection``'s ``check_peer``), so a
user who binds the port while the daemon is away gets nothing and orders nothing. A start
order that names no uid to run as is refused (``scheduler.node.runner``).

Jobs on nodes. With a daemon that runs jobs on their first node (``reshape daemon
--mpiexec-on first-node``), a heartbeat's reply may carry ``orders``: start a job's
``mpiexec`` here, kill a run the daemon does not expect, or kill by its tag what is left here of a job
whose ``mpiexec``'s node was lost (an order with ``confirm``: the heartbeat then confirms, in ``killed``,
each such attempt with no process left in this node's namespace, until the daemon orders it no more).
:class:`scheduler.node.runner.NodeRunner` carries them out; each round sends the runs' output
(``job_output``) and, once a run's ``mpiexec`` exited and its output is all sent, ``job_ended`` with its exit status
(``code``), repeated until the daemon answers (also across a restart of the daemon). The
heartbeat lists the runs still going (``runs``), which confirms a start. Such a run
keeps going whatever happens to the daemon; the scan above does not report it (its exit
status does).
"""

from __future__ import annotations

import argparse
import base64
import os
import pwd
import signal
import socket
import sys
import threading
import uuid

from reshape.joblink import jobenv as E
from reshape.joblink import protocol as P
from reshape.joblink.auth import ENV_CLIENT_KEY, ClientKeys, check_pinned, keys_dir_for, load_client_keys
from reshape.joblink.client import Connection, DaemonError, SchedulerUnavailable
from reshape.joblink.launch import sweep_ipc
from reshape.joblink.protocol import MAX_OUTPUT_BYTES, printable
from scheduler.daemon.peers import ipc_peer_uid, tcp_peer_uid
from scheduler.daemon.startup import WRAPPER_NAME
from scheduler.node.runner import NodeRunner, Run

__all__ = ["NodeMonitor", "add_commands", "local_jobs"]

TAG = E.JOB_TAG


def _netns(pid: int | str) -> int | None:
    try:
        return os.stat(f"/proc/{pid}/ns/net").st_ino
    except OSError:
        return None


def _environ(pid: str) -> dict[bytes, bytes]:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            data = f.read()
    except OSError:
        return {}
    out = {}
    for item in data.split(b"\0"):
        k, sep, v = item.partition(b"=")
        if sep and k in (E.JOB_TAG.encode(), E.HOSTS.encode()):
            out[k] = v
    return out


def _launcher(pid: str) -> bool:
    """Is this the job's ``mpiexec``, or the Job Startup wrapper around it (``sh -c ... reshape-job``),
    on the head or here when the head is also a compute node? Neither is one of the job's ranks."""
    try:
        with open(f"/proc/{pid}/comm") as f:
            if f.read().strip().startswith(("mpiexec", "prterun", "prted")):  # Hydra's or PRRTE's (Open MPI)
                return True
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = f.read().split(b"\0")
        return len(argv) > 3 and argv[3] == WRAPPER_NAME.encode()
    except OSError:
        return True


def _tagged(prefix: bytes):
    """(pid, tag, environment) of each process in this node's network namespace whose job tag starts with
    ``prefix`` (this monitor excepted)."""
    mine, me = _netns("self"), str(os.getpid())
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or pid == me or _netns(pid) != mine:
            continue
        env = _environ(pid)
        tag = env.get(E.JOB_TAG.encode(), b"")
        if tag.startswith(prefix):
            yield pid, tag, env


def tags_here(tag_prefix: str) -> set[str]:
    """The job tags of the processes in this node's network namespace, launchers included."""
    return {tag.decode(errors="replace") for _, tag, _ in _tagged(tag_prefix.encode())}


def local_jobs(tag_prefix: str, node: str) -> dict[tuple[int, int], int]:
    """(job id, attempt) -> number of processes in this node's network namespace, for jobs whose first node is
    ``node`` (the attempt: 0, or the number after ``~`` in a restarted job's tag)."""
    prefix = tag_prefix.encode()
    out: dict[tuple[int, int], int] = {}
    for pid, tag, env in _tagged(prefix):
        if _launcher(pid):
            continue
        first = env.get(E.HOSTS.encode(), b"").split(b",")[0].decode(errors="replace")
        if first != node:
            continue
        jid, _, attempt = tag[len(prefix):].partition(b"~")
        try:
            key = (int(jid), int(attempt or 0))
        except ValueError:
            continue
        out[key] = out.get(key, 0) + 1
    return out


def monitor_keys(endpoint: str, keys: str | None, node: str) -> ClientKeys | None:
    """The keys a monitor uses (None: no CURVE): this node's own pair when the directory has one, and
    the daemon's key it pins, checked first (module docstring). AuthError (a ValueError) otherwise."""
    d = keys_dir_for(endpoint, keys)
    if d is None:
        return None
    check_pinned(d)
    own = os.path.join(d, f"node-{node}.key_secret")
    return load_client_keys(d, own if not os.environ.get(ENV_CLIENT_KEY) and os.path.exists(own) else None)


def daemon_check(daemon_user: str | None):
    """``check_peer`` for a monitor without CURVE: the socket at the other end must be root's or the
    daemon user's (module docstring). ValueError for a user this host does not know."""
    try:
        uid = os.geteuid() if daemon_user is None else pwd.getpwnam(daemon_user).pw_uid
    except KeyError:
        raise ValueError(f"--daemon-user {daemon_user!r}: no such user on this host") from None
    allowed = {0, uid}

    def check(fd: int) -> str | None:
        owner = ipc_peer_uid(fd)
        owner = tcp_peer_uid(fd) if owner is None else owner
        if owner is None:
            return "cannot tell who listens there (not a socket of this machine: use CURVE keys)"
        if owner not in allowed:
            return (f"the socket there is uid {owner}'s, not the daemon's (root or uid {uid}, --daemon-user): "
                    "refused, nothing sent")
        return None

    return check


class NodeMonitor:
    """Registration, heartbeats and job-end detection for one node (see the module docstring)."""

    def __init__(self, endpoint: str, node: str, keys: str | None = None, interval: float | None = None,
                 timeout: float = 2.0, log=None, spool: str | None = None, daemon_user: str | None = None):
        self.endpoint = endpoint
        self.node = node
        self.incarnation = uuid.uuid4().hex[:16]
        creds = monitor_keys(endpoint, keys, node)  # raises AuthError on missing or untrustworthy keys
        self.conn = Connection(endpoint, timeout, keys=creds,
                               check_peer=daemon_check(daemon_user) if creds is None else None)
        self.interval = interval
        self.log = log or sys.stderr
        self.registered = False
        self.tag: str | None = None
        self.seen: dict[tuple[int, int], int] = {}  # (job, attempt) -> processes at the last scan that found some
        self.missing: dict[tuple[int, int], int] = {}  # (job, attempt) -> scans in a row without a process
        self.reported: set[tuple[int, int]] = set()
        self.stop = threading.Event()
        self.wake = threading.Event()  # set by stop and by a run that ended: the next round starts at once
        self.beat = interval or 1.0
        self.runner = NodeRunner(spool or os.path.join(E.default_state_dir(), f"nodemon-{node}"), self.wake,
                                 self.say)

    def say(self, text: str) -> None:
        print(printable(f"reshape nodemon {self.node}: {text}"), file=self.log, flush=True)

    def register(self) -> None:
        """Raises DaemonError (e.g. ``unknown_node``: not in the pool) or SchedulerUnavailable."""
        rep = self.conn.send(P.NodeRegister(node=self.node, incarnation=self.incarnation, pid=os.getpid(),
                                            host=socket.gethostname()))
        self.tag = rep.tag
        self.runner.tag_prefix = self.tag
        self.beat = self.interval or rep.heartbeat
        self.registered = True
        self.say(f"registered with {self.endpoint} (monitor {self.incarnation}, heartbeat {self.beat:g} s, "
                 f"node timeout {rep.timeout:g} s)")

    def scan(self) -> list[int]:
        """Update the job view; send ``job_ended`` for this node's jobs whose processes are gone."""
        assert self.tag is not None
        now_jobs = local_jobs(self.tag, self.node)
        for key in [k for k in now_jobs if self.runner.owns(k)]:
            del now_jobs[key]  # run here: its exit status reports it (:meth:`flush`)
        listed = {jid for jid, _ in now_jobs} | {r["job_id"] for r in self.runner.running()}
        for jid, n in now_jobs.items():
            self.seen[jid] = n
            self.missing.pop(jid, None)
        for jid in [j for j in self.seen if j not in now_jobs]:
            self.missing[jid] = self.missing.get(jid, 0) + 1
            if self.missing[jid] >= 2:
                n = self.seen.pop(jid)
                del self.missing[jid]
                sweep_ipc()  # what its ranks left here if they were killed (reshape.joblink.launch.sweep_ipc)
                if jid not in self.reported:
                    self.reported.add(jid)
                    self._ended(jid, n)
        return sorted(listed)

    def _ended(self, key: tuple[int, int], n: int) -> None:
        jid, attempt = key
        try:
            self.conn.send(P.JobEnded(job_id=jid, node=self.node, incarnation=self.incarnation, status="end",
                                      processes=n, detail=f"its {n} process(es) on {self.node} ended",
                                      attempt=attempt or None))
            self.say(f"job {jid}: ended here (reported)")
        except DaemonError as e:  # not_running: the daemon saw the end first
            self.say(f"job {jid}: ended here ({e.code})")
        except SchedulerUnavailable:
            self.reported.discard(key)  # try again at the next scan
            self.seen[key] = n
            self.missing[key] = 1

    def flush(self) -> None:
        """Send the output of the runs here, then the exit status of those that ended once all their output
        is sent (the daemon takes none after it: the job has ended there). Raises SchedulerUnavailable: the
        rest waits for the next round."""
        for run in list(self.runner.runs.values()):
            ended = run.ended.is_set()  # before reading: output written before the exit is read below
            whole = True
            while not run.dropped:
                offset, data = self.runner.unsent(run, MAX_OUTPUT_BYTES)
                if not data:
                    break
                self._send_output(run, offset, data)
                if run.sent <= offset:  # the daemon took none of it (the job's output rate): next round
                    whole = False
                    break
            if ended and whole:
                self._send_exit(run)

    def _send_output(self, run: Run, offset: int, data: bytes) -> None:
        out = P.JobOutput(job_id=run.job_id, node=self.node, incarnation=self.incarnation, attempt=run.attempt,
                          offset=offset, data=base64.b64encode(data).decode())
        try:
            run.sent = self.conn.send(out).at
        except DaemonError as e:  # not_running: the job ended at the daemon (cancelled, its node lost, ...)
            self.say(f"job {run.job_id}: output not taken ({e.code}); dropped")
            run.dropped = True

    def _send_exit(self, run: Run) -> None:
        assert run.code is not None
        try:
            self.conn.send(P.JobEnded(job_id=run.job_id, node=self.node, incarnation=self.incarnation,
                                      status="end" if run.code == 0 else "error", code=run.code,
                                      detail=f"mpiexec on {self.node} exited with status {run.code}",
                                      attempt=run.attempt or None))
            self.say(f"job {run.job_id}: mpiexec exited {run.code} (reported)")
        except DaemonError as e:  # not_running: the daemon ended it already
            self.say(f"job {run.job_id}: mpiexec exited {run.code} ({e.code})")
        self.runner.forget(run)

    def step(self) -> None:
        """One round: (re)register if needed, scan, send the runs' output and ends, heartbeat (its reply:
        orders to carry out)."""
        if not self.registered:
            self.register()
        jobs = self.scan()
        self.flush()
        runs, killed = tuple(self.runner.running()), ()
        if self.runner.to_confirm():  # confirmed once no process of the attempt is left here
            killed = tuple(self.runner.killed(tags_here(self.tag or "")))
        beat = P.Heartbeat(node=self.node, incarnation=self.incarnation, jobs=tuple(jobs), runs=runs or None,
                           killed=killed or None)
        try:
            rep = self.conn.send(beat)
        except DaemonError as e:
            if e.code != "not_registered":
                raise
            self.say("the daemon does not know this monitor (node marked down?): registering again")
            self.registered = False
            self.register()
            return
        kills = set()
        for order in rep.orders or ():  # objects (the protocol checked), whose fields the runner checks
            self.runner.order(order)
            if order.get("op") == "start":
                self.wake.set()  # confirm the start at once (the next heartbeat lists it)
            elif order.get("op") == "kill":
                kills.add((order.get("job_id"), order.get("attempt")))
        self.runner.prune(kills)  # kills the daemon no longer orders: it took their confirmation

    def run(self) -> int:
        while not self.stop.is_set():
            try:
                self.step()
            except SchedulerUnavailable as e:
                self.say(f"{e}; retrying")
            except DaemonError as e:
                if e.code == "unknown_node":
                    self.say(f"the daemon refused this node: {e}")
                    return 2
                self.say(f"daemon error {e}; retrying")
            self.wake.wait(self.beat)
            self.wake.clear()
        self.conn.close()
        return 0

    def halt(self) -> None:
        self.stop.set()
        self.wake.set()


# ---------------------------------------------------------------- command line
def add_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("nodemon", help="run a node monitor on this compute node (registers it, heartbeats, "
                                       "reports the end of jobs whose first node it is)")
    p.add_argument("--daemon", default=os.environ.get(E.DAEMON), required=E.DAEMON not in os.environ,
                   metavar="ENDPOINT", help="the daemon's address (default $RESHAPE_DAEMON)")
    p.add_argument("--node", default=socket.gethostname(), help="this node's host name in the pool (default: hostname)")
    p.add_argument("--interval", type=float, help="heartbeat period in seconds (default: the daemon's)")
    p.add_argument("--keys", help="key directory (default: see 'reshape keys'); KEYS/node-NODE.key_secret, when "
                                  "present, is this monitor's key")
    p.add_argument("--daemon-user", metavar="USER",
                   help="without CURVE: the user the daemon runs as (default: this monitor's); a socket of "
                        "anyone else but root is refused")
    p.add_argument("--spool", metavar="DIR",
                   help="where the output of the jobs this monitor runs is kept until the daemon has it "
                        "(default $RESHAPE_STATE_DIR/nodemon-NODE)")
    p.set_defaults(func=cmd_nodemon)


def cmd_nodemon(args: argparse.Namespace) -> int:
    if args.interval is not None and not args.interval > 0:
        print(f"reshape nodemon: --interval must be > 0, got {args.interval}", file=sys.stderr)
        return 2
    try:
        mon = NodeMonitor(args.daemon, args.node, keys=args.keys, interval=args.interval, spool=args.spool,
                          daemon_user=args.daemon_user)
    except ValueError as e:
        print(f"reshape nodemon: {e}", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, lambda *_: mon.halt())
    signal.signal(signal.SIGINT, lambda *_: mon.halt())
    return mon.run()
