"""Time-scaled emulations of Sudarsan & Ribbens 2007 §4.2's workloads W1 and W2, run against a real daemon.

Each job is an emulated resizable application (``apps.emujob``: one
process standing for ``p`` processors, iteration time
``work * (serial + (1 - serial) / p) + overhead * p``), with the paper's
initial sizes, arrival times, legal sizes (Table 2's rule: sizes, or grid
sides for LU/MM, divide the problem size; Jacobi and master-worker even, as
Table 2 lists them: :data:`TABLE2`; Table 3's problem sizes) and ten
iterations. ``work`` is set so that one iteration at the initial size takes
a tenth of the job's static turnaround in Tables 4 and 5; ``serial`` and
``overhead`` (our choice: the paper gives no speedup curves) place each
application's sweet spot. Times are multiplied by ``scale``.

:func:`run_workload` starts ``reshape daemon`` as a separate process on a
free loopback port, submits every job with its arrival delay (or, with
``announce=False``, each job when its delay has passed), waits for all
of them and returns the daemon's history and its summary
(:func:`scheduler.observe.report.summarize`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from reshape.joblink import protocol as P
from reshape.joblink.client import Connection, SchedulerUnavailable
from reshape.joblink.emulated import iteration_time
from reshape.joblink.protocol import StatusView
from scheduler.core.policy import JobSpec
from scheduler.daemon.startup import job_tag, kill_job

__all__ = ["TABLE2", "TABLE2_POOL", "W1", "W2", "AppModel", "EmuJob", "jobs_for", "run_workload"]


def _even(n: int | None, lo: int, hi: int) -> tuple[int, ...]:
    """Even sizes from ``lo`` to ``hi`` that divide ``n`` (every even size if ``n`` is None)."""
    return tuple(p for p in range(lo, hi + 1, 2) if n is None or n % p == 0)


#: Sudarsan & Ribbens 2007 Table 2: each row's job (start size, legal sizes) in the paper's 50-node pool; the
#: Remap Scheduler's growth (:func:`scheduler.core.policies.reshape_remap.growth`) walks the row.
#: The stated rule (§4: each grid side, or the size, divides the problem size; 2-D grids grow
#: their smaller side) gives the LU/MM rows and FFT's. Three rows need more than the rule:
#: Jacobi 8000 and master-worker list only even sizes (Jacobi skips 5 and 25, which divide
#: 8000; master-worker's work units do not constrain it; the paper gives no reason), and LU/MM
#: 21000 goes 3x4 -> 4x5, skipping 4x4 although 4 divides 21000 (the rule cannot skip it; W2
#: runs LU 21000 at 16 = 4x4, so the row lists the sizes used in §4.1, not the legal ones).
#: Those rows list their sizes explicitly, as a job file's ``sizes`` does.
TABLE2_POOL = 50
TABLE2 = {
    "8000 (LU, MM)": JobSpec(0, "LU", 0.0, 2, topology="2d", divides=8000),
    "12000 (LU, MM)": JobSpec(0, "LU", 0.0, 2, topology="2d", divides=12000),
    "14000 (LU, MM)": JobSpec(0, "LU", 0.0, 4, topology="2d", divides=14000),
    "16000 (LU, MM)": JobSpec(0, "LU", 0.0, 4, topology="2d", divides=16000),
    "20000 (LU, MM)": JobSpec(0, "LU", 0.0, 4, topology="2d", divides=20000),
    "21000 (LU, MM)": JobSpec(0, "LU", 0.0, 4, topology="2d", divides=21000,
                              sizes=(4, 6, 9, 12, 20, 25, 30, 36, 42, 49)),
    "24000 (LU, MM)": JobSpec(0, "LU", 0.0, 8, topology="2d", divides=24000),
    "8000 (Jacobi)": JobSpec(0, "Jacobi", 0.0, 4, divides=8000, sizes=_even(8000, 4, TABLE2_POOL)),
    "8192 (FFT)": JobSpec(0, "FFT", 0.0, 2, divides=8192),
    "20000 (Master-worker)": JobSpec(0, "Master-worker", 0.0, 4, sizes=_even(None, 4, 22)),
}


@dataclass(frozen=True)
class AppModel:
    serial: float
    sweet: int  # processes at which t(p) is minimal
    topology: str = "1d"
    divides: int | None = None
    sizes: tuple[int, ...] | None = None  # explicit legal sizes, if the rule alone is not Table 2's


# sweet spots: our choice (LU/MM scale well to ~25-30, Jacobi ~20, FFT ~16, master-worker ~24).
# Legal sizes: Table 2's rows, except that LU 21000 keeps the stated rule (W2 runs it at 16 =
# 4x4, which its Table 2 row lacks) and master-worker may also run at 2 (W1 starts it there).
MODELS = {
    "LU": AppModel(0.02, 30, "2d", 21000),
    "MM": AppModel(0.02, 28, "2d", 14000),
    "Master-worker": AppModel(0.01, 24, sizes=_even(None, 2, 22)),
    "Jacobi": AppModel(0.03, 20, "1d", 8000, TABLE2["8000 (Jacobi)"].sizes),
    "FFT": AppModel(0.03, 16, "1d", 8192),
}


@dataclass(frozen=True)
class EmuJob:
    name: str
    arrival: float  # seconds (paper time)
    nprocs: int
    static_turnaround: float  # seconds (paper time, Tables 4/5)
    resizable: bool = True


# Table 4 and §4.2.1 (36 processors): LU, MM at t=0; Master-worker at 450; Jacobi, FFT at 465
W1 = (36, (EmuJob("LU", 0, 6, 4482.60), EmuJob("MM", 0, 8, 3661.20),
           EmuJob("Master-worker", 450, 2, 147.47), EmuJob("Jacobi", 465, 4, 3266.40),
           EmuJob("FFT", 465, 4, 840.00)))
# Table 5 and §4.2.2 (36 processors): arrivals from the text (LU first; Jacobi arrival not
# given: our choice t=100); FFT "static scheduled"
W2 = (36, (EmuJob("LU", 0, 16, 1265.87), EmuJob("Jacobi", 100, 10, 867.00),
           EmuJob("Master-worker", 560, 6, 355.00), EmuJob("FFT", 650, 4, 268.69, resizable=False)))


def _work(model: AppModel, p0: int, t0: float) -> tuple[float, float]:
    """``(work, overhead)`` with t(p0) = t0 and the minimum of t(p) at ``model.sweet``."""
    s, ps = model.serial, model.sweet
    # overhead = work * (1 - s) / ps^2 puts the minimum at ps
    k = (1 - s) / ps**2
    work = t0 / (s + (1 - s) / p0 + k * p0)
    return work, work * k


def jobs_for(workload: tuple[int, tuple[EmuJob, ...]], scale: float, iterations: int = 10) -> list[dict]:
    """Job descriptions (``submit`` bodies) for a workload at time ``scale``."""
    slots, jobs = workload
    out = []
    for j in jobs:
        m = MODELS[j.name]
        t0 = j.static_turnaround / iterations * scale
        work, ov = _work(m, j.nprocs, t0)
        assert abs(iteration_time(j.nprocs, work, m.serial, ov) - t0) < 1e-9
        cmd = ["python", "-m", "apps.emujob", "--work", f"{work:.6f}", "--serial", str(m.serial),
               "--overhead", f"{ov:.6f}", "--iterations", str(iterations), "--redist", f"{0.02 * t0:.6f}"]
        out.append({"name": j.name, "command": cmd, "nprocs": j.nprocs, "topology": m.topology,
                    "divides": m.divides if m.topology == "2d" or m.divides else None,
                    "sizes": list(m.sizes) if m.sizes else None,
                    "max_procs": slots, "resizable": j.resizable, "launch": "single",
                    "arrival_delay": j.arrival * scale})
    return out


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nobody listens on now, on ``host`` ("" for every interface)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _stacks(proc: subprocess.Popen, state_dir: str) -> str:
    """The daemon's thread stacks (it dumps them on SIGUSR1) and the end of its stderr."""
    if proc.poll() is None:
        with contextlib.suppress(OSError):
            os.kill(proc.pid, signal.SIGUSR1)
        time.sleep(0.5)
    try:
        with open(os.path.join(state_dir, "daemon.err"), errors="replace") as f:
            return f.read()[-4000:]
    except OSError:
        return ""


