"""Small helpers shared by the tests that start daemons and monitors."""

from __future__ import annotations

import os
import signal
import socket
import sqlite3
import subprocess
import sys

from reshape.joblink.client import Connection
from reshape.joblink.launch import kill_session
from scheduler.daemon.startup import job_tag, kill_jobs
from scheduler.testing.compose import wait_for

TIMINGS: dict[str, float] = {}  # seconds of the cluster tier's steps; conftest prints them after the run
NOTES: dict[str, str] = {}  # other observations printed with them
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def free_port() -> int:
    """A TCP port on loopback that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def repeated_undone_expansions(sizes: list[int]) -> list[tuple[int, int]]:
    """Expansions ``p -> q`` made again after the job had gone ``p -> q -> p`` (no queue: a sweet-spot return)."""
    undone: set[tuple[int, int]] = set()
    out = []
    for i in range(1, len(sizes)):
        p, q = sizes[i - 1], sizes[i]
        if q > p and (p, q) in undone:
            out.append((p, q))
        if i >= 2 and sizes[i - 2] == q and p > q:
            undone.add((q, p))
    return out


def kill_journaled_jobs(state_dir: str) -> None:
    """Kill every process of every job in the daemon journal of ``state_dir`` (test cleanup)."""
    db = os.path.join(state_dir, "journal.sqlite")
    if os.path.exists(db):
        con = sqlite3.connect(db)
        tags = [job_tag(state_dir, jid) for (jid,) in con.execute("SELECT job_id FROM jobs")]
        con.close()
        kill_jobs(tags)  # one scan of the process table for all of them


class DaemonProc:
    def __init__(self, state_dir: str, slots: int, app: str = "easy", remap: str = "reshape",
                 extra: tuple[str, ...] = (), endpoint: str | None = None, prefix: tuple[str, ...] = ()):
        """``prefix``: a command the daemon's command line is given to (e.g. one that limits its files)."""
        self.state_dir = state_dir
        self.prefix = list(prefix)
        self.endpoint = endpoint or f"tcp://127.0.0.1:{free_port()}"
        self.args = ["--slots", str(slots), "--app-policy", app, "--remap-policy", remap, *extra]
        self.proc: subprocess.Popen | None = None
        self.start()

    def start(self) -> None:
        with open(os.path.join(self.state_dir, "daemon.err"), "ab") as err:
            self.proc = subprocess.Popen(
                [*self.prefix, sys.executable, "-m", "scheduler.cli", "daemon", "--endpoint", self.endpoint,
                 "--state-dir", self.state_dir, *self.args],
                cwd=ROOT, start_new_session=True, stdout=subprocess.DEVNULL, stderr=err)
        try:
            wait_for(lambda: self.ping(), 15)
        except BaseException:  # a daemon that never answered is not left behind
            kill_session(self.proc.pid, grace=1.0)
            raise

    def ping(self) -> bool:
        try:
            self.req("ping", timeout=0.5)
            return True
        except Exception:
            return False

    def req(self, type_: str, body: dict | None = None, job_id: int | None = None, timeout: float = 5):
        c = Connection(self.endpoint, timeout)
        try:
            return c.request(type_, body or {}, job_id=job_id).body
        finally:
            c.close()

    def submit(self, **job) -> int:
        return self.req("submit", {"job": job})["job_id"]

    def job(self, jid: int) -> dict:
        return next(j for j in self.req("history")["jobs"] if j["job_id"] == jid)

    def stderr(self) -> str:
        with open(os.path.join(self.state_dir, "daemon.err"), errors="replace") as f:
            return f.read()[-3000:]

    def kill9(self) -> None:
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(5)

    def cleanup(self) -> None:
        if self.proc and self.proc.poll() is None:
            kill_session(self.proc.pid, grace=1.0)
        kill_journaled_jobs(self.state_dir)


def expansion_times(events: list[dict]) -> list[str]:
    """``"2->4 0.61"`` per expansion of a job's history: seconds from the daemon's advice to the job's
    confirmation (spawn, connect, redistribute, plus the wait for the job's next resize point)."""
    out, advised = [], {}
    for e in events:
        if e["kind"] == "advise" and e["detail"].startswith("expand "):
            advised[(e["job_id"], e["detail"].split()[1].rstrip(":"))] = e["t"]
        elif e["kind"] == "expand" and (e["job_id"], e["detail"]) in advised:
            out.append(f"{e['detail']} {e['t'] - advised.pop((e['job_id'], e['detail'])):.2f}")
    return out
