"""Job Startup and the System Monitor (Sudarsan & Ribbens 2007 §3.1): the daemon's edge to the jobs' processes.

:meth:`Supervisor.perform` carries out the core's actions: a :class:`Launch`
starts the job's ``mpiexec`` (``scheduler.daemon.startup``), a
:class:`Kill` ends every process of the job. :meth:`Supervisor.monitor` is
the System Monitor's poll: a job whose ``mpiexec`` exited (or, for jobs
adopted after a restart, whose session has no process left) returns its
slots to the pool; a job its first node's monitor saw end is settled;
silent nodes, stuck resizes and walltimes are checked (after the ends: a job that
ended while no daemon ran is settled by its exit status, not killed as overdue); a job that lost a
Hydra proxy (its ranks orphaned, its ``mpiexec`` waiting on) fails
(:class:`ProxyWatch`).

Jobs on nodes (``reshape daemon --mpiexec-on first-node``): a job whose hosts all have a
registered node monitor does not run its ``mpiexec`` here. The monitor of its first node
gets a start order in its next heartbeat's reply (:meth:`Supervisor.node_orders`, repeated
until the monitor lists the run in a heartbeat), runs ``mpiexec`` there
(``scheduler.node.runner``), streams its output back (``job_output``, appended to the
job's log here) and reports its exit status (``job_ended`` with ``code``), which settles the
job as an exit of the daemon's own child would. A run the daemon does not expect (the job
ended or was restarted meanwhile) gets a kill order. Such a job outlives the daemon: a
restarted daemon finds it in the journal and the monitor's heartbeats (docs/daemon.md, "Failures").

Cancelling such a job kills nothing here: the core makes it ``cancelling`` (its slots held)
and the kill goes to its monitor as an order; the job is ``cancelled`` once the monitor
confirms the run ended. Every other end the daemon decides for it (walltime, a node down, a
restart) goes the same way, through ``ending`` (``scheduler.core.state``, "Ending a job run
on a node"): no slot of it is given to another job while a rank of it may still run.

Its output is appended to the job's log idempotently by offset: when the attempt is ordered
to start, the core records the log's size then (``out_base``, journaled before the order can
reach the monitor); a chunk of bytes ``offset``.. is written from ``size of the log -
out_base``, the bytes the log file itself holds of this attempt. A daemon killed between
writing a chunk and journaling how much it holds therefore skips that chunk when the monitor
sends it again, instead of writing it twice.

Killing a crashed job's stray ranks needs process-table scans (tens of milliseconds, more when
``/proc`` reads stall); a reaper thread does them so the loop keeps answering.
"""

from __future__ import annotations

import contextlib
import os
import queue
import re
import shutil
import subprocess
import threading
import time

import psutil

from reshape.joblink import jobenv as E
from reshape.joblink.auth import ENV_CLIENT_KEY, ENV_KEYS
from reshape.joblink.launch import sweep_ipc
from reshape.joblink.launchers import Launcher
from scheduler.core.job import JobState
from scheduler.core.jobfile import JobDesc, JobFileError
from scheduler.core.jobtable import KILLING
from scheduler.core.state import ClusterState, Kill, Launch, StateError
from scheduler.daemon.accounts import Accounts
from scheduler.daemon.startup import (
    LOCAL,
    full_env,
    job_argv,
    job_env,
    job_tag,
    kill_job,
    kill_jobs,
    read_exit_status,
    start_job,
)
from scheduler.daemon.statedir import open_private

__all__ = ["MONITOR_GRACE", "ON_NODES", "ProxyWatch", "Supervisor", "log_tail", "process_table"]

MONITOR_GRACE = 3.0  # seconds a watched mpiexec gets to exit after its first node's monitor saw the job end
RUNNER_GRACE = 10.0  # seconds a job run by a node monitor waits for its exit status after an end seen by a scan
ON_NODES = ("head", "first-node")  # where jobs' mpiexec runs (reshape daemon --mpiexec-on)
_ERROR_LINE = re.compile(r"^[\w.]*(Error|Exception|Exit)\b.*: ")  # Python's last traceback line
# Hydra's own errors: "[proxy:0@host] HYDU_create_process (/long/build/path/launch.c:73): execvp error on file X ..."
_HYDRA_LINE = re.compile(r"^\[(?:proxy|mpiexec)[^\]]*\]\s+\w+\s+\([^)]*\):\s*(?P<cause>\S.*)$")


