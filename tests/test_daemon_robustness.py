"""No message or job file can kill the daemon; replies of any size reach the client.

Each case here was a way to stop a live daemon (exit, or a crash at every
restart) or to make it look dead; each runs against a real daemon process,
and the fuzz test sends thousands of generated frames to one.
"""

from __future__ import annotations

import contextlib
import json
import random
import sqlite3
import time
from dataclasses import replace

import pytest
import zmq

from reshape.joblink import protocol as P
from reshape.joblink.client import Connection, DaemonError
from scheduler.core.jobfile import validate_job
from tests.helpers import wait_for

pytestmark = pytest.mark.procs  # real daemons; one test runs Job Startup (and so mpiexec) itself


def raw(d, frame: bytes, timeout: float = 5.0) -> dict | None:
    """Send one raw frame on a DEALER socket; the decoded reply envelope (None: no reply)."""
    ctx = zmq.Context.instance()
    s = ctx.socket(zmq.DEALER)
    s.setsockopt(zmq.LINGER, 0)
    s.connect(d.endpoint)
    try:
        s.send(frame)
        if not s.poll(int(timeout * 1000)):
            return None
        return json.loads(s.recv())
    finally:
        s.close()


def env(type_: str, body: dict, seq: int = 1, job_id=None) -> bytes:
    return json.dumps({"v": 1, "type": type_, "seq": seq, "job_id": job_id, "body": body}).encode()


def alive(d) -> None:
    assert d.proc.poll() is None, d.stderr()
    assert d.req("ping")["version"] == P.VERSION


def test_deep_nesting_is_an_error_reply_not_a_crash(daemon):
    d = daemon(2)
    rep = raw(d, b"[" * 1000 + b"]" * 1000)
    assert rep["type"] == "error" and rep["body"]["code"] == "malformed" and "nested" in rep["body"]["message"]
    nested: list = [1]
    for _ in range(20):
        nested = [nested]
    rep = raw(d, env("ping", {"x": nested}))
    assert rep["body"]["code"] == "malformed"
    alive(d)


@pytest.mark.parametrize("frame", [
    b'{"v":1,"type":"submit","seq":1,"job_id":null,"body":{"job":{"command":["true"],"nprocs":1,'
    b'"arrival_delay":1e999}}}',
    b'{"v":1,"type":"resize_point","seq":1,"job_id":1,"body":{"iteration":1,"nprocs":1,"iter_time":1e999}}',
])
def test_a_non_finite_number_is_refused_and_never_journaled(daemon, frame):
    d = daemon(2)
    rep = raw(d, frame)
    assert rep["type"] == "error" and "not finite" in rep["body"]["message"], rep
    assert d.req("history")["jobs"] == []
    d.kill9()
    d.start()  # used to crash at every restart, the value being in the journal
    d.req("history")
    alive(d)


@pytest.mark.parametrize("job, field", [
    ({"command": ["python", "-c", "print('a\x00b')"]}, "NUL"),
    ({"command": ["true"], "env": {"A=B": "1"}}, "'A=B' is not a variable name"),
    ({"command": ["true"], "env": {"A": "x\x00y"}}, "NUL"),
    ({"command": ["true"], "walltime": 1e300}, "'walltime' must be a number of seconds"),
    ({"command": ["true"], "max_procs": 10**40}, "max_procs"),
    ({"command": ["true"], "max_procs": 2**40}, "'max_procs' must be at most 2,147,483,647"),
])
def test_a_job_the_os_cannot_start_is_refused_at_submit(daemon, job, field):
    d = daemon(2)
    with pytest.raises(DaemonError, match=r"bad_job|bad_field") as e:
        d.submit(**{"name": "bad", "nprocs": 1, **job})
    assert field in str(e.value)
    assert d.req("history")["jobs"] == []
    alive(d)


@pytest.mark.parametrize("prog,why", [
    ("no_such_program", "not found on the PATH jobs get here"),
    ("/no/such/dir/prog", "does not exist"),
    ("no/such/prog", "does not exist (relative to the jobs' directory"),
])
def test_a_program_that_does_not_exist_here_is_refused_at_submit_in_one_line(daemon, prog, why):
    d = daemon(2)
    with pytest.raises(DaemonError, match="bad_job") as e:
        d.submit(name="missing", nprocs=1, command=[prog, "--flag"])
    msg = str(e.value)
    assert why in msg and repr(prog) in msg and "\n" not in msg, msg
    assert d.req("history")["jobs"] == []
    alive(d)


