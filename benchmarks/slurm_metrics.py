"""What a pair of runs of ``benchmarks.slurm_workload`` means: per-job rows, ratios, latencies.

A run (real, from ``benchmarks.slurm_driver``, or the simulator's twin) is ``{"jobs": {name:
{"submit", "start", "end", "state", "nodes", "rigid", "submitted_at", "app_start"}}, "late_starts",
"restarts", "history"}`` (history: the controller's, reshape runs only). A job that did not
complete in either run is *lost*: reported, counted in ``jobs_lost`` and left out of every ratio
and of the utilization of both runs.

Where the mean turnaround moved (:func:`moved`): the seconds of turnaround the jobs that gained saved and
those that lost lost, per job, and the ratio the run would have had if no job had lost anything (the
same gains): a ratio short of a target *with* that bound short too needs larger gains, not fewer losses.
"""

from __future__ import annotations

import itertools
import math
import re
import statistics
from collections.abc import Mapping, Sequence

RATIOS = ("turnaround_static_over_reshape", "utilization_reshape_over_static", "rigid_wait_reshape_over_static",
          "malleable_wait_reshape_over_static", "worst_job_turnaround_static_over_reshape")
TWIN_KEYS = ("turnaround_static_over_reshape", "utilization_reshape_over_static")  # twin_error_max is over these


def timelines(run: dict, cpus: int, names: set[str]) -> dict[str, list[tuple[float, int]]]:
    """Nodes doing each job's work over time, ``[(t, nodes), ...]`` ending with ``(end, 0)``: a malleable
    job of a reshape run from the controller's events (start, expand, shrink), any other job whole."""
    out = {}
    hist = run.get("history") or {}
    by_name = {j["name"]: j["job_id"] for j in hist.get("jobs", [])}
    for name, j in run["jobs"].items():
        if name not in names:
            continue
        rid = None if j["rigid"] else by_name.get(name)
        steps = [(e["t"], math.ceil(e["nprocs"] / cpus)) for e in hist.get("events", [])
                 if rid is not None and e["job_id"] == rid and e["kind"] in ("start", "expand", "shrink")]
        out[name] = [*steps, (j["end"], 0)] if steps else [(j["start"], j["nodes"]), (j["end"], 0)]
    return out


def utilization(lines: dict[str, list[tuple[float, int]]], nodes: int) -> tuple[float, float, float]:
    """Busy node-seconds over nodes x the span from the first start to the last end; and that span."""
    if not lines:
        return 0.0, 0.0, 0.0
    t0 = min(s[0][0] for s in lines.values())
    t1 = max(s[-1][0] for s in lines.values())
    busy = sum((b[0] - a[0]) * a[1] for steps in lines.values() for a, b in itertools.pairwise(steps))
    return (busy / (nodes * (t1 - t0)) if t1 > t0 else 0.0), t0, t1


def sizes_of(run: dict, name: str) -> str:
    hist = run.get("history") or {}
    rid = next((j["job_id"] for j in hist.get("jobs", []) if j["name"] == name), None)
    return "->".join(str(e["nprocs"]) for e in hist.get("events", [])
                     if rid is not None and e["job_id"] == rid and e["kind"] in ("start", "expand", "shrink"))


def stats(xs: list[float]) -> dict | None:
    return {"median": statistics.median(xs), "max": max(xs), "n": len(xs)} if xs else None


def release_latencies(hist: dict) -> list[float]:
    """A shrink asked of a job (its ``shrink_request`` for a waiting Slurm job) to the first node of that
    job given back to Slurm after it (a node event ``released`` "released to Slurm: ..." of a host whose
    last grant was to the job's Slurm job, as its allocation or by one of its expanders). A release named
    for another waiting job counts (the controller gives a freed node to whichever job waits then); a
    node freed because a job ended does not, nor a request the job was asked again after before it gave
    a node back (withdrawn: the waiting job started on other nodes)."""
    alloc = {j["job_id"]: j.get("allocation") for j in hist.get("jobs", [])}
    owner: dict[str, str] = {}
    given: dict[str, list[float]] = {}
    for e in sorted(hist.get("node_events", []), key=lambda e: e["t"]):
        detail = e.get("detail") or ""
        m = re.search(r"(?:allocation of|for) Slurm job (\d+)$|for Slurm job (\d+) in ", detail)
        if e["kind"] == "granted" and m:
            owner[e["host"]] = m.group(1) or m.group(2)
        elif e["kind"] == "released" and detail.startswith("released to Slurm:") and e.get("host") in owner:
            given.setdefault(owner[e["host"]], []).append(e["t"])
    asks: dict[str, list[float]] = {}
    for e in hist.get("events", []):
        a = alloc.get(e.get("job_id"))
        if e["kind"] == "shrink_request" and a is not None:
            asks.setdefault(str(a), []).append(e["t"])
    out = []
    for a, ts in asks.items():
        ts = sorted(ts)
        for t, until in zip(ts, [*ts[1:], math.inf], strict=True):
            after = [r for r in given.get(a, []) if t <= r < until]
            if after:  # none before the job was asked again: that request was withdrawn, not slow
                out.append(min(after) - t)
    return out


