"""The dashboard's views, sans I/O: a plain-data snapshot of the scheduler core, its JSON, and
its Prometheus text exposition.

:func:`snapshot` reads :class:`scheduler.core.state.ClusterState` (queue, running jobs, nodes, the
Performance Profiler's iteration times per size, Sudarsan & Ribbens 2007 §3.1) plus the recent allocation
events and the daemon's request latencies, and returns a JSON-ready dict that is never mutated
afterwards: the daemon's loop builds one now and then, the HTTP thread
(``scheduler.observe.dashboard``) only reads the latest. :func:`metrics_text` renders the same
snapshot in the Prometheus text format (``prometheus_client``'s exposition code), so both views
always agree. The page itself is ``dashboard.html`` beside this module (no external assets).

Every text in a snapshot (job names, reasons, hosts, decision details) is shown as
:func:`reshape.joblink.protocol.printable` shows it on a terminal: a control, invisible or
bidirectional-override character a user put in a job's name arrives at the page as its escape
(``\\x1b``, ``\\u202e``); the page escapes again what it shows, the same way, before HTML.
"""

from __future__ import annotations

import bisect
import collections
import functools
import json
import os
from collections.abc import Iterable, Sequence
from typing import Any

from reshape.joblink.protocol import printable
from scheduler.observe.live import idle_note
from scheduler.observe.palette import palette

__all__ = ["DECISION_KINDS", "LATENCY_BUCKETS", "LatencyHistogram", "metrics_text", "page", "snapshot"]

# event kinds that are decisions or their outcome (the decision log), see scheduler.core.state
DECISION_KINDS = frozenset({"start", "advise", "expand", "shrink", "shrink_request", "resize_failed", "end",
                            "cancel", "cancelling", "ending"})
ALLOCATION_KINDS = ("start", "expand", "shrink", "end", "cancel")  # report.allocation_series's kinds
LATENCY_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0)  # seconds
DECISIONS_SHOWN = 60
QUEUE_SHOWN = 50  # queued (and waiting) jobs listed; a long queue must not slow the daemon's loop


class LatencyHistogram:
    """Cumulative request-latency buckets (recv -> reply), fed by the daemon's loop."""

    def __init__(self, buckets: Sequence[float] = LATENCY_BUCKETS):
        self.buckets = tuple(buckets)
        self.counts = [0] * (len(self.buckets) + 1)  # the last one: above every bound (+Inf)
        self.sum = 0.0
        self.count = 0

    def observe(self, seconds: float) -> None:
        self.counts[bisect.bisect_left(self.buckets, seconds)] += 1
        self.sum += seconds
        self.count += 1

    def to_dict(self) -> dict[str, Any]:
        cum, acc = [], 0
        for c in self.counts:
            acc += c
            cum.append(acc)
        return {"buckets": [*self.buckets, "+Inf"], "cumulative": cum, "sum": self.sum, "count": self.count}


def _profile(j) -> dict[str, Any]:
    p = j.profile
    sizes = sorted(set(p.iter_time) | set(p.best_time))
    return {"sizes": sizes, "latest": [p.iter_time.get(s) for s in sizes], "best": [p.best_time.get(s) for s in sizes],
            "history": list(p.history)}


def snapshot(state, events: Iterable[dict[str, Any]], now: float, service: dict[str, Any] | None = None,
             latency: LatencyHistogram | None = None, resize_counts: dict[str, int] | None = None,
             info: dict[str, Any] | None = None) -> dict[str, Any]:
    """Everything the dashboard shows, as plain data (JSON-ready).

    ``events``: the recent allocation events (the core's ``events`` records, oldest first), from
    which the processors-per-job series and the decision log are cut. ``resize_counts``: confirmed
    resizes by action since the daemon started (a Prometheus counter).
    """
    st = state.status(now, QUEUE_SHOWN)  # the totals still count every queued job
    events = list(events)
    shown = {r["job_id"] for r in st["running"]} | {r["job_id"] for r in st["ended"]}
    shown |= {e["job_id"] for e in events if e["kind"] in ALLOCATION_KINDS}
    jobs = {}
    for jid in sorted(shown):
        j = state.jobs.get(jid)
        if j is not None:
            jobs[str(jid)] = {"job_id": jid, "name": j.desc.name, "state": j.state, "nprocs": j.nprocs,
                              "requested": j.desc.nprocs, "min_procs": j.desc.min_procs,
                              "max_procs": j.desc.max_procs, "resizable": j.desc.resizable,
                              "iterations": j.iterations, "resizes": j.resizes,
                              "redist_seconds": j.redist_seconds, "profile": _profile(j)}
    series: dict[str, list[list[float]]] = {}
    for e in events:
        if e["kind"] in ALLOCATION_KINDS:
            series.setdefault(str(e["job_id"]), []).append([e["t"], e["nprocs"] if e["kind"] in
                                                            ("start", "expand", "shrink") else 0])
    decisions = [e for e in events if e["kind"] in DECISION_KINDS][-DECISIONS_SHOWN:]
    by_state = collections.Counter(j.state for j in state.jobs.values())
    for s in ("waiting", "queued", "running", "cancelling", "ending", "done", "failed", "cancelled", "lost"):
        by_state.setdefault(s, 0)
    node_states = collections.Counter(n["state"] for n in st["nodes"])
    return _shown({
        "now": now, "info": info or {},
        "slots": {"total": st["total_slots"], "capacity": st["capacity_slots"], "free": st["free_slots"],
                  "used": st["total_slots"] - st["free_slots"]},
        "running": st["running"], "queue": st["queue"], "waiting": st["waiting"], "ended": st["ended"],
        "queued_total": st["queued_total"], "waiting_total": st["waiting_total"], "note": idle_note(st),
        "nodes": [{k: n.get(k) for k in ("host", "slots", "used", "state", "reason", "seen_ago", "jobs")}
                  for n in st["nodes"]],
        "node_states": dict(node_states), "jobs": jobs, "series": series,
        "decisions": [{k: e[k] for k in ("t", "job_id", "kind", "nprocs", "detail")} for e in decisions],
        "jobs_by_state": dict(by_state),
        "resizes": dict(resize_counts or {}),
        "redist_seconds": sum(j.redist_seconds for j in state.jobs.values()),
        "policy_errors": state.policy_error_count,
        "service": service or {}, "latency": (latency or LatencyHistogram()).to_dict(),
    })


