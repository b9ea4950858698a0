"""Turnaround, utilization and allocation plots from a daemon's history (seed 001 §4.2).

Utilization follows seed 001 §4.2's footnote: the percentage of total
available CPU-seconds assigned to a running job, over the interval from the
first job arrival to the last job end.
"""

from __future__ import annotations

from typing import Any

__all__ = ["allocation_series", "plot_history", "summarize"]


def allocation_series(events: list[dict[str, Any]]) -> dict[int, list[tuple[float, int]]]:
    """Per job, ``(time, processors)`` steps from the allocation events."""
    out: dict[int, list[tuple[float, int]]] = {}
    for e in events:
        if e["kind"] in ("start", "expand", "shrink", "end", "cancel"):
            out.setdefault(e["job_id"], []).append((e["t"], e["nprocs"]))
    return out


def summarize(hist: dict[str, Any]) -> dict[str, Any]:
    """Per-job turnaround and wait, and utilization, from a ``history`` reply."""
    jobs = [j for j in hist["jobs"] if j["state"] in ("done", "failed", "lost", "cancelled", "running")]
    events = sorted(hist["events"], key=lambda e: e["t"])
    if not jobs:
        return {"jobs": [], "utilization": 0.0, "makespan": 0.0}
    t0 = min(j["arrival_time"] for j in jobs)
    t1 = max((j["end_time"] or hist["now"]) for j in jobs)
    busy_area, last_t, busy = 0.0, t0, 0
    for e in events:
        t = min(max(e["t"], t0), t1)
        busy_area += busy * (t - last_t)
        last_t, busy = t, e["busy"]
    busy_area += busy * (t1 - last_t)
    rows = []
    for j in sorted(jobs, key=lambda j: j["job_id"]):
        end = j["end_time"]
        rows.append({"job_id": j["job_id"], "name": j["name"], "state": j["state"],
                     "initial": j["requested"], "sizes": j["profile"]["history"],
                     "wait": (j["start_time"] - j["arrival_time"]) if j["start_time"] else None,
                     "turnaround": (end - j["arrival_time"]) if end else None, "error": j.get("error")})
    span = t1 - t0
    return {"jobs": rows, "makespan": span,
            "utilization": busy_area / (hist["total_slots"] * span) if span > 0 else 0.0}


def plot_history(hist: dict[str, Any], path: str, title: str = "") -> None:
    """Processors per job over time (Fig. 4a/5a) and busy processors over time (Fig. 4b)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    events = sorted(hist["events"], key=lambda e: e["t"])
    t0 = min((e["t"] for e in events), default=0.0)
    names = {j["job_id"]: j["name"] for j in hist["jobs"]}
    fig, (a, b) = plt.subplots(2, 1, figsize=(8, 6), sharex=True)
    for jid, steps in allocation_series(events).items():
        xs = [t - t0 for t, _ in steps]
        a.step(xs, [p for _, p in steps], where="post", label=f"{jid} {names.get(jid, '')}")
    a.set_ylabel("processors per job")
    a.legend(fontsize=7, loc="upper right")
    if title:
        a.set_title(title)
    b.step([e["t"] - t0 for e in events], [e["busy"] for e in events], where="post")
    b.axhline(hist["total_slots"], color="gray", ls="--", lw=0.8)
    b.set_ylabel("busy processors")
    b.set_xlabel("time (s)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
