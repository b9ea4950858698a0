"""The compose cluster for real: head + four compute nodes on a real Docker engine (marker ``cluster``).

``docker-compose.yml`` as shipped is built and brought up once for the
module (a base image from Debian packages when no registry is reachable,
``docker/make-base-image.sh``); the tests then run real MPI jobs across the
containers through the daemon on the head, kill a node, restart the head,
and finally take the cluster down. The tier skips, with one line saying why,
only where no Docker engine runs; ``.ci/run`` installs and starts one.

Tests run in file order and build on each other's cluster (not on each
other's jobs); each waits for the cluster to be idle before it starts.
``python -m pytest -m cluster -s`` shows the timings.
"""

from __future__ import annotations

import json
import os
import re
import time

import pytest

from scheduler.testing.compose import ComposeCluster, base_image, unavailable
from tests.helpers import NOTES, TIMINGS, expansion_times, repeated_undone_expansions, wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(900)]

NODES = ("node1", "node2", "node3", "node4")


@pytest.fixture(scope="module")
def cluster():
    why = unavailable()
    if why:
        pytest.skip(f"cluster tier: {why}")
    t0 = TIMINGS["start"] = time.monotonic()
    base, how = base_image()
    if base is None:
        pytest.skip(f"cluster tier: {how}")
    TIMINGS["base image"] = time.monotonic() - t0
    c = ComposeCluster(f"reshapet{os.getpid()}", base)
    try:
        c.down()  # a leftover of an interrupted run with the same name
        TIMINGS["build"] = c.build()
        TIMINGS["up"] = c.up()
        yield c
    finally:
        c.down()


def idle(c: ComposeCluster, timeout: float = 60) -> dict:
    """Wait until no job runs or waits and every node is up; returns the status."""
    def ready():
        st = c.status()
        ok = (not st["running"] and not st["queue"] and not st["waiting"]
              and all(n["state"] == "up" for n in st["nodes"]) and st["free_slots"] == 8)
        return st if ok else None

    return wait_for(ready, timeout, every=0.5)


def finished(c: ComposeCluster, jid: int, timeout: float) -> dict:
    return wait_for(lambda: (j := c.jobs()[jid])["state"] not in ("queued", "waiting", "running") and j,
                    timeout, every=0.5)


def run_shipped(c: ComposeCluster, path: str, timeout: float) -> tuple[int, dict, list[int]]:
    """Submit a shipped job file on an idle cluster and wait for its end: its id, its final record and the
    sizes it ran at (its time and sizes go to the tier's notes)."""
    idle(c)
    t0 = time.monotonic()
    jid = c.submit(path)
    job = finished(c, jid, timeout)
    name = os.path.basename(path)
    TIMINGS[name] = time.monotonic() - t0
    sizes = job["profile"]["history"]
    NOTES[f"{name} sizes"] = "->".join(map(str, sizes))
    return jid, job, sizes


def log(c: ComposeCluster, jid: int) -> str:
    return c.reshape("log", str(jid), "--tail", "0")


def gone(c: ComposeCluster, node: str, jid: int, timeout: float = 15) -> list[int]:
    """The job's processes still on ``node`` after waiting up to ``timeout`` s for them to exit."""
    end = time.monotonic() + timeout
    while (pids := c.job_pids(node, jid)) and time.monotonic() < end:
        time.sleep(0.5)
    return pids


def sha(text: str) -> str:
    m = re.search(r"sha256 ([0-9a-f]{16})", text)
    assert m, text[-2000:]
    return m.group(1)


def test_static_job_spans_two_nodes(cluster):
    c = cluster
    assert idle(c, 120)["daemon"]["auth"] == "curve"
    jid = c.submit("docker/jobs/hello.toml")
    job = finished(c, jid, 60)
    assert job["state"] == "done", (job, log(c, jid))
    ranks = dict(re.findall(r"rank (\d) on (\w+)", log(c, jid)))
    assert ranks == {"0": "node1", "1": "node1", "2": "node2", "3": "node2"}, log(c, jid)


