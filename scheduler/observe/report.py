"""A daemon's history: read in pages, a table, metrics (``scheduler.core.metrics``), allocation plots
(Sudarsan & Ribbens 2007 §4.2).

Utilization follows Sudarsan & Ribbens 2007 §4.2's footnote: the percentage of total
available CPU-seconds assigned to a running job, over the interval from the
first job arrival to the last job end.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from reshape.joblink.client import request
from reshape.joblink.protocol import History, HistoryView
from scheduler.core.metrics import JobRecord, Usage, metrics
from scheduler.observe.palette import job_color

__all__ = ["allocation_series", "plot_history", "read_history", "summarize"]


def allocation_series(events: list[dict[str, Any]]) -> dict[int, list[tuple[float, int]]]:
    """Per job, ``(time, processors)`` steps from the allocation events."""
    out: dict[int, list[tuple[float, int]]] = {}
    for e in events:
        if e["kind"] in ("start", "expand", "shrink", "end", "cancel"):
            out.setdefault(e["job_id"], []).append((e["t"], e["nprocs"]))
    return out


def summarize(hist: HistoryView) -> dict[str, Any]:
    """Per-job rows and the run's metrics (:func:`scheduler.core.metrics.metrics`, the simulator's
    definitions) from a ``history`` reply. Ended jobs that ran are the records (their bounded
    slowdown uses the measured run time); utilization spans the first arrival to the last end or
    now, and idle-while-waiting counts jobs still queued."""
    jobs = [j for j in hist.jobs if j["state"] in ("done", "failed", "lost", "cancelled", "running")]
    if not jobs:
        return {"jobs": [], "utilization": 0.0, "makespan": 0.0}
    t0 = min(j["arrival_time"] for j in jobs)
    t1 = max((j["end_time"] or hist.now) for j in jobs)
    usage = Usage().feed_events(sorted(hist.events, key=lambda e: e["t"]))
    records = [JobRecord(j["job_id"], j["arrival_time"], j["start_time"], j["end_time"],
                         j["end_time"] - j["start_time"], j["requested"], j.get("resizes", 0),
                         j.get("redist_seconds", 0.0))
               for j in jobs if j["end_time"] is not None and j["start_time"] is not None]
    waits = [(j["arrival_time"], j["start_time"] if j["start_time"] is not None else hist.now)
             for j in hist.jobs if j["state"] not in ("waiting",)]
    rows = []
    for j in sorted(jobs, key=lambda j: j["job_id"]):
        end = j["end_time"]
        rows.append({"job_id": j["job_id"], "name": j["name"], "state": j["state"],
                     "initial": j["requested"], "sizes": j["profile"]["history"],
                     "wait": (j["start_time"] - j["arrival_time"]) if j["start_time"] else None,
                     "turnaround": (end - j["arrival_time"]) if end else None, "error": j.get("error")})
    m = metrics(records, usage, hist.total_slots, t0, t1, waits) if records else {}
    m.pop("jobs", None)
    span = t1 - t0
    return {"jobs": rows, **m, "makespan": span,
            "utilization": usage.area(t0, t1) / (hist.total_slots * span) if span > 0 else 0.0}


def _level(steps: list[tuple[float, int]], t: float) -> int:
    """Processors held at time ``t`` by a job with allocation ``steps`` (0 before its start)."""
    v = 0
    for ts, p in steps:
        if ts > t:
            break
        v = p
    return v


def plot_history(hist: HistoryView, path: str, title: str = "") -> None:
    """One lane per job (waiting, then its processors over time, with the Remap Scheduler's
    expand/shrink decisions marked: Fig. 4a/5a without jobs hiding each other) above the
    processors of all jobs stacked against the pool's slots (Fig. 4b; white is idle)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    events = sorted(hist.events, key=lambda e: e["t"])
    jobs = sorted(hist.jobs, key=lambda j: j["job_id"])
    t0 = min([e["t"] for e in events] + [j["arrival_time"] for j in jobs], default=0.0)
    t_end = max([e["t"] for e in events], default=t0) - t0
    series = allocation_series(events)
    colors = {j["job_id"]: job_color(j["job_id"]) for j in jobs}  # as on the dashboard
    lanes = [j for j in jobs if j["job_id"] in series or j["state"] in ("queued", "waiting")]
    lane_h = min(0.75, 10.0 / max(1, len(lanes)))  # inches: many jobs get thinner lanes, not a taller figure
    fig, (a, b) = plt.subplots(2, 1, figsize=(10, 2.2 + lane_h * len(lanes) + 2.4), sharex=True,
                               gridspec_kw={"height_ratios": [0.5 + lane_h * max(1, len(lanes)), 2.4]})
    top = max((p for s in series.values() for _, p in s), default=1)
    for k, j in enumerate(reversed(lanes)):
        jid, steps = j["job_id"], series.get(j["job_id"], [])
        start = steps[0][0] - t0 if steps else t_end
        arrive = j["arrival_time"] - t0
        if start > arrive:  # waiting in the queue
            a.broken_barh([(arrive, start - arrive)], (k + 0.1, 0.8), facecolor="none", edgecolor="0.6",
                          hatch="///", lw=0.5)
        xs = [t - t0 for t, _ in steps]
        ps = [p for _, p in steps]
        a.fill_between(xs, k + 0.1, [k + 0.1 + 0.8 * p / top for p in ps], step="post", color=colors[jid],
                       alpha=0.85, lw=0)
        for (x0, p), x1 in zip(zip(xs, ps, strict=True), xs[1:], strict=False):
            if p and x1 - x0 > 0.04 * max(t_end, 1e-9) and lane_h >= 0.3:
                a.text((x0 + x1) / 2, k + 0.1 + 0.4 * p / top, str(p), ha="center", va="center", fontsize=8,
                       color="white", fontweight="bold")
        for e in events:
            if e["job_id"] == jid and e["kind"] == "advise":
                up = e["detail"].startswith("expand")
                a.plot(e["t"] - t0, k + 0.95, "v" if not up else "^", color="#137333" if up else "#b3261e",
                       ms=6, mec="white", mew=0.5)
    a.set_yticks([k + 0.5 for k in range(len(lanes))],
                 [f"{j['job_id']} {j['name']}" for j in reversed(lanes)], fontsize=min(10, max(4, 28 * lane_h)))
    a.set_ylim(0, max(1, len(lanes)) + 0.05)
    a.set_ylabel(f"one lane per job; the band's height\nis its processors (a full lane = {top})", fontsize=8)
    a.grid(axis="x", color="0.9")
    a.legend(handles=[Patch(facecolor="none", edgecolor="0.6", hatch="///", label="waiting in the queue"),
                      Line2D([], [], ls="", marker="^", color="#137333", label="expand advised"),
                      Line2D([], [], ls="", marker="v", color="#b3261e", label="shrink advised")],
             loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    if title:
        a.set_title(title)
    grid = sorted({e["t"] - t0 for e in events} | {t_end})
    ids = [j["job_id"] for j in jobs if j["job_id"] in series]
    stack = [[_level([(t - t0, p) for t, p in series[i]], x) for x in grid] for i in ids]
    if ids:
        names = {j["job_id"]: j["name"] for j in jobs}
        b.stackplot(grid, stack, step="post", colors=[colors[i] for i in ids], alpha=0.85,
                    labels=[f"{i} {names[i]}" if len(ids) <= 12 else "_" for i in ids])  # "_": no entry, the lanes say
    b.axhline(hist.total_slots, color="0.3", ls="--", lw=0.8, label="slots")
    b.set_ylim(0, hist.total_slots + 0.5)
    b.set_ylabel("busy processors (white: idle)")
    b.set_xlabel("time (s)")
    b.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


HISTORY_PAGE = 2000  # jobs per history reply (a few MB at most): any history is read in pages


def read_history(endpoint: str, ask: History | None = None, keys: str | None = None,
                 page: int = HISTORY_PAGE) -> HistoryView:
    """The daemon's ``history`` (``ask``: its ``since`` and ``limit``) in pages of ``page`` jobs (``after``:
    docs/protocol.md) merged into one: no reply grows with the journal. The last N jobs (``limit``) come in
    one reply."""
    ask = ask or History()
    if ask.limit is not None:
        return request(endpoint, ask, timeout=30, keys=keys)
    out: HistoryView | None = None
    after = 0
    while True:
        rep = request(endpoint, replace(ask, after=after, limit=page), timeout=30, keys=keys)
        out = rep if out is None else replace(out, jobs=out.jobs + rep.jobs, events=out.events + rep.events,
                                              now=rep.now)
        if len(rep.jobs) < page:
            break
        after = rep.jobs[-1]["job_id"]
    # pages come by job, the history by time
    return replace(out, events=tuple(sorted(out.events, key=lambda e: e["t"])))
