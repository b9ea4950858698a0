"""Jobs on nodes, the node's half: a node monitor runs the ``mpiexec`` of the jobs whose first node it is.

With ``reshape daemon --mpiexec-on first-node`` the daemon does not start a job's
``mpiexec`` itself when every node of the job has a monitor: it sends the monitor of
the job's first node a start order (in a heartbeat's reply). :class:`NodeRunner` runs
it here, as the daemon would (``scheduler.daemon.startup``: the job's variables on top
of this node's environment, its own session, as its owner's uid when the monitor runs
as root), so the job does not depend on the daemon's process or host: a daemon that
restarts finds it still running.

Output. ``mpiexec``'s standard output and error go to a spool file on this node
(``SPOOL/job-ID~ATTEMPT.log``, mode 0600), which the monitor streams to the daemon
(``job_output``: offset and bytes; the daemon appends to the job's log and answers how
much it holds, so a chunk sent twice is written once and nothing is lost while the daemon
is away). Exit. A waiter thread notices ``mpiexec`` exit, kills what is left of the job
on this node (its tag) and wakes the monitor, which sends the rest of the output and then
``job_ended`` with the exit status (``code``: as a shell reports it, 128 + N for a
signal N), again until the daemon answers. A spool file is removed once the daemon
acknowledged the exit.

Kill. A kill order (a cancelled job, or a run the daemon does not expect) ends every process
of the run on this node (its tag: SIGTERM, SIGKILL after a grace period); its ``mpiexec``
exiting then ends the run as above, and its ``job_ended`` (sent after the waiter killed what
was left of the run here) is what confirms the kill to the daemon: a cancelled job stays
``cancelling`` there, holding its slots, until then (``scheduler.core.state``, "Ending a job
run on a node"). A run an earlier monitor of this node started (this one restarted since) is
killed by its tag; the process scan then reports its end. So are the ranks on this node of a job
whose ``mpiexec``'s node was lost (``scheduler.core.kills``): once no process of that attempt is
left here, the heartbeat says so (``killed``), which frees the job's slots here. The daemon takes the output of
such a run until that confirmation; it writes each byte of it to the job's log once,
counting what the log file holds (a chunk sent again after a restart of the daemon is not
written twice).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import threading
from dataclasses import dataclass, field

from reshape.joblink import jobenv as E
from reshape.joblink.launch import kill_tagged, sweep_ipc
from scheduler.daemon.startup import attempt_tag, full_env, user_ids
from scheduler.daemon.statedir import open_private

__all__ = ["NodeRunner", "Run"]


@dataclass
class Run:
    """One attempt of a job whose ``mpiexec`` runs here."""

    job_id: int
    attempt: int
    tag: str
    log: str  # the spool file with its output
    proc: subprocess.Popen | None = None
    code: int | None = None  # exit status once it ended (128 + N: killed by signal N)
    sent: int = 0  # bytes of its output the daemon holds
    dropped: bool = False  # the daemon no longer wants its output (the job ended there)
    ended: threading.Event = field(default_factory=threading.Event)

    @property
    def key(self) -> tuple[int, int]:
        return self.job_id, self.attempt

    @property
    def pid(self) -> int:
        return self.proc.pid if self.proc is not None else 0


class NodeRunner:
    """The jobs this node's monitor runs (module docstring). ``wake`` is set when one ends."""

    def __init__(self, spool: str, wake: threading.Event, say=print):
        self.spool = spool
        self.wake = wake
        self.say = say
        self.runs: dict[tuple[int, int], Run] = {}
        self.done: set[tuple[int, int]] = set()  # runs reported and forgotten: a repeated start order is ignored
        self.tag_prefix: str | None = None  # the daemon's job tags' prefix (registration): for runs not known here
        self._killing: dict[tuple[int, int], threading.Thread] = {}  # kills by tag of runs not known here
        self._confirm: set[tuple[int, int]] = set()  # kills the daemon wants confirmed (:meth:`killed`)

    def running(self) -> list[dict]:
        """The runs whose ``mpiexec`` still runs, as a heartbeat lists them."""
        return [{"job_id": r.job_id, "attempt": r.attempt, "pid": r.pid}
                for r in self.runs.values() if not r.ended.is_set()]

    def owns(self, key: tuple[int, int]) -> bool:
        return key in self.runs or key in self.done

    # ---------------------------------------------------------------- orders
    def order(self, order: dict) -> None:
        """Carry out one order from a heartbeat's reply (``start`` or ``kill``); a bad one is logged."""
        try:
            op, key = order["op"], (int(order["job_id"]), int(order["attempt"]))
        except (KeyError, TypeError, ValueError):
            self.say(f"ignored a malformed order: {str(order)[:200]}")
            return
        if op == "start":
            if not self.owns(key):
                self.start(key, order)
        elif op == "kill":
            if order.get("confirm") is True:  # the ranks here of a job whose mpiexec's node was lost
                self._confirm.add(key)
            self.kill(key)
        else:
            self.say(f"ignored an order of unknown kind {op!r}")

    def start(self, key: tuple[int, int], order: dict) -> None:
        """Start the job's ``mpiexec``; a start that fails is a run that ended with status 127, its reason
        in its output (the daemon fails the job with it, as for a job it could not start itself)."""
        env_extra = order.get("env") or {}
        run = Run(key[0], key[1], str(env_extra.get(E.JOB_TAG, "")),
                  os.path.join(self.spool, f"job-{key[0]}~{key[1]}.log"))
        self.runs[key] = run
        uid = order.get("uid")
        named = isinstance(uid, int) and not isinstance(uid, bool) and uid >= 0
        uid = uid if named else None
        try:
            os.makedirs(self.spool, mode=0o700, exist_ok=True)
            fd = open_private(run.log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600,
                              owner=uid if uid is not None and os.geteuid() == 0 else None)
        except OSError as e:
            self.say(f"job {key[0]}: cannot open its output file {run.log}: {e}")
            run.code = 127
            run.ended.set()
            return
        try:
            if not named:  # never "as whoever this monitor is" (root): the daemon always names the uid
                raise ValueError(f"the start order names no uid to run as ({order.get('uid')!r}): refused")
            if not isinstance(order.get("argv"), list) or not order["argv"] or not run.tag:
                raise ValueError("the start order has no argv or no job tag")
            env = full_env({str(k): str(v) for k, v in env_extra.items()})
            if uid is not None and uid != os.geteuid() and os.geteuid() != 0:
                raise OSError(f"this monitor runs as uid {os.geteuid()} and cannot start a job as uid {uid}")
            ids = user_ids(uid if uid != os.geteuid() else None, env)
            run.proc = subprocess.Popen([str(a) for a in order["argv"]], stdout=fd, stderr=subprocess.STDOUT,
                                        stdin=subprocess.DEVNULL, env=env, cwd=order.get("cwd") or None,
                                        start_new_session=True, **ids)
        except (OSError, ValueError, subprocess.SubprocessError) as e:
            os.write(fd, f"reshape nodemon: cannot start job {key[0]}: {e}\n".encode())
            run.code = 127
            run.ended.set()
            self.wake.set()
            return
        finally:
            os.close(fd)
        threading.Thread(target=self._wait, args=(run,), name=f"job-{key[0]}", daemon=True).start()
        self.say(f"job {key[0]}: started mpiexec (pid {run.proc.pid}, attempt {key[1]})")

    def _wait(self, run: Run) -> None:
        assert run.proc is not None
        rc = run.proc.wait()
        with contextlib.suppress(Exception):  # what is left of the job here (its ranks call setsid)
            kill_tagged([run.tag], E.JOB_TAG, 0.5)
            sweep_ipc()  # and the shared memory of ranks killed before they could remove it
        run.code = rc if rc >= 0 else 128 - rc
        run.ended.set()
        self.wake.set()

    def to_confirm(self) -> bool:
        return bool(self._confirm)

    def killed(self, here: set[str]) -> list[dict]:
        """The kills the daemon wants confirmed (``confirm``) that were carried out (their thread done), with no
        process of them left here (``here``: the tags of this node's processes): what a heartbeat confirms
        (``killed``). One with processes left is killed again when the daemon orders it again."""
        out = []
        for k in sorted(self._confirm):
            t = self._killing.get(k)
            if (t is None or not t.is_alive()) and attempt_tag(self.tag_prefix or "", *k) not in here:
                out.append({"job_id": k[0], "attempt": k[1]})
        return out

    def prune(self, ordered: set) -> None:
        """Forget the kills carried out that the daemon no longer orders (it took their confirmation)."""
        self._confirm &= ordered
        for k in [k for k, t in self._killing.items() if k not in ordered and not t.is_alive()]:
            del self._killing[k]

    def kill(self, key: tuple[int, int]) -> None:
        """End a run the daemon does not want (any more): every process of it on this node, in a thread
        (a grace period of SIGTERM before SIGKILL); its exit is reported as any other. A run not known here
        is killed by its tag: one an earlier monitor of this node started (the process scan reports its end),
        or the ranks here of a job whose ``mpiexec``'s node was lost (:meth:`killed` confirms it)."""
        run = self.runs.get(key)
        if run is None:  # started by an earlier monitor of this node (this one restarted): by its tag
            t = self._killing.get(key)
            if self.tag_prefix is None or key in self.done or (t is not None and t.is_alive()):
                return
            tag = attempt_tag(self.tag_prefix, *key)
            self.say(f"job {key[0]}: killing attempt {key[1]} by its tag, not a run of this monitor (the daemon's "
                     "order)")
            t = self._killing[key] = threading.Thread(target=kill_tagged, args=([tag], E.JOB_TAG, 1.0), daemon=True)
            t.start()
            return
        if run.ended.is_set():
            return
        self.say(f"job {key[0]}: killing attempt {key[1]} (the daemon's order)")
        threading.Thread(target=kill_tagged, args=([run.tag], E.JOB_TAG, 1.0), daemon=True).start()

    # ---------------------------------------------------------------- what goes to the daemon
    def unsent(self, run: Run, limit: int) -> tuple[int, bytes]:
        """(offset, up to ``limit`` bytes) of the run's output the daemon does not hold yet."""
        try:
            with open(run.log, "rb") as f:
                f.seek(run.sent)
                return run.sent, f.read(limit)
        except OSError:
            return run.sent, b""

    def forget(self, run: Run) -> None:
        """The daemon acknowledged the run's end: its spool file goes."""
        self.runs.pop(run.key, None)
        self.done.add(run.key)
        with contextlib.suppress(OSError):
            os.unlink(run.log)