def test_the_shipped_heat_job_grows_across_nodes_without_oscillating(cluster):
    c = cluster
    jid, job, sizes = run_shipped(c, "docker/jobs/heat.toml", 180)
    NOTES["daemon-only expansions (s)"] = ", ".join(
        expansion_times([e for e in c.history()["events"] if e["job_id"] == jid]))
    assert job["state"] == "done", (job, log(c, jid)[-3000:])
    assert max(sizes) >= 4, sizes  # it grew onto a second node
    assert repeated_undone_expansions(sizes) == [], sizes


@pytest.fixture(scope="module")
def grow_and_compete(cluster):
    """grow.toml alone grows 2 -> 4 -> 8 over all nodes; compete.toml arrives; grow shrinks to admit it."""
    c = cluster
    idle(c)
    seen: dict = {}
    a = c.submit("docker/jobs/grow.toml")
    st = wait_for(lambda: (s := c.status()) and any(r["job_id"] == a and r["nprocs"] == 8 and not r["pending"]
                                                  for r in s["running"]) and s, 60, every=0.3)
    seen["hosts_at_8"] = next(r["hosts"] for r in st["running"] if r["job_id"] == a)
    b = c.submit("docker/jobs/compete.toml")
    st = wait_for(lambda: (s := c.status()) and any(r["job_id"] == b for r in s["running"]) and s, 60, every=0.3)
    seen["a_at_b_start"] = next(r for r in st["running"] if r["job_id"] == a)
    seen["b_hosts"] = next(r["hosts"] for r in st["running"] if r["job_id"] == b)
    # the ranks grow retired on node3/node4 are gone (B's ranks there carry B's tag)
    seen["a_left_on"] = {n: gone(c, n, a) for n in ("node3", "node4")}
    seen["a"], seen["b"] = finished(c, a, 240), finished(c, b, 240)
    seen["a_log"], seen["b_log"] = log(c, a), log(c, b)
    seen["events"] = [e for e in c.history()["events"] if e["job_id"] in (a, b)]
    seen["ids"] = (a, b)
    return seen


def test_a_resizable_job_grows_from_one_node_onto_the_others(grow_and_compete):
    s = grow_and_compete
    assert s["a"]["profile"]["history"][:3] == [2, 4, 8], s["a"]["profile"]
    assert s["hosts_at_8"] == list(NODES)


def test_it_shrinks_back_its_remote_ranks_exit_and_its_result_matches_a_static_run(cluster, grow_and_compete):
    s = grow_and_compete
    a = s["ids"][0]
    shrinks = [e for e in s["events"] if e["job_id"] == a and e["kind"] == "shrink"]
    assert shrinks and shrinks[0]["detail"] == "8->4", s["events"]
    assert s["a_at_b_start"]["nprocs"] == 4 and s["a_at_b_start"]["hosts"] == ["node1", "node2"]
    assert s["a_left_on"] == {"node3": [], "node4": []}
    assert s["a"]["state"] == "done", s["a_log"][-3000:]
    # the same program run statically on one node (the head, no scheduler) gives the same field
    static = cluster.exec("head", "mpiexec -n 2 python examples/heat.py --n 256 --steps 40", timeout=120).stdout
    assert sha(s["a_log"]) == sha(static)


def test_two_resizable_jobs_compete_one_shrinks_to_admit_the_other(cluster, grow_and_compete):
    s = grow_and_compete
    a, b = s["ids"]
    t = {(e["job_id"], e["kind"]): e["t"] for e in s["events"]}
    assert t[(a, "shrink")] <= t[(b, "start")] < t[(a, "end")]  # admitted by A's shrink, while A ran
    assert sorted(s["b_hosts"]) == ["node3", "node4"]
    assert s["b"]["state"] == "done", s["b_log"][-3000:]
    static = cluster.exec("head", "mpiexec -n 4 python examples/heat.py --n 256 --steps 16", timeout=120).stdout
    assert sha(s["b_log"]) == sha(static)


