"""A daemon's history as a table, metrics (``scheduler.core.metrics``) and allocation plots (seed 001 §4.2).

Utilization follows seed 001 §4.2's footnote: the percentage of total
available CPU-seconds assigned to a running job, over the interval from the
first job arrival to the last job end.
"""

from __future__ import annotations

from typing import Any

from scheduler.core.metrics import JobRecord, Usage, metrics

__all__ = ["allocation_series", "plot_history", "summarize"]


def allocation_series(events: list[dict[str, Any]]) -> dict[int, list[tuple[float, int]]]:
    """Per job, ``(time, processors)`` steps from the allocation events."""
    out: dict[int, list[tuple[float, int]]] = {}
    for e in events:
        if e["kind"] in ("start", "expand", "shrink", "end", "cancel"):
            out.setdefault(e["job_id"], []).append((e["t"], e["nprocs"]))
    return out


def summarize(hist: dict[str, Any]) -> dict[str, Any]:
    """Per-job rows and the run's metrics (:func:`scheduler.core.metrics.metrics`, the simulator's
    definitions) from a ``history`` reply. Ended jobs that ran are the records (their bounded
    slowdown uses the measured run time); utilization spans the first arrival to the last end or
    now, and idle-while-waiting counts jobs still queued."""
    jobs = [j for j in hist["jobs"] if j["state"] in ("done", "failed", "lost", "cancelled", "running")]
    if not jobs:
        return {"jobs": [], "utilization": 0.0, "makespan": 0.0}
    t0 = min(j["arrival_time"] for j in jobs)
    t1 = max((j["end_time"] or hist["now"]) for j in jobs)
    usage = Usage().feed_events(sorted(hist["events"], key=lambda e: e["t"]))
    records = [JobRecord(j["job_id"], j["arrival_time"], j["start_time"], j["end_time"],
                         j["end_time"] - j["start_time"], j["requested"], j.get("resizes", 0),
                         j.get("redist_seconds", 0.0))
               for j in jobs if j["end_time"] is not None and j["start_time"] is not None]
    waits = [(j["arrival_time"], j["start_time"] if j["start_time"] is not None else hist["now"])
             for j in hist["jobs"] if j["state"] not in ("waiting",)]
    rows = []
    for j in sorted(jobs, key=lambda j: j["job_id"]):
        end = j["end_time"]
        rows.append({"job_id": j["job_id"], "name": j["name"], "state": j["state"],
                     "initial": j["requested"], "sizes": j["profile"]["history"],
                     "wait": (j["start_time"] - j["arrival_time"]) if j["start_time"] else None,
                     "turnaround": (end - j["arrival_time"]) if end else None, "error": j.get("error")})
    m = metrics(records, usage, hist["total_slots"], t0, t1, waits) if records else {}
    m.pop("jobs", None)
    span = t1 - t0
    return {"jobs": rows, **m, "makespan": span,
            "utilization": usage.area(t0, t1) / (hist["total_slots"] * span) if span > 0 else 0.0}


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