def test_a_job_hydra_cannot_exec_fails_with_hydras_cause_not_its_source_path(daemon, tmp_path):
    """A program that exists but cannot be executed (its interpreter is missing): the job's reason is Hydra's
    cause (``execvp error on file ...``), not the start of Hydra's line (function name, source path)."""
    prog = tmp_path / "run.sh"
    prog.write_text("#!/no/such/interpreter\n")
    prog.chmod(0o755)
    d = daemon(2)
    jid = d.submit(name="noexec", nprocs=1, command=[str(prog)], resizable=False)
    j = wait_for(lambda: (j := next(j for j in d.req("history")["jobs"] if j["job_id"] == jid))["state"]
                 not in ("queued", "running") and j, 30)
    assert j["state"] == "failed", j
    assert f"execvp error on file {prog}" in j["error"] and "HYDU" not in j["error"], j["error"]


def test_a_job_that_cannot_be_started_fails_and_the_daemon_serves_on(tmp_path):
    """Past validation (a job journaled by an older version), Popen's ValueError fails the job only."""
    from scheduler.core.pool import default_pool
    from scheduler.daemon.loop import Daemon

    d = Daemon(str(tmp_path), pool=default_pool(2))
    try:
        jid = d.state.submit(replace(validate_job({"command": ["true"], "nprocs": 1}), command=("tr\x00ue",)), 0.0)
        d.perform(d.state.tick(0.0), 0.0)
        j = d.state.jobs[jid]
        assert j.state == "failed" and "cannot start" in (j.error or ""), j
    finally:
        d.journal.close()


def test_an_internal_error_costs_one_request(tmp_path, monkeypatch):
    from scheduler.core.pool import default_pool
    from scheduler.daemon.loop import Daemon

    d = Daemon(str(tmp_path), pool=default_pool(2))
    try:
        monkeypatch.setattr(d.state, "status", lambda *a, **k: 1 / 0)
        rep, _ = d.handle(env("status", {}), time.time())
        assert rep.type == "error" and rep.body["code"] == "internal" and "ZeroDivisionError" in rep.body["message"]
        rep, _ = d.handle(env("ping", {}), time.time())
        assert rep.type == "ok"
    finally:
        d.journal.close()


def test_an_unreadable_journal_record_is_set_aside_with_a_warning(tmp_path):
    from scheduler.core.pool import default_pool
    from scheduler.daemon.loop import Daemon

    d = Daemon(str(tmp_path), pool=default_pool(2))
    d.journal.close()
    db = sqlite3.connect(tmp_path / "journal.sqlite")
    db.execute("INSERT INTO jobs(job_id, state, record) VALUES (7, 'queued', '{\"job_id\": 7, \"x\": Infinity}')")
    db.execute("INSERT INTO jobs(job_id, state, record) VALUES (8, 'queued', 'not json')")
    db.commit()
    db.close()
    d = Daemon(str(tmp_path), pool=default_pool(2))
    try:
        assert len(d.warnings) == 2 and all("quarantine" in w for w in d.warnings), d.warnings
        assert d.state.jobs == {}
        rep, _ = d.handle(env("history", {}), time.time())
        assert rep.type == "ok"
    finally:
        d.journal.close()
    db = sqlite3.connect(tmp_path / "journal.sqlite")
    assert db.execute("SELECT count(*) FROM quarantine").fetchone()[0] == 2


@pytest.mark.timeout(240)
def test_ten_thousand_jobs_in_history_reach_the_client_whole_or_in_pages(daemon):
    """``history``/``status`` with 10,000 jobs: replies of megabytes (they used to exceed the client's
    64 KiB decoder and look like a dead daemon), and ``limit``/``since`` for a page."""
    d = daemon(2)
    c = Connection(d.endpoint, 60)
    try:
        job = {"name": "w", "command": ["true"], "nprocs": 1, "arrival_delay": 1e6}
        for _ in range(10_000):
            c.request("submit", {"job": job})
        st = c.request("status").body
        hist = c.request("history").body
        page = c.request("history", {"limit": 10}).body
        first = c.request("status", {"limit": 5}).body
        recent = c.request("history", {"since": time.time() + 3600}).body
    finally:
        c.close()
    assert len(st["waiting"]) == st["waiting_total"] == 10_000 and len(hist["jobs"]) == 10_000
    assert len(P.encode(P.Message("ok", 1, None, hist))) > 20 * P.MAX_MESSAGE_BYTES
    assert [j["job_id"] for j in page["jobs"]] == list(range(9991, 10_001)) and page["jobs_total"] == 10_000
    assert {e["job_id"] for e in page["events"]} == set(range(9991, 10_001))
    assert len(first["waiting"]) == 5 and first["waiting_total"] == 10_000
    assert len(recent["jobs"]) == 10_000 and recent["events"] == []  # not ended: still active


