"""Benchmark: ``contact_scheduler`` round trips against a real daemon on loopback.

``python -m benchmarks.daemon [--quick]``

A daemon process runs ``jobs`` real (sleeping) one-slot jobs filling its
pool, so every request goes through the full path (decode, Performance
Profiler update, Remap Scheduler on a snapshot, journal commit, reply).
``procs`` client processes with ``threads`` clients each send
``resize_point`` requests back to back for those jobs. Reports round-trip
p50/p99 and requests per second, and the same for ``ping`` (decode and
reply only) measured in the same run as the baseline.

The round trip as a client sees it includes waiting for a CPU: the clients
and the daemon share this machine's cores (two here, and other work may be
running). So the daemon's own *service time* (request received -> reply sent,
from ``status``) and the load average during the run are reported too.
Writes ``benchmarks/results/daemon.json``. Targets: p99 < 5 ms, > 2,000 requests/s.
``--dashboard`` measures a second daemon serving its dashboard (``--dashboard``) while a scraper
reads ``/api/state`` and ``/metrics`` five times a second, and reports its throughput and p99 as
ratios to the first (``benchmarks/results/daemon-dashboard.json``).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import sys
import tempfile
import threading
import time

import numpy as np

from reshape.joblink.client import Connection
from scheduler.daemon.startup import job_tag, kill_job

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "daemon.json")


def _client_proc(endpoint: str, job_ids: list[int], threads: int, seconds: float, kind: str, q) -> None:
    lat: list[list[float]] = [[] for _ in range(threads)]
    start = time.perf_counter() + 0.2

    def run(k: int) -> None:
        c = Connection(endpoint, timeout=10)
        jid = job_ids[k % len(job_ids)]
        it = 0
        while time.perf_counter() < start:
            pass
        end = start + seconds
        while (t0 := time.perf_counter()) < end:
            it += 1
            if kind == "ping":
                c.request("ping")
            else:
                c.request("resize_point", {"iteration": it, "nprocs": 1, "iter_time": 0.5 + 0.001 * (it % 7)},
                          job_id=jid)
            lat[k].append(time.perf_counter() - t0)
        c.close()

    ts = [threading.Thread(target=run, args=(k,)) for k in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    q.put([x for lst in lat for x in lst])


def measure(endpoint: str, job_ids: list[int], procs: int, threads: int, seconds: float, kind: str) -> dict:
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    ps = [ctx.Process(target=_client_proc, args=(endpoint, job_ids[i::procs] or job_ids, threads,
                                                  seconds, kind, q)) for i in range(procs)]
    for p in ps:
        p.start()
    lat = np.concatenate([np.array(q.get(timeout=seconds + 60)) for _ in ps])
    for p in ps:
        p.join(10)
    return {"requests": int(lat.size), "requests_per_s": lat.size / seconds,
            "p50_ms": float(np.percentile(lat, 50) * 1e3), "p99_ms": float(np.percentile(lat, 99) * 1e3),
            "clients": procs * threads}


def _ms(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def run_daemon_bench(a, seconds: float, dashboard: bool = False) -> dict:
    """One daemon, its jobs, and the ping and resize_point measurements; with ``dashboard``, the
    daemon serves its dashboard and a scraper reads /api/state and /metrics 5 times a second
    meanwhile (a page and a Prometheus server), so the cost shows in the same numbers."""
    from scheduler.cli.workload import free_port

    state = tempfile.TemporaryDirectory(prefix="reshape-bench-")
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    port = free_port()
    import subprocess
    import urllib.request

    extra = ["--dashboard", f"127.0.0.1:{port}"] if dashboard else []
    daemon = subprocess.Popen([sys.executable, "-m", "scheduler.cli", "daemon", "--endpoint", endpoint,
                               "--state-dir", state.name, "--slots", str(a.jobs), *extra],
                              stdout=subprocess.DEVNULL, start_new_session=True)
    ids: list[int] = []
    stop = threading.Event()
    scraped = [0]

    def scrape() -> None:
        while not stop.wait(0.2):
            for path in ("api/state", "metrics"):
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}/{path}", timeout=5) as r:
                        r.read()
                    scraped[0] += 1
                except OSError:
                    pass

    try:
        c = Connection(endpoint, timeout=0.5)
        for _ in range(100):
            try:
                c.request("ping")
                break
            except Exception:
                time.sleep(0.1)
        c.timeout = 10
        job = {"name": "idle", "command": ["python", "-c", "import time; time.sleep(600)"], "nprocs": 1,
               "launch": "single"}
        ids = [c.request("submit", {"job": job}).target for _ in range(a.jobs)]
        deadline = time.monotonic() + 30
        while len(c.request("status").running) < a.jobs and time.monotonic() < deadline:
            time.sleep(0.1)
        c.close()
        scraper = threading.Thread(target=scrape, daemon=True)
        if dashboard:
            scraper.start()
        res = {}
        for kind in ("ping", "resize_point"):
            res[kind] = measure(endpoint, ids, a.procs, a.threads, seconds, kind)
            # the daemon's own view: request received -> reply sent, over its last 8192 requests
            res[kind]["service"] = Connection(endpoint, timeout=10).request("status").daemon
        stop.set()
        if dashboard:
            scraper.join(5)
            res["scrapes"] = scraped[0]
        return res
    finally:
        stop.set()
        daemon.kill()
        daemon.wait(5)
        for i in ids:
            kill_job(job_tag(state.name, i), grace=0.5)
        state.cleanup()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.daemon")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--jobs", type=int, default=8)
    ap.add_argument("--procs", type=int, default=2)
    ap.add_argument("--threads", type=int, default=8)
    ap.add_argument("--dashboard", action="store_true",
                    help="also measure a daemon serving its dashboard while it is scraped; report the ratios")
    a = ap.parse_args(argv)
    seconds = 2.0 if a.quick else 6.0
    load = [os.getloadavg()[0]]
    res = run_daemon_bench(a, seconds)
    with_dash = run_daemon_bench(a, seconds, dashboard=True) if a.dashboard else None
    load.append(os.getloadavg()[0])
    print(f"{'request':<24}{'clients':>8}{'req/s':>10}{'p50 ms':>9}{'p99 ms':>9}"
          f"{'service p50':>13}{'service p99':>13}")
    for label, rr in (("", res), (" +dashboard", with_dash)):
        for kind in ("ping", "resize_point") if rr else ():
            r = rr[kind]
            sv = r["service"] or {}
            print(f"{kind + label:<24}{r['clients']:>8}{r['requests_per_s']:>10.0f}{r['p50_ms']:>9.2f}"
                  f"{r['p99_ms']:>9.2f}{_ms(sv.get('p50_ms')):>13}{_ms(sv.get('p99_ms')):>13}")
    rp = res["resize_point"]
    sv = rp["service"] or {}
    summary = {"p50_ms": rp["p50_ms"], "p99_ms": rp["p99_ms"], "requests_per_s": rp["requests_per_s"],
               "clients": rp["clients"],
               "throughput_vs_ping": rp["requests_per_s"] / res["ping"]["requests_per_s"],
               "p99_vs_ping": rp["p99_ms"] / res["ping"]["p99_ms"],
               "service_p50_ms": sv.get("p50_ms"), "service_p99_ms": sv.get("p99_ms"),
               "loadavg_1min": load, "cpus": os.cpu_count(),
               "targets": {"p99_ms": "< 5", "requests_per_s": "> 2000"}}
    print(f"summary: resize_point p50 {summary['p50_ms']:.2f} ms, p99 {summary['p99_ms']:.2f} ms, "
          f"{summary['requests_per_s']:.0f} req/s ({summary['throughput_vs_ping']:.2f} x ping); "
          f"daemon service p99 {_ms(summary['service_p99_ms'])} ms; "
          f"load average {load[0]:.1f} -> {load[1]:.1f} on {os.cpu_count()} CPUs")
    out = {"seconds": seconds, "results": res, "summary": summary}
    if with_dash is not None:
        d = with_dash["resize_point"]
        dsv = d["service"] or {}
        summary["dashboard"] = {
            "scrapes": with_dash["scrapes"], "requests_per_s": d["requests_per_s"], "p99_ms": d["p99_ms"],
            "throughput_ratio": d["requests_per_s"] / rp["requests_per_s"], "p99_ratio": d["p99_ms"] / rp["p99_ms"],
            "service_p99_ratio": (dsv["p99_ms"] / sv["p99_ms"]) if dsv.get("p99_ms") and sv.get("p99_ms") else None}
        sd = summary["dashboard"]
        print(f"dashboard on and scraped {sd['scrapes']} times: resize_point throughput x{sd['throughput_ratio']:.2f}, "
              f"p99 x{sd['p99_ratio']:.2f}, daemon service p99 x{sd['service_p99_ratio'] or float('nan'):.2f} "
              f"of the daemon without it (same run)")
        out["results_dashboard"] = with_dash
    path = RESULTS.replace("daemon.json", "daemon-dashboard.json") if with_dash is not None else RESULTS
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
