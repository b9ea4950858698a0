"""Jobs on nodes (``reshape daemon --mpiexec-on first-node``) against the real daemon on loopback: the node
monitor of a job's first node runs its ``mpiexec``, streams its output to the job's log and reports its exit
status; a ``kill -9`` of the daemon mid-job leaves the job running, and the restarted daemon re-adopts it:
it ends ``done`` with no restart and the same result as a run that never saw a failure. A cancelled job is
``cancelling`` (its slots held) until the monitor confirms its processes are gone; ``stop --kill-jobs`` waits
for those confirmations; a chunk of output the daemon wrote but did not journal is not written twice.

The same in the compose cluster, with ``docker-compose restart head``: ``tests/test_cluster_compose.py``.
"""

from __future__ import annotations

import base64
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time

import psutil
import pytest

from reshape.joblink.launch import mpi_env
from scheduler.core.jobfile import JobDesc
from scheduler.daemon.startup import job_argv, job_pids, job_tag
from tests.helpers import ROOT, wait_for
from tests.test_nodemon import Cluster

pytestmark = pytest.mark.procs

HEAT = ["python", "examples/heat.py", "--n", "64"]


class NodeCluster(Cluster):
    """A daemon that runs jobs on their first node, and one node monitor (``localhost``); ``nodes``: a pool of these
    names (1 slot each) instead, all of this machine, each with its monitor (``mons``). A pool of this machine only
    runs jobs' ``mpiexec`` on the head by default: these tests ask for ``first-node``."""

    def __init__(self, tmp, timeout: float = 1.0, extra=(), nodes=(), **kw):
        self.args = ("--mpiexec-on", "first-node", *extra)
        if nodes:
            pool = os.path.join(str(tmp), "pool.toml")
            with open(pool, "w") as f:
                f.write("".join(f'[[node]]\nhost = "{n}"\nslots = 1\n\n' for n in nodes))
            self.args += ("--config", pool)
        self.timeout = timeout
        super().__init__(tmp, extra=self.args, timeout=timeout, **kw)
        self.mons = {n: self.monitor(n, "--spool", os.path.join(self.dir, f"spool-{n}")) for n in nodes}
        if not nodes:
            self.mon = self.monitor("localhost", "--spool", os.path.join(self.dir, "spool"))
        wait_for(lambda: all(n["state"] == "up" for n in self.status()["nodes"]), 15)

    def restart_daemon(self, meanwhile=None) -> None:
        """``kill -9`` of the daemon (``meanwhile()`` runs while it is down), and a new one on the same state
        directory and endpoint."""
        self.daemon.send_signal(signal.SIGKILL)
        self.daemon.wait(10)
        if meanwhile is not None:
            meanwhile()
        self.daemon = self._spawn("daemon.err", "daemon", "--endpoint", self.endpoint, "--state-dir", self.dir,
                                  "--slots", "2", "--node-timeout", f"{self.timeout:g}", *self.args)
        wait_for(self.ping, 15)

    def submit(self, desc: dict) -> int:
        return self.req("submit", {"job": desc})["job_id"]

    def finished(self, jid: int, timeout: float) -> dict:
        return wait_for(lambda: (j := self.job(jid))["state"] not in ("queued", "waiting", "running") and j,
                        timeout, every=0.2)

    def job_log(self, jid: int) -> str:
        return self.req("log", {"job_id": jid, "tail": 0})["text"]

    def events(self, jid: int) -> list[tuple[str, str]]:
        """The job's history events: (kind, detail)."""
        return [(e["kind"], e["detail"]) for e in self.req("history")["events"] if e["job_id"] == jid]


@pytest.fixture
def nodes(tmp_path):
    c = NodeCluster(tmp_path, slots=2, timeout=1.0)
    try:
        yield c
    finally:
        c.close()


@pytest.fixture
def restartable(tmp_path):
    """For tests that restart the daemon: a node timeout above the monitor's request timeout (2 s), so that
    a heartbeat lost with the killed daemon is not taken for a dead node by the new one (the job would fail
    with its node)."""
    c = NodeCluster(tmp_path, slots=2, timeout=3.0)
    try:
        yield c
    finally:
        c.close()


def sha(text: str) -> str:
    m = re.search(r"sha256 ([0-9a-f]{16})", text)
    assert m, text[-2000:]
    return m.group(1)


