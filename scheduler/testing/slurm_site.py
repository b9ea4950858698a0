"""The Slurm site controller on the compose cluster's real Slurm, and a node lost under a malleable job.

The Slurm overlay (``docker/slurm-compose.yml``: slurmctld on the head, slurmd on node1..node16) with a
site controller (``reshape daemon --slurm-site``) on the head, driven from the host through
:class:`~scheduler.testing.compose.ComposeCluster`. :func:`node_loss` is one run of the failure the
Slurm tier tests (``tests/test_cluster_slurm.py``) and ``python -m benchmarks.recovery --slurm``
measure: a malleable job with checkpoints runs ``examples/heat.py`` on 4 ranks over two nodes, and once
its first checkpoint is on the shared volume a node of it is ``docker kill``-ed (or ``docker pause``-d):

* ``node``: not its batch host; the controller restarts the job inside its allocation on the node left;
* ``batch-host``: its batch host, so its batch script goes too; the controller requeues the Slurm job
  (``scontrol requeue``) and its next batch attempt resumes from the checkpoint.

It returns what happened (the job's end, restarts, iterations lost, the seconds from the failure to the
job running again from its events, its result's hash, Slurm's record, the controller's notes) for the
caller to judge; the node comes back (``docker start``/``unpause``) and every Slurm job is cancelled
afterwards, failed or not.
"""

from __future__ import annotations

import contextlib
import json
import re
import shlex
import subprocess
import time

from scheduler.testing.compose import ComposeCluster, wait_for

FILES = ("docker-compose.yml", "docker/slurm-compose.yml")
ALL = tuple(f"node{i}" for i in range(1, 17))  # partition batch, the default
SITE = "tcp://head:5600"
SITE_STATE = "/var/lib/reshape/site-test"
STEPS = 300  # of a node-loss run: about a minute at 4 ranks
CASES = ("node", "batch-host")
# a malleable job with checkpoints on the volume every node mounts, 4 ranks on two nodes, at least 2
NODEKILL = """name = "{name}"
command = ["python", "/opt/reshape/examples/heat.py", "--n", "256", "--steps", "{steps}", "--work", "0.4"]
nprocs = 4
min_procs = 2
max_procs = 4
divides = 256
checkpoint = "every:10"
checkpoint_dir = "{ckpt}"
walltime = 600
"""
_KEY = re.compile(r" (?=[A-Za-z][A-Za-z0-9_:/]*=)")


def sh(c: ComposeCluster, command: str, timeout: float = 60) -> str:
    return c.exec("head", command, timeout=timeout).stdout


def squeue(c: ComposeCluster) -> list[dict]:
    """Every job in Slurm's queue; hostlists expanded here (python-hostlist, as the daemon does), so that a
    look is one command in the head, quick enough to catch a short job running."""
    import hostlist

    rows = []
    for line in sh(c, "squeue -h -o '%i|%j|%T|%N|%r'").splitlines():
        jid, name, state, nodes, reason = line.split("|")
        hosts = hostlist.expand_hostlist(nodes) if nodes else []
        rows.append({"id": jid, "name": name, "state": state, "hosts": hosts, "reason": reason})
    return rows


def scontrol_job(c: ComposeCluster, jid: str) -> dict[str, str]:
    """``scontrol show job -o``: one line of ``Key=Value`` fields. A value may hold ``=`` (``TRES=cpu=8,node=4``)
    or be empty (``Power=``), so the line is split only before a space and a ``Key=``."""
    line = sh(c, f"scontrol show job -o {jid}").strip()
    return dict(field.split("=", 1) for field in _KEY.split(line))


def quiet_site(c: ComposeCluster, timeout: float = 120) -> None:
    """No Slurm job left and all sixteen nodes idle."""
    wait_for(lambda: not squeue(c) and sh(c, "sinfo -h -p batch -o '%T %D'").split() == ["idle", str(len(ALL))],
             timeout, every=0.5)