def grow_latencies(hist: dict) -> list[float]:
    """A node an expander of Slurm job M brought (node event ``granted ... for Slurm job M``) to the
    first expansion of M's job after it (its ``expand`` event: the new ranks iterating); a node given back
    before that expansion (to a waiting job, say) was not grown onto and is not timed."""
    job_of = {j.get("allocation"): j["job_id"] for j in hist.get("jobs", [])}
    expands: dict[int, list[float]] = {}
    for e in hist.get("events", []):
        if e["kind"] == "expand":
            expands.setdefault(e["job_id"], []).append(e["t"])
    released: dict[str, list[float]] = {}
    for e in hist.get("node_events", []):
        if e["kind"] == "released":
            released.setdefault(e["host"], []).append(e["t"])
    out = []
    for e in hist.get("node_events", []):
        m = re.search(r"for Slurm job (\d+)", e.get("detail") or "")
        if e["kind"] == "granted" and m and job_of.get(m.group(1)) is not None:
            after = [t for t in expands.get(job_of[m.group(1)], []) if t >= e["t"]]
            first = min(after, default=None)
            if first is not None and not any(e["t"] <= t < first for t in released.get(e["host"], [])):
                out.append(first - e["t"])
    return out


def summarize(static: dict, reshape: dict, w) -> tuple[list[dict], dict]:
    """Per-job rows and the pair's summary (module docstring)."""
    rows, ok = [], set()
    for j in w.jobs:
        a, b = static["jobs"][j.name], reshape["jobs"][j.name]
        good = a["state"] == "COMPLETED" and b["state"] == "COMPLETED"
        ta, tb = a["end"] - a["submit"], b["end"] - b["submit"]
        rows.append({"job": j.name, "kind": "malleable" if j.malleable else "rigid", "nodes": j.nodes,
                     "wait_static": a["start"] - a["submit"], "wait_reshape": b["start"] - b["submit"],
                     "run_static": a["end"] - a["start"], "run_reshape": b["end"] - b["start"],
                     "turnaround_static": ta, "turnaround_reshape": tb,
                     "ratio": ta / tb if good and tb > 0 else None,
                     "sizes": (sizes_of(reshape, j.name) or str(j.nodes * w.cpus_per_node)) if good else
                     f"lost ({a['state']} / {b['state']})", "ok": good})
        if good:
            ok.add(j.name)
    done = [r for r in rows if r["ok"]]
    mean = lambda xs: statistics.fmean(xs) if xs else None  # noqa: E731
    ratio = lambda x, y: x / y if x is not None and y else None  # noqa: E731
    ua, a0, a1 = utilization(timelines(static, w.cpus_per_node, ok), w.nodes)
    ub, b0, b1 = utilization(timelines(reshape, w.cpus_per_node, ok), w.nodes)
    rigid = [r for r in done if r["kind"] == "rigid"]
    mall = [r for r in done if r["kind"] == "malleable"]
    s = {"nodes": w.nodes, "offered_load": w.offered_load(), "jobs": len(rows), "completed": len(done),
         "malleable_jobs": sum(j.malleable for j in w.jobs), "rigid_jobs": sum(not j.malleable for j in w.jobs),
         "utilization_static": ua, "utilization_reshape": ub, "utilization_reshape_over_static": ratio(ub, ua),
         "turnaround_static_mean_s": mean([r["turnaround_static"] for r in done]),
         "turnaround_reshape_mean_s": mean([r["turnaround_reshape"] for r in done]),
         "worst_job_turnaround_static_over_reshape": min((r["ratio"] for r in done), default=None),
         "rigid_wait_static_mean_s": mean([r["wait_static"] for r in rigid]),
         "rigid_wait_reshape_mean_s": mean([r["wait_reshape"] for r in rigid]),
         "malleable_wait_static_mean_s": mean([r["wait_static"] for r in mall]),
         "malleable_wait_reshape_mean_s": mean([r["wait_reshape"] for r in mall]),
         "rigid_late_starts": len(reshape["late_starts"]), "rigid_late_starts_static": len(static["late_starts"]),
         "controller_late_starts": (reshape.get("controller") or {}).get("late_starts"),
         "jobs_lost": len(rows) - len(done), "makespan_static_s": a1 - a0, "makespan_reshape_s": b1 - b0}
    s["turnaround_static_over_reshape"] = ratio(s["turnaround_static_mean_s"], s["turnaround_reshape_mean_s"])
    s["rigid_wait_reshape_over_static"] = ratio(s["rigid_wait_reshape_mean_s"], s["rigid_wait_static_mean_s"])
    s["malleable_wait_reshape_over_static"] = ratio(s["malleable_wait_reshape_mean_s"],
                                                    s["malleable_wait_static_mean_s"])
    s["controller_restarts_survived"] = reshape["restarts"] if not s["jobs_lost"] else 0
    for mode, run in (("static", static), ("reshape", reshape)):
        s[f"start_latency_{mode}_s"] = stats([x["app_start"] - x["submitted_at"] for n, x in run["jobs"].items()
                                              if n in ok and not x["rigid"] and x.get("app_start")
                                              and x["start"] - x["submit"] <= 1.0])
    hist = reshape.get("history") or {}
    return rows, s | latencies(hist) | moved(rows)