def reference(steps: int) -> str:
    """The field of a run of heat with no daemon and no failure."""
    env = mpi_env()
    argv = job_argv(JobDesc(name="heat", command=(*HEAT, "--steps", str(steps)), nprocs=2), ["localhost"] * 2, env)
    r = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return sha(r.stdout)


def heat(steps: int, work: float, **extra) -> dict:
    return {"name": "heat", "command": [*HEAT, "--steps", str(steps), "--work", str(work)], "nprocs": 2,
            "resizable": False, **extra}


def test_the_first_nodes_monitor_runs_the_job_and_its_output_reaches_the_log(nodes):
    c = nodes
    jid = c.submit(heat(12, 0.05))
    tag = job_tag(c.dir, jid)
    pids = wait_for(lambda: job_pids(tag), 20)
    parents = {psutil.Process(p).ppid() for p in pids}
    assert c.mon.pid in parents  # mpiexec is the monitor's child, not the daemon's
    assert c.daemon.pid not in parents
    job = c.finished(jid, 60)
    assert job["state"] == "done" and job["runner"] == "localhost" and job["restarts"] == 0, job
    assert sha(c.job_log(jid)) == reference(12)
    assert job["exit_code"] == 0
    assert os.listdir(os.path.join(c.dir, "spool")) == []  # the spool file went once the daemon had it all
    assert "mpiexec exited 0 (reported)" in c.log("nodemon-localhost.log")


def test_a_kill_9_of_the_daemon_leaves_the_job_running_and_the_new_daemon_adopts_it(restartable):
    c = restartable
    steps = 40
    jid = c.submit(heat(steps, 0.25))
    wait_for(lambda: c.job(jid)["iterations"] >= 3, 60, every=0.2)
    t0 = time.monotonic()
    c.restart_daemon()
    t_back = time.monotonic() - t0
    again = wait_for(lambda: next((r for r in c.status()["running"] if r["job_id"] == jid and r["connected"]),
                                  None), 30, every=0.1)
    t_reporting = time.monotonic() - t0
    job = c.finished(jid, 120)
    assert job["state"] == "done" and job["restarts"] == 0 and job["iterations_lost"] == 0, job
    assert job["failures"] == [], job
    text = c.job_log(jid)
    assert sha(text) == reference(steps)
    assert text.count("sha256") == 1  # one run, its output once
    print(f"\ndaemon kill -9 -> new daemon answering {t_back:.2f} s, job reporting again {t_reporting:.2f} s "
          f"(iteration {again['iterations']})")


def test_cancel_goes_through_the_monitor_and_the_job_is_cancelled_only_once_its_processes_are_gone(nodes):
    """The daemon kills nothing itself: the monitor gets the kill; until it confirms, the job is
    ``cancelling`` and holds its slots (the job queued behind it does not start)."""
    c = nodes
    jid = c.submit(heat(400, 0.2))
    nxt = c.submit(heat(400, 0.2))  # needs the same 2 slots: waits for them
    tag = job_tag(c.dir, jid)
    wait_for(lambda: job_pids(tag), 20)
    t0 = time.monotonic()
    rep = c.req("cancel", {"job_id": jid})
    assert rep == {"job_id": jid, "state": "cancelling", "runner": "localhost"}, rep
    states: list[str] = []
    wait_for(held_until_confirmed(c, jid, nxt, "cancelling", "not yet confirmed by the monitor of localhost",
                                  "cancelled", states), 20, every=0.05)
    print(f"\ncancel -> job cancelled, no process of it left: {time.monotonic() - t0:.2f} s "
          f"({states.count('cancelling')} polls saw it cancelling)")
    job = c.job(jid)
    assert job["error"] is None, job
    wait_for(lambda: c.job(nxt)["state"] == "running", 20)  # the freed slots go to the next job
    c.req("cancel", {"job_id": nxt})
    wait_for(lambda: c.job(nxt)["state"] == "cancelled", 20)
    assert not job_pids(job_tag(c.dir, nxt))
    assert c.status()["free_slots"] == 2