_PLAIN = frozenset({int, float, bool, type(None)})
_key = functools.lru_cache(maxsize=4096)(printable)  # a snapshot's keys are mostly the same few words


def _shown(x: Any) -> Any:
    """``x`` with every string in it (keys too) as :func:`printable` shows it: what the page receives.
    (Numbers, most of a snapshot, are passed over without a call.)"""
    if isinstance(x, str):
        return printable(x)
    if isinstance(x, dict):
        return {_key(k) if isinstance(k, str) else k: v if type(v) in _PLAIN else _shown(v)
                for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [v if type(v) in _PLAIN else _shown(v) for v in x]
    return x


def metrics_text(snap: dict[str, Any]) -> bytes:
    """The snapshot in the Prometheus text format (version 0.0.4), through ``prometheus_client``."""
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

    def families():
        g = GaugeMetricFamily("reshape_slots_total", "Slots in the pool (nodes that are up)")
        g.add_metric([], snap["slots"]["total"])
        yield g
        g = GaugeMetricFamily("reshape_slots_used", "Slots held by running jobs (pending expansions included)")
        g.add_metric([], snap["slots"]["used"])
        yield g
        g = GaugeMetricFamily("reshape_jobs", "Jobs known to the daemon, by state", labels=["state"])
        for s, n in sorted(snap["jobs_by_state"].items()):
            g.add_metric([s], n)
        yield g
        g = GaugeMetricFamily("reshape_job_processes", "Processes of each running job", labels=["job_id", "name"])
        for r in snap["running"]:
            g.add_metric([str(r["job_id"]), r["name"]], r["nprocs"])  # printable already (:func:`snapshot`)
        yield g
        g = GaugeMetricFamily("reshape_nodes", "Pool nodes, by state", labels=["state"])
        for s, n in sorted(snap["node_states"].items()):
            g.add_metric([s], n)
        yield g
        c = CounterMetricFamily("reshape_resizes", "Confirmed resizes since the daemon started, by action",
                                labels=["action"])
        for a in ("expand", "shrink"):
            c.add_metric([a], snap["resizes"].get(a, 0))
        yield c
        c = CounterMetricFamily("reshape_redistribution_seconds", "Measured redistribution time of all resizes")
        c.add_metric([], snap["redist_seconds"])
        yield c
        c = CounterMetricFamily("reshape_policy_errors", "Policy decisions the core could not apply (skipped)")
        c.add_metric([], snap["policy_errors"])
        yield c
        lat = snap["latency"]
        h = HistogramMetricFamily("reshape_request_duration_seconds",
                                  "Daemon requests: received to reply sent (journal commit included)")
        h.add_metric([], [(str(b), c) for b, c in zip(lat["buckets"], lat["cumulative"], strict=True)], lat["sum"])
        yield h

    class _Snap:
        def collect(self):
            yield from families()

    reg = CollectorRegistry(auto_describe=False)
    reg.register(_Snap())
    return generate_latest(reg)


_PAGE: bytes | None = None


def page() -> bytes:
    """The dashboard page (HTML with its script and style inline: nothing is fetched from elsewhere)."""
    global _PAGE
    if _PAGE is None:
        with open(os.path.join(os.path.dirname(__file__), "dashboard.html"), "rb") as f:
            # the job colours of reshape history --plot (scheduler.observe.palette), one per job id
            _PAGE = f.read().replace(b"/*PALETTE*/[]", json.dumps(palette()).encode())
    return _PAGE
