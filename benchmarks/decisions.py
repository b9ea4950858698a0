"""Fingerprints of every preset's decision sequence on the shared traces.

``python -m benchmarks.decisions [--traces DIR] [--policy NAME ...]`` simulates
each preset on ``lublin_256.swf`` and ``mira.swf`` (50% malleable, seed 0) and
prints, per (trace, preset), the number of decisions, the SHA-256 (first 16
hex digits) of the sequence of ``(time rounded to 1e-6, kind, job, size)`` and
the simulation time. Two trees that print the same fingerprints make the same
decisions: this is how a change to the scheduler core is checked against the
tree before it. Writes ``benchmarks/results/decisions.json``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import time

from benchmarks._common import table, write_result
from reshape.joblink import jobenv as E
from scheduler.core.policy import presets
from scheduler.lab.jobmodel import from_trace
from scheduler.lab.runner import run_policies
from scheduler.lab.swf import read_swf

DEFAULT_TRACES = os.environ.get(E.TRACES, os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "..", "shared", "data", "traces"))


def fingerprint(decisions) -> str:
    seq = [(round(d.time, 6), d.kind, d.job_id, d.nprocs) for d in decisions]
    return hashlib.sha256(json.dumps(seq).encode()).hexdigest()[:16]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--traces", default=DEFAULT_TRACES, help="directory with lublin_256.swf and mira.swf")
    ap.add_argument("--policy", action="append", help="preset (repeatable; default: every preset)")
    a = ap.parse_args(argv)
    names = a.policy or list(presets())
    rows = []
    for tr in ("lublin_256", "mira"):
        jobs, slots = from_trace(read_swf(os.path.join(a.traces, f"{tr}.swf")), malleable_fraction=0.5, seed=0)
        for n in names:
            t0 = time.perf_counter()
            res = run_policies(jobs, slots, [n], record=True)[n]["result"]
            rows.append({"trace": tr, "policy": n, "decisions": len(res.decisions),
                         "fingerprint": fingerprint(res.decisions), "sim_s": time.perf_counter() - t0})
    print(table(rows, [("trace", "trace", ""), ("policy", "policy", ""), ("decisions", "decisions", ""),
                       ("fingerprint", "sha256[:16]", ""), ("sim_s", "sim (s)", ".2f")]))
    worst = max(rows, key=lambda r: r["sim_s"])
    path = write_result("decisions", {"rows": rows, "summary": {
        "fingerprints": {f"{r['trace']}/{r['policy']}": r["fingerprint"] for r in rows},
        "slowest": f"{worst['trace']}/{worst['policy']} {worst['sim_s']:.2f} s"}})
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