FAULTY = """
name = "{name}"
command = ["python", "examples/heat.py", "--n", "256", "--steps", "30", "--work", "1.2"]
nprocs = 2
max_procs = 8
divides = 256
resize_timeout = {timeout}
[env]
RESHAPE_FAULT = "{fault}"
"""


@pytest.mark.parametrize("fault", ["join:spawned:kill", "transfer:spawned:kill", "transfer:spawned:hang"],
                         ids=["a new rank on another node dies before joining",
                              "a rank on another node killed mid-transfer", "a rank on another node hangs"])
def test_an_injected_failure_during_a_cross_node_expansion_ends_the_job_and_frees_its_slots(cluster, fault):
    """The job's runtime sees the failure (or its resize timeout, 6 s, ends a hang) and ends the job with the
    reason; the daemon's own bound on an unconfirmed resize (its timeout plus 5 s) is never what ends it. How
    long it takes goes to the tier's timings (``-s``)."""
    c = cluster
    idle(c)
    jid = c.submit_text("faulty", FAULTY.format(name="faulty", timeout=6, fault=fault))
    job = finished(c, jid, 90)
    text = log(c, jid)
    m = re.search(r"fault injected: \S+ at ([0-9.]+) \(rank (\d+)", text)
    assert m, text[-3000:]
    assert job["state"] == "failed" and "expand 2->4" in job["error"], (job, text[-4000:])
    end = next(e["t"] for e in c.history()["events"] if e["job_id"] == jid and e["kind"] == "end")
    delay = end - float(m.group(1))
    TIMINGS[f"{fault} -> slots freed"] = delay
    print(f"\n{fault}: {delay:.2f} s from the injected failure to the freed slots ({job['error']})")
    assert "not confirmed within" not in job["error"], job["error"]  # the job's runtime ended it
    st = c.status()
    assert st["free_slots"] == 8 and not st["running"]
    assert next(r for r in st["ended"] if r["job_id"] == jid)["error"] == job["error"]
    for n in ("head", *NODES):
        assert c.job_pids(n, jid) == [], n


def test_an_expansion_onto_a_node_ssh_cannot_reach_is_refused_and_the_job_keeps_its_size_and_data(cluster):
    """The other side of the rule across nodes: the launcher probe fails before anything starts."""
    c = cluster
    idle(c)
    c.exec("node2", "pkill -x sshd")
    try:
        jid = c.submit_text("stays", 'name = "stays"\nnprocs = 2\nmax_procs = 4\ndivides = 256\n'
                            'command = ["python", "examples/heat.py", "--n", "256", "--steps", "8", "--work", "1.0"]\n')
        job = finished(c, jid, 120)
    finally:
        c.exec("node2", "/usr/sbin/sshd -e")
    refused = [e["detail"] for e in c.history()["events"] if e["job_id"] == jid and e["kind"] == "resize_failed"]
    assert job["state"] == "done" and job["profile"]["history"] == [2], job
    assert refused and all("'node2' is not reachable" in d for d in refused), refused
    static = c.exec("head", "mpiexec -n 2 python examples/heat.py --n 256 --steps 8", timeout=120).stdout
    assert sha(log(c, jid)) == sha(static)


HEAT = ["python", "examples/heat.py", "--n", "256"]


def reference(c: ComposeCluster, steps: int) -> str:
    """The field a failure-free run of heat gives (on the head, no scheduler; sleep-free)."""
    return sha(c.exec("head", f"mpiexec -n 2 {' '.join(HEAT)} --steps {steps}", timeout=120).stdout)


def checkpointed(c: ComposeCluster, jid: int, at_least: int = 10, timeout: float = 60) -> int:
    """Wait until job ``jid`` has a committed checkpoint of iteration ``at_least`` or later (on the volume
    every node mounts, the compose head's ``--checkpoint-root``); returns that iteration."""
    def newest():
        out = c.exec("head", f"ls /cluster/checkpoints/job-{jid} 2>/dev/null; true").stdout.split()
        done = [int(n[5:]) for n in out if n.startswith("ckpt-") and not n.endswith(".part")]
        return max(done) if done and max(done) >= at_least else None

    return wait_for(newest, timeout, every=0.3)


