"""The dashboard's views (snapshot, JSON, Prometheus text) and its HTTP edge's access rule, in-process."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from reshape.joblink import protocol as P
from scheduler.core import events as C
from scheduler.core.jobfile import validate_job
from scheduler.core.policy import app_policy, remap_policy
from scheduler.core.pool import default_pool
from scheduler.core.state import ClusterState
from scheduler.observe.dashboard import Dashboard, is_loopback, parse_bind
from scheduler.observe.dashboard_view import LatencyHistogram, metrics_text, page, snapshot


def _state_with_history():
    """Job 1 expands 2->3->4 and returns to 3 (sweet spot), then job 2 (6 procs) queues."""
    st = ClusterState(default_pool(8), app_policy("easy"), remap_policy("reshape"))
    a = st.submit(validate_job({"name": "lu", "command": ["true"], "nprocs": 2, "max_procs": 8}), 0.0)
    st.tick(0.0)
    for n, q, t, it in ((2, 3, 1.0, 1), (3, 4, 0.7, 2), (4, 3, 0.69, 3)):
        st.handle(C.ResizePoint(job_id=a, iteration=it, nprocs=n, iter_time=t), float(it))
        st.resized(a, n, q, 0.25, None, it + 0.5)
    st.submit(validate_job({"name": "big", "command": ["true"], "nprocs": 6}), 5.0)
    st.tick(5.0)
    return st, a


def _families(text: bytes) -> dict:
    return {f.name: f for f in text_string_to_metric_families(text.decode())}


def test_snapshot_has_every_view_and_is_json():
    st, a = _state_with_history()
    lat = LatencyHistogram()
    for s in (0.0003, 0.004, 0.004, 2.0):
        lat.observe(s)
    snap = snapshot(st, st.events, 6.0, {"served": 4}, lat, {"expand": 2, "shrink": 1})
    json.dumps(snap, allow_nan=False)  # what /api/state sends
    assert [r["nprocs"] for r in snap["running"]] == [3]
    assert [q["name"] for q in snap["queue"]] == ["big"]
    job = snap["jobs"][str(a)]
    assert job["profile"]["sizes"] == [2, 3, 4] and job["profile"]["best"] == [1.0, 0.7, 0.69]
    assert job["profile"]["history"] == [2, 3, 4, 3]
    assert [p[1] for p in snap["series"][str(a)]] == [2, 3, 4, 3]  # processors over time
    advised = [d["detail"] for d in snap["decisions"] if d["kind"] == "advise"]
    assert advised[0] == "expand 2->3: idle processors" and advised[-1].startswith("shrink 4->3: sweet spot")
    assert snap["slots"] == {"total": 8, "capacity": 8, "free": 5, "used": 3}
    assert snap["nodes"][0]["host"] == "localhost"
    assert snap["note"].startswith("5 slot(s) idle: big (first in the queue) needs 6")  # why slots idle


def test_metrics_parse_as_prometheus_text():
    st, _ = _state_with_history()
    lat = LatencyHistogram()
    for s in (0.0003, 0.004, 0.004, 2.0):
        lat.observe(s)
    fam = _families(metrics_text(snapshot(st, st.events, 6.0, {}, lat, {"expand": 2, "shrink": 1})))
    one = {n: fam[n].samples[0].value for n in ("reshape_slots_total", "reshape_slots_used")}
    assert one == {"reshape_slots_total": 8, "reshape_slots_used": 3}
    jobs = {s.labels["state"]: s.value for s in fam["reshape_jobs"].samples}
    assert jobs["running"] == 1 and jobs["queued"] == 1 and jobs["done"] == 0
    resizes = {s.labels["action"]: s.value for s in fam["reshape_resizes"].samples}
    assert resizes == {"expand": 2, "shrink": 1} and fam["reshape_resizes"].type == "counter"
    assert fam["reshape_redistribution_seconds"].samples[0].value == pytest.approx(0.75)
    h = fam["reshape_request_duration_seconds"]
    assert h.type == "histogram"
    buckets = {s.labels["le"]: s.value for s in h.samples if s.name.endswith("_bucket")}
    assert buckets["0.0005"] == 1 and buckets["0.005"] == 3 and buckets["1.0"] == 3 and buckets["+Inf"] == 4
    assert [s.value for s in h.samples if s.name.endswith("_count")] == [4]


def test_page_is_self_contained():
    html = page().decode()
    assert "<script>" in html and "api/state" in html
    assert "http://" not in html.replace('"http://www.w3.org/2000/svg"', "") and "https://" not in html
    assert "src=" not in html and "<link" not in html  # nothing fetched but the daemon's JSON


@pytest.mark.parametrize(("text", "bind"), [("8080", ("127.0.0.1", 8080)), ("0.0.0.0:0", ("0.0.0.0", 0)),
                                            ("[::1]:9000", ("::1", 9000)), ("localhost:81", ("localhost", 81))])
def test_parse_bind(text, bind):
    assert parse_bind(text) == bind


@pytest.mark.parametrize("text", ["", "host:", "x:70000", "8o8o"])
def test_parse_bind_names_the_bad_value(text):
    with pytest.raises(ValueError, match="--dashboard"):
        parse_bind(text)


def test_loopback():
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("10.1.2.3") and not is_loopback("node1")


def _get(url: str, headers: dict | None = None) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers or {}), timeout=5) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def test_loopback_dashboard_serves_without_token(tmp_path):
    st, _ = _state_with_history()
    d = Dashboard("127.0.0.1:0")
    try:
        d.publish(snapshot(st, st.events, 6.0))
        d.start(str(tmp_path))
        assert d.token is None and not (tmp_path / "dashboard.token").exists()
        code, body = _get(d.url + "api/state")
        assert code == 200 and json.loads(body)["slots"]["used"] == 3
        code, body = _get(d.url + "metrics")
        assert code == 200 and "reshape_slots_used" in _families(body)
        assert _get(d.url + "nothing")[0] == 404
    finally:
        d.close()


@pytest.mark.parametrize(("bind", "keys"), [("0.0.0.0:0", False), ("127.0.0.1:0", True)])
def test_where_the_protocol_needs_curve_the_dashboard_needs_the_token(tmp_path, bind, keys):
    """HTTP cannot carry CURVE: beyond loopback, or on a daemon with keys, every request needs the
    token the daemon wrote (0600)."""
    st, _ = _state_with_history()
    d = Dashboard(bind, require_token=keys)  # 0.0.0.0: reached here through loopback
    try:
        assert not (tmp_path / "dashboard.token").exists()  # written at start, into the state directory
        d.publish(snapshot(st, st.events, 6.0))
        d.start(str(tmp_path))
        path = tmp_path / "dashboard.token"
        assert path.stat().st_mode & 0o777 == 0o600 and path.read_text().strip() == d.token
        url = f"http://127.0.0.1:{d.port}/"
        for u in ("", "api/state", "metrics", "api/state?token=wrong"):
            assert _get(url + u)[0] == 401
        assert _get(url + "metrics", {"Authorization": "Bearer nope"})[0] == 401
        assert _get(url + "metrics", {"Authorization": f"Bearer {d.token}"})[0] == 200
        assert _get(url + f"?token={d.token}")[0] == 200
        assert _get(url + f"api/state?token={d.token}")[0] == 200
    finally:
        d.close()


def test_page_and_history_plot_share_a_palette_that_does_not_repeat_for_many_jobs():
    from scheduler.observe import palette, report

    colors = palette.palette()
    assert len(set(colors)) == palette.COLORS >= 64  # job 11 is not job 1's colour again, nor job 21
    assert json.dumps(colors) in page().decode()  # the dashboard colours job k with entry k - 1
    assert report.job_color is palette.job_color and palette.job_color(1) == colors[0]
    assert palette.job_color(palette.COLORS + 1) == colors[0]

    def rgb(c):
        return [int(c[i:i + 2], 16) for i in (1, 3, 5)]

    close = min(sum((a - b) ** 2 for a, b in zip(rgb(x), rgb(y), strict=True)) ** 0.5
                for i, x in enumerate(colors[:24]) for y in colors[i + 1:24])
    assert close > 30, close  # the first 24 jobs' colours are told apart


def test_queue_has_no_waiting_column():
    html = page().decode()
    head = html[html.index('<table id="queue">'):html.index("</thead>", html.index('<table id="queue">'))]
    assert "<th>waiting</th>" not in head and "<th>submitted</th>" in head  # "waiting" is a state only


# a job's name as a user may choose it: a terminal escape (red), a bidirectional override, a carriage return
# that would forge a line, and markup
EVIL = "a\x1b[31mred\u202eevil\r<script>alert(1)</script>"


def _state_with_evil_texts():
    """Job 1 (named EVIL) runs with a parked rank on a host named like it; job 2 failed with a reason
    written the same way; job 3 (named EVIL too) queues."""
    st = ClusterState(default_pool(4), app_policy("easy"), remap_policy("reshape"))
    a = st.submit(validate_job({"name": EVIL, "command": ["true"], "nprocs": 2}), 0.0)
    b = st.submit(validate_job({"name": "b\x07ell", "command": ["true"], "nprocs": 1}), 0.0)
    st.tick(0.0)
    st.handle(C.ResizePoint(job_id=a, iteration=1, nprocs=2, iter_time=1.0, parked=("h\x1b]0;x\x07",)), 1.0)
    st.finished(b, "error", "boom\x1b[2J\nreshape daemon: forged line \u2066", 2.0)
    st.exited(b, 1, 2.0)
    st.submit(validate_job({"name": EVIL, "command": ["true"], "nprocs": 4}), 3.0)
    st.tick(3.0)
    return st, a, b


def _strings(x):
    if isinstance(x, str):
        yield x
    elif isinstance(x, dict):
        for k, v in x.items():
            yield from _strings(k)
            yield from _strings(v)
    elif isinstance(x, list | tuple):
        for v in x:
            yield from _strings(v)


def test_texts_users_chose_reach_the_page_escaped_as_on_the_terminal():
    """Every string of the snapshot (what /api/state sends) is as ``printable`` shows it: no control,
    bidirectional-override or invisible character anywhere; names, reasons and hosts as their escapes."""
    st, a, b = _state_with_evil_texts()
    snap = snapshot(st, st.events, 4.0)
    raw = [s for s in _strings(snap) if s != P.printable(s)]
    assert raw == [], raw
    shown = P.printable(EVIL)
    assert shown == "a\\x1b[31mred\\u202eevil\\r<script>alert(1)</script>"
    assert [r["name"] for r in snap["running"]] == [shown] and [q["name"] for q in snap["queue"]] == [shown]
    assert snap["jobs"][str(a)]["name"] == shown
    assert snap["running"][0]["parked"] == {"h\\x1b]0;x\\x07": 1}
    (ended,) = snap["ended"]
    assert ended["name"] == "b\\x07ell" and ended["error"].startswith("boom\\x1b[2J\\nreshape daemon: forged line")
    assert any("boom\\x1b[2J\\n" in d["detail"] for d in snap["decisions"] if d["job_id"] == b), snap["decisions"]
    fam = _families(metrics_text(snap))
    assert [s.labels["name"] for s in fam["reshape_job_processes"].samples] == [shown]
    json.dumps(snap, allow_nan=False)
