"""Benchmark: the head node at scale (up to 50,000 queued jobs), and the simulator on a million-job trace.

``python -m benchmarks.scale [--quick] [--no-daemon] [--no-sim] [--million]``

**Daemon.** A real daemon process (``reshape daemon``, default policies: EASY
+ the Remap Scheduler, one ``localhost`` node of ``R + 3`` slots) runs ``R``
emulated jobs: real one-slot jobs it launched itself (``sleep`` under
``mpiexec``, so it watches ``R`` ``mpiexec`` processes), each resizable, with
a walltime (staggered by a second per job, so EASY's shadow time is finite),
for which client processes speak the job's side of the protocol: every job
reaches a resize point once per :data:`PERIOD` seconds (``R`` resize points
per second in all, paced, not back to back). Behind them ``Q`` queued jobs
(sizes 1 to 64, walltimes of two or three days, the head needing 64 slots or
all ``R``) wait: three slots are free, so every scheduling pass (after each
submission, every 0.1 s tick) tries backfill candidates (a third of the
queue fits three slots; none may start, since none ends before the head's
shadow time), which EASY's window bounds
(:data:`scheduler.core.policies.easy.WINDOW`). While the resize points flow,
one client submits (:data:`SUBMITS_PER_S` a second) and one asks for
``status`` with ``limit=100`` (paged: the first 100 queued jobs, and the
totals). Reported per ``(R, Q)``: round-trip p50/p99 of each request as the
client sees it (clients and daemon share this machine's CPUs), the daemon's
own service time over its last 8,192 requests (all kinds), its RSS, and the
load average. The queue grows from 1,000 to 10,000 to 50,000 on the same
daemon (a run of ``R`` jobs per daemon).

How the clients measure: each client thread is paced open-loop (request ``k``
is due at ``start + k / rate``) but waits for each reply before the next
request (a late request goes out at once, and its round trip is timed from
when it was sent, not from when it was due), and a round trip runs from the
send to the reply, the client's own encoding and decoding included. Where a
round trip's time goes, next to it: the daemon's loop
(:mod:`scheduler.observe.loopstats`, read from ``status`` before and after
the measurement: p99 of a whole turn, ``loop_busy_p99_ms``, and of its
phases; handling time per request kind; GC pauses; the slowest turns with
their breakdown), the time the daemon's main thread was runnable but waited
for a CPU (``daemon_runq_wait_share``, seconds per second, from
``/proc/PID/task/PID/schedstat``) beside its time on a CPU
(``daemon_on_cpu_share``), the share of time some task on the machine waited
for a CPU (``cpu_pressure_some``, Linux PSI), and the CPU the resize-point
clients used (``client_cpu_share``). ``--client-procs`` changes how many
processes speak for the emulated jobs (same request rate).

**Simulator.** Synthetic traces from the Lublin-Feitelson model
(:mod:`scheduler.lab.workloads.lublin`, seeded) on
:data:`benchmarks.scale_sim.SIM_SLOTS` nodes, arrivals scaled to an offered
load of :data:`benchmarks.scale_sim.SIM_LOAD`, half the jobs
malleable, simulated with ``easy`` and the recommended preset
``reshape-plus``; each run in a fresh process, which reports its time and
peak RSS, its CPU seconds and the span of its arrivals (a year on 1,024
nodes at load 0.9 holds about 30,000 jobs: a million span some 33 years).
Default sizes 100k, 200k and 400k jobs (the cost per 100k jobs and its growth
show whether the cost is linear); ``--million`` adds the million-job run
(minutes).

Writes ``benchmarks/results/scale.json`` (``--quick``: ``scale-quick.json``);
summary keys ``resize_point_p99_ms_at_10k`` and ``submit_p99_ms_at_10k``
(10,000 queued, 1,000 running), targets p99 < 5 ms there and RSS < 500 MB at
50,000 queued; the simulator: < 300 s of CPU and < 2 GB for a million jobs.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing as mp
import os
import random
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np
import psutil

from benchmarks._common import RESULTS, table, write_result
from benchmarks.scale_sim import SIM_LOAD, SIM_SLOTS, run_sims
from reshape.joblink.client import Connection
from scheduler.daemon.startup import job_tag, kill_jobs
from scheduler.observe.loopstats import delta

PERIOD = 1.0  # seconds between two resize points of one emulated job
SUBMITS_PER_S = 20.0
STATUS_PER_S = 5.0
FREE = 3  # slots left free beside the running jobs: backfill has candidates to try
RUNNING = (100, 1000)
QUEUED = (1000, 10000, 50000)
SIM_JOBS = (100_000, 200_000, 400_000)


# ---------------------------------------------------------------------------------------- daemon
def _queued_job(rng: random.Random, cap: int) -> dict:
    """A queued job: 1 to 64 slots (at most ``cap``), a walltime of two or three days."""
    n = min(cap, rng.choice((1, 2, 4, 8, 16, 32, 64)))
    return {"name": "queued", "command": ["sleep", "1"], "nprocs": n, "launch": "single",
            "walltime": rng.choice((172800, 259200))}


def _running_job(i: int) -> dict:
    return {"name": f"emu{i}", "command": ["sleep", "86400"], "nprocs": 1, "min_procs": 1,
            "launch": "single", "walltime": 86400 + i}


def _pace(endpoint: str, kind: str, per_s: float, seconds: float, start: float, job_ids: list[int],
          cap: int, seed: int, out: list[float]) -> None:
    """Send ``kind`` requests at ``per_s`` a second from ``start`` for ``seconds``; round trips into ``out``."""
    c = Connection(endpoint, timeout=30)
    rng = random.Random(seed)
    it = {j: 0 for j in job_ids}
    k, dt = 0, 1.0 / per_s
    while time.perf_counter() < start:
        time.sleep(0.001)
    end = start + seconds
    while (t_next := start + k * dt) < end:
        if (wait := t_next - time.perf_counter()) > 0:
            time.sleep(wait)
        t0 = time.perf_counter()
        if kind == "resize_point":
            jid = job_ids[k % len(job_ids)]
            it[jid] += 1
            adv = c.request("resize_point", {"iteration": it[jid], "nprocs": 1,
                                             "iter_time": PERIOD * (1 + 0.01 * rng.random())}, job_id=jid)
            if adv.action != "continue":  # an emulated job does not resize: it says so
                c.request("resized", {"old": 1, "new": 1, "seconds": 0.0, "error": "emulated job: no resize"},
                          job_id=jid)
        elif kind == "submit":
            c.request("submit", {"job": _queued_job(rng, cap)})
        else:
            c.request("status", {"limit": 100})
        out.append(time.perf_counter() - t0)
        k += 1
    c.close()


def _resize_clients(endpoint: str, job_ids: list[int], threads: int, seconds: float, start: float, q) -> None:
    """One client process: ``threads`` threads, each the protocol side of a share of the jobs; puts its
    round trips and the CPU seconds it used."""
    outs: list[list[float]] = [[] for _ in range(threads)]
    cpu0 = time.process_time()
    ts = [threading.Thread(target=_pace, args=(endpoint, "resize_point", len(job_ids[i::threads]) / PERIOD,
                                                seconds, start, job_ids[i::threads], 1, i, outs[i]))
          for i in range(threads) if job_ids[i::threads]]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    q.put(([x for o in outs for x in o], time.process_time() - cpu0))


def _status_client(endpoint: str, seconds: float, start: float, cap: int, seed: int, q) -> None:
    """The ``status`` pacer in a process of its own: decoding a page holds the interpreter lock for
    milliseconds, which the submitting thread would otherwise wait for (and count as the daemon's)."""
    out: list[float] = []
    _pace(endpoint, "status", STATUS_PER_S, seconds, start, [], cap, seed, out)
    q.put(("status", out))


def _submitter(endpoint: str, n: int, cap: int, seed: int, q) -> None:
    """Submit ``n`` queued jobs back to back (setting the queue up)."""
    c = Connection(endpoint, timeout=60)
    rng = random.Random(seed)
    for _ in range(n):
        c.request("submit", {"job": _queued_job(rng, cap)})
    c.close()
    q.put(n)


def _fill(endpoint: str, n: int, cap: int, seed: int, procs: int = 4) -> None:
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    ps = [ctx.Process(target=_submitter, args=(endpoint, n // procs + (i < n % procs), cap, seed * 100 + i, q))
          for i in range(procs)]
    for p in ps:
        p.start()
    for _ in ps:
        q.get(timeout=1800)
    for p in ps:
        p.join(10)


def _stats(lat: list[float]) -> dict:
    a = np.array(lat) * 1e3
    if not a.size:
        return {"n": 0, "p50_ms": None, "p99_ms": None, "max_ms": None}
    return {"n": int(a.size), "p50_ms": float(np.percentile(a, 50)), "p99_ms": float(np.percentile(a, 99)),
            "max_ms": float(a.max())}


def _measure(endpoint: str, ids: list[int], seconds: float, cap: int, seed: int, clients: int = 2) -> dict:
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    start = time.perf_counter() + 1.5  # spawned clients are up by then
    procs = [ctx.Process(target=_resize_clients, args=(endpoint, ids[i::clients], 4, seconds, start, q))
             for i in range(clients)]
    sq = ctx.Queue()
    procs.append(ctx.Process(target=_status_client, args=(endpoint, seconds, start, cap, seed, sq)))
    for p in procs:
        p.start()
    sub: list[float] = []
    ts = [threading.Thread(target=_pace, args=(endpoint, "submit", SUBMITS_PER_S, seconds, start, [], cap, seed, sub))]
    for t in ts:
        t.start()
    got = [q.get(timeout=seconds + 120) for _ in procs[:-1]]
    st = sq.get(timeout=seconds + 120)[1]
    rp = [x for lat, _ in got for x in lat]
    for t in ts:
        t.join()
    for p in procs:
        p.join(10)
    return {"resize_point": _stats(rp), "resize_points_per_s": len(rp) / seconds, "submit": _stats(sub),
            "status": _stats(st), "client_cpu_share": sum(c for _, c in got) / seconds}


def _schedstat(pid: int) -> tuple[float, float]:
    """(seconds on a CPU, seconds runnable but waiting for one) of ``pid``'s main thread (Linux schedstat)."""
    try:
        with open(f"/proc/{pid}/task/{pid}/schedstat") as f:
            run, wait, _ = f.read().split()
        return int(run) / 1e9, int(wait) / 1e9
    except (OSError, ValueError):
        return math.nan, math.nan


def _cpu_pressure() -> float:
    """Seconds (cumulative) during which some runnable task waited for a CPU (Linux PSI), nan without PSI."""
    try:
        with open("/proc/pressure/cpu") as f:
            return int(f.readline().split("total=")[1]) / 1e6
    except (OSError, ValueError, IndexError):
        return math.nan


def run_daemon(running: int, queued: tuple[int, ...], seconds: float, log=print, clients: int = 2) -> list[dict]:
    """One daemon with ``running`` emulated jobs; the queue grown to each of ``queued`` in turn."""
    from scheduler.cli.workload import free_port

    state = tempfile.TemporaryDirectory(prefix="reshape-scale-")
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    slots = running + FREE
    with open(os.path.join(state.name, "daemon.err"), "wb") as err:
        daemon = subprocess.Popen([sys.executable, "-m", "scheduler.cli", "daemon", "--endpoint", endpoint,
                                   "--state-dir", state.name, "--slots", str(slots)],
                                  stdout=subprocess.DEVNULL, stderr=err, start_new_session=True)
    ids: list[int] = []
    rows = []
    try:
        c = Connection(endpoint, timeout=0.5)
        for _ in range(150):
            try:
                c.request("ping")
                break
            except Exception:
                time.sleep(0.1)
        c.timeout = 60
        t0 = time.perf_counter()
        ids = [c.request("submit", {"job": _running_job(i)}).target for i in range(running)]
        deadline = time.monotonic() + 60 + running * 0.2
        while c.request("status", {"limit": 0}).running_total < running:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{running} emulated jobs not running after {deadline:.0f} s")
            time.sleep(0.5)
        log(f"R={running}: {running} jobs launched and running in {time.perf_counter() - t0:.1f} s")
        head = {"name": "head", "command": ["sleep", "1"], "nprocs": min(64, running), "launch": "single",
                "walltime": 172800}
        c.request("submit", {"job": head})  # the head does not fit: everything behind it may only backfill
        have = 1
        for i, target in enumerate(queued):
            t0 = time.perf_counter()
            _fill(endpoint, target - have, running, seed=running + i)
            have = c.request("status", {"limit": 0}).queued_total
            log(f"R={running}: queue {have} ({time.perf_counter() - t0:.1f} s to fill)")
            load0 = os.getloadavg()[0]
            proc = psutil.Process(daemon.pid)
            sv0 = c.request("status", {"limit": 0}).daemon
            served0, cpu0, sched0, psi0 = sv0["served"], proc.cpu_times(), _schedstat(daemon.pid), _cpu_pressure()
            w0 = time.perf_counter()
            m = _measure(endpoint, ids, seconds, running, seed=i, clients=clients)
            cpu1, sched1, psi1 = proc.cpu_times(), _schedstat(daemon.pid), _cpu_pressure()
            wall = time.perf_counter() - w0  # the measurement plus the clients' start and end
            st = c.request("status", {"limit": 0})
            sv = st.daemon
            cpu = (cpu1.user + cpu1.system) - (cpu0.user + cpu0.system)
            loop = delta(sv["loop"], sv0["loop"])
            ph = loop["phases"]
            rss = psutil.Process(daemon.pid).memory_info().rss
            row = {"running": st.running_total, "queued": have, "queued_after": st.queued_total,
                   **{f"{k}_{s}": m[k][s] for k in ("resize_point", "submit", "status")
                      for s in ("p50_ms", "p99_ms", "max_ms", "n")},
                   "resize_points_per_s": m["resize_points_per_s"], "service_p50_ms": sv["p50_ms"],
                   "service_p99_ms": sv["p99_ms"], "max_loop_gap_ms": sv["max_loop_gap_ms"],
                   "policy_errors": sv["policy_errors"], "rss_mb": rss / 2**20,
                   "daemon_cpu_share": cpu / wall,  # of one CPU, during the measurement
                   "daemon_cpu_ms_per_request": 1e3 * cpu / max(1, sv["served"] - served0 - 1),
                   # the loop's own time per turn that did work (bucket upper bounds, within 33%)
                   **{f"loop_{p}_p99_ms": ph[p]["p99_ms"] for p in ("busy", "handle", "tick", "commit", "send")},
                   "loop_busy_max_ms": ph["busy"]["max_ms"], "gc_pause_max_ms": loop["gc_pauses"]["max_ms"],
                   "gc_seconds": loop["gc_pauses"]["total_s"],
                   # the daemon's main thread: runnable but waiting for a CPU, per second of the run
                   "daemon_runq_wait_share": (sched1[1] - sched0[1]) / wall,
                   "daemon_on_cpu_share": (sched1[0] - sched0[0]) / wall,
                   "cpu_pressure_some": (psi1 - psi0) / wall,  # PSI: share of time some task waited
                   "client_procs": clients, "client_cpu_share": m["client_cpu_share"],
                   "loop": loop, "slowest_turns": sv["loop"]["slowest"][-5:],
                   "loadavg": [load0, os.getloadavg()[0]]}
            rows.append(row)
            have = st.queued_total
            log(f"R={running} Q={row['queued']}: resize_point p99 {row['resize_point_p99_ms']:.2f} ms, submit p99 "
                f"{row['submit_p99_ms']:.2f} ms, status p99 {row['status_p99_ms']:.2f} ms, RSS {row['rss_mb']:.0f} MB; "
                f"loop busy p99 {ph['busy']['p99_ms']} ms, daemon waited for a CPU "
                f"{row['daemon_runq_wait_share']:.2f} s/s, load {row['loadavg']}")
    finally:
        daemon.kill()
        daemon.wait(10)
        kill_jobs([job_tag(state.name, i) for i in ids])
        state.cleanup()
    return rows


# ---------------------------------------------------------------------------------------- core
def run_core(running: int, queued: tuple[int, ...], reps: int = 300) -> list[dict]:
    """The same scenario on the sans-I/O core in this process: what each request costs the scheduler
    itself (no sockets, no journal), per queue length; the queue grows on one core as in the daemon."""
    from scheduler.core.events import ResizePoint
    from scheduler.core.jobfile import validate_job
    from scheduler.core.policy import app_policy, remap_policy
    from scheduler.core.pool import Node, Pool
    from scheduler.core.state import ClusterState

    pool = Pool([Node("localhost", running + FREE)])
    st = ClusterState(pool, app_policy("easy"), remap_policy("reshape"))
    rng = random.Random(running)
    now = 0.0
    for i in range(running):
        st.submit(validate_job(_running_job(i), pool.capacity), now)
    st.tick(now)
    st.submit(validate_job({"name": "head", "command": ["sleep", "1"], "nprocs": min(64, running),
                            "walltime": 172800}, pool.capacity), now)
    ids = [j.job_id for j in st.running()]
    rows = []
    for target in queued:
        while len(st.table.queued) < target:
            st.submit(validate_job(_queued_job(rng, running), pool.capacity), now)
        st.tick(now)
        lat: dict[str, list[float]] = {"resize_point": [], "submit": [], "tick": [], "status": []}
        for k in range(reps):
            for kind, out in lat.items():
                now += 0.001
                t0 = time.perf_counter()
                if kind == "resize_point":
                    j = st.jobs[ids[k % running]]
                    st.handle(ResizePoint(job_id=j.job_id, nprocs=1, iteration=j.iterations + 1, iter_time=PERIOD), now)
                elif kind == "submit":
                    st.submit(validate_job(_queued_job(rng, running), pool.capacity), now)
                    st.tick(now)
                elif kind == "tick":
                    st.tick(now)
                else:
                    st.status(now, 100, 100)  # paged, as the protocol's status with limit=100
                out.append(time.perf_counter() - t0)
                st.dirty.clear()
                st.events.clear()
        row = {"running": running, "queued": target}
        for kind, xs in lat.items():
            got = _stats(xs)
            row[f"core_{kind}_p50_ms"], row[f"core_{kind}_p99_ms"] = got["p50_ms"], got["p99_ms"]
        rows.append(row)
    return rows


# ---------------------------------------------------------------------------------------- main
def _at(rows: list[dict], running: int, queued: int, key: str):
    for r in rows:
        if r["running"] == running and abs(r["queued"] - queued) <= 0.05 * queued:
            return r[key]
    return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.scale", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="20 running jobs, 200 and 1,000 queued; 5k jobs simulated")
    ap.add_argument("--no-daemon", action="store_true", help="skip the live daemon")
    ap.add_argument("--no-sim", action="store_true", help="skip the simulator")
    ap.add_argument("--million", action="store_true", help="also simulate the million-job trace (minutes)")
    ap.add_argument("--seconds", type=float, help="measurement seconds per configuration (default 10; quick 3)")
    ap.add_argument("--running", type=int, action="append",
                    help="emulated running jobs (repeatable; default 100 and 1000)")
    ap.add_argument("--queued", type=int, action="append", help="queue lengths (repeatable; default 1k, 10k, 50k)")
    ap.add_argument("--client-procs", type=int, default=2,
                    help="processes speaking for the emulated jobs (4 threads each; default 2)")
    ap.add_argument("--name", help="results file name (default scale, or scale-quick with --quick)")
    ap.add_argument("--no-core", action="store_true", help="skip the in-process core part")
    a = ap.parse_args(argv)
    seconds = a.seconds or (3.0 if a.quick else 10.0)
    out: dict = {"config": {"period_s": PERIOD, "submits_per_s": SUBMITS_PER_S, "status_per_s": STATUS_PER_S,
                            "free_slots": FREE, "seconds": seconds}}
    summary: dict = {}
    if not a.no_daemon:
        rows = []
        for r in a.running or ((20,) if a.quick else RUNNING):
            rows += run_daemon(r, tuple(a.queued or ((200, 1000) if a.quick else QUEUED)), seconds,
                               clients=a.client_procs)
        print(table(rows, [("running", "running", "d"), ("queued", "queued", "d"),
                           ("resize_point_p50_ms", "resize p50", ".2f"), ("resize_point_p99_ms", "resize p99", ".2f"),
                           ("submit_p50_ms", "submit p50", ".2f"), ("submit_p99_ms", "submit p99", ".2f"),
                           ("status_p50_ms", "status p50", ".2f"), ("status_p99_ms", "status p99", ".2f"),
                           ("service_p99_ms", "service p99", ".2f"), ("loop_busy_p99_ms", "turn p99", ".1f"),
                           ("resize_points_per_s", "resize/s", ".0f"),
                           ("daemon_cpu_ms_per_request", "CPU ms/req", ".3f"), ("daemon_cpu_share", "CPU", ".2f"),
                           ("daemon_runq_wait_share", "CPU wait", ".2f"), ("cpu_pressure_some", "PSI", ".2f"),
                           ("client_cpu_share", "client CPU", ".2f"), ("rss_mb", "RSS MB", ".0f")]))
        out["daemon"] = rows
        summary |= {"resize_point_p99_ms_at_10k": _at(rows, 1000, 10000, "resize_point_p99_ms"),
                    "submit_p99_ms_at_10k": _at(rows, 1000, 10000, "submit_p99_ms"),
                    "status_p99_ms_at_10k": _at(rows, 1000, 10000, "status_p99_ms"),
                    "rss_mb_at_50k": _at(rows, 1000, 50000, "rss_mb"),
                    "worst_resize_point_p99_ms": max(r["resize_point_p99_ms"] for r in rows),
                    "worst_submit_p99_ms": max(r["submit_p99_ms"] for r in rows)}
    if not a.no_daemon and not a.no_core:
        core = []
        for r in a.running or ((20,) if a.quick else RUNNING):
            core += run_core(r, tuple(a.queued or ((200, 1000) if a.quick else QUEUED)))
        print("\nthe core alone (this process, no I/O):")
        print(table(core, [("running", "running", "d"), ("queued", "queued", "d")]
                    + [(f"core_{k}_{s}", f"{k} {s[:3]}", ".3f") for k in ("resize_point", "submit", "tick", "status")
                       for s in ("p50_ms", "p99_ms")]))
        out["core"] = core
    if not a.no_sim:
        sims = run_sims((5_000,) if a.quick else SIM_JOBS + ((1_000_000,) if a.million else ()),
                        ("easy", "reshape-plus"), SIM_SLOTS, SIM_LOAD)
        out["simulator"] = sims
        summary |= {"sim": {f"{r['policy']}@{r['jobs']}": {k: r[k] for k in (
            "seconds", "cpu_seconds", "peak_rss_mb", "s_per_100k", "span_days", "jobs_per_year")} for r in sims}}
    name = a.name or ("scale-quick" if a.quick else "scale")
    try:  # a run of one part keeps the other part's last results
        with open(os.path.join(RESULTS, f"{name}.json")) as f:
            old = json.load(f)
        daemon_keys = ("resize_point_p99_ms_at_10k", "submit_p99_ms_at_10k", "status_p99_ms_at_10k", "rss_mb_at_50k",
                       "worst_resize_point_p99_ms", "worst_submit_p99_ms")
        for part, keys in (("core", ()), ("daemon", daemon_keys), ("simulator", ("sim",))):
            if part not in out and part in old:
                out[part] = old[part]
                summary |= {k: old["summary"][k] for k in keys if k in old.get("summary", {})}
    except (OSError, ValueError, KeyError):
        pass
    summary["targets"] = {"resize_point_p99_ms_at_10k": "< 5", "submit_p99_ms_at_10k": "< 5",
                          "rss_mb_at_50k": "< 500", "sim_million_reshape_plus": "< 300 s of CPU, < 2048 MB"}
    summary["cpus"] = os.cpu_count()
    path = write_result(name, {**out, "summary": summary})
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