def test_a_killed_node_is_marked_down_its_job_restarts_from_its_checkpoint_the_other_runs_on(cluster):
    """``docker-compose kill node2`` under a job with checkpoints: the node is taken out, the job is
    relaunched on the nodes left from its last checkpoint and ends done, bit-identical to a run that
    never failed; a job on another node is not touched."""
    c = cluster
    idle(c)
    steps = 400  # long enough to be still running when the test, polling through docker exec, sees the relaunch
    on12 = c.submit_text("victim", 'name = "victim"\nnprocs = 4\nresizable = false\ncheckpoint = "every:10"\n'
                         f'command = {json.dumps([*HEAT, "--steps", str(steps), "--work", "0.4"])}\n')
    on3 = c.submit_text("bystander", 'name = "bystander"\nnprocs = 2\nresizable = false\n'
                        'command = ["python", "examples/heat.py", "--n", "256", "--steps", "40", "--work", "0.6"]\n')
    st = wait_for(lambda: (s := c.status()) and len(s["running"]) == 2 and s, 60, every=0.3)
    hosts = {r["job_id"]: r["hosts"] for r in st["running"]}
    assert hosts == {on12: ["node1", "node2"], on3: ["node3"]}
    at = checkpointed(c, on12)
    t_kill = time.time()
    c.cmd("kill", "node2")
    down = wait_for(lambda: next((n for n in c.status()["nodes"] if n["host"] == "node2" and n["state"] == "down"),
                                 None), 30, every=0.5)
    t_down = next(e["t"] for e in reversed(c.history()["node_events"]) if e["host"] == "node2"
                  and e["kind"] == "down")
    TIMINGS["node2 killed -> marked down"] = t_down - t_kill
    assert down["reason"], down
    relaunched = wait_for(lambda: next((r for r in c.status()["running"] if r["job_id"] == on12
                                        and r["restarts"] >= 1), None), 60, every=0.5)
    TIMINGS["node2 killed -> job running again (seen by the test)"] = time.time() - t_kill
    ev = [e for e in c.history()["events"] if e["job_id"] == on12]
    restart = next(e for e in ev if e["kind"] == "restart")
    TIMINGS["node2 killed -> job relaunched (daemon's events)"] = next(
        e["t"] for e in ev if e["kind"] == "start" and e["t"] >= restart["t"]) - t_kill
    NOTES["node kill cause"] = restart["detail"]
    assert "node2" not in relaunched["hosts"], relaunched
    victim = finished(c, on12, 180)
    assert victim["state"] == "done" and victim["restarts"] == 1, victim
    assert victim["resumed_at"] >= at and victim["iterations_lost"] <= 10 + 10, victim  # interval + in flight
    assert sha(log(c, on12)) == reference(c, steps)
    assert finished(c, on3, 120)["state"] == "done"
    NOTES["node kill"] = (f"resumed at {victim['resumed_at']}, iterations lost {victim['iterations_lost']}, "
                          f"hosts after {relaunched['hosts']}")
    c.cmd("start", "node2")  # its monitor registers again: node2 rejoins
    c.wait_healthy(90)
    idle(c, 60)
    for n in ("node1", "node3", "node4"):
        assert c.job_pids(n, on12) == []


def mpiexec_pid(c: ComposeCluster, node: str, jid: int) -> int | None:
    """The pid of job ``jid``'s ``mpiexec`` on ``node`` (its first node: its monitor runs it), if any."""
    out = c.exec(node, f"for p in $(grep -zlx 'RESHAPE_JOB_TAG=/var/lib/reshape#{jid}' /proc/[0-9]*/environ "
                       "2>/dev/null | cut -d/ -f3); do case $(cat /proc/$p/comm) in mpiexec*) echo $p;; esac; done; "
                       "true").stdout.split()
    return int(out[0]) if out else None


