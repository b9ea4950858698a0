"""Node monitors against the real daemon on loopback (no root needed): a monitor killed mid-job
takes its node down within seconds (job failed, processes killed, slots out of the pool), a new
monitor brings it back, and the first node's monitor settles a job whose mpiexec hangs.

The same on a namespace cluster, with nodes that really disappear: ``tests/test_netns.py``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from reshape.joblink.client import Connection
from reshape.joblink.launch import kill_session
from scheduler.daemon.startup import job_pids, job_tag
from tests.helpers import ROOT, free_port, kill_journaled_jobs, wait_for

pytestmark = pytest.mark.procs

SLEEPER = "import time; from mpi4py import MPI; time.sleep({})"


class Cluster:
    """A daemon on loopback plus node monitors, all killed at the end (with every job they journaled)."""

    def __init__(self, tmp, slots=2, timeout=1.0, extra=(), keys=None):
        self.dir = str(tmp)
        self.keys = keys
        self.endpoint = f"tcp://127.0.0.1:{free_port()}"
        self.procs: list[subprocess.Popen] = []
        self.daemon = self._spawn("daemon.err", "daemon", "--endpoint", self.endpoint, "--state-dir", self.dir,
                                  "--slots", str(slots), "--node-timeout", str(timeout), *extra,
                                  *(("--keys", keys) if keys else ()))
        try:
            wait_for(self.ping, 15)
        except BaseException:
            self.close()
            raise

    def _spawn(self, log, *args, env=None):
        with open(os.path.join(self.dir, log), "ab") as err:
            p = subprocess.Popen([sys.executable, "-m", "scheduler.cli", *args], cwd=ROOT, start_new_session=True,
                                 stdout=err, stderr=subprocess.STDOUT, env=env)
        self.procs.append(p)
        return p

    def monitor(self, node="localhost", *extra):
        keys = ("--keys", self.keys) if self.keys else ()
        return self._spawn(f"nodemon-{node}.log", "nodemon", "--daemon", self.endpoint, "--node", node, *keys,
                           *extra)

    def ping(self):
        try:
            self.req("ping", timeout=0.5)
            return True
        except Exception:
            return False

    def req(self, type_, body=None, timeout=5.0):
        c = Connection(self.endpoint, timeout, keys=self.keys)
        try:
            return c.request(type_, body or {}).body
        finally:
            c.close()

    def status(self):
        st = self.req("status")
        assert st["free_slots"] == st["total_slots"] - sum(j["nprocs"] for j in st["running"]), st
        assert st["total_slots"] == sum(n["slots"] for n in st["nodes"] if n["state"] != "down"), st
        return st

    def node(self, host="localhost"):
        return next(n for n in self.status()["nodes"] if n["host"] == host)

    def job(self, jid):
        return next(j for j in self.req("history")["jobs"] if j["job_id"] == jid)

    def log(self, name):
        with open(os.path.join(self.dir, name), errors="replace") as f:
            return f.read()

    def close(self):
        for p in reversed(self.procs):
            if p.poll() is None:
                kill_session(p.pid, grace=1.0)
        kill_journaled_jobs(self.dir)


@pytest.fixture
def cluster(tmp_path):
    made = []

    def make(**kw):
        c = Cluster(tmp_path, **kw)
        made.append(c)
        return c

    try:
        yield make
    finally:
        for c in made:
            c.close()


def sleeper(seconds, nprocs=2):
    return {"name": f"sleep{seconds}", "command": ["python", "-c", SLEEPER.format(seconds)], "nprocs": nprocs,
            "resizable": False}


def test_killed_monitor_takes_its_node_down_fails_its_job_and_a_new_monitor_brings_it_back(cluster):
    c = cluster(slots=2, timeout=1.0)
    assert c.node()["state"] == "unmonitored"
    mon = c.monitor()
    wait_for(lambda: c.node()["state"] == "up", 10)
    a = c.req("submit", {"job": sleeper(60)})["job_id"]
    tag = job_tag(c.dir, a)
    wait_for(lambda: c.node()["jobs"] == [a], 15)  # the monitor sees it as its first node's job
    assert len(job_pids(tag)) >= 3
    os.kill(mon.pid, signal.SIGKILL)
    t0 = time.monotonic()
    seen = []
    while time.monotonic() - t0 < 10:
        st = c.status()  # consistent at every moment (checked in status())
        seen.append((st["total_slots"], [j["job_id"] for j in st["running"]]))
        if c.node()["state"] == "down":
            break
        time.sleep(0.1)
    node = c.node()
    assert node["state"] == "down" and node["reason"].startswith("no heartbeat for "), (node, seen)
    st = c.status()
    assert st["total_slots"] == 0 and st["capacity_slots"] == 2 and not st["running"]
    j = c.job(a)
    assert j["state"] == "failed" and "node localhost down" in j["error"]
    wait_for(lambda: not job_pids(tag), 5)  # its processes were killed
    b = c.req("submit", {"job": sleeper(0.5)})["job_id"]  # waits for the node
    time.sleep(0.5)
    assert c.job(b)["state"] == "queued"
    c.monitor()
    wait_for(lambda: c.job(b)["state"] == "done", 20)
    kinds = [(e["host"], e["kind"]) for e in c.req("history")["node_events"]]
    assert kinds == [("localhost", "up"), ("localhost", "down"), ("localhost", "rejoin")]
    assert "registered with" in c.log("nodemon-localhost.log")


def test_first_node_monitor_settles_a_job_whose_mpiexec_hangs(cluster):
    c = cluster(slots=2, timeout=2.0)
    c.monitor()
    wait_for(lambda: c.node()["state"] == "up", 10)
    a = c.req("submit", {"job": sleeper(60)})["job_id"]
    tag = job_tag(c.dir, a)
    wait_for(lambda: c.node()["jobs"] == [a], 15)
    sid = c.job(a)["sid"]  # Job Startup's wrapper; its child is mpiexec
    mpiexec = next(p.pid for p in psutil.Process(sid).children() if p.name().startswith("mpiexec"))
    os.kill(mpiexec, signal.SIGSTOP)  # mpiexec hangs ...
    for pid in job_pids(tag):
        if pid not in (sid, mpiexec):
            os.kill(pid, signal.SIGKILL)  # ... while its proxy and ranks die
    wait_for(lambda: c.job(a)["state"] != "running", 15)
    j = c.job(a)
    assert j["state"] == "failed" and "mpiexec did not exit" in j["error"], j
    assert j["node_report"]["node"] == "localhost" and j["node_report"]["status"] == "end"
    wait_for(lambda: not job_pids(tag), 5)
    assert "job 1: ended here (reported)" in c.log("nodemon-localhost.log")
    assert c.node()["state"] == "up" and c.status()["free_slots"] == 2


def test_monitor_of_an_unknown_node_is_refused_with_a_message(cluster):
    c = cluster()
    mon = c.monitor("nosuchnode")
    assert mon.wait(15) == 2
    assert "refused this node" in c.log("nodemon-nosuchnode.log")
    assert c.node()["state"] == "unmonitored"  # nothing else changed


def test_status_json_lists_node_states(cluster):
    c = cluster(timeout=1.0)
    c.monitor()
    wait_for(lambda: c.node()["state"] == "up", 10)
    out = subprocess.run([sys.executable, "-m", "scheduler.cli", "status", "--endpoint", c.endpoint],
                         capture_output=True, text=True, cwd=ROOT, timeout=20)
    assert "NODE" in out.stdout and "localhost  up" in out.stdout
    js = json.loads(subprocess.run([sys.executable, "-m", "scheduler.cli", "status", "--json", "--endpoint",
                                    c.endpoint], capture_output=True, text=True, cwd=ROOT, timeout=20).stdout)
    assert js["nodes"][0]["monitor"]["pid"] > 0 and js["daemon"]["auth"] == "none"


def test_a_kill_to_confirm_is_confirmed_once_no_process_of_the_attempt_is_left_here(tmp_path):
    """A monitor ordered to kill, by its tag, what is left here of a job whose ``mpiexec``'s node was lost
    (``confirm``) kills it and lists it in ``killed`` only once no process of that attempt is left in its
    namespace (an attempt's tag is its own: another attempt's process is not waited for); a kill order
    without ``confirm`` (every earlier daemon's) is never reported; an order no longer repeated is forgotten."""
    import threading

    from scheduler.daemon.startup import TAG, attempt_tag, tag_prefix
    from scheduler.node.monitor import tags_here
    from scheduler.node.runner import NodeRunner

    prefix = tag_prefix(str(tmp_path))
    procs = {key: subprocess.Popen(["sleep", "600"], env={**os.environ, TAG: attempt_tag(prefix, *key)},
                                   start_new_session=True) for key in ((7, 0), (7, 1), (8, 0))}
    runner = NodeRunner(str(tmp_path / "spool"), threading.Event(), say=lambda text: None)
    runner.tag_prefix = prefix
    try:
        runner.order({"op": "kill", "job_id": 8, "attempt": 0})  # no confirm: killed, never reported
        runner.order({"op": "kill", "job_id": 7, "attempt": 0, "confirm": True})
        assert runner.to_confirm()
        assert runner.killed({attempt_tag(prefix, 7, 0)}) == []  # a process of it is left (or its kill runs)
        procs[(7, 0)].wait(30)
        procs[(8, 0)].wait(30)
        got = wait_for(lambda: runner.killed(tags_here(prefix)), 30, every=0.1)
        assert got == [{"job_id": 7, "attempt": 0}], got
        assert procs[(7, 1)].poll() is None  # the next attempt's process: not this kill's
        runner.prune({(7, 0)})  # ordered again: kept
        assert runner.to_confirm()
        runner.prune(set())  # the daemon took the confirmation
        assert not runner.to_confirm() and runner.killed(set()) == []
    finally:
        for p in procs.values():
            p.kill()
            p.wait()
