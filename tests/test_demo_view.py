"""The demo's live view (plain and rich) and its plot, from a daemon's status and events, in-process."""

from __future__ import annotations

import io

from reshape.joblink import protocol as P
from scheduler.observe.live import LiveView, idle_note, view_model
from scheduler.observe.report import plot_history


def _row(jid, name, n, state="running", req=None):
    return {"job_id": jid, "name": name, "state": state, "nprocs": n, "requested": req or n, "iterations": 3,
            "pending": None, "hosts": ["localhost"], "submit_time": 0.0}


def _status(now, running, queue=(), free=0, waiting=()):
    return {"now": now, "total_slots": 8, "free_slots": free, "running": list(running), "queue": list(queue),
            "waiting": list(waiting)}


EVENTS = [{"t": 100.0, "job_id": 1, "kind": "start", "nprocs": 2, "busy": 2, "detail": ""},
          {"t": 101.0, "job_id": 1, "kind": "advise", "nprocs": 2, "busy": 6, "detail": "expand 2->6: idle processors"},
          {"t": 101.5, "job_id": 1, "kind": "expand", "nprocs": 6, "busy": 6, "detail": "2->6"},
          {"t": 104.0, "job_id": 1, "kind": "advise", "nprocs": 6, "busy": 6,
           "detail": "shrink 6->2: admit queued job 2"}]


def test_idle_note_explains_idle_slots_behind_a_waiting_head():
    st = _status(105, [_row(1, "LU", 2), _row(3, "MM", 4)],
                 [_row(2, "Jacobi", 0, "queued", 4), _row(4, "FFT", 0, "queued", 2)], free=2)
    note = idle_note(st)
    assert note.startswith("2 slot(s) idle: Jacobi (first in the queue) needs 4") and "FFT would fit" in note
    assert "EASY" in note and "walltime" in note
    assert idle_note(_status(105, [_row(1, "LU", 8)], [_row(2, "Jacobi", 0, "queued", 4)])) is None  # no slot idle
    assert idle_note(_status(105, [_row(1, "LU", 2)], [], free=6)) is None  # nobody waits


def test_view_model_rows():
    st = _status(105, [_row(1, "LU", 6)], [_row(2, "Jacobi", 0, "queued", 4)], free=2)
    vm = view_model(st, EVENTS, 100.0)
    assert vm["header"].startswith("t =   5.0 s") and "slots 6/8 busy" in vm["header"]
    assert vm["running"] == [(1, "LU", 6, 6, 3, "")] and vm["queue"] == [(2, "Jacobi", 4, "queued")]
    assert vm["decisions"][1] == (1.0, 1, "advised", "expand 2->6: idle processors")


def test_jobs_not_yet_arrived_are_not_listed_as_queued():
    """A job submitted with an arrival delay waits in the daemon; it is queued only once it arrives."""
    st = _status(101, [_row(1, "LU", 2)], [_row(2, "Jacobi", 0, "queued", 4)], free=2,
                 waiting=[_row(4, "Master-worker", 0, "waiting", 2)])
    vm = view_model(st, [], 100.0)
    assert vm["queue"] == [(2, "Jacobi", 4, "queued")] and vm["arriving"] == ["Master-worker"]
    out = io.StringIO()
    with LiveView(out=out, terminal=False) as v:
        v(st, [])
    assert "queued: Jacobi (4); arriving later: Master-worker" in out.getvalue()


def test_the_demo_header_says_when_each_job_comes():
    from scheduler.cli.demo import _when, demo_jobs

    assert [_when(j) for j in demo_jobs()] == ["+0s", "+0s", "once a job has grown, by +20s", "+20s", "+25s"]


def test_plain_view_prints_each_decision_and_periodic_status():
    out = io.StringIO()
    with LiveView(out=out, terminal=False) as v:
        v.t0 = 100.0
        v(_status(101, [_row(1, "LU", 2)]), EVENTS[:2])
        v(_status(102, [_row(1, "LU", 6)]), EVENTS[2:3])  # within 5 s: decisions only
        v(_status(107, [_row(1, "LU", 6)], [_row(2, "Jacobi", 0, "queued", 4)], free=2), EVENTS[3:])
    lines = out.getvalue().splitlines()
    assert "[  1.0 s] 1 LU: advised expand 2->6: idle processors" in out.getvalue()
    assert sum(line.startswith("t = ") for line in lines) == 2, lines  # the first call and 5 s later
    assert any("note: 2 slot(s) idle: Jacobi" in line for line in lines)
    assert "running: LU on 6; queued: Jacobi (4)" in out.getvalue()


def test_rich_view_renders_jobs_queue_and_reasons():
    from rich.console import Console

    v = LiveView(out=io.StringIO(), terminal=True)
    v.t0 = 100.0
    vm = view_model(_status(105, [_row(1, "LU", 6)], [_row(2, "Jacobi", 0, "queued", 4)], free=2), EVENTS, 100.0)
    con = Console(file=io.StringIO(), width=140, color_system=None)
    con.print(v._rich(vm))
    text = con.file.getvalue()
    assert "1 LU" in text and "██████" in text and "queue: 2 Jacobi (4 procs, queued)" in text
    assert "shrink 6->2: admit queued job 2" in text and "note: 2 slot(s) idle" in text


def test_plot_has_one_lane_per_job_and_marks_decisions(tmp_path, monkeypatch):
    hist = P.HistoryView(
        total_slots=8, now=110.0, node_events=(), jobs_total=2,
        jobs=({"job_id": 1, "name": "LU", "state": "done", "arrival_time": 100.0},
              {"job_id": 2, "name": "Jacobi", "state": "done", "arrival_time": 102.0}),
        events=(*EVENTS, {"t": 105.0, "job_id": 1, "kind": "shrink", "nprocs": 2, "busy": 2, "detail": "6->2"},
                         {"t": 105.0, "job_id": 2, "kind": "start", "nprocs": 4, "busy": 6, "detail": ""},
                         {"t": 109.0, "job_id": 2, "kind": "end", "nprocs": 0, "busy": 2, "detail": "done"},
                         {"t": 110.0, "job_id": 1, "kind": "end", "nprocs": 0, "busy": 0, "detail": "done"}))
    import matplotlib.pyplot as plt

    path = tmp_path / "p.png"
    shown = {}
    orig = plt.Figure.savefig

    def keep(fig, *a, **k):
        shown["fig"] = fig
        return orig(fig, *a, **k)

    monkeypatch.setattr(plt.Figure, "savefig", keep)
    plot_history(hist, str(path), "t")
    lanes, stack = shown["fig"].axes
    assert [t.get_text() for t in lanes.get_yticklabels()] == ["2 Jacobi", "1 LU"]
    marks = [ln for ln in lanes.get_lines() if ln.get_marker() in ("^", "v")]
    assert sorted(ln.get_marker() for ln in marks) == ["^", "v"]  # expand and shrink advice of LU
    assert path.stat().st_size > 10_000
    assert [t.get_text() for t in stack.get_legend().get_texts()] == ["1 LU", "2 Jacobi", "slots"]
    # the dashboard's colours (scheduler.observe.palette), by job id; a lane label that says what the band is
    from matplotlib.colors import to_hex

    from scheduler.observe.palette import job_color

    assert [to_hex(p.get_facecolor()) for p in stack.get_legend().get_patches()] == [job_color(1), job_color(2)]
    assert "band's height" in lanes.get_ylabel() and "full =" not in lanes.get_ylabel()