def _alive(pid: int | None) -> bool:
    """Is the (adopted) job's ``mpiexec`` still running?"""
    if not pid:
        return False
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


Proc = tuple[int, int]  # (pid, start time in clock ticks): a process, not a reused pid


def process_table() -> dict[int, tuple[int, str, int]]:
    """Every process: pid -> (parent pid, command name, start time)."""
    out: dict[int, tuple[int, str, int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                data = f.read()
        except OSError:
            continue
        head, _, rest = data.rpartition(b")")
        fields = rest.split()
        with contextlib.suppress(IndexError, ValueError):
            out[int(name)] = (int(fields[1]), head.partition(b"(")[2].decode(errors="replace"), int(fields[19]))
    return out


class ProxyWatch:
    """Noticing a lost Hydra proxy: its ranks still run, its ``mpiexec`` never exits.

    A job the daemon launched runs as ``sh`` (the exit-status wrapper) ->
    ``mpiexec`` -> one ``hydra_pmi_proxy`` per host -> the ranks. When a proxy is
    killed (``kill -9``, the OOM killer), Hydra does not notice: ``mpiexec`` waits
    on, the orphaned ranks keep running, and the job's slots stay held until the
    ranks end or the walltime kills them. This scans the process table once a
    second (in its own thread: a scan reads ``/proc/*/stat``, a few milliseconds
    per thousand processes) and remembers, for every job, each local proxy with
    the ranks under it. A proxy that is gone while ``mpiexec`` still runs and one
    of its ranks is still alive, at two scans in a row, was lost: a proxy that
    ends normally ends after its ranks (the job's end, or a shrink retiring a
    spawned group). The System Monitor then fails the job (``lost``, naming the
    proxy) and kills what is left of it (:meth:`Supervisor.monitor`). Proxies on other
    hosts are ``ssh`` processes here, with no local ranks: not watched (their
    node's monitor sees the ranks end, docs/cluster.md).

    Watches the jobs in :attr:`roots` (job id -> pid of its launch wrapper).
    """

    def __init__(self, every: float = 1.0):
        self.every = every
        self.roots: dict[int, int] = {}  # replaced (not changed) by the daemon's loop
        self.lost: queue.SimpleQueue[tuple[int, str]] = queue.SimpleQueue()  # (job id, why) for the loop
        self._seen: dict[int, dict[Proc, set[Proc]]] = {}  # job -> proxy -> its ranks
        self._told: set[int] = set()
        self._suspect: dict[int, tuple[int, set[Proc]]] = {}  # job -> (proxy gone, its ranks) at the last scan
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="proxy-watch", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=3.0)

    def _run(self) -> None:
        wait = self.every
        while not self._stop.wait(wait):
            t0 = time.monotonic()
            with contextlib.suppress(Exception):  # a scan that fails is tried again next time
                self.scan()
            # at most 5% of a CPU (and of the interpreter the loop shares): a machine with many
            # processes is scanned less often
            wait = max(self.every, 20 * (time.monotonic() - t0))

    def scan(self, table: dict[int, tuple[int, str, int]] | None = None) -> None:
        roots = self.roots
        if not roots:
            self._seen.clear()
            return
        table = process_table() if table is None else table
        kids: dict[int, list[int]] = {}
        for pid, (ppid, _, _) in table.items():
            kids.setdefault(ppid, []).append(pid)
        for jid in [j for j in self._seen if j not in roots]:
            del self._seen[jid]
            self._suspect.pop(jid, None)
        self._told &= set(roots)
        for jid, root in roots.items():
            mpiexec = [p for p in kids.get(root, []) if table[p][1].startswith("mpiexec")]
            if not mpiexec or jid in self._told:
                continue
            now: dict[Proc, set[Proc]] = {}
            for m in mpiexec:
                for proxy in kids.get(m, []):
                    if table[proxy][1].startswith("hydra_pmi_prox"):
                        now[(proxy, table[proxy][2])] = {(r, table[r][2]) for r in kids.get(proxy, [])}
            seen = self._seen.setdefault(jid, {})
            suspect = self._suspect.pop(jid, None)
            if suspect is not None:  # gone with ranks alive a second ago: still so, not an ending
                proxy, ranks = suspect
                alive = [r for r, t in ranks if r in table and table[r][2] == t]
                if alive:
                    self._told.add(jid)
                    self.lost.put((jid, f"its Hydra proxy (pid {proxy}) was lost while {len(alive)} of its ranks "
                                        f"still ran (pids {', '.join(map(str, alive[:8]))}); mpiexec did not "
                                        "notice"))
                    continue
            for proxy, ranks in seen.items():
                if proxy not in now and any(r in table and table[r][2] == t for r, t in ranks):
                    self._suspect[jid] = (proxy[0], ranks)
                    break
            for proxy, ranks in now.items():
                seen[proxy] = seen.get(proxy, set()) | ranks
            for proxy in [p for p in seen if p not in now]:
                del seen[proxy]


def run_as(owner: str | None, accounts: Accounts | None = None) -> int | None:
    """The uid to run a job as: its owner's account's, when the daemon runs as root and that is not
    root (``scheduler.daemon.accounts``; ValueError: an owner with no account)."""
    return (accounts or Accounts()).run_as(owner)


def log_tail(path: str, tail: int) -> str:
    """The last ``tail`` lines (0: all) of the last 32 KiB of a job's log (``""``: no log yet); the daemon's
    ``log`` reply, and ``reshape log`` when no daemon runs."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 32768))
            # as text the protocol carries: undecodable bytes and NULs (a program's binary output) as U+FFFD
            lines = f.read().decode("utf-8", "replace").replace("\0", "\ufffd").splitlines()
    except FileNotFoundError:
        return ""
    return "\n".join(lines[-tail:] if tail else lines)


class Supervisor:
    """The jobs' processes: started, watched, killed (module docstring)."""

    poll_all_up_to = 64  # with more running jobs, the kernel names the exited ones (:meth:`_exited`)

    def __init__(self, state: ClusterState, state_dir: str, workdir: str, launcher: Launcher,
                 endpoint: str, keys_dir: str | None, overtime: float, checkpoint_root: str | None = None,
                 mpiexec_on: str = "head", accounts: Accounts | None = None):
        self.state, self.state_dir, self.workdir = state, state_dir, workdir
        self.accounts = accounts or Accounts()  # whose job runs as whom (scheduler.daemon.accounts)
        self.checkpoint_root = checkpoint_root or os.path.join(state_dir, "checkpoints")
        self.launcher, self.endpoint, self.keys_dir, self.overtime = launcher, endpoint, keys_dir, overtime
        self.procs: dict[int, subprocess.Popen] = {}
        self._reap: list[subprocess.Popen] = []  # killed jobs' mpiexec not yet reaped
        self._strays: queue.SimpleQueue[str | None] = queue.SimpleQueue()  # tags for the reaper thread
        self._reaper: threading.Thread | None = None
        self._last_adopted_check = 0.0
        self.proxies = ProxyWatch()  # lost Hydra proxies
        if mpiexec_on not in ON_NODES:
            raise ValueError(f"mpiexec-on must be one of {', '.join(ON_NODES)}, got {mpiexec_on!r}")
        self.on_nodes = mpiexec_on == "first-node"
        self.orders: dict[str, dict[int, dict]] = {}  # node -> job id -> start order its monitor has not confirmed

    def check_program(self, desc: JobDesc, owner: str | None) -> None:
        """Refuse, at submit, a job whose program does not exist where it would run, when the daemon can tell:
        every rank runs on this machine (its own ``mpiexec``, a pool of this host only), as the daemon's own
        user (a root daemon does not look up paths for another user: that would tell them what exists where
        they may not look), and the program is a path (from the jobs' working directory) or a name on the
        ``PATH`` the job gets. A leading ``python`` is the daemon's own interpreter
        (:func:`scheduler.daemon.startup.job_argv`)."""
        prog = desc.command[0]
        if prog in ("python", "python3") or self.on_nodes or self.accounts.job_uid(owner) != self.accounts.me or \
                any(n.host not in LOCAL for n in self.state.pool.nodes):
            return
        path = desc.env.get("PATH", os.environ.get("PATH", os.defpath))
        if "/" not in prog:
            if shutil.which(prog, path=path) is None:
                raise JobFileError(f"command: program {prog!r} not found on the PATH jobs get here ({path})")
            return
        full = os.path.join(self.workdir, prog)  # an absolute path stays as it is
        if not os.path.isfile(full):
            raise JobFileError(f"command: program {prog!r} does not exist" +
                               ("" if os.path.isabs(prog) else f" (relative to the jobs' directory {self.workdir})"))
        if not os.access(full, os.X_OK):
            raise JobFileError(f"command: program {prog!r} is not executable")

    # ------------------------------------------------------------------ paths
    def log_path(self, job_id: int) -> str:
        return os.path.join(self.state_dir, "logs", f"job-{job_id}.log")

    def exit_path(self, job_id: int) -> str:
        return os.path.join(self.state_dir, "logs", f"job-{job_id}.exit")

    def tag(self, job_id: int, attempt: int | None = None) -> str:
        """The processes of the job's attempt (default: the one running; ``scheduler.core.restarts``)."""
        j = self.state.jobs.get(job_id)
        return job_tag(self.state_dir, job_id, (j.restarts if j else 0) if attempt is None else attempt)

    def checkpoint_dir(self, job_id: int) -> str:
        """Where the job's checkpoints go: its job file's ``checkpoint_dir``, else the daemon's root."""
        d = self.state.jobs[job_id].desc.checkpoint_dir
        return os.path.abspath(os.path.join(self.workdir, d)) if d else os.path.join(self.checkpoint_root,
                                                                                     f"job-{job_id}")

    # ------------------------------------------------------------------ reaper thread
    def start(self) -> None:
        self._reaper = threading.Thread(target=self._reap_strays, name="reaper", daemon=True)
        self._reaper.start()
        self.proxies.start()

    def stop(self) -> None:
        self.proxies.stop()
        self._strays.put(None)
        if self._reaper is not None:
            self._reaper.join(timeout=3.0)

    def _reap_strays(self) -> None:
        while (tag := self._strays.get()) is not None:
            with contextlib.suppress(Exception):
                if tag:  # "": only the sweep
                    kill_job(tag, grace=0.5)
                sweep_ipc()  # shared memory of ranks killed before anyone could collect it

    def settle_unlaunched(self, now: float) -> None:
        """After a restart: a running job with no session was allocated but maybe never launched."""
        for j in self.state.running():
            if j.sid is None and j.allocation is None:  # died between allocating and recording the launch
                kill_job(self.tag(j.job_id), grace=0.5)  # in case it was launched
                self.state.exited(j.job_id, None, now, "daemon restarted before the job was launched")

    # ------------------------------------------------------------------ actions
    def perform(self, actions: list, now: float) -> None:
        """Kills first (all at once: one grace period, whatever the number of jobs), then launches."""
        # a cancelling or ending job's processes are its node monitor's to kill (an order in its next heartbeat reply)
        kills = [a for a in actions if isinstance(a, Kill)
                 and not ((j := self.state.jobs.get(a.job_id)) is not None and j.state in KILLING)]
        if kills:
            kill_jobs([self.tag(k.job_id, k.attempt) for k in kills])
            self._strays.put("")  # and sweep, off the loop, what ranks killed earlier left
            for jid in (k.job_id for k in kills):
                p = self.procs.pop(jid, None)
                if p:  # reap it; a stray one is reaped by the System Monitor's poll later
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        p.wait(timeout=1.0)
                    if p.returncode is None:
                        self._reap.append(p)
        pending = [a for a in actions if isinstance(a, Launch)]
        while pending:
            pending += self._launch(pending.pop(0).job_id, now)

    def _launch(self, job_id: int, now: float) -> list:
        """Start one job's ``mpiexec``; a job that cannot start fails (and the actions that follow)."""
        j = self.state.jobs[job_id]
        if j.state != JobState.RUNNING or j.job_id in self.procs:
            return []  # cancelled in the same batch, before its launch
        desc = j.desc
        if self.keys_dir:  # what the job's client needs to authenticate: the key it was submitted with
            own = self._own_key(j.owner)
            desc = desc.with_env({ENV_KEYS: self.keys_dir, **own})
        node = self.runner_for(j.hosts)
        try:
            uid = self.accounts.run_as(j.owner)  # ValueError: an owner with no account runs nothing
            if desc.checkpoint and not desc.checkpoint_dir:
                self._job_dir(self.checkpoint_dir(j.job_id), uid)
            order = self._start_order(j, desc) if node is not None else None
            if order is not None:
                self.orders.setdefault(node, {})[j.job_id] = order
                self.state.run_on(j.job_id, node, self._log_size(j.job_id))
                return []
            p = start_job(j.job_id, desc, j.hosts, self.endpoint, self.launcher, self.log_path(j.job_id),
                          self.tag(j.job_id), cwd=self.workdir, exit_path=self.exit_path(j.job_id),
                          run_as=uid, checkpoint_dir=self.checkpoint_dir(j.job_id),
                          reachable={n.host: n.slots for n in self.state.pool.nodes
                                     if n.host not in self.state.pool.down})
        except (OSError, ValueError) as e:  # ValueError: what the OS cannot take (e.g. NUL)
            return [a for a in self.state.exited(j.job_id, 127, now, f"cannot start: {e}") if isinstance(a, Launch)]
        self.procs[j.job_id] = p
        self.state.launched(j.job_id, p.pid)
        return []

    # ------------------------------------------------------------------ jobs on nodes
    def runner_for(self, hosts: list[str]) -> str | None:
        """The node whose monitor is to run a job on ``hosts``: its first, when every one of them has a
        registered monitor and the daemon runs jobs on nodes; else None (the daemon runs it)."""
        if not self.on_nodes or not hosts:
            return None
        for h in set(hosts):
            rec = self.state.nodes.get(h)
            if rec is None or rec.state != "up" or rec.incarnation is None:
                return None
        return hosts[0]

    def _start_order(self, j, desc: JobDesc) -> dict | None:
        """What the monitor of the job's first node needs to run its ``mpiexec`` (docs/protocol.md); None
        for a job on Open MPI, whose ``mpiexec`` runs here as before (only MPICH's runs on nodes)."""
        extra = job_env(j.job_id, desc, j.hosts, self.endpoint, self.launcher, self.tag(j.job_id),
                        self.checkpoint_dir(j.job_id))
        env = full_env(extra)
        if env.get(E.MPI) == "openmpi":
            return None
        return {"op": "start", "job_id": j.job_id, "attempt": j.restarts, "argv": job_argv(desc, j.hosts, env),
                "env": extra, "cwd": self.workdir, "uid": self.accounts.job_uid(j.owner)}

    def node_orders(self, node: str, runs: list[dict], now: float, jobs: list[int] = ()) -> list[dict]:
        """The reply to a heartbeat of ``node``'s monitor that runs ``runs`` and whose scan sees ``jobs``:
        start orders it has not confirmed yet, a kill order for each run that is not a running job's current
        attempt there, and one for each job run there whose kill is ordered (cancelling, ending) that its scan
        still sees (started by an earlier monitor of the node, which restarted since), or, where the node of a
        job's ``mpiexec`` was lost, that has ranks on this node, until this monitor confirms (``killed``)."""
        out: list[dict] = []
        listed = set()
        for r in runs:
            jid, attempt = r["job_id"], r["attempt"]
            listed.add((jid, attempt))
            if not self.state.run_started(jid, node, attempt, r["pid"]):
                out.append({"op": "kill", "job_id": jid, "attempt": attempt})
        seen = set(jobs)
        for j in self.state.killing():
            if j.kill_on.get(node) == "":  # its runner's node lost: this node kills what is left here, and says so
                out.append({"op": "kill", "job_id": j.job_id, "attempt": j.restarts, "confirm": True})
            elif j.runner == node and j.job_id in seen and (j.job_id, j.restarts) not in listed:
                out.append({"op": "kill", "job_id": j.job_id, "attempt": j.restarts})
        mine = self.orders.get(node, {})
        for jid, order in list(mine.items()):
            j = self.state.jobs.get(jid)
            if j is None or j.state != JobState.RUNNING or j.restarts != order["attempt"] or j.runner != node \
                    or (jid, order["attempt"]) in listed:
                del mine[jid]  # confirmed, or no longer wanted
            else:
                out.append(order)
        return out

    def _log_size(self, job_id: int) -> int:
        try:
            return os.stat(self.log_path(job_id)).st_size
        except FileNotFoundError:
            return 0

    def output(self, job_id: int, node: str, attempt: int, offset: int, data: bytes) -> int:
        """Output of a job run by ``node``'s monitor, bytes ``offset``.. of its attempt: appended to the job's
        log where it continues what the log holds of this attempt (its size less ``out_base``, the size it
        had when the attempt was ordered to start: module docstring); returns how much the daemon holds now
        (a chunk sent twice is written once, also after a restart of the daemon between writing it and
        journaling it; one beyond a gap is not written, and the monitor sends again from there). A
        cancelling or ending job's output is still taken, until its monitor confirms the run ended."""
        j = self.state.jobs.get(job_id)
        if j is None:
            raise StateError("unknown_job", f"no job {job_id}")
        if (j.state != JobState.RUNNING and j.state not in KILLING) or j.restarts != attempt or j.runner != node:
            raise StateError("not_running", f"job {job_id} attempt {attempt} does not run on {node}")
        fd = open_private(self.log_path(job_id), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600,
                          owner=self._log_owner(j.owner))
        try:
            size = os.fstat(fd).st_size
            base = j.out_base
            if base is None or base > size:  # journaled by an older daemon, or the log was cut: trust the file
                base = max(0, size - j.out_at) if base is None else size
                self.state.output_base(job_id, base)
            at = size - base  # what the log holds of this attempt
            if offset <= at < offset + len(data):
                os.write(fd, data[at - offset:])
                at = offset + len(data)
        finally:
            os.close(fd)
        self.state.output_received(job_id, at)
        return at

    def _own_key(self, owner: str | None) -> dict[str, str]:
        """A job submitted with key NAME authenticates with that key (``$RESHAPE_CLIENT_KEY``), which its
        account can read, rather than the directory's default ``client`` key, which it may not."""
        if not (owner or "").startswith("key:") or self.keys_dir is None:
            return {}
        path = os.path.join(self.keys_dir, f"{owner[4:]}.key_secret")
        return {ENV_CLIENT_KEY: path} if os.path.exists(path) else {}

    def _log_owner(self, owner: str | None) -> int | None:
        try:
            return self.accounts.run_as(owner)
        except ValueError:
            return None  # no account: the log stays the daemon's

    @staticmethod
    def _job_dir(path: str, uid: int | None) -> None:
        """A job's own directory in the daemon's checkpoint root, made with ``mkdir`` 0700 and given to its
        owner (the job's user could not make it there); one that exists is used only if it is the owner's and
        not writable by group or others (:func:`reshape.runtime.ckptfiles.dir_problem`): OSError naming it."""
        from reshape.runtime.ckptfiles import dir_problem

        os.makedirs(os.path.dirname(path), exist_ok=True)
        try:
            os.mkdir(path, 0o700)
            if uid is not None:
                os.chown(path, uid, -1, follow_symlinks=False)
        except FileExistsError:
            pass
        problem = dir_problem(path, uid)
        if problem:
            raise OSError(problem)

    # ------------------------------------------------------------------ System Monitor
    def monitor(self, now: float) -> list:
        """Jobs whose processes ended give their slots back; nodes, resizes and walltimes are checked."""
        acts: list = []
        self._reap = [p for p in self._reap if p.poll() is None]
        for jid in self._exited():
            rc = self.procs.pop(jid).returncode
            self._strays.put(self.tag(jid))  # stray ranks of a crashed job
            j = self.state.jobs.get(jid)
            acts += self.state.exited(jid, rc, now, self.last_words(jid, rc) if j and not j.error else None)
        # how jobs ended first: a job that exited 0 while no daemon ran is done, not past its walltime
        acts += self._reported_ends(now)
        acts += self._lost_proxies(now)
        if now - self._last_adopted_check >= 0.5 or self.state.overdue(now, self.overtime):
            self._last_adopted_check = now
            acts += self._adopted_ends(now)
        acts += self.state.check_nodes(now)
        acts += self.state.check_resizes(now)
        acts += self.state.expire(now, self.overtime)
        return acts

    def _lost_proxies(self, now: float) -> list:
        """Jobs that lost a Hydra proxy (:class:`ProxyWatch`): failed, their processes killed."""
        acts: list = []
        while not self.proxies.lost.empty():
            jid, why = self.proxies.lost.get()
            j = self.state.jobs.get(jid)
            if j is None or j.state != JobState.RUNNING:
                continue
            p = self.procs.pop(jid, None)
            if p is not None:
                self._reap.append(p)  # killed below with the rest of the job, reaped by a later poll
            self._strays.put(self.tag(jid))
            acts += self.state.exited(jid, None, now, why)
        # the jobs to watch: our children, and adopted jobs by their session (the wrapper's pid)
        self.proxies.roots = {j.job_id: (self.procs[j.job_id].pid if j.job_id in self.procs else j.sid)
                              for j in self.state.running() if j.job_id in self.procs or (j.sid and not j.runner)}
        return acts

    def _reported_ends(self, now: float) -> list:
        """Jobs the monitor of their first node saw end."""
        acts: list = []
        for j in self.state.running():
            r = j.node_report
            if r is None:
                continue
            if j.runner is not None:  # its monitor ran mpiexec: the exit status settles it, as for our child
                if "code" in r:
                    rc = r["code"]
                    acts += self.state.exited(j.job_id, rc, now, self.last_words(j.job_id, rc) if not j.error
                                              else None)
                elif now - r["t"] > RUNNER_GRACE:  # seen ended by a scan, no exit status (its monitor restarted)
                    acts += self.state.ended_on_node(j.job_id, now)
            elif j.job_id not in self.procs:  # not our child (adopted): the monitor's word settles it
                acts += self.state.ended_on_node(j.job_id, now)
            elif now - r["t"] > MONITOR_GRACE:  # our mpiexec should have exited by now
                acts += self.state.ended_on_node(
                    j.job_id, now, f"its processes on {r['node']} ended, mpiexec did not exit within "
                                   f"{MONITOR_GRACE:.0f} s")
        return acts

    def _adopted_ends(self, now: float) -> list:
        """Adopted jobs (not our children) whose ``mpiexec`` is gone: their wrapper wrote how they ended."""
        acts: list = []
        for j in self.state.running():
            # sid None: started by this daemon in this batch, not launched yet
            if j.job_id not in self.procs and j.runner is None and j.sid is not None and not _alive(j.sid):
                self._strays.put(self.tag(j.job_id))
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

    def last_words(self, job_id: int, rc: int) -> str | None:
        """A failed job's reason when it reported none: its exit code and the error its log ends with (Python's
        last exception, else the cause Hydra gave, e.g. ``execvp error on file X``, else the last line)."""
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
        if not errors:  # Hydra's cause, without the function and source path before it
            errors = [m["cause"] for m in map(_HYDRA_LINE.match, lines) if m]
        last = (errors or lines or [""])[-1]
        return f"exit code {rc}: {last[:200]}" if last else None

    def log_tail(self, job_id: int, tail: int) -> str:
        """The last ``tail`` lines (0: all) of the last 32 KiB of the job's log."""
        return log_tail(self.log_path(job_id), tail)
