"""reshape with a real Slurm 22.05: slurmctld, slurmd and munge in the compose cluster (marker ``cluster``).

The Slurm overlay (``docker/slurm-compose.yml``) runs slurmctld on the head
and slurmd on node1..node16 (2 CPUs each); partition ``batch`` (the default)
has all sixteen, ``small`` node1..node4. The reshape tests use Slurm as a user
would, from the head, in ``small``: ``salloc`` with a daemon inside the
allocation, and ``reshape submit --slurm`` with a job that grows onto nodes
Slurm grants (expander jobs), gives nodes back to a waiting ``sbatch`` job,
keeps its size when the partition is full, and ends with ``scancel`` leaving
nothing behind. The site tests check the sixteen nodes and what Slurm itself
does in ``batch``: backfill's predicted start times for rigid jobs with time
limits, shrinking a running job with ``scontrol update``, and an expander
whose ``--deadline`` keeps it from outliving its parent. One cluster for all
of them. Skips, with one line, only where no Docker engine runs.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import shlex
import time
from datetime import datetime

import hostlist
import pytest

from scheduler.rm.slurm.view import resized
from scheduler.testing.compose import ComposeCluster, base_image, unavailable
from scheduler.testing.slurm_site import (
    ALL,
    FILES,
    SITE,
    SITE_STATE,
    by_slurm,
    controller,
    evidence,
    node_loss,
    quiet_site,
    reference,
    scontrol_job,
    sh,
    site,
    squeue,
    start_controller,
)
from tests.helpers import NOTES, TIMINGS, expansion_times, wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(900)]

NODES = ("node1", "node2", "node3", "node4")  # partition small, where the reshape tests run
SMALL = "small"


@pytest.fixture(scope="module")
def slurm():
    why = unavailable()
    if why:
        pytest.skip(f"cluster tier: {why}")
    base, how = base_image()
    if base is None:
        pytest.skip(f"cluster tier: {how}")
    c = ComposeCluster(f"reshapes{os.getpid()}", base, FILES)
    try:
        c.down()
        TIMINGS["slurm build"] = c.build()
        TIMINGS[f"slurm up ({len(ALL)} nodes idle)"] = c.up()
        yield c
    finally:
        c.down()


def status(c: ComposeCluster, sid: str) -> dict:
    return json.loads(sh(c, f"reshape status --json --slurm-job {sid}"))


def quiet(c: ComposeCluster, timeout: float = 60) -> None:
    """No Slurm job left and every node of partition small idle."""
    wait_for(lambda: not squeue(c) and sh(c, f"sinfo -h -p {SMALL} -o '%T %D'").split() == ["idle", "4"],
             timeout, every=0.5)


def leftovers(c: ComposeCluster) -> dict[str, str]:
    """Application processes (heat.py ranks, Hydra proxies) still running on any node."""
    out = {}
    for n in ("head", *NODES):
        r = c.exec(n, "pgrep -af '[h]eat.py|[h]ydra_pmi_proxy' || true").stdout.strip()
        if r:
            out[n] = r
    return out


def submit_slurm(c: ComposeCluster, path: str) -> str:
    return json.loads(sh(c, f"reshape submit --slurm --json --sbatch=--partition={SMALL} {path}"))["slurm_job_ids"][0]


def test_a_daemon_inside_salloc_takes_the_allocation_as_its_pool(slurm):
    c = slurm
    quiet(c, 120)
    job = ('name = "heat-salloc"\ncommand = ["python", "examples/heat.py", "--n", "128", "--steps", "14", '
           '"--work", "1.2"]\nnprocs = 2\nmax_procs = 4\ndivides = 128\n')
    c.exec("head", "cat > /tmp/salloc.toml", input=job)
    script = r"""
set -e
reshape daemon --endpoint tcp://0.0.0.0:5600 --state-dir /tmp/salloc-state > /tmp/salloc-daemon.log 2>&1 &
d=$!
until reshape status --endpoint tcp://head:5600 >/dev/null 2>&1; do sleep 0.2; done
reshape submit --endpoint tcp://head:5600 /tmp/salloc.toml
while reshape status --json --endpoint tcp://head:5600 \
      | python -c "import json,sys; s=json.load(sys.stdin); sys.exit(0 if s['running']+s['queue'] else 1)"; do
    sleep 0.5
