"""The daemon's dashboard in a real headless browser (Debian's chromium, driven through chromedriver),
and its /metrics over HTTP, while a real job runs and resizes."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.helpers import free_port

pytestmark = pytest.mark.procs

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
# one iteration at 1 process takes 3 s (half at 2): the page sees the job at 1 before it expands
HEAT = {"name": "heat", "command": ["python", "examples/heat.py", "--n", "64", "--steps", "6", "--work", "3"],
        "nprocs": 1, "max_procs": 2, "walltime": 60}


@contextlib.contextmanager
def browser():
    """A headless chromium with a fresh profile; quit (browser and driver) even when the test fails."""
    if not (os.access(CHROMIUM, os.X_OK) and os.access(CHROMEDRIVER, os.X_OK)):
        pytest.skip("chromium/chromedriver not installed (apt-get install chromium chromium-driver)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="reshape-chromium-")
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for a in ("--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
              "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
              f"--user-data-dir={profile}", "--window-size=1280,1000"):
        opts.add_argument(a)
    driver = None
    try:
        driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=opts)
        yield driver
    finally:
        if driver is not None:
            driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def _running(driver) -> dict[str, str]:
    """job id -> the procs cell of the page's running-jobs table."""
    return driver.execute_script(
        "const o = {}; for (const r of document.querySelectorAll('#running tbody tr[data-job-id]'))"
        " o[r.dataset.jobId] = r.querySelector('td.procs').textContent; return o;")


def _until(pred, timeout: float, what: str):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if v := pred():
            return v
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def test_page_shows_a_running_job_and_follows_its_resize(daemon):
    port = free_port()
    d = daemon(2, extra=("--dashboard", f"127.0.0.1:{port}"))
    url = f"http://127.0.0.1:{port}/"
    with browser() as b:
        b.get(url)
        _until(lambda: b.execute_script("return document.getElementById('updated').textContent") != "never",
               15, "the page's first update")
        assert "no job running" in b.find_element("id", "running").text
        jid = d.req("submit", {"job": HEAT})["job_id"]
        seen = _until(lambda: _running(b).get(str(jid)), 30, "the job in the running table")
        assert seen == "1", f"the job should run at 1 process first, the page shows {seen}"
        _until(lambda: _running(b).get(str(jid)) == "2", 30, "the page to show the expansion to 2")
        # the same page, not reloaded: the decision log and the charts followed
        log = b.find_element("id", "decisions").text
        assert "expand 1->2" in log and "idle processors" in log
        assert b.execute_script("return document.querySelectorAll('#alloc path').length") >= 1
        assert b.execute_script(f"return !!document.querySelector('#curves svg[data-job-id=\"{jid}\"]')")
        with urllib.request.urlopen(url + "metrics", timeout=5) as r:
            fam = {f.name: f for f in text_string_to_metric_families(r.read().decode())}
        assert fam["reshape_slots_total"].samples[0].value == 2
        assert {s.labels["action"]: s.value for s in fam["reshape_resizes"].samples}["expand"] >= 1
        procs = {s.labels["job_id"]: s.value for s in fam["reshape_job_processes"].samples}
        assert procs.get(str(jid)) == 2
        served = [s.value for s in fam["reshape_request_duration_seconds"].samples if s.name.endswith("_count")]
        assert served[0] >= 3  # submit and the job's own requests
        _until(lambda: d.req("status")["running"] == [], 60, "the job to finish")


def _daemon_cli(tmp_path, *args):
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "scheduler.cli", "daemon", "--endpoint",
                           f"tcp://127.0.0.1:{free_port()}", "--state-dir", str(tmp_path / "state"), "--slots", "2",
                           *args], capture_output=True, text=True, timeout=30)


def test_dashboard_address_errors_name_the_value(tmp_path):
    import socket

    p = _daemon_cli(tmp_path, "--dashboard", "127.0.0.1:http")
    assert p.returncode == 2 and "--dashboard '127.0.0.1:http'" in p.stderr and "PORT" in p.stderr, p.stderr
    with socket.socket() as taken:  # a port somebody else listens on
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        p = _daemon_cli(tmp_path, "--dashboard", f"127.0.0.1:{port}")
    assert p.returncode == 1, p.stdout + p.stderr
    assert f"cannot serve the dashboard on 127.0.0.1:{port}: address already in use" in p.stderr, p.stderr
    assert not (tmp_path / "state").exists()  # refused before anything was written


def _many_jobs_state():
    """24 jobs on 8 slots: 20 ended after resizing, 2 running (the two newest to start), 2 queued."""
    from scheduler.core import events as C
    from scheduler.core.jobfile import validate_job
    from scheduler.core.policy import app_policy, remap_policy
    from scheduler.core.pool import default_pool
    from scheduler.core.state import ClusterState

    st = ClusterState(default_pool(8), app_policy("fcfs"), remap_policy("reshape"))
    now = 0.0
    for k in range(22):
        jid = st.submit(validate_job({"name": f"j{k + 1}", "command": ["true"], "nprocs": 3, "max_procs": 4}), now)
        st.tick(now)
        st.handle(C.ResizePoint(job_id=jid, iteration=1, nprocs=3, iter_time=1.0), now + 0.5)
        if k < 20:
            st.exited(jid, 0, now + 1.0)
        now += 1.0
    for k in (22, 23):
        st.submit(validate_job({"name": f"big{k + 1}", "command": ["true"], "nprocs": 6}), now)
    st.tick(now)
    return st, now