def held_until_confirmed(c, jid: int, nxt: int, killing: str, detail: str, final: str, polls: list[str]):
    """A ``wait_for`` predicate: while job ``jid`` is ``killing`` (cancelling, ending), its row says ``detail`` and
    it holds its slots (job ``nxt`` does not start); once it is not, it is ``final`` and no process of it is left."""
    tag = job_tag(c.dir, jid)

    def check() -> bool:
        st = c.status()  # first the state, then the processes: once it is not killing, none may be left
        row = next((r for r in st["running"] if r["job_id"] == jid), None)
        if row is not None and row["state"] == "running":
            return False  # its kill not ordered yet
        if row is not None:
            polls.append(row["state"])
            assert row["state"] == killing and detail in row["detail"], row
            assert st["free_slots"] == 0 and not any(r["job_id"] == nxt for r in st["running"]), st
            return False
        state, alive = c.job(jid)["state"], job_pids(tag)
        assert state == final, state
        assert not alive, f"job {jid} shows {state} while its processes {alive} still run"
        return True

    return check


def journaled(c, jid: int) -> dict:
    db = sqlite3.connect(os.path.join(c.dir, "journal.sqlite"))
    try:
        return json.loads(db.execute("SELECT record FROM jobs WHERE job_id = ?", (jid,)).fetchone()[0])
    finally:
        db.close()


def test_stop_kill_jobs_exits_once_the_monitor_confirmed_the_kills(nodes):
    c = nodes
    jid = c.submit(heat(400, 0.2))
    tag = job_tag(c.dir, jid)
    wait_for(lambda: job_pids(tag), 20)
    t0 = time.monotonic()
    c.req("stop", {"kill_jobs": True})
    c.daemon.wait(30)
    alive = job_pids(tag)
    print(f"\nstop --kill-jobs -> daemon exited {time.monotonic() - t0:.2f} s later")
    assert not alive, f"the daemon exited while the job's processes {alive} still ran"
    assert "every kill confirmed" in c.log("daemon.err")
    assert journaled(c, jid)["state"] == "cancelled"


def test_stop_kill_jobs_names_the_kills_an_unreachable_monitor_did_not_confirm(nodes):
    """A monitor that does not answer (stopped) cannot confirm: the daemon stops after a bounded wait, names
    the job, and leaves it ``cancelling``; a daemon started again has the monitor kill it and confirm."""
    c = nodes
    jid = c.submit(heat(400, 0.2))
    tag = job_tag(c.dir, jid)
    wait_for(lambda: job_pids(tag), 20)
    c.mon.send_signal(signal.SIGSTOP)
    try:
        c.req("stop", {"kill_jobs": True})
        c.daemon.wait(60)  # it gives up after the node timeout plus KILL_CONFIRM_GRACE: no hang
    finally:
        c.mon.send_signal(signal.SIGCONT)
    err = c.log("daemon.err")
    assert f"job {jid}'s kill was not confirmed by the monitor of localhost" in err, err[-2000:]
    assert job_pids(tag)  # nobody killed it: the daemon said so
    assert journaled(c, jid)["state"] == "cancelling"
    c.daemon = c._spawn("daemon.err", "daemon", "--endpoint", c.endpoint, "--state-dir", c.dir, "--slots", "2",
                        "--node-timeout", "1.0", *c.args)
    wait_for(c.ping, 15)
    wait_for(lambda: c.job(jid)["state"] == "cancelled", 30, every=0.2)
    wait_for(lambda: not job_pids(tag), 30, every=0.2)  # the monitor's kill; SIGKILL's teardown on a busy host
    assert c.status()["free_slots"] == 2


def test_a_run_killed_on_its_node_is_a_loss_and_the_job_restarts_from_its_checkpoint(nodes):
    """The exit status the monitor reports classifies the end as the daemon's own child's would
    (``scheduler.core.restarts``): mpiexec killed by SIGKILL (137) of a job with checkpoints is a loss."""
    c = nodes
    steps = 40
    jid = c.submit(heat(steps, 0.15, checkpoint="every:5"))
    wait_for(lambda: c.job(jid)["iterations"] >= 12, 60, every=0.2)
    mpiexec = [p for p in job_pids(job_tag(c.dir, jid)) if psutil.Process(p).name().startswith("mpiexec")]
    assert mpiexec
    os.kill(mpiexec[0], signal.SIGKILL)
    job = c.finished(jid, 120)
    assert job["state"] == "done" and job["restarts"] == 1, job
    assert "exit code 137" in job["failures"][0], job
    assert sha(c.job_log(jid)) == reference(steps)