def latencies(hist: dict) -> dict:
    """``release_latency_s`` and ``grow_latency_s`` of a controller run's history."""
    return {"release_latency_s": stats(release_latencies(hist)), "grow_latency_s": stats(grow_latencies(hist))}


def moved(rows: Sequence[Mapping]) -> dict:
    """Turnaround saved and lost per completed job (seconds), and the ratio without the losses (module docstring)."""
    done = [r for r in rows if r["ok"]]
    if not done:
        return {}
    deltas = [r["turnaround_static"] - r["turnaround_reshape"] for r in done]
    saved = sum(d for d in deltas if d > 0) / len(done)
    lost = -sum(d for d in deltas if d < 0) / len(done)
    static = statistics.fmean(r["turnaround_static"] for r in done)
    return {"turnaround_saved_per_job_s": saved, "turnaround_lost_per_job_s": lost,
            "turnaround_static_over_reshape_without_losses": static / (static - saved) if static > saved else None}


def alone(reshape: dict, w) -> tuple[list[dict], dict]:
    """A controller run without its plain-Slurm pair (``--controller-only``): per-job rows and what needs no
    baseline: completions, ``jobs_lost``, late starts, restarts survived, utilization and latencies."""
    rows = []
    for j in w.jobs:
        b = reshape["jobs"][j.name]
        good = b["state"] == "COMPLETED"
        rows.append({"job": j.name, "kind": "malleable" if j.malleable else "rigid", "nodes": j.nodes,
                     "wait_reshape": b["start"] - b["submit"], "run_reshape": b["end"] - b["start"],
                     "turnaround_reshape": b["end"] - b["submit"], "ok": good,
                     "sizes": (sizes_of(reshape, j.name) or str(j.nodes * w.cpus_per_node)) if good else
                     f"lost ({b['state']})"})
    done = {r["job"] for r in rows if r["ok"]}
    ub, b0, b1 = utilization(timelines(reshape, w.cpus_per_node, done), w.nodes)
    hist = reshape.get("history") or {}
    lost = len(rows) - len(done)
    s = {"nodes": w.nodes, "offered_load": w.offered_load(), "jobs": len(rows), "completed": len(done),
         "jobs_lost": lost, "rigid_late_starts": len(reshape["late_starts"]),
         "controller_late_starts": (reshape.get("controller") or {}).get("late_starts"),
         "controller_restarts_survived": reshape["restarts"] if not lost else 0, "utilization_reshape": ub,
         "makespan_reshape_s": b1 - b0,
         "turnaround_reshape_mean_s": statistics.fmean([r["turnaround_reshape"] for r in rows if r["ok"]] or [0.0]),
         **latencies(hist)}
    return rows, s


def combine(runs: list[dict], twin: dict | None, band: Mapping[str, Sequence[float]] | None = None) -> dict:
    """A workload's summary over its repeats: the mean of every number (latencies: medians' median, max of
    maxima; counts summed), the twin's ratios and its worst relative error on :data:`TWIN_KEYS`; with
    ``band`` (each ratio's range over the jittered twin's draws), how far outside it the measured ratio
    lies, relative to it (0 inside), worst of :data:`TWIN_KEYS`."""
    out: dict = {}
    for k, v in runs[0].items():
        vals = [r[k] for r in runs if r.get(k) is not None]
        if k in ("jobs_lost", "rigid_late_starts", "rigid_late_starts_static"):
            out[k] = sum(vals)
        elif k == "controller_restarts_survived":
            out[k] = min(vals) if len(vals) == len(runs) else 0
        elif vals and isinstance(vals[0], dict):
            out[k] = {"median": statistics.median(x["median"] for x in vals), "max": max(x["max"] for x in vals)}
        elif vals and isinstance(vals[0], int | float):
            out[k] = statistics.fmean(vals)
        else:
            out[k] = v
    out["repeats"] = len(runs)
    if twin is not None:
        out["twin"] = {k: twin.get(k) for k in (*RATIOS, "rigid_late_starts", "jobs_lost")}
        errs = [abs(twin[k] - out[k]) / out[k] for k in TWIN_KEYS if out.get(k) and twin.get(k) is not None]
        out["twin_error_max"] = max(errs) if errs else None
    if band:
        out["twin_band"] = {k: list(v) for k, v in band.items()}
        errs = [max(0.0, band[k][0] - out[k], out[k] - band[k][1]) / out[k] for k in TWIN_KEYS
                if out.get(k) and k in band]
        out["twin_band_error_max"] = max(errs) if errs else None
    return out