def _start_daemon(endpoint: str, state_dir: str, args: list[str]) -> subprocess.Popen:
    """``reshape daemon`` on ``endpoint`` in its own session, its stderr in ``state_dir/daemon.err``."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repository
    with open(os.path.join(state_dir, "daemon.err"), "ab") as err:
        return subprocess.Popen(
            [sys.executable, "-m", "scheduler.cli", "daemon", "--endpoint", endpoint, "--state-dir", state_dir, *args],
            cwd=root, stdout=subprocess.DEVNULL, stderr=err, start_new_session=True)


def _wait_ready(conn: Connection, proc: subprocess.Popen, state_dir: str, timeout: float = 20.0) -> None:
    """Until the daemon answers ``ping``; one line naming why if it exits or does not answer in time."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            conn.send(P.Ping(), timeout=0.5)
            return
        except Exception:
            if time.monotonic() > deadline or proc.poll() is not None:
                why = _stacks(proc, state_dir).strip().splitlines()
                raise RuntimeError("the daemon did not start" + (f": {why[-1]}" if why else "")) from None


def _on_time(jobs: list[dict], announce: bool) -> tuple[list[tuple[float, dict]], list[dict]]:
    """``(later, now)``: without ``announce``, the jobs with an arrival delay, soonest first, each
    ``(delay, job without it)``, and the others; with it, none later."""
    if announce:
        return [], jobs
    later = sorted(((j["arrival_delay"], {k: v for k, v in j.items() if k != "arrival_delay"})
                    for j in jobs if j.get("arrival_delay")), key=lambda x: x[0])
    return later, [j for j in jobs if not j.get("arrival_delay")]