def test_restarting_the_head_leaves_its_job_running_and_the_restarted_daemon_adopts_it(cluster):
    """``docker-compose restart head`` mid-job, with the daemon's default settings. The job's mpiexec runs on its
    first node (its monitor started it: the default for a pool of other hosts, not an option of the compose head),
    so it runs on while the head is away; the restarted daemon re-adopts it from its journal and the
    monitor's reports, its rank 0 reconnects, and it ends done with no restart (it has checkpoints, so a
    relaunch would be possible: none is needed), no iteration lost, bit-identical to a run that never failed.
    The queue, the history and the profiles survive in the journal."""
    c = cluster
    idle(c)
    banner = c.cmd("logs", "--no-color", "head").stdout
    assert "jobs' mpiexec on first-node (the pool has hosts other than this machine)" in banner, banner[-2000:]
    steps = 300  # about 75 s of iterations: the head restarts well before the end, even on a loaded machine
    runner = c.submit_text("runner", 'name = "runner"\nnprocs = 2\nresizable = false\ncheckpoint = "every:10"\n'
                           f'command = {json.dumps([*HEAT, "--steps", str(steps), "--work", "0.25"])}\n')
    big = c.submit_text("big", 'name = "big"\nnprocs = 8\nresizable = false\n'
                        'command = ["python", "examples/heat.py", "--steps", "5"]\n')
    later = c.submit_text("later", 'name = "later"\nnprocs = 2\narrival_delay = 3600\n'
                          'command = ["python", "examples/heat.py"]\n')
    wait_for(lambda: any(r["job_id"] == runner and r["iterations"] >= 5 for r in c.status()["running"]), 60,
             every=0.3)
    try:
        adopted(c, runner, big, later, steps)
    finally:
        cancel(c, runner, big, later)


def cancel(c: ComposeCluster, *ids: int) -> None:
    """End these jobs if they have not (a test that failed midway leaves the cluster idle for the next)."""
    for jid in ids:
        c.exec("head", f"reshape cancel {jid} >/dev/null 2>&1; true")


def adopted(c: ComposeCluster, runner: int, big: int, later: int, steps: int) -> None:
    before = c.jobs()
    assert (before[runner]["state"], before[big]["state"], before[later]["state"]) == ("running", "queued", "waiting")
    assert before[runner]["runner"] == "node1", before[runner]
    ended_before = {i: (j["state"], j["profile"], j["error"]) for i, j in before.items()
                    if j["state"] not in ("running", "queued", "waiting")}
    assert ended_before  # the history of the earlier tests (at least the static job's)
    pid = mpiexec_pid(c, "node1", runner)
    assert pid and c.job_pids("head", runner) == []  # nothing of the job on the head
    t0 = time.monotonic()
    c.cmd("restart", "head", timeout=120)
    t_restarted = time.monotonic() - t0
    c.wait_healthy(120, ("head",))
    t_healthy = time.monotonic() - t0
    row = wait_for(lambda: next((r for r in c.status()["running"] if r["job_id"] == runner and r["connected"]),
                                None), 60, every=0.2)
    t_reporting = time.monotonic() - t0
    TIMINGS["head restart (compose restart)"] = t_restarted
    TIMINGS["head restart -> daemon healthy"] = t_healthy
    TIMINGS["head restart -> job reporting again"] = t_reporting
    assert mpiexec_pid(c, "node1", runner) == pid  # the same mpiexec: nothing was relaunched
    after = c.jobs()
    assert {i: (j["state"], j["profile"], j["error"]) for i, j in after.items() if i in ended_before} == ended_before
    assert after[later]["state"] == "waiting"
    job = finished(c, runner, 240)
    assert job["state"] == "done" and job["restarts"] == 0 and job["failures"] == [], job
    assert job["iterations_lost"] == 0 and job["exit_code"] == 0, job
    text = log(c, runner)
    assert text.count("sha256") == 1, text[-2000:]
    assert sha(text) == reference(c, steps)
    assert finished(c, big, 120)["state"] == "done"
    NOTES["head restart"] = (f"job reporting again {t_reporting:.1f} s after the restart began (iteration "
                             f"{row['iterations']}), no restart, 0 iterations lost")
    for n in ("head", *NODES):
        assert c.job_pids(n, runner) == [], n
    c.reshape("cancel", str(later))
    assert idle(c, 60)["free_slots"] == 8