def _fuzz_frames(n: int, seed: int):
    rng = random.Random(seed)
    types = [*sorted(P.CONTROL_TYPES | P.JOB_TYPES | P.NODE_TYPES), "advice", "bogus", ""]
    atoms = [0, -1, 1, 2**60, -(2**63), 1.5, 1e308, "x", "", "a\x00b", None, True, [], {}, "\udcff"]

    def value(depth=0):
        r = rng.random()
        if depth < 3 and r < 0.15:
            return [value(depth + 1) for _ in range(rng.randrange(3))]
        if depth < 3 and r < 0.3:
            return {rng.choice(["nprocs", "job", "iteration", "iter_time", "node", "x"]): value(depth + 1)
                    for _ in range(rng.randrange(3))}
        return rng.choice(atoms)

    for i in range(n):
        k = rng.randrange(10)
        if k == 0:
            yield bytes(rng.randrange(256) for _ in range(rng.randrange(40)))
        elif k == 1:
            yield b"[" * rng.randrange(10, 3000)
        elif k == 2:
            yield b'{"v":1,"type":"ping","seq":1,"job_id":null,"body":{"x":' + rng.choice(
                [b"1e999", b"-1e999", b"NaN", b"Infinity", b"1" * 5000, b'"\\u0000"']) + b"}}"
        else:
            body = {f: value() for f in rng.sample(["nprocs", "iteration", "iter_time", "job", "node",
                                                    "incarnation", "job_id", "status", "kill_jobs"], 3)}
            e = {"v": rng.choice([1, 1, 1, 2, "1"]), "type": rng.choice(types), "seq": rng.choice([i, -1, "s"]),
                 "job_id": rng.choice([None, 0, 1, 99, -5, "j"]), "body": body}
            if rng.random() < 0.1:
                e["extra"] = 1
            yield json.dumps(e, allow_nan=True).encode("utf-8", "surrogatepass")


@pytest.mark.timeout(240)
def test_fuzz_ten_thousand_frames_never_kill_the_daemon(daemon):
    """10,000 generated frames (seeded): deep nesting, huge and non-finite numbers, NUL, wrong types,
    random bytes. Every frame gets a reply, and the daemon serves on."""
    d = daemon(2)
    ctx = zmq.Context.instance()
    s = ctx.socket(zmq.DEALER)
    s.setsockopt(zmq.LINGER, 0)
    s.connect(d.endpoint)
    n = answered = 0
    try:
        batch = []
        for frame in _fuzz_frames(10_000, seed=12):
            batch.append(frame)
            if len(batch) == 100:
                for f in batch:
                    s.send(f)
                for _ in batch:
                    assert s.poll(10_000), f"no reply after {answered} of {n + len(batch)}: {d.stderr()}"
                    json.loads(s.recv())
                    answered += 1
                n += len(batch)
                batch = []
    finally:
        s.close()
    assert n == answered == 10_000
    alive(d)
    wait_for(lambda: d.req("status") is not None, 5)
    assert "Traceback" not in d.stderr(), d.stderr()


