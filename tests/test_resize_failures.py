"""A failed resize never strands a job: injected failures against a real daemon and real MPI jobs.

Each failure (``RESHAPE_FAULT``, ``reshape/faults.py``) happens for real in a
real rank: killed, exiting, hanging or raising during an expansion or a
shrink. Every case must end in a defined state: the job ``failed`` with the
resize and the reason in its error (journal, ``status``'s recently ended
jobs, ``history``), its slots back in the pool, none of its processes left,
and the daemon still serving (a queued job starts), ended by the path that
should end it: a dead rank by the failure itself (Hydra tears the job down),
a hang by the runtime's watchdog at the job's ``resize_timeout``, a job that
cannot even report by the daemon at ``resize_timeout`` + 5 s + 10% (how long
each takes is measured by ``benchmarks.recovery``, not bounded here). An
expansion the runtime can refuse before anything starts (new ranks cannot run
a ``python -c`` program) is refused, and the job runs on at its size.
"""

from __future__ import annotations

import re
import time

import pytest

from scheduler.daemon.startup import job_pids, job_tag
from tests.helpers import wait_for

pytestmark = pytest.mark.procs

TIMEOUT = 4.0  # the jobs' resize_timeout in these tests


def resizable(fault: str | None = None, iters: int = 10, work: float = 1.2, **kw) -> dict:
    """tests/jobs/sweetspot_mpi.py: t(p) = work/p + 0.05 p, so 2 -> 4 helps; data checked after every resize."""
    job = {"name": "victim", "command": ["python", "tests/jobs/sweetspot_mpi.py", "--iters", str(iters),
                                         "--work", str(work), "--overhead", "0.05"],
           "nprocs": 2, "sizes": [2, 4], "resize_timeout": TIMEOUT, **kw}
    if fault:
        job["env"] = {"RESHAPE_FAULT": fault}
    return job


def injected_at(d, jid: int) -> float:
    text = d.req("log", {"job_id": jid, "tail": 0})["text"]
    m = re.search(r"fault injected: \S+ at ([0-9.]+)", text)
    assert m, f"no injection in the job's log:\n{text[-3000:]}"
    return float(m.group(1))


def advised_at(d, jid: int, action: str) -> float:
    """When the daemon advised the job's first ``action`` (the runtime arms the resize deadline on receiving it)."""
    return next(e["t"] for e in d.req("history")["events"]
                if e["job_id"] == jid and e["kind"] == "advise" and e["detail"].startswith(action))


def ended(d, jid: int, timeout: float) -> dict:
    return wait_for(lambda: (j := d.job(jid))["state"] not in ("queued", "running", "waiting") and j, timeout)


def end_event(d, jid: int) -> dict:
    return next(e for e in d.req("history")["events"] if e["job_id"] == jid and e["kind"] == "end")


def assert_settled(d, jid: int, slots: int) -> dict:
    """The failed job holds nothing and is reported with its reason everywhere."""
    st = d.req("status")
    assert st["free_slots"] == slots and not st["running"], st
    assert job_pids(job_tag(d.state_dir, jid)) == []
    row = next(r for r in st["ended"] if r["job_id"] == jid)
    job = d.job(jid)
    assert row["state"] == job["state"] == "failed"
    assert row["error"] == job["error"] and job["error"]
    return job


CRASHES = {
    "join:spawned:kill": "a new rank dies before joining",
    "transfer:spawned:kill": "a new rank is killed mid-transfer",
    "transfer:old:kill": "an original rank is killed mid-transfer",
    "transfer:old:raise": "a redistribution error on one rank",
}


@pytest.mark.parametrize("fault", list(CRASHES), ids=list(CRASHES.values()))
def test_a_crash_during_an_expansion_fails_the_job_and_frees_its_slots_at_once(daemon, fault):
    d = daemon(4)
    jid = d.submit(**resizable(fault))
    job = ended(d, jid, 60)
    assert "expand 2->4" in job["error"], job["error"]
    if fault.endswith("raise"):  # the rank that raised reported why before the abort
        assert "injected fault" in job["error"] and "redistributing" in job["error"], job["error"]
    assert_settled(d, jid, 4)
    # ended by the failure itself, seen at once: neither the job's resize timeout nor the daemon's bound on an
    # unconfirmed resize (how long it takes is measured by benchmarks.recovery)
    assert "did not complete within" not in job["error"] and "not confirmed within" not in job["error"], job
    assert injected_at(d, jid) <= end_event(d, jid)["t"]


# the first rank to report names the step it was in: an original rank or the stuck new one
HANGS = {
    "join:spawned:hang": ("a new rank never joins", r"expand 2->4 .*stuck (a new rank )?merging with the"),
    "transfer:spawned:hang": ("a new rank stops mid-transfer",
                              r"expand 2->4 .*stuck (redistributing|a new rank receiving) the arrays"),
}