def test_bad_node_reports_are_refused_with_a_reason(nodes):
    c = nodes
    from reshape.joblink.client import Connection, DaemonError

    conn = Connection(c.endpoint, 5.0)
    body = {"node": "localhost", "incarnation": "x", "attempt": 0, "offset": 0}
    try:
        with pytest.raises(DaemonError) as e:
            conn.request("job_output", {**body, "data": "not base64!"}, job_id=1)
        assert e.value.code == "bad_field" and "not base64" in str(e.value)
        with pytest.raises(DaemonError) as e:
            conn.request("job_output", {**body, "data": ""}, job_id=99)
        assert e.value.code == "unknown_job"
        jid = c.submit(heat(400, 0.2))
        wait_for(lambda: c.job(jid)["runner"] == "localhost" and c.job(jid)["sid"], 20)
        with pytest.raises(DaemonError) as e:  # a monitor that does not run the job may not give its exit status
            conn.request("job_ended", {"node": "elsewhere", "incarnation": "x", "status": "end", "code": 0},
                         job_id=jid)
        assert e.value.code == "not_first_node" and "only its monitor reports its exit status" in str(e.value)
        assert c.job(jid)["state"] == "running"
        c.req("cancel", {"job_id": jid})
    finally:
        conn.close()


def test_output_beyond_the_jobs_rate_reaches_its_log_whole_and_once(nodes):
    """A job writes 11 MiB at once, more than a job's output may bring at once (8 MiB, then 1 MiB a second): the
    daemon takes what the rate allows and none of the rest for now, its monitor sends the rest again, and the
    log holds every byte once, in order."""
    c = nodes
    lines = 1_150_000  # 10 bytes each: 11.0 MiB
    code = "\n".join(["import os", f"data = b''.join(b'%09d\\n' % i for i in range({lines}))",
                      "view = memoryview(data)", "while view:", "    view = view[os.write(1, view):]"])
    jid = c.submit({"name": "loud", "command": [sys.executable, "-c", code], "nprocs": 1, "resizable": False})
    job = c.finished(jid, 120)
    assert job["state"] == "done" and job["runner"] == "localhost", (job["state"], job.get("error"))
    with open(os.path.join(c.dir, "logs", f"job-{jid}.log"), "rb") as f:
        got = f.read()
    want = b"".join(b"%09d\n" % i for i in range(lines))
    assert len(got) == len(want) and got == want, (len(got), len(want))
    deferred = c.status()["daemon"]["job_output_deferred"]
    assert deferred > 0  # the rate held some of it back: what reached the log was sent again
    print(f"\n{len(want) / (1 << 20):.1f} MiB of output: {deferred} chunks deferred and sent again, the log whole")