def _submit_held(conn: Connection, held: list[dict], st: StatusView, expansions: int, started: float,
                 ids: list[int]) -> None:
    """Submit each held job whose ``hold`` is over (see :func:`run_workload`), adding its id to ``ids``."""
    for job in list(held):
        hold = job["hold"]
        if ((expansions >= hold.get("after_expansions", 0) and st.free_slots < job["nprocs"])
                or time.monotonic() - started >= hold.get("latest", 0.0)):
            held.remove(job)
            body = {k: v for k, v in job.items() if k != "hold"}
            ids.append(conn.send(P.Submit(job=body)).target)


def _collect_and_stop(conn: Connection, proc: subprocess.Popen, state_dir: str, ids: list[int],
                      logs: bool) -> dict[str, Any]:
    """The history (and with ``logs`` the jobs' output tails) of a finished workload, then stop the daemon."""
    from scheduler.observe.report import summarize

    hist = conn.send(P.History(), timeout=30)
    tails = {i: conn.send(P.Log(target=i, tail=40)).text for i in ids} if logs else {}
    stop_error = None
    try:
        conn.send(P.Stop(kill_jobs=True))
        proc.wait(10)
    except (SchedulerUnavailable, subprocess.TimeoutExpired) as e:
        # killed below; reported (with the daemon's stacks) so a hang does not go unnoticed
        stop_error = f"{e}\n{_stacks(proc, state_dir)}"
    return {"history": hist, "summary": summarize(hist), "state_dir": state_dir,
            "clean_stop": stop_error is None, "stop_error": stop_error, "logs": tails}