done
python -c "import json; from reshape.joblink.client import request as r; from reshape.joblink.protocol import History; \
print(json.dumps(r('tcp://head:5600', History()).body))"
reshape stop --endpoint tcp://head:5600
wait $d
"""
    c.exec("head", "cat > /tmp/salloc.sh", input=script)
    out = sh(c, f"salloc -p {SMALL} -N 2 sh /tmp/salloc.sh 2>/dev/null", timeout=180)
    banner = sh(c, "cat /tmp/salloc-daemon.log")
    assert "4 slots" in banner and re.search(r"pool from Slurm allocation \d+; launcher slurm", banner), banner
    hist = json.loads(out[out.index("{"):out.rindex("}") + 1])
    (j,) = hist["jobs"]
    assert j["state"] == "done" and 4 in j["profile"]["history"], j
    assert {e["detail"].split(":")[0] for e in hist["events"] if e["kind"] == "advise"} >= {"expand 2->4"}
    assert not leftovers(c)


def test_a_job_grows_onto_nodes_slurm_grants_and_gives_them_back_to_a_waiting_job(slurm):
    c = slurm
    quiet(c, 120)
    t0 = time.monotonic()
    sid = submit_slurm(c, "docker/jobs/slurm.toml")
    st = wait_for(lambda: (s := status_or_none(c, sid)) and any(j["nprocs"] == 8 for j in s["running"]) and s,
                  120, every=0.5)
    TIMINGS["slurm 2->8 via expanders"] = time.monotonic() - t0
    grants = [float(m) for n in st["nodes"] for m in re.findall(r"in ([\d.]+) s", n.get("reason") or "")]
    NOTES["slurm grant waits (s)"] = ",".join(f"{g:.1f}" for g in grants)
    # Slurm and reshape agree: the job's hosts are the nodes of its allocation and its expander jobs
    (run,) = st["running"]
    ours = [q for q in squeue(c) if q["id"] == sid or q["name"] == f"reshape-expand-{sid}"]
    assert all(q["state"] == "RUNNING" for q in ours), ours
    assert sorted({h for q in ours for h in q["hosts"]}) == sorted(set(run["hosts"])) == list(NODES), (ours, run)
    assert any(q["name"].startswith("reshape-expand-") for q in ours)

    # a plain sbatch job waits for two nodes: the job shrinks off two and Slurm starts it there
    t1 = time.monotonic()
    other = sh(c, f"sbatch --parsable -p {SMALL} -N 2 --job-name=other --wrap 'hostname; sleep 4'").strip()
    started = wait_for(lambda: next((q for q in squeue(c) if q["id"] == other and q["state"] == "RUNNING"),
                                    None), 90, every=0.2)
    TIMINGS["slurm waiting job started on released nodes"] = time.monotonic() - t1
    st = status(c, sid)
    (run,) = st["running"]
    assert not set(started["hosts"]) & set(run["hosts"]), (started, run)
    assert run["nprocs"] <= 4
    released = [n for n in st["nodes"] if n["host"] in started["hosts"]]
    assert all(n["state"] == "down" and "released to Slurm" in n["reason"] for n in released), released

    endpoint = sh(c, f"python -c 'from scheduler.cli.slurm import daemon_of; print(daemon_of({sid}))'").strip()
    hist = json.loads(sh(c, "python -c " + shlex.quote(
        f"import json; from reshape.joblink.client import request as r; from reshape.joblink.protocol import History; "
        f"print(json.dumps(r('{endpoint}', History()).body))")))
    NOTES["slurm expansions (s)"] = ", ".join(expansion_times(hist["events"]))

    # scancel ends every rank and every expander job
    t2 = time.monotonic()
    sh(c, f"scancel {sid}")
    wait_for(lambda: not [q for q in squeue(c) if q["id"] == sid or q["name"] == f"reshape-expand-{sid}"],
             60, every=0.5)
    wait_for(lambda: not leftovers(c), 30, every=0.5)
    TIMINGS["slurm scancel -> all gone"] = time.monotonic() - t2


def status_or_none(c: ComposeCluster, sid: str) -> dict | None:
    r = c.exec("head", f"reshape status --json --slurm-job {sid}", check=False)
    return json.loads(r.stdout) if r.returncode == 0 else None


def test_when_slurm_does_not_start_the_expander_it_is_cancelled_and_the_job_keeps_its_size(slurm):
    """Idle nodes, but Slurm starts nothing on them: node2-4 are reserved from
    five minutes on, so no job without an end before then may start there (the expander has no
    time limit). The job starts on node1; the expander pends, is cancelled after the grant
    timeout (10 s), and the job runs on at 2. (The reservation is made before the job is
    submitted: setting the partition DOWN after the job starts raced with the first expander.)"""
    c = slurm
    quiet(c, 120)
    sh(c, "scontrol create reservation ReservationName=later StartTime=now+300 Duration=10 "
          "Nodes=node[2-4] Users=root")
    sid = None
    try:
        sid = submit_slurm(c, "docker/jobs/slurm.toml")
        pend = wait_for(lambda: next((q for q in squeue(c) if q["name"] == f"reshape-expand-{sid}"), None),
                        60, every=0.3)
        assert pend["state"] == "PENDING", pend
        assert [q["hosts"] for q in squeue(c) if q["id"] == sid] == [["node1"]]
        t0 = time.monotonic()
        wait_for(lambda: not [q for q in squeue(c) if q["id"] == pend["id"]], 30, every=0.3)
        NOTES["slurm expander not started -> cancelled (s)"] = f"{time.monotonic() - t0:.1f}"
        st = status(c, sid)
        (run,) = st["running"]
        assert run["nprocs"] == 2 and not run["pending"], run
        assert any("granted no node" in n for n in st["daemon"]["rm"]["notes"]), st["daemon"]
    finally:
        sh(c, "scontrol delete ReservationName=later" + (f"; scancel {sid}" if sid else ""))
    wait_for(lambda: not squeue(c) and not leftovers(c), 60, every=0.5)


def test_on_a_full_cluster_slurm_grants_nothing_and_the_job_keeps_its_size(slurm):
    c = slurm
    quiet(c, 120)
    blocker = sh(c, f"sbatch --parsable -p {SMALL} -N 3 --job-name=blocker --wrap 'sleep 300'").strip()
    try:
        wait_for(lambda: any(q["id"] == blocker and q["state"] == "RUNNING" for q in squeue(c)), 30, every=0.3)
        sid = submit_slurm(c, "docker/jobs/slurm.toml")
        wait_for(lambda: (s := status_or_none(c, sid)) and s["running"] and s["running"][0]["iterations"] >= 8,
                 90, every=0.5)
        (run,) = status(c, sid)["running"]
        assert run["nprocs"] == 2 and not run["pending"], run
        assert not [q for q in squeue(c) if q["name"] == f"reshape-expand-{sid}"]
    finally:
        sh(c, f"scancel {blocker}; scancel --name=heat-slurm")
    wait_for(lambda: not squeue(c) and not leftovers(c), 60, every=0.5)


# ---------------------------------------------------------------------- the site: 16 nodes, Slurm's own scheduling
# What a controller beside Slurm reads about pending jobs (priority, time limit, predicted start, reason).
PENDING_FORMAT = "%i|%j|%T|%u|%D|%r|%S|%Q|%l|%P"


def when(text: str) -> datetime | None:
    """A Slurm time (``2026-11-26T08:32:35``, the head's clock) or None (``N/A``, ``Unknown``, ``None``...)."""
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        return None


def start_times(c: ComposeCluster) -> dict[str, datetime]:
    """Pending jobs with a start time predicted by Slurm, from plain ``squeue --start``
    (JOBID PARTITION NAME USER ST START_TIME NODES SCHEDNODES NODELIST(REASON); ``N/A`` before one is known)."""
    out = {}
    for line in sh(c, "squeue --start -h").splitlines():
        f = line.split()
        if len(f) >= 6 and when(f[5]):
            out[f[0]] = when(f[5])
    return out


def pending(c: ComposeCluster) -> dict[str, dict]:
    rows = {}
    for line in sh(c, f"squeue -h -t PD -o '{PENDING_FORMAT}'").splitlines():
        jid, name, state, user, nodes, reason, start, prio, limit, part = line.split("|")
        rows[jid] = {"name": name, "state": state, "user": user, "nodes": int(nodes), "reason": reason,
                     "start": when(start), "priority": int(prio), "limit": limit, "partition": part}
    return rows


def running(c: ComposeCluster, jid: str) -> dict | None:
    return next((q for q in squeue(c) if q["id"] == jid and q["state"] == "RUNNING"), None)


@contextlib.contextmanager
def site_jobs(c: ComposeCluster):
    """The ids of the jobs a test submits (``sbatch`` below): all cancelled at the end, failed or not."""
    ids: list[str] = []
    try:
        yield ids
    finally:
        if ids:
            c.exec("head", "scancel " + " ".join(ids), check=False)
        wait_for(lambda: not [q for q in squeue(c) if q["id"] in ids], 60, every=0.5)


def sbatch(c: ComposeCluster, ids: list[str], name: str, args: str) -> str:
    jid = sh(c, f"sbatch --parsable -J {name} {args} --output /dev/null --wrap 'sleep 600'").strip()
    ids.append(jid)
    return jid


def test_the_site_has_sixteen_idle_nodes_of_two_cpus_in_a_default_and_a_small_partition(slurm):
    c = slurm
    quiet_site(c)
    rows = [line.split() for line in sh(c, "sinfo -h -N -p batch -o '%N %T %c'").splitlines()]
    assert sorted(r[0] for r in rows) == sorted(ALL) and {(r[1], r[2]) for r in rows} == {("idle", "2")}, rows
    assert sh(c, f"sinfo -h -p {SMALL} -o '%T %D %N'").split() == ["idle", "4", "node[1-4]"]
    parts = {p.split()[0]: p for p in sh(c, "scontrol show partition -o").splitlines()}
    assert "Default=YES" in parts["PartitionName=batch"] and "Default=NO" in parts[f"PartitionName={SMALL}"], parts


def test_backfill_predicts_when_rigid_jobs_with_time_limits_start(slurm):
    """A blocker (6 nodes, 2 min) runs; a 12-node job (3 min) can start only when it ends, and an 8-node
    job (3 min) only when that one ends: ``squeue --start`` predicts both, to the second, within a few
    seconds of submission, the same at every look (nothing ends meanwhile), and ``squeue -o`` and
    ``scontrol show job -o`` say the same."""
    c = slurm
    quiet_site(c)
    with site_jobs(c) as ids:
        blocker = sbatch(c, ids, "site-blocker", "-N 6 --time=2")
        wait_for(lambda: running(c, blocker), 30, every=0.3)
        blocker_end = when(scontrol_job(c, blocker)["EndTime"])
        t0 = time.monotonic()
        a = sbatch(c, ids, "site-a", "-N 12 --time=3")
        b = sbatch(c, ids, "site-b", "-N 8 --time=3")
        starts = wait_for(lambda: (s := start_times(c)) and a in s and b in s and s, 30, every=0.2)
        NOTES["slurm start predicted after submit (s)"] = f"{time.monotonic() - t0:.1f}"
        assert abs((starts[a] - blocker_end).total_seconds()) <= 2, (starts, blocker_end)
        assert abs((starts[b] - starts[a]).total_seconds() - 180) <= 2, starts
        rows = pending(c)
        assert rows[a]["nodes"] == 12 and rows[b]["nodes"] == 8, rows
        assert {rows[a]["reason"], rows[b]["reason"]} <= {"Resources", "Priority"}, rows
        assert rows[a]["priority"] > rows[b]["priority"], rows  # priority/basic: first come, first served
        assert rows[a]["limit"] == rows[b]["limit"] == "3:00" and rows[a]["partition"] == "batch", rows
        assert (rows[a]["start"], rows[b]["start"]) == (starts[a], starts[b]), (rows, starts)
        job = scontrol_job(c, a)
        assert (job["JobState"], job["TimeLimit"], job["Partition"]) == ("PENDING", "00:03:00", "batch"), job
        assert when(job["StartTime"]) == starts[a] and job["Reason"] == rows[a]["reason"], job
        time.sleep(2)
        again = start_times(c)
        assert {j: again.get(j) for j in (a, b)} == {a: starts[a], b: starts[b]}, (again, starts)


LOOK = ("python -c " + shlex.quote(
    "import subprocess, sys; from scheduler.rm.slurm.view import look\n"
    "state = lambda: subprocess.run(['squeue', '-h', '-j', sys.argv[1], '-o', '%T'], capture_output=True,"
    " text=True).stdout.strip() or 'gone'\n"
    "before = state(); idle = look(['-p', 'batch'])[1]; print(before, idle, state())") + " {jid}")


def test_a_node_whose_job_is_still_completing_is_not_counted_idle(slurm):
    """The controller's look at Slurm counts a node idle only once Slurm can place a job there: a node whose
    job was cancelled but is still ``COMPLETING`` (here a script that ignores SIGTERM, ended by SIGKILL after
    ``KillWait``) is not idle, so no expander is asked for on it; ``sinfo -t idle`` counts it."""
    c = slurm
    quiet_site(c)
    with site_jobs(c) as ids:
        jid = sh(c, "sbatch --parsable -N 1 -w node16 -J stubborn --output /dev/null "
                    "--wrap 'trap \"\" TERM; sleep 60 & wait; sleep 60'").strip()
        ids.append(jid)
        wait_for(lambda: running(c, jid), 60, every=0.2)
        assert sh(c, LOOK.format(jid=jid)).split() == ["RUNNING", str(len(ALL) - 1), "RUNNING"]
        sh(c, f"scancel {jid}")
        # a look taken while Slurm had the job completing before and after it
        during = wait_for(lambda: (r := sh(c, LOOK.format(jid=jid)).split()) and r[0] == r[2] == "COMPLETING" and r,
                          60, every=0.1)
        assert during[1] == str(len(ALL) - 1), (during, sh(c, "sinfo -N -h -p batch -o '%N %T'"))
        wait_for(lambda: (r := sh(c, LOOK.format(jid=jid)).split()) and r[0] not in ("RUNNING", "COMPLETING")
                 and r[1] == str(len(ALL)), 60, every=0.5)  # and idle once it has completed


def test_scontrol_update_shrinks_a_running_job_and_a_waiting_job_starts_on_the_nodes_it_gave_back(slurm):
    c = slurm
    quiet_site(c)
    with site_jobs(c) as ids:
        big = sbatch(c, ids, "site-shrunk", "-N 6 --time=5")
        hosts = wait_for(lambda: running(c, big), 30, every=0.3)["hosts"]
        waiting = sbatch(c, ids, "site-waiting", "-N 12 --time=1")
        wait_for(lambda: pending(c).get(waiting, {}).get("reason") == "Resources", 30, every=0.3)
        keep = hosts[:2]
        t0 = time.monotonic()
        sh(c, f"scontrol update JobId={big} NodeList={','.join(keep)}")
        job = scontrol_job(c, big)
        assert (job["JobState"], job["NumNodes"], job["BatchHost"]) == ("RUNNING", "2", keep[0]), job
        assert hostlist.expand_hostlist(job["NodeList"]) == keep and when(job["ResizeTime"]), job
        started = wait_for(lambda: running(c, waiting), 30, every=0.2)
        TIMINGS["slurm shrink by scontrol update -> waiting job runs"] = time.monotonic() - t0
        assert len(started["hosts"]) == 12 and not set(started["hosts"]) & set(keep), started
        assert running(c, big)["hosts"] == keep
        # without accounting that was its one update: a restarted controller reads which jobs had theirs
        both = {big: "site-shrunk", waiting: "site-waiting"}
        assert resized(sh(c, "scontrol show job -o"), both) == {big}
        again = c.exec("head", f"scontrol update JobId={big} TimeLimit=6 2>&1", check=False)
        assert again.returncode != 0 and "DB index" in again.stdout, again.stdout
        t1 = time.monotonic()
        sh(c, f"scancel {big} {waiting}")
        quiet_site(c, 60)
        TIMINGS["slurm scancel -> 16 nodes idle"] = time.monotonic() - t1


def test_an_expander_given_its_parents_end_as_deadline_ends_no_later_than_the_parent(slurm):
    """``sbatch --deadline=<the parent's EndTime>`` without ``--time``: Slurm sets the time limit when the job
    starts, to the whole minutes left before the deadline, so a job that started late still ends in time;
    one whose ``--time`` cannot end before the deadline is not run at all (state DEADLINE)."""
    c = slurm
    quiet_site(c)
    with site_jobs(c) as ids:
        parent = sbatch(c, ids, "site-parent", "-N 2 --time=3")
        wait_for(lambda: running(c, parent), 30, every=0.3)
        end = scontrol_job(c, parent)["EndTime"]
        expander = sbatch(c, ids, "site-expander", f"-N 2 --deadline={end}")
        wait_for(lambda: running(c, expander), 30, every=0.3)
        job = scontrol_job(c, expander)
        start, stop, deadline = when(job["StartTime"]), when(job["EndTime"]), when(job["Deadline"])
        assert deadline == when(end) and stop <= deadline, job
        h, m, s = map(int, job["TimeLimit"].split(":"))
        assert s == 0 and h * 60 + m == int((deadline - start).total_seconds() // 60), job
        late = sbatch(c, ids, "site-late", f"-N 2 --deadline={end} --time=10")
        wait_for(lambda: scontrol_job(c, late)["JobState"] == "DEADLINE", 30, every=0.3)


def test_an_expander_borrowing_nodes_kept_for_a_waiting_job_starts_with_a_time_limit_and_not_without(slurm):
    """A 16-node job waits for a 12-node blocker (3 min): Slurm keeps the 4 idle nodes for it. An expander
    with only ``--deadline`` at that start (lowest priority) is passed over: Slurm's backfill tests a job
    without ``--time`` as running the partition's ``MaxTime``. The controller's ``submit_expander``
    (``--time`` of the minutes left, ``--time-min=1``, the same ``--deadline``), asked for after it, starts
    on an idle node, ends by the waiting job's start, and that start stays where Slurm put it."""
    c = slurm
    quiet_site(c)
    with site_jobs(c) as ids:
        blocker = sbatch(c, ids, "site-blocker", "-N 12 --time=3")
        wait_for(lambda: running(c, blocker), 30, every=0.3)
        big = sbatch(c, ids, "site-big", "-N 16 --time=1")
        start = wait_for(lambda: start_times(c).get(big), 30, every=0.5)
        plain = sbatch(c, ids, "site-plain-expander", f"-N 1 --nice=10000 --deadline={start.isoformat()}")
        code = ("import datetime; from scheduler.rm.slurm.view import submit_expander; "
                f"print(submit_expander('{blocker}', 1, [], datetime.datetime.fromisoformat('{start.isoformat()}')"
                ".timestamp()))")
        ours = sh(c, f"python -c {shlex.quote(code)}").strip()
        ids.append(ours)
        wait_for(lambda: running(c, ours), 30, every=0.3)
        job = scontrol_job(c, ours)
        assert when(job["EndTime"]) <= start and job["TimeMin"] == "00:01:00", job
        waiting = pending(c)
        assert waiting[plain]["reason"] == "Priority" and waiting[big]["start"] == start, waiting


# ---------------------------------------------------------------------- the site controller: one for every job
# an emulated application (one process standing for its processors) whose iteration time falls to 16
EMU = """name = "{name}"
command = ["python", "-m", "apps.emujob", "--times", "2:3.0,4:1.6,8:0.9,16:0.6", "--iterations", "{iters}",
           "--redist", "0.1"]
nprocs = 2
max_procs = 16
divides = 16
launch = "single"
walltime = 600
"""


def submit_site(c: ComposeCluster, name: str, iters: int = 30) -> str:
    c.exec("head", f"cat > /tmp/{name}.toml", input=EMU.format(name=name, iters=iters))
    return json.loads(sh(c, f"cd /tmp && reshape submit --slurm --json --controller {SITE} /tmp/{name}.toml")
                      )["slurm_job_ids"][0]


def test_the_site_controller_shares_the_cluster_between_two_malleable_jobs_and_a_rigid_one(slurm):
    """Two malleable jobs register with one controller and grow into the idle nodes through their own
    expanders; a rigid job then waits for 6 nodes: the controller promises it what it lacks, no more (the
    nodes a shrink frees beyond that, where a job's sizes step by more, go back to Slurm for any job
    rather than idle with the shrunk job), it starts no later than Slurm predicted, and both malleable
    jobs finish."""
    c = slurm
    with controller(c):
        t0 = time.monotonic()
        # long enough that neither ends while the rigid job waits (nodes it frees would make a release superfluous)
        a, b = submit_site(c, "site-a", iters=60), submit_site(c, "site-b", iters=60)
        # grown as far as they go (16 each: every node) with no expander waiting, so the rigid job's demand
        # does not race a growth Slurm is granting at that moment
        st = wait_for(lambda: (s := site(c)) and all((r := by_slurm(s, x)) and r["nprocs"] == 16 for x in (a, b))
                      and not any(q["state"] == "PENDING" for q in squeue(c)) and s, 150, every=0.5)
        TIMINGS["site: two jobs 2 -> 16 through their expanders"] = time.monotonic() - t0
        ours = {h for j in st["running"] for h in j["hosts"]}
        for x in (a, b):  # each job's hosts are its own Slurm jobs' nodes
            mine = {h for q in squeue(c) if q["id"] == x or q["name"] == f"reshape-expand-{x}" for h in q["hosts"]}
            assert set(by_slurm(st, x)["hosts"]) <= mine, (x, mine, st["running"])
        idle = len(ALL) - len({h for q in squeue(c) for h in q["hosts"]})
        t1 = time.monotonic()
        rigid = sh(c, "sbatch --parsable -N 6 --time=2 -J rigid --output /dev/null --wrap 'sleep 10'").strip()
        got = wait_for(lambda: running(c, rigid), 90, every=0.2)
        TIMINGS["site: a waiting 6-node job started"] = time.monotonic() - t1
        hist = json.loads(sh(c, "python -c " + shlex.quote(
            f"import json; from reshape.joblink.client import request as r; "
            f"from reshape.joblink.protocol import History; print(json.dumps(r('{SITE}', History()).body))")))
        released = [e for e in hist["node_events"] if e["kind"] == "released" and f"Slurm job {rigid} " in e["detail"]]
        # promised to it: what it lacks, no more; what a job's sizes free beyond that goes back to Slurm for anyone
        given = [e for e in released if "freed beyond the need" not in e["detail"]]
        assert len(given) <= max(0, 6 - idle), (given, idle)
        assert len({e["host"] for e in given}) == len(given)
        # Slurm picks the rigid job's nodes: where other nodes freed up meanwhile (a job's own resize point,
        # an idle release) it may start it on those and leave a released one idle, so which nodes it got is
        # recorded, not asserted; that our jobs and it never share a node is
        assert len(ours | set(got["hosts"])) <= len(ALL), (
            got, idle, hist["node_events"][-20:], [(j["name"], j["state"], j.get("end")) for j in hist["jobs"]])
        NOTES["site: nodes released for the rigid job / beyond its need / used by it"] = (
            f"{len(given)} / {len(released) - len(given)} / {len({e['host'] for e in released} & set(got['hosts']))}")
        st = wait_for(lambda: (s := site(c)) and not s["running"] and s, 180, every=1.0)
        done = {j["name"]: j for j in st["ended"]}
        assert done["site-a"]["state"] == done["site-b"]["state"] == "done", st["ended"]
        assert st["daemon"]["rm"]["rigid_late_starts"] == 0, st["daemon"]["rm"]
        NOTES["site sizes"] = "; ".join(f"{n}: {'->'.join(map(str, j['sizes']))}" for n, j in sorted(done.items()))


def test_the_site_controller_killed_and_restarted_readopts_its_running_jobs(slurm):
    c = slurm
    with controller(c):
        a = submit_site(c, "site-restart", iters=40)
        row = wait_for(lambda: (r := by_slurm(site(c), a)) and r["nprocs"] >= 4 and r, 90, every=0.5)
        sh(c, "pkill -9 -f '[d]aemon --slurm-site'")
        time.sleep(3)
        assert running(c, a), "the job runs on while its controller is away"
        t0 = time.monotonic()
        start_controller(c, fresh=False)
        back = wait_for(lambda: (r := by_slurm(site(c), a)) and r["iterations"] > row["iterations"] + 1 and r,
                        60, every=0.5)
        TIMINGS["site: controller restart -> job reporting again"] = time.monotonic() - t0
        assert back["job_id"] == row["job_id"] and back["nprocs"] >= 4, (row, back)
        st = wait_for(lambda: (s := site(c)) and not s["running"] and s, 180, every=1.0)
        assert [(j["name"], j["state"]) for j in st["ended"]] == [("site-restart", "done")], st["ended"]


def test_an_expander_cancelled_by_hand_makes_its_job_shrink_off_its_nodes(slurm):
    c = slurm
    with controller(c):
        a = submit_site(c, "site-scancel", iters=40)
        wait_for(lambda: (r := by_slurm(site(c), a)) and r["nprocs"] >= 8, 90, every=0.5)
        exp = [q for q in squeue(c) if q["name"] == f"reshape-expand-{a}" and q["state"] == "RUNNING"][-1]
        sh(c, f"scancel {exp['id']}")
        t0 = time.monotonic()
        row = wait_for(lambda: (r := by_slurm(site(c), a)) and not set(r["hosts"]) & set(exp["hosts"]) and r,
                       60, every=0.5)
        TIMINGS["site: expander cancelled -> job off its nodes"] = time.monotonic() - t0
        assert row["state"] == "running"
        st = wait_for(lambda: (s := site(c)) and not s["running"] and s, 240, every=1.0)
        assert [(j["name"], j["state"]) for j in st["ended"]] == [("site-scancel", "done")], st["ended"]


# short malleable jobs for a burst: one node (2 CPUs) at the start, growing to 16 CPUs at most
BURST = """name = "{name}"
command = ["python", "-m", "apps.emujob", "--times", "2:1.0,4:0.6,8:0.4,16:0.3", "--iterations", "{iters}"]
nprocs = 2
max_procs = 16
divides = 16
launch = "single"
walltime = 300
"""
OUT = "/cluster/slurm-burst"  # the burst test's Slurm outputs, read from the head


def test_a_burst_of_malleable_jobs_landing_on_nodes_just_given_up_all_register_and_finish(slurm):
    """A rigid job holds ten nodes; a malleable job grows through expanders into the other six; then ten
    one-node malleable jobs are submitted at once. The controller shrinks the grown job for them (nodes
    its expanders give back). It is killed (``kill -9``) while they run: each that ends meanwhile frees
    its node, Slurm starts the next there, and that one's registration waits for the controller. At its
    restart the registrations come before its looks at Slurm have seen the ended jobs go (an end is
    believed from two looks): each settles the ended job on its node by Slurm's word and is taken at once
    (no refusal, not even a retried ``node_busy``), and every job finishes, none of them cancelled."""
    c = slurm
    with controller(c), site_jobs(c) as ids:
        sh(c, f"rm -rf {OUT}; mkdir -p {OUT}")
        sbatch(c, ids, "burst-rigid", "-N 10 --time=10")
        wait_for(lambda: running(c, ids[0]), 30, every=0.3)
        grower = submit_site(c, "burst-grower", iters=80)
        wait_for(lambda: (r := by_slurm(site(c), grower)) and r["nprocs"] >= 8, 120, every=0.5)
        names = [f"burst-{i}" for i in range(10)]
        for n in names:
            c.exec("head", f"cat > /tmp/{n}.toml", input=BURST.format(name=n, iters=8))
        out = sh(c, f"cd /tmp && reshape submit --slurm --json --controller {SITE} --sbatch=--output={OUT}/%x-%j.out "
                 + " ".join(f"/tmp/{n}.toml" for n in names))
        burst = json.loads(out)["slurm_job_ids"]
        assert len(burst) == len(names), out
        wait_for(lambda: len([j for j in site(c)["running"] if j["name"] in names]) >= 3, 120, every=0.5)
        sh(c, "pkill -9 -f '[d]aemon --slurm-site'")
        killed = time.time()
        # burst jobs end while it is away and others start on their nodes, waiting to register
        wait_for(lambda: len(started_since(c, burst, killed)) >= 2, 120, every=0.5)
        start_controller(c, fresh=False)
        wait_for(lambda: not [q for q in squeue(c) if q["id"] in burst], 300, every=1.0)
        st = wait_for(lambda: (s := site(c)) and not [j for j in s["running"] if j["name"] in names] and s, 30)
        records = {jid: scontrol_job(c, jid) for jid in burst}
        logs = sh(c, f"cat {OUT}/*.out")
        log = sh(c, f"cat {SITE_STATE}/controller.log")  # every note of both controllers (status keeps the last 20)
        hist = json.loads(sh(c, "python -c " + shlex.quote(
            f"import json; from reshape.joblink.client import request as r; "
            f"from reshape.joblink.protocol import History; print(json.dumps(r('{SITE}', History()).body))")))
        registered = {j["allocation"] for j in hist["jobs"]}
        assert set(burst) <= registered, (sorted(set(burst) - registered), st["daemon"]["rm"]["notes"], logs[-3000:])
        assert {jid: r["JobState"] for jid, r in records.items()} == dict.fromkeys(burst, "COMPLETED"), \
            ({jid: r["JobState"] for jid, r in records.items()}, log[-6000:], logs[-3000:])
        assert {j["name"]: j["state"] for j in st["ended"] if j["name"] in names} == dict.fromkeys(names, "done"), \
            log[-6000:]
        assert "reshape slurm-run:" not in logs, logs
        refused = [n for n in log.splitlines() if "registration of" in n and "refused" in n]
        assert not refused, (refused, log[-4000:])
        NOTES["burst: jobs started while the controller was away"] = str(len(started_since(c, burst, killed)))


def started_since(c: ComposeCluster, jids: list[str], t: float) -> list[str]:
    """Those of ``jids`` Slurm started after ``t`` (epoch seconds; the head's clock is the host's)."""
    out = sh(c, "SLURM_TIME_FORMAT=%s squeue -h -t R,CD,CG -o '%i %S' -j " + ",".join(jids))
    return [f[0] for f in (line.split() for line in out.splitlines()) if len(f) == 2 and f[1].isdigit()
            and float(f[1]) > t]


# a malleable job for the moldable-start and shrink-to-start tests: 100 iterations, nearly linear to 16 CPUs
SIZED = """name = "{name}"
command = ["python", "-m", "apps.emujob", "--times", "2:3.2,4:1.6,8:0.85,16:{t16}", "--iterations", "100"]
nprocs = {nprocs}
sizes = [2, 4, 8, 16]
max_procs = 16
launch = "single"
walltime = {walltime}
iterations = 100
"""


def submit_sized(c: ComposeCluster, name: str, nprocs: int, walltime: int, t16: float = 0.45) -> str:
    c.exec("head", f"cat > /tmp/{name}.toml", input=SIZED.format(name=name, nprocs=nprocs, walltime=walltime,
                                                                 t16=t16))
    return json.loads(sh(c, f"cd /tmp && reshape submit --slurm --json --controller {SITE} /tmp/{name}.toml")
                      )["slurm_job_ids"][0]


def idle_hosts(c: ComposeCluster) -> list[str]:
    """The nodes of partition batch that ``sinfo`` lists as plain ``idle`` (as the controller counts them)."""
    return sorted(n for n, st in (ln.split() for ln in sh(c, "sinfo -h -N -p batch -o '%N %T'").splitlines())
                  if st == "idle")


def limit_minutes(c: ComposeCluster, jid: str) -> int:
    h, m, s = map(int, scontrol_job(c, jid)["TimeLimit"].split(":"))
    return 60 * h + m + (s > 0)


def test_a_malleable_job_waiting_for_nodes_starts_on_the_idle_ones_with_a_longer_limit(slurm):
    """A moldable start: a rigid job holds 14 nodes for 10 minutes; a malleable job asking for 4 nodes
    (2 minutes) would start only after it (Slurm's prediction). Waiting costs more than running on the 2
    idle nodes twice as long, so the controller makes Slurm start it there (NumNodes=2) with the limit
    the walltime charging rule gives (4 minutes), and it registers at the 4 processes those hold (on one
    node, 8 minutes and 2 processes, where Slurm still had the other unavailable when the controller looked)."""
    c = slurm
    quiet_site(c)  # the premise: two idle nodes (a previous test's expanders exit by themselves after it)
    with controller(c), site_jobs(c) as ids:
        blocker = sbatch(c, ids, "mold-blocker", "-N 14 --time=10")
        wait_for(lambda: running(c, blocker), 30, every=0.3)
        # the premise, seen as the controller sees it: the two nodes the blocker left are idle in Slurm's eyes
        free = wait_for(lambda: len(f := idle_hosts(c)) == 2 and f, 60, every=0.3)
        t0 = time.monotonic()
        m = submit_sized(c, "mold", nprocs=8, walltime=120)
        ids.append(m)
        got = wait_for(lambda: running(c, m), 60, every=0.3)
        TIMINGS["site: moldable start (submit -> running on the idle nodes)"] = time.monotonic() - t0
        # on the idle nodes it saw: both as a rule; one where Slurm still had the other unavailable at the
        # controller's look (seen once: a node of a previous test's expander completing late)
        k = len(got["hosts"])
        assert 1 <= k <= 2 and set(got["hosts"]) <= set(free), (got, free, site(c)["daemon"]["rm"]["notes"],
                                                                 evidence(c, m, "/tmp"))
        if k != 2:
            NOTES["site: moldable start"] = f"on {k} of the 2 idle nodes (the other not idle at the controller's look)"
        limit = math.ceil(120 * 4 / k / 60)  # the charging rule: 2 minutes at 4 nodes
        assert limit_minutes(c, m) == limit, scontrol_job(c, m)
        row = wait_for(lambda: by_slurm(site(c), m), 30, every=0.3)
        assert row["nprocs"] == 2 * k, row
        notes = site(c)["daemon"]["rm"]["notes"]
        assert any(f"Slurm job {m}: NumTasks={2 * k} NumCPUs={2 * k} NumNodes={k} TimeLimit={limit}" in n
                   for n in notes), notes


def test_a_malleable_job_shrinks_below_its_size_for_a_waiting_job_and_slurm_gets_its_longer_limit(slurm):
    """Shrink to start, and a time-limit update: a malleable job runs on 8 nodes (16 CPUs, as asked, 3
    minutes), a rigid job holds the other 8 for 10 minutes. A rigid job asking for 4 nodes would wait
    for the malleable job's end (Slurm's prediction, minutes away); shrinking it to 8 CPUs costs it
    less than that (SD-Policy's slowdown test), and Slurm's plan delays no one: the controller shrinks it
    within its stretch bound (``--max-stretch``, default three times its run at 16), the rigid job starts on the nodes
    it gives back long before its predicted start, and the shrunk job's Slurm limit grows as the charging
    rule says (half the size: its remaining budget lasts twice as long), in the update that shrinks it."""
    c = slurm
    quiet_site(c)  # no node of a previous test still completing (Slurm's prediction would count it free)
    with controller(c), site_jobs(c) as ids:
        m = submit_sized(c, "shrunk", nprocs=16, walltime=180)
        ids.append(m)
        wait_for(lambda: (r := by_slurm(site(c), m)) and r["iterations"] >= 3, 90, every=0.5)
        blocker = sbatch(c, ids, "shrink-blocker", "-N 8 --time=10")
        wait_for(lambda: running(c, blocker), 30, every=0.3)
        before = limit_minutes(c, m)
        t0 = time.monotonic()
        rigid = sh(c, "sbatch --parsable -N 4 --time=1 -J shrink-rigid --output /dev/null --wrap 'sleep 20'").strip()
        ids.append(rigid)
        predicted = wait_for(lambda: pending(c).get(rigid, {}).get("start") or running(c, rigid), 30, every=0.2)
        got = wait_for(lambda: running(c, rigid), 60, every=0.2)
        TIMINGS["site: shrink to start (submit -> the waiting job runs)"] = time.monotonic() - t0
        if isinstance(predicted, datetime):
            NOTES["site: shrink to start, Slurm's prediction was (s after submit)"] = (
                f"{(predicted - datetime.now()).total_seconds() + time.monotonic() - t0:.0f}")
        row = by_slurm(site(c), m)
        assert row["nprocs"] == 8 and not set(row["hosts"]) & set(got["hosts"]), (row, got)
        after = wait_for(lambda: (x := limit_minutes(c, m)) > before and x, 30, every=0.5)
        NOTES["site: time limit of the shrunk job (minutes)"] = f"{before} -> {after}"
        st = site(c)
        assert st["daemon"]["rm"]["rigid_late_starts"] == 0, st["daemon"]["rm"]
        assert before == 3 and after <= 2 * before, (before, after)  # as submitted; at most twice at half the size


@pytest.mark.parametrize("how", ["kill", "pause"])
def test_a_node_killed_under_a_malleable_job_restarts_it_in_its_allocation_from_its_checkpoint(slurm, how):
    """``docker kill`` of one of the two slurmd nodes a malleable job with checkpoints runs on (not its batch
    host): its batch script finds the node dead, the controller restarts the job in its allocation on the
    node left (same reshape job, restarts 1; Slurm keeps the job: ``--no-kill``), the dead node goes back to
    Slurm, and the job ends done with the field a run that never failed gives, bit for bit. ``pause``: the
    node hangs instead (``docker pause``); nothing on it answers or closes a connection, so the job learns
    of the loss only from Slurm, which has by then taken the node out of the job: a node Slurm reports down
    is as lost as one that does not answer. The scenario: :func:`scheduler.testing.slurm_site.node_loss`."""
    r = node_loss(slurm, "node", reference(slurm), how)
    TIMINGS[f"site: node {how} -> job restarted in its allocation"] = r["failure_to_seen_running_s"]
    assert r["same_job"] and r["victim"] != r["batch_host"] and r["victim"] not in r["hosts_after"], r
    assert (r["state"], r["restarts"]) == ("done", 1), r
    assert r["bit_identical"], r
    assert not r["slurm_run_error"], r["log_tail"]
    assert r["slurm_state"] == "COMPLETED", r
    assert any(f"restarted in Slurm job {r['slurm_job']}" in n and r["victim"] in n for n in r["notes"]), r["notes"]
    NOTES[f"site: node {how}"] = (f"resumed at {r['resumed_at']}, iterations lost {r['iterations_lost']}, "
                                  f"{r['failures']}")


def test_the_batch_host_killed_under_a_malleable_job_requeues_it_through_slurm_and_it_resumes_from_its_checkpoint(
        slurm):
    """``docker kill`` of the node that runs a malleable checkpointed job's batch script (its first node): the
    batch script and ``mpiexec`` go with it, and Slurm takes the node out of the job (``--no-kill``); the
    controller requeues the job (``scontrol requeue``; it was submitted ``--requeue``), and its next batch attempt
    registers as the same reshape job (restarts 1) and resumes from its checkpoint on the nodes Slurm gives it,
    ending done with the field a run that never failed gives, bit for bit."""
    r = node_loss(slurm, "batch-host", reference(slurm))
    TIMINGS["site: batch host kill -> job requeued and running again"] = r["failure_to_seen_running_s"]
    assert r["same_job"] and r["victim"] == r["hosts_before"][0] and r["victim"] not in r["hosts_after"], r
    assert (r["state"], r["restarts"]) == ("done", 1), r
    assert r["bit_identical"], r
    assert r["requeued_line"], r["log_tail"]
    assert (r["slurm_state"], r["slurm_restarts"]) == ("COMPLETED", "1"), r
    assert any(f"resumes from its checkpoint in requeued Slurm job {r['slurm_job']}" in n for n in r["notes"]), \
        r["notes"]
    NOTES["site: batch host kill"] = (f"resumed at {r['resumed_at']}, iterations lost {r['iterations_lost']}, "
                                      f"{r['failures']}")
