"""The daemon as a real process, with real mpiexec jobs (emulated resizable jobs run one process).

Every test starts its own daemon on a free loopback port with a temporary
state directory; the fixture kills the daemon and every job session it
journaled, even when the test fails.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import time

import pytest
import zmq

from reshape.joblink import protocol as P
from reshape.joblink.client import Connection, DaemonError, SchedulerUnavailable
from scheduler.core.walltime import kill_time
from scheduler.daemon.startup import job_pids, job_tag, kill_job, read_exit_status
from tests.helpers import repeated_undone_expansions, wait_for

pytestmark = pytest.mark.procs


def emu(iterations=10, work=1.0, serial=0.05, overhead=0.04, nprocs=2, noise=0.0, seed=0, **kw) -> dict:
    """An emulated resizable job (t(p) has its sweet spot at 4-5 with the defaults)."""
    cmd = ["python", "-m", "apps.emujob", "--work", str(work), "--serial", str(serial),
           "--overhead", str(overhead), "--iterations", str(iterations), "--redist", "0.05",
           "--noise", str(noise), "--seed", str(seed)]
    return {"name": "emu", "command": cmd, "nprocs": nprocs, "launch": "single", **kw}


def sleeper(seconds: float, nprocs: int, **kw) -> dict:
    return {"name": f"sleep{seconds}", "command": ["python", "-c", f"import time; time.sleep({seconds})"],
            "nprocs": nprocs, "resizable": False, **kw}


def test_expand_sweet_spot_then_shrink_to_admit_a_queued_job(daemon):
    d = daemon(6)
    a = d.submit(**emu(iterations=16, max_procs=6))
    # expands while it helps, probes 5, returns to its sweet spot 4
    wait_for(lambda: d.job(a)["profile"]["history"][:5] == [2, 3, 4, 5, 4], 20)
    b = d.submit(**sleeper(1.0, 4))  # needs 4, only 2 free: A must shrink to 2
    wait_for(lambda: d.job(b)["state"] in ("running", "done"), 10)
    ja = d.job(a)
    assert ja["state"] == "running" and ja["nprocs"] == 2
    assert ja["profile"]["history"][-1] == 2
    wait_for(lambda: d.job(a)["state"] == "done", 30)
    assert d.job(b)["state"] == "done"
    assert "resize 4 -> 2" in d.req("log", {"job_id": a, "tail": 0})["text"]


def test_noisy_timings_never_make_a_job_repeat_an_expansion_the_sweet_spot_undid(daemon):
    """Iterations randomly up to 40% slower (interference) around a sweet spot at 4 (t(5) is 1.7% faster)."""
    d = daemon(6)
    jobs = [d.submit(**emu(iterations=24, work=0.6, max_procs=6, noise=0.4, seed=s)) for s in (1, 2)]
    wait_for(lambda: all(d.job(j)["state"] == "done" for j in jobs), 90)
    for j in jobs:
        sizes = d.job(j)["profile"]["history"]
        assert len(sizes) >= 3 and repeated_undone_expansions(sizes) == [], sizes


def test_easy_backfill_starts_a_short_job_without_delaying_the_head(daemon):
    d = daemon(4, remap="static")
    long_ = d.submit(**sleeper(3.0, 2, walltime=4.0))
    head = d.submit(**sleeper(0.5, 4, walltime=2.0))
    late = d.submit(**sleeper(0.5, 2, walltime=30.0))  # would delay the head: must wait
    short = d.submit(**sleeper(0.5, 1, walltime=1.5))  # ends before the head could start
    wait_for(lambda: d.job(short)["state"] == "done", 15)
    assert d.job(head)["state"] == "queued" and d.job(late)["state"] == "queued"
    wait_for(lambda: d.job(late)["state"] == "done", 30)
    h, lo, la = d.job(head), d.job(long_), d.job(late)
    assert h["start_time"] >= lo["end_time"] - 0.01
    assert la["start_time"] >= h["start_time"]
    assert h["start_time"] == lo["end_time"]  # the head started in the scheduling pass that saw the long job end


def test_kill9_of_a_running_job_returns_its_slots(daemon):
    d = daemon(2)
    a = d.submit(**sleeper(60, 2))
    b = d.submit(**sleeper(0.5, 2))
    sid = wait_for(lambda: d.job(a)["sid"], 10)
    tag = job_tag(d.state_dir, a)
    wait_for(lambda: len(job_pids(tag)) >= 4, 10)  # mpiexec, proxy, 2 ranks
    os.kill(sid, signal.SIGKILL)  # the job's mpiexec
    wait_for(lambda: d.job(b)["state"] in ("running", "done"), 30)  # a would have run for 60 s
    assert d.job(a)["state"] == "failed"
    wait_for(lambda: not job_pids(tag), 5)  # orphaned proxy and ranks were killed too
    wait_for(lambda: d.req("status")["free_slots"] == 2, 10)


def test_kill9_of_the_daemon_keeps_queue_profiles_and_history(daemon):
    d = daemon(4)
    done = d.submit(**sleeper(0.2, 1))
    wait_for(lambda: d.job(done)["state"] == "done", 10)
    a = d.submit(**emu(iterations=40, work=0.6, max_procs=3))
    wait_for(lambda: len(d.job(a)["profile"]["iter_time"]) >= 2, 15)
    q = d.submit(**sleeper(0.2, 4))  # waits: the running job can give back at most 1
    before = d.job(a)
    d.kill9()
    time.sleep(1.0)
    d.start()
    st = d.req("status")
    assert [j["job_id"] for j in st["running"]] == [a]
    assert [j["job_id"] for j in st["queue"]] == [q]
    after = d.job(a)
    assert set(before["profile"]["iter_time"]) <= set(after["profile"]["iter_time"])
    assert d.job(done)["state"] == "done"
    kinds = [e["kind"] for e in d.req("history")["events"]]
    assert kinds.count("submit") == 3 and "end" in kinds
    # the running job reconnects to the new daemon at a resize point
    it0 = after["iterations"]
    wait_for(lambda: d.req("status")["running"][0]["connected"], 15)
    wait_for(lambda: d.job(a)["iterations"] > it0, 10)
    d.req("cancel", {"job_id": a})
    wait_for(lambda: d.job(q)["state"] in ("running", "done"), 10)


def test_garbage_gets_error_replies_and_the_daemon_keeps_serving(daemon):
    d = daemon(2)
    ctx = zmq.Context.instance()
    s = ctx.socket(zmq.DEALER)
    s.setsockopt(zmq.LINGER, 0)
    s.connect(d.endpoint)

    def raw(*frames: bytes) -> dict:
        s.send_multipart(list(frames))
        assert s.poll(5000), "no reply"
        return json.loads(s.recv())

    try:
        cases = [
            ((b"{not json",), "malformed"),
            ((b'{"v": 9, "type": "ping", "seq": 1}',), "bad_version"),
            ((b'{"v": 1, "type": "ping", "seq": 1, "body": {"x": 1}}',), "bad_field"),
            ((b'{"v": 1, "type": "teleport", "seq": 1}',), "unknown_type"),
            ((b"x" * 100_000,), "too_large"),
            ((b"{}", b"{}"), "malformed"),
            ((P.encode(P.Message("resized", 5, 99, {"old": 1, "new": 2, "seconds": 0.1})),), "unknown_job"),
            ((P.encode(P.Message("advice", 6, 1, {"action": "continue", "nprocs": 1})),), "unexpected"),
        ]
        for frames, code in cases:
            rep = raw(*frames)
            assert rep["type"] == "error" and rep["body"]["code"] == code, (frames[0][:40], rep)
        a = d.submit(**sleeper(30, 1))
        wait_for(lambda: d.job(a)["state"] == "running", 10)
        with pytest.raises(DaemonError, match="out_of_order"):
            d.req("resized", {"old": 1, "new": 2, "seconds": 0.1}, job_id=a)
        with pytest.raises(DaemonError, match="bad_job"):
            d.submit(command=["x"], nprocs=3)  # larger than the pool
        # a frame over the hard limit only drops that sender's connection
        big = ctx.socket(zmq.DEALER)
        big.setsockopt(zmq.LINGER, 0)
        big.connect(d.endpoint)
        big.send(b"y" * (2 << 20))
        assert not big.poll(500)
        big.close()
        assert d.req("ping")["version"] == P.VERSION
        assert raw(P.encode(P.Message("status", 7)))["body"]["free_slots"] == 1
        d.req("cancel", {"job_id": a})
    finally:
        s.close()


def test_cancel_queued_and_running_jobs_frees_everything(daemon):
    d = daemon(2)
    a = d.submit(**sleeper(60, 2))
    b = d.submit(**sleeper(60, 2))
    tag = job_tag(d.state_dir, a)
    wait_for(lambda: len(job_pids(tag)) >= 4, 10)
    d.req("cancel", {"job_id": b})
    assert d.job(b)["state"] == "cancelled"
    d.req("cancel", {"job_id": a})
    assert d.job(a)["state"] == "cancelled"
    assert not job_pids(tag)
    st = d.req("status")
    assert st["free_slots"] == 2 and not st["running"] and not st["queue"]
    with pytest.raises(DaemonError, match="not_active"):
        d.req("cancel", {"job_id": a})


def test_real_mpi_job_finds_its_sweet_spot(daemon):
    """reshape.runtime under the daemon: spawn on expand, redistribution, shrink back."""
    d = daemon(4)
    a = d.submit(name="sweet-mpi", command=["python", "tests/jobs/sweetspot_mpi.py", "--iters", "8"],
                 nprocs=1, max_procs=4)
    wait_for(lambda: d.job(a)["state"] not in ("queued", "running"), 90, every=0.3)
    j = d.job(a)
    log = d.req("log", {"job_id": a, "tail": 0})["text"]
    assert j["state"] == "done", log
    assert j["profile"]["history"][:5] == [1, 2, 3, 4, 3], log
    assert "data ok" in log
    assert d.req("status")["free_slots"] == 4


def test_a_job_with_standby_ranks_grows_first_onto_them(daemon):
    """RESHAPE_STANDBY under the daemon: two standbys; the expansion 1 -> 2 (its maximum) calls one back, no
    spawn; `reshape status` then shows the other parked on this host; nothing of the job is left after it."""
    d = daemon(4)
    a = d.submit(name="standby-mpi", command=["python", "tests/jobs/sweetspot_mpi.py", "--iters", "10"],
                 nprocs=1, max_procs=2, env={"RESHAPE_REUSE": "1", "RESHAPE_STANDBY": "2"})
    here = socket.gethostname()

    def status() -> str | None:
        out = subprocess.run([sys.executable, "-m", "scheduler.cli", "status", "--endpoint", d.endpoint],
                             capture_output=True, text=True).stdout
        return out if f"{here}:1" in out else None

    shown = wait_for(status, 60, every=0.2)
    assert "PARKED" in shown, shown
    wait_for(lambda: d.job(a)["state"] not in ("queued", "running"), 90, every=0.3)
    j = d.job(a)
    log = d.req("log", {"job_id": a, "tail": 0})["text"]
    assert j["state"] == "done", log
    assert j["profile"]["history"][:2] == [1, 2], log
    assert "data ok called back [1]" in log, log
    assert d.req("status")["free_slots"] == 4
    wait_for(lambda: not job_pids(job_tag(d.state_dir, a)), 10, every=0.2)  # the standbys left with it


def test_start_and_stop_many_times_with_jobs_running(daemon):
    """Regression: ``stop`` must be answered and the daemon must exit promptly, whatever runs.

    Each round restarts the daemon on the same journal (it adopts the running
    jobs), submits another job so launches, exits and resize points are under
    way, and stops it; the last round stops with ``kill_jobs``.
    """
    d = daemon(4)
    mpi = d.submit(**sleeper(60, 2))
    resizable = d.submit(**emu(iterations=400, work=0.05, serial=0.5, overhead=0.0, nprocs=1, max_procs=2))
    ids = [mpi, resizable]
    wait_for(lambda: len(job_pids(job_tag(d.state_dir, mpi))) >= 4, 10)
    rounds = 6
    for r in range(rounds):
        if r:
            d.start()
        ids.append(d.submit(**sleeper(0.3 * (r % 3), 1)))  # short jobs start and end around the stop
        time.sleep(0.3 + 0.2 * (r % 2))
        last = r == rounds - 1
        try:
            d.req("stop", {"kill_jobs": last}, timeout=5)
            d.proc.wait(5)
        except (SchedulerUnavailable, subprocess.TimeoutExpired):
            os.kill(d.proc.pid, signal.SIGUSR1)  # the daemon dumps its threads' stacks
            time.sleep(1.0)
            raise AssertionError(f"round {r}: no clean stop; daemon stderr:\n{d.stderr()}") from None
        assert d.proc.returncode == 0, d.stderr()
        if not last:
            assert job_pids(job_tag(d.state_dir, mpi)), "jobs keep running when the daemon stops"
    for jid in ids:
        assert not job_pids(job_tag(d.state_dir, jid)), f"job {jid} left processes behind"
    d.start()
    # a short job still queued at the last stop was never started, so not killed: it runs now
    wait_for(lambda: not (st := d.req("status"))["running"] and not st["queue"] and st["free_slots"] == 4, 15)
    states = {j["job_id"]: j["state"] for j in d.req("history")["jobs"]}
    assert states[mpi] == "cancelled" and states[resizable] == "cancelled"
    # a short job that ended while no daemon ran is "lost": nobody saw its exit code
    assert all(s in ("done", "cancelled", "lost") for s in states.values()), states


def test_kill9_right_after_acknowledgements_loses_nothing(daemon):
    """Journal durability: every acknowledged request survives a ``kill -9`` straight after."""
    d = daemon(1)
    ids = [d.submit(**sleeper(60, 1, name=f"q{i}")) for i in range(25)]
    wait_for(lambda: d.job(ids[0])["state"] == "running", 10)
    c = Connection(d.endpoint, 5)
    for it in range(1, 6):  # profiler updates acknowledged by their advice
        c.request("resize_point", {"iteration": it, "nprocs": 1, "iter_time": 0.5}, job_id=ids[0])
    last = c.request("submit", {"job": sleeper(60, 1, name="last")}).body["job_id"]
    d.kill9()  # at once: nothing acknowledged may be missing
    c.close()
    d.start()
    st = d.req("status")
    assert [j["job_id"] for j in st["running"]] == [ids[0]]
    assert [j["job_id"] for j in st["queue"]] == [*ids[1:], last]
    assert d.job(ids[0])["iterations"] == 5
    d.req("cancel", {"job_id": ids[0]})


def test_submit_and_cancel_in_one_batch_launches_nothing(tmp_path):
    """A job started and cancelled within one batch of requests is never launched."""
    from scheduler.core.pool import default_pool
    from scheduler.daemon.loop import Daemon

    d = Daemon(str(tmp_path), pool=default_pool(2))
    try:
        acts = []
        for msg in (P.Message("submit", 1, None, {"job": sleeper(60, 1, name="never")}),
                    P.Message("cancel", 2, None, {"job_id": 1})):
            rep, a = d.handle(P.encode(msg), time.time())
            assert rep.type == "ok", rep
            acts += a
        assert any(type(a).__name__ == "Launch" for a in acts)  # started by the submit ...
        d.perform(acts, time.time())  # ... and cancelled before the batch's actions ran
        assert not d.supervisor.procs and d.state.jobs[1].sid is None and d.state.jobs[1].state == "cancelled"
        assert not job_pids(job_tag(d.state_dir, 1))
    finally:
        d.journal.close()
        kill_job(job_tag(str(tmp_path), 1), grace=0.5)


def test_shrink_requests_through_a_live_daemon(daemon):
    """``--remap-param request_shrinks=true``: a waiting job makes the daemon request a shrink,
    which the running job carries out at its next resize point."""
    d = daemon(6, extra=("--remap-param", "request_shrinks=true"))
    a = d.submit(**emu(iterations=30, work=1.0, serial=0.05, overhead=0.04, max_procs=6))
    wait_for(lambda: d.job(a)["nprocs"] >= 4, 20)
    b = d.submit(**sleeper(0.5, 4))
    wait_for(lambda: d.job(b)["state"] in ("running", "done"), 15)
    ev = [e for e in d.req("history")["events"] if e["job_id"] == a]
    kinds = [e["kind"] for e in ev]
    assert "shrink_request" in kinds, kinds
    assert kinds.index("shrink_request") < max(i for i, k in enumerate(kinds) if k == "shrink")
    d.req("cancel", {"job_id": a})



def test_stop_kill_jobs_launches_nothing(tmp_path):
    """Regression: ``stop --kill-jobs`` frees the slots of the jobs it kills; a queued job must
    not start on them in the daemon's last batch (one did, and outlived the daemon), nor may
    a job the same batch allocated before the stop."""
    from scheduler.core.pool import default_pool
    from scheduler.daemon.loop import Daemon

    d = Daemon(str(tmp_path), pool=default_pool(2))
    try:
        acts = []
        for msg in (P.Message("submit", 1, None, {"job": sleeper(60, 2, name="big")}),
                    P.Message("submit", 2, None, {"job": sleeper(60, 1, name="queued")}),
                    P.Message("stop", 3, None, {"kill_jobs": True})):
            rep, a = d.handle(P.encode(msg), time.time())
            assert rep.type == "ok", rep
            acts += a
        acts = d.batch_actions(acts, time.time(), tick=True)
        assert not [a for a in acts if type(a).__name__ == "Launch"], acts
        assert d.state.jobs[1].state == "cancelled" and d.state.jobs[2].state == "queued"
        d.perform(acts, time.time())
        assert not d.supervisor.procs and not job_pids(job_tag(d.state_dir, 1))
    finally:
        d.journal.close()
        for jid in (1, 2):
            kill_job(job_tag(str(tmp_path), jid), grace=0.5)


def test_an_adopted_job_keeps_its_true_outcome(daemon):
    """A job that ends while no daemon runs (or under a restarted one, which is not its parent) is
    recorded as it ended: exit 0 done, exit 3 failed with its code; not 'lost' (it was, before the
    Job Startup wrapper recorded the exit status)."""
    d = daemon(2)
    ok = d.submit(name="ok", command=["python", "-c", "import time; time.sleep(4); print('result OK')"],
                  nprocs=1, resizable=False)
    bad = d.submit(name="bad", command=["python", "-c", "import sys, time; time.sleep(4); sys.exit(3)"],
                   nprocs=1, resizable=False)
    wait_for(lambda: all(job_pids(job_tag(d.state_dir, j)) for j in (ok, bad)), 10)
    d.kill9()
    d.start()  # adopts both while they run
    wait_for(lambda: all(d.job(j)["state"] not in ("queued", "running") for j in (ok, bad)), 20)
    assert d.job(ok)["state"] == "done", d.job(ok)
    j = d.job(bad)
    assert j["state"] == "failed" and j["exit_code"] == 3 and "exit code 3" in j["error"], j


def test_a_job_that_ended_while_no_daemon_ran_is_done_even_once_its_deadline_has_passed(daemon):
    """``stop`` while a job runs; the job exits 0 with no daemon; a daemon started on the same state directory
    after the job's walltime deadline reads the exit status first: ``done`` with code 0, not a walltime kill."""
    d = daemon(2, extra=("--overtime", "0"))
    go = os.path.join(d.state_dir, "go")
    code = f"import os, time\nwhile not os.path.exists({go!r}):\n    time.sleep(0.05)\nprint('finished')"
    jid = d.submit(name="short", command=["python", "-c", code], nprocs=2, resizable=False, walltime=1.0)
    wait_for(lambda: job_pids(job_tag(d.state_dir, jid)), 10)
    d.req("stop")
    d.proc.wait(10)
    open(go, "w").close()
    exit_file = os.path.join(d.state_dir, "logs", f"job-{jid}.exit")
    wait_for(lambda: read_exit_status(exit_file) == 0, 20)
    db = sqlite3.connect(os.path.join(d.state_dir, "journal.sqlite"))
    try:
        deadline = json.loads(db.execute("SELECT record FROM jobs WHERE job_id = ?", (jid,)).fetchone()[0])["deadline"]
    finally:
        db.close()
    wait_for(lambda: time.time() > kill_time(deadline) + 0.2, 10)  # the event: its kill time (overtime 0) has passed
    d.start()
    j = wait_for(lambda: (j := d.job(jid))["state"] not in ("queued", "running") and j, 15)
    assert j["state"] == "done" and j["exit_code"] == 0 and not j["error"], j
    assert d.req("status")["daemon"]["walltime_kills"] == 0


def test_a_job_past_its_walltime_is_killed_and_its_slots_freed(daemon):
    d = daemon(2, remap="static", extra=("--overtime", "0.5"))
    a = d.submit(**sleeper(60.0, 2, walltime=1.0))
    wait_for(lambda: d.job(a)["state"] == "running", 10)
    tag = job_tag(d.state_dir, a)
    wait_for(lambda: d.job(a)["state"] == "failed", 15)
    assert "walltime exceeded" in d.job(a)["error"]
    assert re.search(r"deadline \d{4}-\d\d-\d\d \d\d:\d\d:\d\d \(", d.job(a)["error"]), d.job(a)["error"]
    wait_for(lambda: not job_pids(tag), 10)  # mpiexec and its ranks are gone
    st = d.req("status")
    assert st["free_slots"] == 2 and st["daemon"]["walltime_kills"] == 1, st