def test_layout_at_1400x1000_with_many_jobs(tmp_path):
    """The decision log and the nodes are on screen without scrolling, running jobs' charts come first,
    and no two of the jobs drawn share a colour."""
    from scheduler.observe.dashboard import Dashboard
    from scheduler.observe.dashboard_view import snapshot

    st, now = _many_jobs_state()
    d = Dashboard("127.0.0.1:0")
    try:
        d.publish(snapshot(st, st.events, now))
        d.start(str(tmp_path))
        with browser() as b:
            b.set_window_size(1400, 1000)
            b.get(d.url)
            _until(lambda: b.execute_script("return document.getElementById('updated').textContent") != "never",
                   15, "the page's first update")
            inner = b.execute_script("return window.innerHeight")
            box = b.execute_script("return document.getElementById('decisions-box').getBoundingClientRect().toJSON()")
            assert box["top"] < inner and box["bottom"] <= inner, (box, inner)
            nodes = b.execute_script("return document.getElementById('nodes-box').getBoundingClientRect().toJSON()")
            assert nodes["bottom"] <= inner, (nodes, inner)
            assert b.execute_script("return document.querySelectorAll('#decisions tbody tr').length") >= 5
            first = b.execute_script("return [...document.querySelectorAll('#curves svg')].map(e => e.dataset.jobId)")
            running = sorted(str(r["job_id"]) for r in st.status(now)["running"])
            assert len(first) >= 22 and sorted(first[:2]) == running, (first[:4], running)
            fills = b.execute_script(
                "return [...document.querySelectorAll('#alloc path')].map(e => e.getAttribute('fill'))")
            assert len(fills) >= 22 and len(set(fills)) == len(fills), fills
            b.save_screenshot(str(tmp_path / "dashboard.png"))
    finally:
        d.close()


def test_the_page_shows_texts_users_chose_as_their_escapes(tmp_path):
    """A job named with a terminal escape, a bidirectional override, a carriage return and a ``<script>``
    shows in the page's tables and charts as ``printable`` shows it on a terminal, as text: from the
    daemon's snapshot (escaped there), and from one whose texts are raw (the page escapes on its own)."""
    import copy

    from reshape.joblink.protocol import printable
    from scheduler.observe.dashboard import Dashboard
    from scheduler.observe.dashboard_view import snapshot
    from tests.test_dashboard import EVIL, _state_with_evil_texts

    st, a, _ = _state_with_evil_texts()
    snap = snapshot(st, st.events, 4.0)
    raw = copy.deepcopy(snap)
    raw["running"][0].update(name=EVIL, hosts=[EVIL])
    raw["queue"][0]["name"] = raw["jobs"][str(a)]["name"] = EVIL
    raw["nodes"][0]["reason"] = raw["note"] = EVIL
    raw["decisions"].append({"t": 4.0, "job_id": a, "kind": "advise", "nprocs": 2, "detail": f"expand 2->3: {EVIL}"})
    want = printable(EVIL)
    cells = ("return {running: document.querySelector('#running tbody tr td:nth-child(2)').textContent,"
             " hosts: document.querySelector('#running tbody tr td:nth-child(7)').textContent,"
             " queue: document.querySelector('#queue tbody tr td:nth-child(2)').textContent,"
             " node: document.querySelector('#nodes tbody tr td:nth-child(5)').textContent,"
             " note: document.getElementById('note').textContent,"
             " legend: [...document.querySelectorAll('#alloc text')].map(e => e.textContent).join('|'),"
             " decision: document.querySelector('#decisions tbody tr td.reason').textContent,"
             " scripts: document.scripts.length, body: document.body.innerText}")
    d = Dashboard("127.0.0.1:0")
    try:
        d.start(str(tmp_path))
        with browser() as b:
            for which, s in (("the daemon's snapshot", snap), ("a raw snapshot", raw)):
                d.publish(s)
                b.get(d.url)
                _until(lambda: b.execute_script("return document.getElementById('updated').textContent") != "never",
                       15, "the page's first update")
                got = b.execute_script(cells)
                assert got["running"] == want and got["queue"] == want, (which, got)
                assert f"{a} {want} (running)" in got["legend"], (which, got["legend"])
                assert got["scripts"] == 1, (which, got)  # only the page's own: the name's <script> is text
                bad = {ch for ch in got["body"] if printable(ch) != ch} - {"\n", "\t"}  # (the layout's own)
                assert bad == set(), (which, bad)  # nothing on the page a terminal would take for a control
                if s is raw:
                    assert got["hosts"] == want and got["node"] == want and got["note"] == want, got
                    assert got["decision"] == want, got  # the newest decision's reason
    finally:
        d.close()