def run_workload(jobs: list[dict], slots: int, remap: str, app: str = "easy",
                 timeout: float = 600.0, state_dir: str | None = None,
                 logs: bool = False, watch: Callable[[dict, list[dict]], None] | None = None,
                 daemon_args: tuple[str, ...] = (), ready: Callable[[dict], None] | None = None,
                 announce: bool = True) -> dict[str, Any]:
    """Run ``jobs`` on a fresh daemon; returns ``{"history": ..., "summary": ...}`` (the ``history`` reply, a
    :class:`~reshape.joblink.protocol.HistoryView`, and its :func:`~scheduler.observe.report.summarize`).

    ``announce``: a job's ``arrival_delay`` goes to the daemon with it, all jobs submitted at the
    start (``reshape submit --delay``: the daemon knows what is coming, ``Snapshot.announced``);
    with ``announce=False`` each job is submitted without it when its delay has passed, as a user
    who submits work as it comes does (the daemon sees it only when it arrives).

    ``ready(status)``: called once the daemon answers, before any job is submitted, with its
    ``status`` reply (``status["daemon"]["dashboard"]``: the dashboard's URL, its real port).

    A job may carry ``"hold": {"after_expansions": N, "latest": T}`` (taken out before it is
    submitted): it is submitted once the running jobs have expanded N times in all and the free
    slots cannot hold it (so it queues and running jobs shrink to admit it), or ``T`` seconds
    after the first submission, whichever comes first. The demo uses it so that its story (grow
    into idle slots, then shrink to admit a queued job) does not depend on how fast a loaded
    machine reaches the first resize points.
    With ``logs``, also ``"logs"``: the last lines of every job's output, by job id.
    ``watch(status, new_events)`` is called about five times a second while the jobs run, with
    the daemon's ``status`` reply and the allocation events (decisions with their reasons)
    journaled since the previous call. ``daemon_args``: more ``reshape daemon`` options.
    """
    tmp = None
    if state_dir is None:
        tmp = tempfile.TemporaryDirectory(prefix="reshape-workload-")
        state_dir = tmp.name
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    proc = _start_daemon(endpoint, state_dir, ["--slots", str(slots), "--app-policy", app, "--remap-policy", remap,
                                               *daemon_args])
    conn = Connection(endpoint, timeout=10.0)
    ids: list[int] = []
    try:
        _wait_ready(conn, proc, state_dir)
        if ready is not None:
            ready(conn.send(P.Status()).body)  # as the live view takes it: the dashboard's dict
        held = [j for j in jobs if "hold" in j]
        later, now_jobs = _on_time([j for j in jobs if "hold" not in j], announce)
        started = time.monotonic()
        for job in now_jobs:
            ids.append(conn.send(P.Submit(job=job)).target)
        deadline = started + timeout
        seen: set[tuple] = set()
        since = None
        expansions = 0
        while True:
            while later and time.monotonic() - started >= later[0][0]:
                ids.append(conn.send(P.Submit(job=later.pop(0)[1])).target)
            st = conn.send(P.Status())
            if watch is not None or held:
                events = conn.send(P.History(since=since) if since else P.History(limit=len(jobs)),
                                   timeout=30).events
                new = [e for e in events if (e["t"], e["job_id"], e["kind"], e["detail"]) not in seen]
                seen.update((e["t"], e["job_id"], e["kind"], e["detail"]) for e in new)
                since = max((e["t"] for e in events), default=since)
                expansions += sum(e["kind"] == "expand" for e in new)
                if watch is not None:
                    watch(st.body, new)
            _submit_held(conn, held, st, expansions, started, ids)
            if not st.running and not st.queue and not st.waiting and not held and not later:
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"workload did not finish in {timeout}s")
            time.sleep(min(0.2, max(0.0, later[0][0] - (time.monotonic() - started))) if later else 0.2)
        return _collect_and_stop(conn, proc, state_dir, ids, logs)
    finally:
        conn.close()
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
        for i in ids:
            kill_job(job_tag(state_dir, i), grace=0.5)
        if tmp is not None:
            tmp.cleanup()