@pytest.mark.parametrize("fault", list(HANGS), ids=[v[0] for v in HANGS.values()])
def test_a_resize_that_hangs_is_aborted_at_its_deadline_with_the_reason(daemon, fault):
    d = daemon(4)
    jid = d.submit(**resizable(fault))
    job = ended(d, jid, 60)
    assert f"did not complete within {TIMEOUT:g} s" in job["error"], job["error"]
    assert re.search(HANGS[fault][1], job["error"]), job["error"]
    assert_settled(d, jid, 4)
    # the job's own watchdog ended it (above), not the daemon's bound on an unconfirmed resize
    assert "not confirmed within" not in job["error"], job["error"]
    assert advised_at(d, jid, "expand") < injected_at(d, jid) < end_event(d, jid)["t"]


def test_a_rank_dying_as_it_retires_in_a_shrink_fails_the_job_and_the_queued_job_starts(daemon):
    d = daemon(4)
    jid = d.submit(**resizable("retire:spawned:exit", iters=30))
    wait_for(lambda: d.job(jid)["nprocs"] == 4, 30)  # grew 2 -> 4
    waiting = d.submit(name="admitted", command=["python", "-c", "print('ran')"], nprocs=2, resizable=False)
    job = ended(d, jid, 60)  # asked to shrink 4 -> 2 to admit it; the retiring rank dies
    assert "shrink 4->2" in job["error"], job["error"]
    assert ended(d, waiting, 30)["state"] == "done"
    assert_settled(d, jid, 4)


def test_the_daemon_ends_a_job_stuck_in_a_resize_that_never_reports(daemon):
    """No watchdog in the job (an emulated job that hangs in its first resize): the daemon's bound."""
    d = daemon(4)
    jid = d.submit(name="stuck", command=["python", "-m", "apps.emujob", "--work", "0.4",
                                          "--iterations", "20", "--hang-in-resize"],
                   nprocs=2, launch="single", resize_timeout=1.0)
    advised = wait_for(lambda: next((e["t"] for e in d.req("history")["events"]
                                     if e["job_id"] == jid and e["kind"] == "advise"), None), 30)
    job = ended(d, jid, 30)
    assert job["error"].startswith("expand 2->") and "not confirmed within 6.1 s" in job["error"], job["error"]
    assert advised < end_event(d, jid)["t"]
    assert_settled(d, jid, 4)


def test_a_refused_resize_keeps_the_job_running_with_its_data(daemon, tmp_path):
    """The other side of the rule: nothing started yet, so nothing is lost (a host that does not resolve)."""
    pool = tmp_path / "pool.toml"
    pool.write_text('[[node]]\nhost = "localhost"\nslots = 2\n\n[[node]]\nhost = "nosuchhost.invalid"\nslots = 2\n')
    d = daemon(4, extra=("--config", str(pool)))
    jid = d.submit(**resizable(iters=6))
    job = ended(d, jid, 60)
    assert job["state"] == "done", job
    assert job["profile"]["history"] == [2]
    kinds = [e for e in d.req("history")["events"] if e["job_id"] == jid and e["kind"] == "resize_failed"]
    assert kinds and "nosuchhost.invalid" in kinds[0]["detail"], kinds
    assert "data ok" in d.req("log", {"job_id": jid})["text"]
    time.sleep(0.2)
    assert d.req("status")["free_slots"] == 4


INLINE = """
import time
import reshape
rt = reshape.init()
x = rt.register_array("x", (64,), layout="rows", init=lambda i: i * 1.0)
def step(it):
    time.sleep(0.3 / rt.size)
    rt.log(0.3 / rt.size + 0.05 * rt.size)
rt.run(step, 6)
whole = x.gather()
assert rt.rank != 0 or list(whole) == [float(i) for i in range(64)]
print("sizes", [rt.history[0]] + [r.new for r in rt.results if r.action in ("expand", "shrink")], flush=True)
rt.finish()
"""


def test_an_expansion_of_a_python_c_program_is_refused_with_the_reason_and_the_job_runs_on(daemon):
    """New ranks run the program again from its file or module; ``python -c CODE`` has neither. The expansion
    the daemon advises into idle slots is refused before anything is spawned (one line saying why), and the
    job carries on at its size to the end (before, a spawned rank failed with a traceback and the job waited
    for it until its resize timeout, then failed)."""
    d = daemon(4)
    jid = d.submit(name="inline", command=["python", "-c", INLINE], nprocs=2, sizes=[2, 4], resize_timeout=20)
    job = ended(d, jid, 120)
    text = d.req("log", {"job_id": jid, "tail": 0})["text"]
    assert job["state"] == "done" and job["profile"]["history"] == [2], (job, text[-3000:])
    refused = [e["detail"] for e in d.req("history")["events"] if e["job_id"] == jid and e["kind"] == "resize_failed"]
    why = "new ranks cannot start this program: it runs from 'python -c'"
    assert refused and all(why in r for r in refused), refused
    lines = [ln for ln in text.splitlines() if "refused" in ln]
    assert lines and all(ln.startswith("[reshape] resize 2 -> 4 refused: " + why) for ln in lines), text[-3000:]
    assert "Traceback" not in text and "sizes [2]" in text, text[-3000:]
