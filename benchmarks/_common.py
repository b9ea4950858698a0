"""Shared benchmark plumbing: tables and JSON results (relaunching is in ``reshape.joblink.launch``)."""

from __future__ import annotations

import json
import os
import platform
import time

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