def test_a_bad_mpiexec_on_is_refused_in_one_line():
    r = subprocess.run([sys.executable, "-m", "scheduler.cli", "daemon", "--mpiexec-on", "nowhere"], cwd=ROOT,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "--mpiexec-on: invalid choice: 'nowhere'" in r.stderr, r.stderr


def test_a_chunk_written_but_not_journaled_before_a_daemon_crash_is_not_written_twice(restartable):
    """The daemon is killed after writing a chunk to the job's log and before journaling how much it holds
    (here: its journal is set back to that moment while it is down); the monitor sends the chunk again
    from the old offset (here: replayed by hand). The log holds every byte once.

    Each rank writes each line with one ``write`` (``print`` under ``PYTHONUNBUFFERED``, which jobs get,
    writes a line in pieces, and two ranks' pieces interleave in ``mpiexec``'s output), and writes its
    second line only once the test has checked the replay (a file appears): no step waits on a clock."""
    from reshape.joblink.client import Connection

    c = restartable
    go = os.path.join(c.dir, "go")
    code = "\n".join(["import os, time", "r = os.environ['PMI_RANK']", "os.write(1, f'early {r}\\n'.encode())",
                      f"while not os.path.exists({go!r}):", "    time.sleep(0.05)",
                      "os.write(1, f'late {r}\\n'.encode())"])
    jid = c.submit({"name": "talk", "command": [sys.executable, "-c", code], "nprocs": 2, "resizable": False})
    path = os.path.join(c.dir, "logs", f"job-{jid}.log")

    def early() -> bytes | None:
        try:
            with open(path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return None
        return data if sorted(data.splitlines()) == [b"early 0", b"early 1"] else None

    written = wait_for(early, 30, every=0.1)
    wait_for(lambda: journaled(c, jid)["out_at"] == len(written), 10, every=0.1)

    def lose_the_commit():
        db = sqlite3.connect(os.path.join(c.dir, "journal.sqlite"))
        try:
            rec = json.loads(db.execute("SELECT record FROM jobs WHERE job_id = ?", (jid,)).fetchone()[0])
            rec["out_at"] = 0
            db.execute("UPDATE jobs SET record = ? WHERE job_id = ?", (json.dumps(rec), jid))
            db.commit()
        finally:
            db.close()

    c.restart_daemon(meanwhile=lose_the_commit)
    conn = Connection(c.endpoint, 5.0)
    try:
        body = {"node": "localhost", "incarnation": "replay", "attempt": 0, "offset": 0,
                "data": base64.b64encode(written).decode()}
        at = conn.request("job_output", body, job_id=jid).body["at"]
    finally:
        conn.close()
    assert at == len(written)
    with open(path, "rb") as f:
        assert f.read() == written  # not written again
    open(go, "w").close()  # now the ranks write their second lines
    job = c.finished(jid, 60)
    assert job["state"] == "done", (job["state"], job.get("error"))
    text = c.job_log(jid)
    assert sorted(text.splitlines()) == ["early 0", "early 1", "late 0", "late 1"], text


def test_a_cancelled_job_started_by_a_monitor_that_restarted_since_is_killed_by_the_new_one(tmp_path):
    """The monitor that started the job dies (``kill -9``; the job runs on) and a new one takes the node: the
    kill order reaches the new monitor, which kills the run by its tag; cancelled once no process is left."""
    c = NodeCluster(tmp_path, slots=2, timeout=5.0)  # the node stays up while its monitor restarts
    try:
        jid = c.submit(heat(400, 0.2))
        tag = job_tag(c.dir, jid)
        wait_for(lambda: job_pids(tag) and c.job(jid)["sid"], 20)
        c.mon.send_signal(signal.SIGKILL)
        c.mon.wait(10)
        assert job_pids(tag)
        c.mon = c.monitor("localhost", "--spool", os.path.join(c.dir, "spool"))
        assert c.req("cancel", {"job_id": jid})["state"] == "cancelling"

        def cancelled() -> bool:
            if c.job(jid)["state"] == "cancelling":
                return False
            alive = job_pids(tag)
            assert not alive, f"job {jid} shows cancelled while its processes {alive} still run"
            return True

        wait_for(cancelled, 30, every=0.1)
        assert c.job(jid)["state"] == "cancelled" and c.status()["free_slots"] == 2
        assert "killing attempt 0 by its tag, not a run of this monitor" in c.log("nodemon-localhost.log")
    finally:
        c.close()


def reported(c, node: str, jid: int) -> list[str]:
    """What the monitor of ``node`` logged of sending the exit status of job ``jid``'s runs: ``(reported)`` when
    the daemon took it (it confirmed a kill), ``(not_running)`` when the daemon had ended the job already."""
    return re.findall(rf"job {jid}: mpiexec exited \d+ \((\w+)\)", c.log(f"nodemon-{node}.log"))


def test_a_walltime_kill_frees_the_jobs_slots_only_once_its_monitor_confirmed_the_kill(tmp_path):
    """A job run on its node that outlives its walltime is ``ending`` (its slots held: the job queued behind it
    does not start) until the monitor that runs it confirms its processes are gone; then ``failed``."""
    c = NodeCluster(tmp_path, slots=2, timeout=1.0, extra=("--overtime", "0"))
    try:
        a = c.submit(heat(400, 0.2, walltime=3))
        b = c.submit(heat(12, 0.05))
        tag = job_tag(c.dir, a)
        wait_for(lambda: job_pids(tag), 20)

        def b_started() -> bool:
            if c.job(b)["state"] in ("queued", "waiting"):
                return False
            alive = job_pids(tag)
            assert not alive, f"job {b} started while the processes {alive} of job {a} still ran"
            return True

        wait_for(b_started, 60, every=0.05)
        job = c.job(a)
        assert job["state"] == "failed" and job["error"].startswith("walltime exceeded"), job
        ev = c.events(a)
        assert [k for k, _ in ev][-2:] == ["ending", "end"], ev
        assert ev[-2][1] == "walltime exceeded: kill ordered to the monitor of localhost, not yet confirmed", ev
        assert reported(c, "localhost", a) == ["reported"]  # the daemon waited for (and took) its exit status
        assert c.finished(b, 60)["state"] == "done"
    finally:
        c.close()


def test_a_node_lost_under_a_job_restarts_it_only_once_its_first_nodes_monitor_confirmed_the_kill(tmp_path):
    """Two nodes of this machine (``localhost`` and ``127.0.0.1``, one slot each), a job with checkpoints on both,
    its ``mpiexec`` on ``localhost``. The monitor of ``127.0.0.1`` dies: the node goes down, the job is ``ending``
    until the monitor of ``localhost`` confirms the lost attempt's kill, then relaunched on the slot left (from
    its checkpoint, at 1 rank), and ``done``, bit-identical to a run that never failed."""
    c = NodeCluster(tmp_path, timeout=3.0, nodes=("localhost", "127.0.0.1"))
    try:
        steps = 60
        jid = c.submit(heat(steps, 0.15, checkpoint="every:5"))
        row = wait_for(lambda: next((r for r in c.status()["running"] if r["job_id"] == jid
                                     and r["iterations"] >= 8), None), 60, every=0.2)
        assert row["hosts"] == ["127.0.0.1", "localhost"], row
        lost = job_tag(c.dir, jid)
        c.mons["127.0.0.1"].send_signal(signal.SIGKILL)
        c.mons["127.0.0.1"].wait(10)
        wait_for(lambda: c.job(jid)["restarts"] == 1, 30, every=0.1)
        assert not job_pids(lost)  # confirmed: nothing of the lost attempt is left
        kinds = [k for k, _ in c.events(jid)]
        assert "ending" in kinds and kinds.index("ending") < kinds.index("restart"), kinds
        detail = dict(c.events(jid))["ending"]
        assert detail.startswith("to restart after: node 127.0.0.1 down"), detail
        assert reported(c, "localhost", jid) == ["reported"]
        job = c.finished(jid, 120)
        assert job["state"] == "done" and job["restarts"] == 1 and job["profile"]["history"][-1] == 1, job
        assert sha(c.job_log(jid)) == reference(steps)
    finally:
        c.close()


def test_when_the_node_of_a_jobs_mpiexec_is_lost_its_other_nodes_monitors_kill_the_rest_and_free_their_slots(tmp_path):
    """Two nodes of this machine (``localhost`` and ``127.0.0.1``, one slot each), a job on both, its ``mpiexec`` on
    its first node. That node's monitor dies (``kill -9``; the job runs on): once the node is down, the job is
    ``ending`` and the other node's slot stays held (the job queued for one slot does not start) until that
    node's monitor, ordered by the daemon, killed what is left of the job there (by its tag) and confirmed;
    then the job is ``failed``, none of its processes is left, and the queued job gets the slot."""
    c = NodeCluster(tmp_path, timeout=3.0, nodes=("localhost", "127.0.0.1"))
    try:
        jid = c.submit(heat(400, 0.2))
        tag = job_tag(c.dir, jid)
        wait_for(lambda: c.job(jid)["iterations"] >= 2, 60, every=0.2)
        runner = c.job(jid)["runner"]
        other = next(n for n in c.mons if n != runner)
        nxt = c.submit({**heat(400, 0.2), "nprocs": 1})  # one slot: only the other node's will be up
        c.mons[runner].send_signal(signal.SIGKILL)
        c.mons[runner].wait(10)
        assert job_pids(tag)  # the job runs on without its runner's monitor
        seen: list[str] = []
        wait_for(held_until_confirmed(c, jid, nxt, "ending", f"not yet confirmed by the monitor of {other} (its "
                                      f"mpiexec's node {runner} is down)", "failed", seen), 60, every=0.05)
        ev = c.events(jid)
        assert [k for k, _ in ev][-2:] == ["ending", "end"], ev
        assert ev[-2][1].startswith(f"node {runner} down"), ev
        assert f"kill ordered to the monitor of {other} (its mpiexec's node {runner} is down)" in ev[-2][1], ev
        assert f"killed on {other} by the monitor of {other}" in ev[-1][1], ev
        assert "killing attempt 0 by its tag" in c.log(f"nodemon-{other}.log")
        job = c.job(jid)
        assert job["error"].startswith(f"node {runner} down") and job["kill_on"] == {}, job
        print(f"\nrunner's node down -> job ending ({len(seen)} polls), then failed once {other} confirmed")
        wait_for(lambda: c.job(nxt)["state"] == "running", 30)  # the freed slot goes to the next job
        c.req("cancel", {"job_id": nxt})
        wait_for(lambda: c.job(nxt)["state"] == "cancelled", 30)
    finally:
        c.close()
