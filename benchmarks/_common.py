"""Shared benchmark plumbing: tables, JSON results, one run of an application (relaunching is in
``reshape.joblink.launch``)."""

from __future__ import annotations

import json
import os
import platform
import tempfile
import time

from reshape.joblink import jobenv as E

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the repository: applications run from here
#: Where results go: ``benchmarks/results``, or ``$RESHAPE_RESULTS_DIR`` (``benchmarks.reproduce --quick``
#: writes its small runs there, not over the committed results)
RESULTS = os.environ.get("RESHAPE_RESULTS_DIR") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")


def table(rows: list[dict], cols: list[tuple[str, str, str]]) -> str:
    """Format rows as a text table; ``cols`` = (key, header, format)."""
    cells = [[h for _, h, _ in cols]]
    for r in rows:
        cells.append([("-" if r.get(k) is None else format(r[k], f)) for k, _, f in cols])
    w = [max(len(c[i]) for c in cells) for i in range(len(cols))]
    lines = ["  ".join(c[i].rjust(w[i]) for i in range(len(cols))) for c in cells]
    lines.insert(1, "  ".join("-" * x for x in w))
    return "\n".join(lines)


def write_result(name: str, payload: dict) -> str:
    os.makedirs(RESULTS, exist_ok=True)
    payload = {
        "benchmark": name,
        "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "host": {"machine": platform.machine(), "cpus": os.cpu_count(), "python": platform.python_version()},
        **payload,
    }
    path = os.path.join(RESULTS, f"{name}.json")
    with open(path, "w") as f:
        json.dump(payload, f, indent=2, default=float)
    return path


def run_app(app: str, start: int, plan: str, iters: int, opts: list[str], method: str,
            timeout: float = 600.0, env: dict | None = None) -> dict:
    """One run of ``apps.<app>`` under ``mpiexec`` (``start`` ranks, ``RESHAPE_PLAN=plan``); returns its ``--json``
    payload. A failed run ends the benchmark (``SystemExit``)."""
    from reshape.joblink.launch import MPIRunError, mpirun  # psutil: only the benchmarks that run apps need it

    with tempfile.TemporaryDirectory(prefix="resize-apps-") as tmp:
        out = os.path.join(tmp, "run.json")
        env = {E.PLAN: plan, E.REDIST_METHOD: method, "TMPDIR": tmp, **(env or {})}
        argv = ["-m", f"apps.{app}", *opts, "--iters", str(iters), "--no-check", "--quiet", "--json", out]
        try:
            mpirun(start, argv, timeout=timeout, env=env, cwd=ROOT)
        except MPIRunError as e:
            raise SystemExit(f"resize_apps: {app} ({method}) failed:\n{e}") from e
        with open(out) as fh:
            return json.load(fh)
