"""Shared benchmark plumbing: relaunch under mpiexec, tables, JSON results."""

from __future__ import annotations

import json
import os
import platform
import sys
import time

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")


def under_mpiexec() -> bool:
    return any(k in os.environ for k in ("PMI_RANK", "PMI_SIZE", "PMIX_RANK", "OMPI_COMM_WORLD_SIZE"))


def relaunch(module: str, nranks: int, argv: list[str], timeout: float = 3600.0) -> int:
    """Run ``python -m module argv`` under ``mpiexec -n nranks`` and echo its output."""
    from reshape.launch import MPIRunError, mpirun

    try:
        res = mpirun(nranks, ["-m", module, *argv], timeout=timeout, check=False)
    except MPIRunError as e:
        print(e, file=sys.stderr)
        return 1
    sys.stdout.write(res.stdout)
    sys.stderr.write(res.stderr)
    return res.returncode


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