def site(c: ComposeCluster) -> dict:
    return json.loads(sh(c, f"reshape status --json --all --endpoint {SITE}"))


def site_history(c: ComposeCluster) -> dict:
    """The site controller's ``history`` reply body (jobs, events)."""
    return json.loads(sh(c, "python -c " + shlex.quote(
        f"import json; from reshape.joblink.client import request as r; from reshape.joblink.protocol import History; "
        f"print(json.dumps(r('{SITE}', History(), timeout=30).body))")))


def no_controller(c: ComposeCluster) -> None:
    """No site controller process left on the head (one still stopping would answer the next test's
    ``reshape status`` while the new one could not bind the endpoint): ``SIGKILL`` after 15 s."""
    alive = lambda: c.exec("head", "pgrep -f '[d]aemon --slurm-site'", check=False).returncode == 0  # noqa: E731
    try:
        wait_for(lambda: not alive(), 15, every=0.2)
    except AssertionError:
        c.exec("head", "pkill -9 -f '[d]aemon --slurm-site'", check=False)
        wait_for(lambda: not alive(), 15, every=0.2)


def start_controller(c: ComposeCluster, fresh: bool = True) -> None:
    no_controller(c)
    sh(c, (f"rm -rf {SITE_STATE}; " if fresh else "") + f"mkdir -p {SITE_STATE}; nohup reshape daemon --slurm-site "
          f"--endpoint tcp://0.0.0.0:5600 --state-dir {SITE_STATE} --workdir /opt/reshape --idle-release 10 "
          f">> {SITE_STATE}/controller.log 2>&1 &")
    wait_for(lambda: c.exec("head", f"reshape status --endpoint {SITE}", check=False).returncode == 0, 30,
             every=0.3)


@contextlib.contextmanager
def controller(c: ComposeCluster):
    """A fresh site controller on the head; afterwards every Slurm job is cancelled and it stops."""
    quiet_site(c)
    start_controller(c)
    try:
        yield
    finally:
        c.exec("head", "scancel --user root; pkill -f '[d]aemon --slurm-site'", check=False)
        wait_for(lambda: not squeue(c), 60, every=0.5)
        no_controller(c)


def by_slurm(st: dict, sid: str) -> dict | None:
    return next((j for j in st["running"] if j.get("allocation") == sid), None)


def evidence(c: ComposeCluster, slurm_job: str, out: str) -> str:
    """Where a job stopped: its Slurm output, Slurm's view of it and of the nodes, the controller's log and
    its view of the job."""
    cmds = [f"tail -c 3000 {out}/{slurm_job}.out", f"scontrol show job {slurm_job} | head -30",
            "sinfo -N -h -o '%N %T %E'", "squeue -h -o '%A %j %T %N'", f"tail -n 60 {SITE_STATE}/controller.log",
            f"reshape status --all --endpoint {SITE}"]
    return "\n".join(f"$ {cmd}\n{c.exec('head', cmd + ' 2>&1', check=False).stdout}" for cmd in cmds)


def sha(text: str) -> str | None:
    """The ``sha256`` line ``examples/heat.py`` prints (its field's digest), or None."""
    m = re.search(r"sha256 ([0-9a-f]{16})", text)
    return m.group(1) if m else None


def reference(c: ComposeCluster, steps: int = STEPS) -> str | None:
    """The digest of a run of the node-loss job's program that nothing disturbs (2 ranks on the head)."""
    return sha(sh(c, f"mpiexec -n 2 python /opt/reshape/examples/heat.py --n 256 --steps {steps}", 180))


def _docker(how: str, cid: str) -> None:
    subprocess.run(["docker", how, cid], check=True, capture_output=True, timeout=60)


def running_again(events: list[dict], job_id: int, failed_at: float) -> float | None:
    """When job ``job_id`` ran again after ``failed_at``: its first ``start`` after it (a requeued job's new
    batch attempt), else its first ``restart`` (an attempt launched at once inside its allocation)."""
    mine = [e for e in events if e["job_id"] == job_id and e["t"] > failed_at]
    for kind in ("start", "restart"):
        t = next((e["t"] for e in mine if e["kind"] == kind), None)
        if t is not None:
            return t
    return None


