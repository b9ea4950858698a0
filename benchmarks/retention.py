"""Benchmark: a daemon's memory and journal under a submit-and-cancel loop at the per-user quota.

``python -m benchmarks.retention [--minutes 10] [--rate 20] [--retain-jobs 1000] [--retain-days 0.002]``

Two real daemons (``reshape daemon`` on loopback TCP, two slots each) run side by side on this
machine for ``--minutes``: one keeps every ended job in memory and in its journal for ever
(``--retain-jobs`` 10⁹, ``--retain-days 0``: what a daemon did before retention existed), the other
with the retentions given (``--retain-jobs``, ``--retain-days``; the defaults keep 1,000 ended jobs
in memory and ~3 minutes of them in the journal, so the 10-minute run reaches its steady state). A
client per daemon, run as uid 65534 when started as root (so it is an ordinary user, held to the
quota), submits a job that waits (``arrival_delay`` one hour) and cancels it, ``--rate`` times a
second (the quota's default: ``reshape daemon --submit-rate 20``), paced open-loop. Every minute
each daemon's resident memory (``VmRSS``) and journal size (``journal.sqlite``; its write-ahead log,
which the daemon checkpoints every second and truncates when idle or past 16 MiB, beside it) are
sampled. The table lists the samples; the summary gives, per daemon, the growth per 1,000 jobs over
the second half of the run (flat: about 0) and the worst sample. Writes
``benchmarks/results/retention.json``.

Both daemons and clients share this machine's CPUs (and other users' work on it): the rates are the
clients' targets; the jobs each client got through are reported.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

from benchmarks._common import ROOT, table, write_result
from reshape.joblink.client import Connection, DaemonError, SchedulerUnavailable
from tests.helpers import free_port

NOBODY = 65534
JOB = {"name": "loop", "command": ["sleep", "1"], "nprocs": 1, "resizable": False, "launch": "single",
       "arrival_delay": 3600}


def start_daemon(state: str, extra: list[str]) -> tuple[subprocess.Popen, str]:
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    with open(os.path.join(state, "daemon.err"), "ab") as err:
        p = subprocess.Popen([sys.executable, "-m", "scheduler.cli", "daemon", "--endpoint", endpoint, "--state-dir",
                              state, "--slots", "2", *extra], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=err,
                             start_new_session=True)
    end = time.monotonic() + 30
    while time.monotonic() < end:
        try:
            Connection(endpoint, 0.5).request("ping")
            return p, endpoint
        except SchedulerUnavailable:
            time.sleep(0.2)
    p.kill()
    raise SystemExit(f"retention: the daemon in {state} did not start")


def loop(endpoint: str, rate: float, seconds: float) -> None:
    """Submit a waiting job and cancel it, ``rate`` times a second, for ``seconds`` (a forked child)."""
    conn = Connection(endpoint, 10.0)
    t0 = time.monotonic()
    k = 0
    while (due := t0 + k / rate) < t0 + seconds:
        time.sleep(max(0.0, due - time.monotonic()))
        k += 1
        try:
            jid = conn.request("submit", {"job": JOB}).target
            conn.request("cancel", {"job_id": jid})
        except (DaemonError, SchedulerUnavailable):
            continue  # over the quota for a moment, or a reply that came late: the loop goes on


def fork_loop(endpoint: str, rate: float, seconds: float) -> int:
    pid = os.fork()
    if pid == 0:
        try:
            if os.geteuid() == 0:
                os.setgid(NOBODY)
                os.setuid(NOBODY)
            loop(endpoint, rate, seconds)
        finally:
            os._exit(0)
    return pid


def sample(pid: int, endpoint: str, state: str) -> dict:
    with open(f"/proc/{pid}/status") as f:
        rss = next(int(line.split()[1]) for line in f if line.startswith("VmRSS:")) / 1024
    def mib(suffix: str) -> float:
        path = os.path.join(state, f"journal.sqlite{suffix}")
        return os.path.getsize(path) / 2**20 if os.path.exists(path) else 0.0
    hist = Connection(endpoint, 30.0).request("history", {"limit": 1})
    jobs = hist.jobs[-1]["job_id"] if hist.jobs else 0
    st = Connection(endpoint, 30.0).request("status", {"limit": 0}).daemon
    return {"rss_mib": rss, "journal_mib": mib(""), "wal_mib": mib("-wal"), "jobs": jobs,
            "in_memory": st["retention"]["in_memory"], "pruned": st["retention"]["pruned"]}


def growth(samples: list[dict], key: str) -> float | None:
    """MiB per 1,000 jobs over the second half of the run (a least-squares slope)."""
    half = samples[len(samples) // 2:]
    xs, ys = [s["jobs"] / 1000 for s in half], [s[key] for s in half]
    if len(half) < 2 or max(xs) == min(xs):
        return None
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum((x - mx) ** 2 for x in xs)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.retention", description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--rate", type=float, default=20.0, help="submit+cancel pairs per second (default 20: the quota)")
    ap.add_argument("--retain-jobs", type=int, default=1000)
    ap.add_argument("--retain-days", type=float, default=0.002)
    args = ap.parse_args(argv)
    configs = {"kept for ever": ["--retain-jobs", str(10**9), "--retain-days", "0"],
               "retained": ["--retain-jobs", str(args.retain_jobs), "--retain-days", str(args.retain_days)]}
    base = tempfile.mkdtemp(prefix="reshape-retention-")
    os.chmod(base, 0o755)
    daemons, loops = {}, []
    try:
        for name, extra in configs.items():
            state = os.path.join(base, name.replace(" ", "-"))
            os.mkdir(state, 0o700)
            daemons[name] = (*start_daemon(state, extra), state)
        seconds = args.minutes * 60
        t0 = time.monotonic()
        loops = [fork_loop(endpoint, args.rate, seconds) for _, endpoint, _ in daemons.values()]
        rows: list[dict] = []
        samples: dict[str, list[dict]] = {name: [] for name in daemons}
        for minute in range(int(args.minutes) + 1):
            time.sleep(max(0.0, t0 + 60 * minute - time.monotonic()))
            row = {"minute": minute}
            for name, (p, endpoint, state) in daemons.items():
                s = sample(p.pid, endpoint, state)
                samples[name].append(s)
                key = "kept" if name == "kept for ever" else "ret"
                row |= {f"{key}_jobs": s["jobs"], f"{key}_rss": s["rss_mib"], f"{key}_journal": s["journal_mib"],
                        f"{key}_wal": s["wal_mib"]}
            rows.append(row)
            print(json.dumps(row), flush=True)
    finally:
        for pid in loops:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
        for p, _, _ in daemons.values():
            p.kill()
            p.wait()
    print(table(rows, [("minute", "min", "d"), ("kept_jobs", "jobs (kept)", "d"), ("kept_rss", "RSS MiB", ".1f"),
                       ("kept_journal", "journal MiB", ".2f"), ("kept_wal", "WAL MiB", ".2f"),
                       ("ret_jobs", "jobs (retained)", "d"), ("ret_rss", "RSS MiB", ".1f"),
                       ("ret_journal", "journal MiB", ".2f"), ("ret_wal", "WAL MiB", ".2f")]))
    summary = {}
    for name, ss in samples.items():
        summary[name] = {"jobs": ss[-1]["jobs"], "rss_mib_end": ss[-1]["rss_mib"],
                         "rss_mib_worst": max(s["rss_mib"] for s in ss), "journal_mib_end": ss[-1]["journal_mib"],
                         "journal_mib_worst": max(s["journal_mib"] for s in ss),
                         "wal_mib_worst": max(s["wal_mib"] for s in ss),
                         "rss_mib_per_1000_jobs_second_half": growth(ss, "rss_mib"),
                         "journal_mib_per_1000_jobs_second_half": growth(ss, "journal_mib"),
                         "in_memory_end": ss[-1]["in_memory"], "pruned": ss[-1]["pruned"]}
    print(json.dumps(summary, indent=1))
    path = write_result("retention", {"args": vars(args), "configs": configs, "samples": samples, "rows": rows,
                                      "summary": summary})
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