@pytest.mark.timeout(180)
@pytest.mark.parametrize("clients", [16, 64])
def test_many_concurrent_clients_get_every_reply(daemon, clients):
    """``clients`` threads, each its own connection, mix status/submit/cancel for 4 s against one
    daemon (loopback): zero errors, every request answered. Prints req/s and the p99 latency."""
    import threading

    d = daemon(2)
    stop = time.monotonic() + 4.0
    lat: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()

    def client(i: int) -> None:
        rng = random.Random(i)
        c = Connection(d.endpoint, 30)
        mine: list[int] = []
        try:
            while time.monotonic() < stop:
                r = rng.random()
                t0 = time.perf_counter()
                if r < 0.5 or (r < 0.8 and len(mine) > 5):
                    c.request("status")
                elif r < 0.8:
                    mine.append(c.request("submit", {"job": {"name": f"c{i}", "command": ["true"], "nprocs": 1,
                                                             "arrival_delay": 600}}).body["job_id"])
                elif mine:
                    c.request("cancel", {"job_id": mine.pop()})
                else:
                    c.request("ping")
                with lock:
                    lat.append(time.perf_counter() - t0)
        except Exception as e:
            with lock:
                errors.append(f"client {i}: {type(e).__name__}: {e}")
        finally:
            c.close()

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    took = time.monotonic() - t0
    assert not errors, errors[:5]
    lat.sort()
    p99 = lat[int(0.99 * (len(lat) - 1))] * 1e3
    print(f"\n{clients} clients: {len(lat)} requests in {took:.1f} s = {len(lat) / took:.0f} req/s, "
          f"p50 {lat[len(lat) // 2] * 1e3:.1f} ms, p99 {p99:.1f} ms")
    alive(d)


@pytest.mark.procs
def test_exited_jobs_are_found_without_polling_every_job(tmp_path):
    """With many running jobs the System Monitor asks the kernel which mpiexec exited (``waitid``); a
    child that is no job's (here an unrelated process left unreaped) makes it poll every job instead."""
    import subprocess

    from scheduler.core.pool import default_pool
    from scheduler.daemon.loop import Daemon
    from scheduler.daemon.startup import job_tag, kill_jobs
    from tests.helpers import wait_for

    d = Daemon(str(tmp_path), pool=default_pool(4))
    d.supervisor.poll_all_up_to = 0
    ids = []
    try:
        for cmd in (["sleep", "60"], ["true"], ["sleep", "60"], ["true"]):
            ids.append(d.state.submit(validate_job({"command": cmd, "nprocs": 1, "launch": "single"}), 0.0))
        d.perform(d.state.tick(0.0), 0.0)
        stray = subprocess.Popen(["true"])  # exits and stays a zombie until reaped below
        wait_for(lambda: d.perform(d.monitor(time.time()), time.time())
                 or all(d.state.jobs[i].state == "done" for i in ids[1::2]), 30)
        assert [d.state.jobs[i].state for i in ids] == ["running", "done", "running", "done"]
        assert stray.wait(5) == 0
        d.perform(d.state.cancel(ids[0], time.time()) + d.state.cancel(ids[2], time.time()), time.time())
        assert not d.supervisor.procs
    finally:
        kill_jobs([job_tag(str(tmp_path), i) for i in ids])
        d.journal.close()


def test_a_request_over_the_limit_is_refused_at_once_by_the_client(daemon, monkeypatch):
    """A 100 MB request is refused by the client before sending (and before encoding it: "at least"), naming
    its size and the limit; a too-large request the daemon refuses (its reply carries seq 0) is not taken for
    a stale reply (the client gets the refusal, not its timeout)."""
    import subprocess
    import sys

    import reshape.joblink.client as client
    from reshape.joblink.client import RequestTooLarge
    from tests.helpers import ROOT

    d = daemon(2)
    big = {"job": {"name": "big", "command": ["x" * 100_000_000], "nprocs": 1}}
    c = Connection(d.endpoint, timeout=20)
    try:
        t0 = time.monotonic()
        with pytest.raises(RequestTooLarge) as e:
            c.request("submit", big)
        took = time.monotonic() - t0
        assert e.value.message == "request too large: at least 100000043 bytes > 64 KiB", e.value.message
        print(f"\nlarge request: refused by the client in {took * 1e3:.0f} ms")
        with pytest.raises(RequestTooLarge) as e:  # just over: found by encoding it
            c.request("submit", {"job": {"name": "big", "command": ["\n" * 40_000], "nprocs": 1}})
        assert e.value.message == "request too large: 80101 bytes > 64 KiB", e.value.message
        monkeypatch.setattr(client, "MAX_MESSAGE_BYTES", 1 << 30)  # the client sends it: the daemon refuses
        with pytest.raises(DaemonError) as e:  # a reply taken for a stale one would end in SchedulerUnavailable
            c.request("submit", {"job": {"name": "big", "command": ["x" * 200_000], "nprocs": 1}})
        assert e.value.code == "too_large", e.value
        assert e.value.message.startswith("request too large: 200") and e.value.message.endswith(" > 64 KiB")
        rep = raw(d, b"x" * 100_000)  # nothing to read a seq from: seq 0, which a client takes as its answer
        assert rep["seq"] == 0 and rep["body"]["code"] == "too_large", rep
    finally:
        c.close()
    job = tmp = None
    try:
        import tempfile

        tmp = tempfile.mkdtemp()
        job = f"{tmp}/big.toml"
        with open(job, "w") as f:
            f.write(f'name = "big"\ncommand = ["{"x" * 100_000}"]\nnprocs = 1\n')
        r = subprocess.run([sys.executable, "-m", "scheduler.cli", "submit", job, "--endpoint", d.endpoint],
                           cwd=ROOT, capture_output=True, text=True, timeout=30)
        assert r.returncode == 1 and "request too large:" in r.stderr and "> 64 KiB" in r.stderr, r
        assert "no reply" not in r.stderr, r.stderr  # refused, not timed out
    finally:
        if tmp:
            import shutil

            shutil.rmtree(tmp, ignore_errors=True)
    alive(d)


