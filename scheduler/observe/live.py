"""The demo's live view: jobs and their sizes, the queue, and the scheduler's last decisions with
their reasons, while the workload runs.

On a terminal it is a ``rich`` live display redrawn twice a second; elsewhere (a pipe, a log, CI)
it prints each decision as it happens and a status line every few seconds, so the output never
stalls for long. :func:`view_model` turns the daemon's ``status`` reply and events into plain
rows (tested without a terminal); the two renderers only format them.
"""

from __future__ import annotations

import collections
import sys
import time
from typing import Any, TextIO

__all__ = ["LiveView", "idle_note", "view_model"]

DECISIONS = 8  # decisions shown on the terminal
PLAIN_EVERY = 5.0  # seconds between status lines without a terminal
# the events worth a line: decisions and what became of them (scheduler.core.state)
SHOWN = {"start": "started", "advise": "advised", "expand": "expanded", "shrink": "shrank",
         "shrink_request": "asked to shrink", "resize_failed": "resize failed", "end": "ended",
         "cancel": "cancelled", "cancelling": "cancelling (kill not yet confirmed)",
         "ending": "ending (kill not yet confirmed)"}


def idle_note(st: dict[str, Any]) -> str | None:
    """Why slots are idle while jobs queue (EASY backfilling, Sudarsan & Ribbens 2007 §3.1), or None."""
    queue = st["queue"]
    free = st["free_slots"]
    if not queue or free <= 0:
        return None
    head = queue[0]
    if head["requested"] <= free:
        return None  # it starts at the next scheduling pass
    fits = [q["name"] for q in queue[1:] if q["requested"] <= free]
    note = f"{free} slot(s) idle: {head['name']} (first in the queue) needs {head['requested']}"
    if fits:
        note += (f"; {', '.join(fits)} would fit but may pass it only if its walltime estimate ends before "
                 f"{head['name']}'s reservation (EASY backfilling)")
    return note + ("; a running job shrinks to admit it at its next resize point, but only to a size it "
                   "has run at (Sudarsan & Ribbens 2007 §3.1)")


def view_model(st: dict[str, Any], decisions: list[dict[str, Any]], t0: float) -> dict[str, Any]:
    """Plain rows for either renderer: header, running jobs, queue, jobs still to arrive, the decisions, an idle
    note."""
    used = st["total_slots"] - st["free_slots"]
    return {
        "header": f"t = {st.get('now', t0) - t0:5.1f} s   slots {used}/{st['total_slots']} busy",
        "running": [(j["job_id"], j["name"], j["nprocs"], j["requested"], j["iterations"], j["pending"] or "")
                    for j in st["running"]],
        # jobs that have arrived; those submitted with an arrival delay join the queue when they arrive
        "queue": [(j["job_id"], j["name"], j["requested"], j["state"]) for j in st["queue"]],
        "arriving": [j["name"] for j in st["waiting"]],
        "decisions": [(e["t"] - t0, e["job_id"], SHOWN[e["kind"]], e["detail"]) for e in decisions],
        "note": idle_note(st),
    }


class LiveView:
    """``watch`` callback for :func:`scheduler.cli.workload.run_workload`; use as a context manager."""

    def __init__(self, names: dict[int, str] | None = None, out: TextIO | None = None,
                 terminal: bool | None = None):
        self.out = out or sys.stdout
        self.terminal = self.out.isatty() if terminal is None else terminal
        self.t0 = time.time()
        self.names = names or {}
        self.decisions: collections.deque[dict[str, Any]] = collections.deque(maxlen=DECISIONS)
        self._live = None
        self._last_line = 0.0
        self._last_note: str | None = None

    def __enter__(self) -> LiveView:
        if self.terminal:
            from rich.console import Console
            from rich.live import Live

            self._live = Live(console=Console(file=self.out), refresh_per_second=4, transient=False)
            self._live.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._live is not None:
            self._live.__exit__(*exc)

    def __call__(self, st: dict[str, Any], events: list[dict[str, Any]]) -> None:
        for j in st["running"] + st["queue"] + st["waiting"]:
            self.names[j["job_id"]] = j["name"]
        new = [e for e in events if e["kind"] in SHOWN]
        self.decisions.extend(new)
        vm = view_model(st, list(self.decisions), self.t0)
        if self._live is not None:
            self._live.update(self._rich(vm))
        else:
            self._plain(vm, new, st.get("now", time.time()))

    def _name(self, jid: int) -> str:
        return f"{jid} {self.names.get(jid, '')}".strip()

    def _plain(self, vm: dict[str, Any], new: list[dict[str, Any]], now: float) -> None:
        for e in new:
            print(f"  [{e['t'] - self.t0:5.1f} s] {self._name(e['job_id'])}: {SHOWN[e['kind']]} {e['detail']}".rstrip(),
                  file=self.out, flush=True)
        if now - self._last_line >= PLAIN_EVERY or (vm["note"] and vm["note"] != self._last_note):
            self._last_line = now
            running = ", ".join(f"{n} on {p}" for _, n, p, *_ in vm["running"]) or "none"
            queued = ", ".join(f"{n} ({p})" for _, n, p, _ in vm["queue"]) or "none"
            later = f"; arriving later: {', '.join(vm['arriving'])}" if vm["arriving"] else ""
            print(f"{vm['header']}; running: {running}; queued: {queued}{later}", file=self.out, flush=True)
            if vm["note"] and vm["note"] != self._last_note:
                print(f"  note: {vm['note']}", file=self.out, flush=True)
        self._last_note = vm["note"]

    def _rich(self, vm: dict[str, Any]):
        from rich.console import Group
        from rich.table import Table
        from rich.text import Text

        jobs = Table(title="running", title_justify="left", show_edge=False)
        for col in ("job", "procs", "", "requested", "iteration", "pending"):
            jobs.add_column(col)
        for jid, name, p, req, it, pend in vm["running"]:
            jobs.add_row(f"{jid} {name}", str(p), Text("█" * p, style="green"), str(req), str(it), pend)
        if not vm["running"]:
            jobs.add_row("-", "", "", "", "", "")
        parts: list[Any] = [Text(vm["header"], style="bold"), jobs]
        queued = ", ".join(f"{jid} {n} ({p} procs, {s})" for jid, n, p, s in vm["queue"])
        parts.append(Text(f"queue: {queued or 'empty'}"
                          + (f"; arriving later: {', '.join(vm['arriving'])}" if vm["arriving"] else "")))
        if vm["note"]:
            parts.append(Text(f"note: {vm['note']}", style="yellow"))
        dec = Table(title="last decisions", title_justify="left", show_edge=False)
        for col in ("t (s)", "job", "what", "detail and reason"):
            dec.add_column(col)
        for t, jid, what, detail in vm["decisions"]:
            style = "green" if "expand" in what + detail[:6] else "red" if "shrink" in what + detail[:6] else ""
            dec.add_row(f"{t:.1f}", self._name(jid), Text(what, style=style), detail)
        parts.append(dec)
        return Group(*parts)