def test_a_head_restart_during_which_the_jobs_mpiexec_dies_resumes_it_from_its_checkpoint(cluster):
    """The head is down and the job's mpiexec dies meanwhile (``kill -9`` on its node): the monitor keeps the
    exit status (137) until the restarted daemon takes it, which classifies it as a loss (as for mpiexec
    killed under a running daemon) and relaunches the job from its last checkpoint; it ends done,
    bit-identical to a run that never failed."""
    c = cluster
    idle(c)
    steps = 300
    jid = c.submit_text("phoenix", 'name = "phoenix"\nnprocs = 2\nresizable = false\ncheckpoint = "every:10"\n'
                        f'command = {json.dumps([*HEAT, "--steps", str(steps), "--work", "0.2"])}\n')
    try:
        resumed(c, jid, steps)
    finally:
        cancel(c, jid)


def resumed(c: ComposeCluster, jid: int, steps: int) -> None:
    wait_for(lambda: any(r["job_id"] == jid for r in c.status()["running"]), 60, every=0.3)
    at = checkpointed(c, jid)
    pid = mpiexec_pid(c, "node1", jid)
    assert pid
    c.cmd("stop", "-t", "10", "head", timeout=120)
    try:
        c.exec("node1", f"kill -9 {pid}")
        wait_for(lambda: mpiexec_pid(c, "node1", jid) is None, 15)
    finally:
        c.cmd("start", "head", timeout=120)
    c.wait_healthy(120, ("head",))
    job = finished(c, jid, 240)
    assert job["state"] == "done" and job["restarts"] == 1, job
    assert "exit code 137" in job["failures"][0], job
    assert job["resumed_at"] >= at, job
    assert sha(log(c, jid)) == reference(c, steps)
    NOTES["head restart, mpiexec killed"] = (f"resumed at {job['resumed_at']}, iterations lost "
                                             f"{job['iterations_lost']}")
    for n in ("head", *NODES):
        assert c.job_pids(n, jid) == [], n
    assert idle(c, 60)["free_slots"] == 8


def test_a_job_on_open_mpi_grows_across_nodes_and_gives_mpichs_bits(cluster):
    """docker/jobs/heat-openmpi.toml: PRRTE starts the ranks over ssh (with daemons on every pool node,
    where the job may grow), a resize spawns onto another node, and the field is MPICH's to the bit; no
    PRRTE daemon or session directory stays behind on any node."""
    c = cluster
    jid, job, sizes = run_shipped(c, "docker/jobs/heat-openmpi.toml", 240)
    text = log(c, jid)
    assert job["state"] == "done", (job, text[-3000:])
    assert max(sizes) >= 4, sizes  # it grew onto a second node
    # and no further while its spawned ranks run (Open MPI 5.0 cannot connect a second spawn over TCP)
    assert max(sizes) == 4 and job["sizes"] == [1, 2, 4], (sizes, job["sizes"])
    static = c.exec("head", "mpiexec -n 2 python examples/heat.py --n 512 --steps 60", timeout=120).stdout
    assert sha(text) == sha(static)
    for n in ("head", *NODES):
        left = c.exec(n, "pgrep -a prted; ls -d /tmp/ompi.* /tmp/prte.* 2>/dev/null; true").stdout.strip()
        assert left == "", (n, left)


def test_compose_down_leaves_nothing_running(cluster):
    c = cluster
    t0 = time.monotonic()
    c.down()
    TIMINGS["down"] = time.monotonic() - t0
    TIMINGS["tier"] = time.monotonic() - TIMINGS.pop("start")
    assert c.leftovers() == {"containers": [], "networks": [], "volumes": []}