def test_a_lost_hydra_proxy_fails_the_job_and_frees_its_slots(daemon):
    """kill -9 of a running job's hydra_pmi_proxy (its ranks run on, mpiexec waits on): the job ends
    'lost' naming the proxy (the proxy watch noticed, not the job's own end two minutes later), its slots
    are free, and none of its processes is left."""
    import os
    import signal

    import psutil

    from scheduler.daemon.startup import job_pids, job_tag

    d = daemon(4)
    jid = d.submit(name="victim", command=["sleep", "120"], nprocs=2, resizable=False)
    tag = job_tag(d.state_dir, jid)

    def proxy():
        for pid in job_pids(tag):
            with contextlib.suppress(psutil.Error):
                if psutil.Process(pid).name().startswith("hydra_pmi_prox") and \
                        len(psutil.Process(pid).children()) == 2:
                    return pid
        return None

    pid = wait_for(proxy, 30, every=0.2)
    time.sleep(1.5)  # seen by a scan with its ranks
    t0 = time.monotonic()
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: d.req("status")["free_slots"] == 4, 15, every=0.1)
    took = time.monotonic() - t0
    j = d.job(jid)
    assert j["state"] == "lost" and "Hydra proxy" in j["error"] and str(pid) in j["error"], j
    wait_for(lambda: not job_pids(tag), 10, every=0.2)
    print(f"\nlost proxy: noticed and slots freed in {took:.1f} s")
    alive(d)


CLOSE_UNDER_FLOOD = """
import os, threading, time, zmq
from scheduler.daemon.gatekeeper import Gatekeeper
ctx = zmq.Context()
sock = ctx.socket(zmq.ROUTER)
sock.linger = 0
gate = Gatekeeper(ctx, sock, None, log=open(os.devnull, "w"), local=False)
port = sock.bind_to_random_port("tcp://127.0.0.1")
endpoint = f"tcp://127.0.0.1:{port}"

def flood():  # clients connect and leave all the while: a monitor event every few milliseconds
    while True:
        c = ctx.socket(zmq.DEALER)
        c.linger = 0
        c.connect(endpoint)
        time.sleep(0.002)
        c.close()

threading.Thread(target=flood, daemon=True).start()
time.sleep(0.3)
gate.close()
print("closed", flush=True)
os._exit(0)
"""


def test_the_gate_closes_while_clients_keep_connecting():
    """The daemon's stop hung in ``disable_monitor`` (``test_start_and_stop_many_times_with_jobs_running``,
    once, on a loaded host): libzmq sends each monitor event blocking, under the lock ``disable_monitor``
    takes, and the gate had stopped reading its events first, so an event sent in between blocked the
    sender, and the stop then held the GIL for good. The gate now stops the monitor while it still
    reads. This checks that a close under a flood of connections returns (in a process of its own); the
    race needs a gap between the two steps that the test cannot force: with a 0.2-s gap, the old order
    hung 3 of 3 runs of plain pyzmq sockets and the new one 0 of 4."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", CLOSE_UNDER_FLOOD], capture_output=True, text=True, timeout=120,
                         check=False)
    assert out.stdout.strip() == "closed", out.stderr[-2000:]