def node_loss(c: ComposeCluster, case: str, ref: str | None, how: str = "kill", steps: int = STEPS) -> dict:
    """One run of the failure ``case`` (``node`` or ``batch-host``; module docstring), the node ``docker
    kill``-ed (``how="pause"``: ``docker pause``-d): what came of it. AssertionError, with the evidence,
    where the job never ran again."""
    if case not in CASES:
        raise ValueError(f"case {case!r}: allowed {', '.join(CASES)}")
    tag = "nodekill" if case == "node" else "batchkill"
    name, ckpt, out = f"site-{tag}", f"/cluster/ckpt-site-{tag}", f"/cluster/slurm-{tag}"
    victim = None
    with controller(c):
        sh(c, f"rm -rf {ckpt} {out}; mkdir -p {out}")
        c.exec("head", f"cat > /tmp/{name}.toml", input=NODEKILL.format(name=name, steps=steps, ckpt=ckpt))
        a = json.loads(sh(c, f"cd /tmp && reshape submit --slurm --json --controller {SITE} "
                             f"--sbatch=--output={out}/%j.out /tmp/{name}.toml"))["slurm_job_ids"][0]
        try:
            row = wait_for(lambda: (r := by_slurm(site(c), a)) and len(set(r["hosts"])) == 2 and r, 90, every=0.5)
            wait_for(lambda: any(n.startswith("ckpt-") and not n.endswith(".part")
                                 for n in sh(c, f"ls {ckpt} 2>/dev/null; true").split()), 90, every=0.3)
            batch_host = scontrol_job(c, a)["BatchHost"]
            victim = batch_host if case == "batch-host" else next(h for h in row["hosts"] if h != batch_host)
            cid = c.container(victim)
            failed_at = time.time()
            _docker(how, cid)
            try:
                again = wait_for(lambda: (r := by_slurm(site(c), a)) and r["restarts"] >= 1 and r,
                                 120 if case == "node" else 420, every=0.5)
            except AssertionError as e:
                raise AssertionError(f"{e}: not running again after {how} of {victim}\n{evidence(c, a, out)}"
                                     ) from None
            seen_again = time.time()
            st = wait_for(lambda: (s := site(c)) and not s["running"] and not s.get("waiting") and s, 300, every=1.0)
            log = sh(c, f"cat {out}/{a}.out")
            hist = site_history(c)
            (j,) = [j for j in hist["jobs"] if j["name"] == name]
            t_again = running_again(hist["events"], j["job_id"], failed_at)
            info = scontrol_job(c, a)
        finally:
            if victim:  # slurmd registers again (ReturnToService=2): the next run has 16 idle
                c.cmd("unpause" if how == "pause" else "start", victim)
    quiet_site(c, 180)
    return {"case": case, "how": how, "victim": victim, "batch_host": batch_host, "slurm_job": a,
            "job_id": j["job_id"], "same_job": again["job_id"] == row["job_id"], "hosts_before": row["hosts"],
            "hosts_after": again["hosts"], "state": j["state"], "restarts": j["restarts"],
            "resumed_at": j["resumed_at"], "iterations_lost": j["iterations_lost"], "failures": j["failures"],
            "failure_to_running_s": t_again - failed_at if t_again is not None else None,
            "failure_to_seen_running_s": seen_again - failed_at, "result": sha(log), "reference": ref,
            "bit_identical": ref is not None and sha(log) == ref, "slurm_state": info["JobState"],
            "slurm_restarts": info["Restarts"], "requeued_line": "Slurm requeued this job" in log,
            "slurm_run_error": "reshape slurm-run:" in log, "notes": st["daemon"]["rm"]["notes"],
            "log_tail": log[-3000:]}
