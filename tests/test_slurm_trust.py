"""The site controller believes only Slurm (``scheduler.rm.slurm.verify``).

Pure: ``scontrol show job -o`` read, and what of a registration Slurm does not vouch for. Against
the real ``slurmctld`` of the compose cluster's Slurm overlay (marker ``cluster``, one cluster, one
test): uid 65534 with a key of its own (``user-nobody``, its account in ``/cluster/keys/accounts.toml``)
may register its own running job on its own node, and nothing else: not root's job, not a host its
job does not hold, not a job that does not exist or waits; root (the admin key) may not take its job
over; its ``reshape cancel`` ends its Slurm job and never root's. Skips, with one line, only where no
Docker engine runs.
"""

from __future__ import annotations

import json
import shlex

import pytest

from scheduler.core.actions import StateError
from scheduler.core.job import Job
from scheduler.core.jobfile import validate_job
from scheduler.rm.slurm.verify import SlurmFacts, Verified, mismatch, own_expanders, parse_show_job
from scheduler.rm.slurm.view import SlurmJob
from tests.helpers import wait_for
from tests.test_cluster_slurm import slurm  # noqa: F401  (the fixture: one Slurm cluster for this module)

LINE = ("JobId=42 JobName=heat UserId=alice(1001) GroupId=alice(1001) MCS_label=N/A Priority=4294901758 "
        "Nice=0 Account=(null) QOS=(null) JobState=RUNNING Reason=None Dependency=(null) BatchHost=node3 "
        "NodeList=node[3-4] TRES=cpu=4,mem=0,node=2,billing=4 Comment=reshape-daemon=tcp://head:5600 Power=")


def test_scontrol_show_job_is_read_field_by_field():
    (f,) = parse_show_job(LINE + "\n")
    assert f == SlurmFacts("42", "RUNNING", "alice", 1001, ("node3", "node4"))
    assert parse_show_job(LINE.replace("NodeList=node[3-4]", "NodeList=(null)"))[0].nodes == ()


@pytest.mark.parametrize("allocation, hosts, account, uid, code, words", [
    ("42", ["node3", "node4"], "alice", 1001, None, ""),
    ("42", ["node3"], None, 1001, None, ""),  # a key whose account this host lacks: Slurm's uid decides
    ("42", ["node3"], "mallory", 1002, "forbidden", "belongs to alice (uid 1001), not to mallory (uid 1002)"),
    ("42", ["node3", "node9"], "alice", 1001, "bad_hosts", "does not hold node9 (it holds node[3-4])"),
    ("43", ["node3"], "alice", 1001, "bad_hosts", "not one plain job"),
])
def test_a_registration_is_checked_word_by_word(allocation, hosts, account, uid, code, words):
    bad = mismatch(parse_show_job(LINE), allocation, hosts, account, uid)
    assert (bad is None) if code is None else (bad[0] == code and words in bad[1]), bad
    pending = parse_show_job(LINE.replace("JobState=RUNNING", "JobState=PENDING"))
    assert mismatch(pending, "42", ["node3"], "alice", 1001) == ("bad_hosts", "Slurm job 42 is PENDING, not RUNNING")


def test_only_its_own_expanders_and_its_owners_retries():
    jobs = [SlurmJob("7", "reshape-expand-42", "RUNNING", "root", 1, ("n1",), "None"),
            SlurmJob("8", "reshape-expand-42", "RUNNING", "mallory", 1, ("n2",), "None"),
            SlurmJob("9", "rigid", "PENDING", "mallory", 2, (), "Resources")]
    assert [j.id for j in own_expanders(jobs, "root")] == ["7", "9"]

    class Accounts:
        def account(self, who):
            return {"key:user-alice": "alice", "uid:1001": "alice"}.get(who)

        def uid(self, who):
            return 1001 if self.account(who) else None

    v = Verified(Accounts(), show=lambda jid: LINE)
    v.register("42", ["node3"], "key:user-alice")
    assert v.jobs == {"42"}
    j = Job(5, validate_job({"name": "x", "command": ["x"], "nprocs": 1}), 0.0, owner="key:user-alice",
            allocation="42")
    assert v.reattach(j, "uid:1001") == 5  # the same account over another door
    with pytest.raises(StateError, match=r"registered .* by key:user-alice; key:client may not"):
        v.reattach(j, "key:client")


def test_registrations_take_the_senders_submission_tokens_before_slurm_is_asked():
    """Each ``register`` costs the controller's loop an ``scontrol show job`` (up to 5 s): a user's registrations
    take tokens of their submission bucket (``--submit-rate 2 --submit-burst 4``) before Slurm is asked, so a
    flood of 10 gets Slurm asked 4 times, then twice a second; an admin is not held to it."""
    from types import SimpleNamespace

    from reshape.joblink import protocol as P
    from scheduler.core.policy import app_policy, remap_policy
    from scheduler.core.pool import Node, Pool
    from scheduler.core.state import ClusterState
    from scheduler.daemon.accounts import Accounts
    from scheduler.daemon.handlers import Quota, answer
    from scheduler.observe.loopstats import LoopStats
    from scheduler.rm.slurm.site import SlurmSite
    from scheduler.rm.slurm.view import SlurmError

    asked: list[str] = []

    def show(jid: str) -> str:  # slurmctld knows none of them
        asked.append(jid)
        raise SlurmError(f"slurm_load_jobs error: Invalid job id specified ({jid})")

    pool = Pool([Node("node3", 2), Node("node4", 2)])
    site = SlurmSite(None, {}, pool=pool)
    site.verified.show = show
    accounts = Accounts(me=0)  # a root controller
    site.accounts = accounts
    d = SimpleNamespace(state=ClusterState(pool, app_policy("easy"), remap_policy("reshape")), rm=site,
                        quota=Quota(rate=2.0, burst=4), accounts=accounts, loop=LoopStats(), endpoint="tcp://x")
    job = {"name": "t", "command": ["sleep", "1"], "nprocs": 1}

    def register(who: str, k: int, now: float) -> str:
        rep, _ = answer(d, P.Register(seq=k, job=job, allocation=str(100 + k), hosts=("node3",)), now, who)
        return rep.body["code"]

    codes = [register("uid:65534", k, 0.0) for k in range(10)]
    assert codes == ["bad_hosts"] * 4 + ["over_limit"] * 6, codes
    assert asked == ["100", "101", "102", "103"]  # the refused six never reached Slurm
    rep, _ = answer(d, P.Register(seq=10, job=job, allocation="110", hosts=("node3",)), 0.0, "uid:65534")
    assert "uid:65534 registers faster than the limit of 2 jobs per second" in rep.body["message"], rep.body
    assert [register("uid:65534", k, 1.0) for k in range(20, 23)] == ["bad_hosts"] * 2 + ["over_limit"]
    assert [register("uid:0", k, 1.0) for k in range(30, 40)] == ["bad_hosts"] * 10  # root: no limit
    assert len(asked) == 4 + 2 + 10 and d.quota.refused == 6 + 1 + 1


# ---------------------------------------------------------------------- the real slurmctld
SITE = "tcp://head:5600"
STATE = "/var/lib/reshape/trust-test"
JOB = {"name": "t", "command": ["sleep", "1"], "nprocs": 2, "resizable": False, "launch": "single"}
# requests (argv[1]: [[type, body], ...]) to the controller: each reply's body, or {"error": code, "message": ...}
REQUESTS = """
import json, sys
from reshape.joblink.client import Connection, DaemonError
out = []
for t, body in json.loads(sys.argv[1]):
    c = Connection("{site}", 10.0)
    try:
        out.append(c.request(t, body).body)
    except DaemonError as e:
        out.append({{"error": e.code, "message": e.message}})
    finally:
        c.close()
print(json.dumps(out))
"""


def _sh(c, command: str, timeout: float = 60) -> str:
    return c.exec("head", command, timeout=timeout).stdout


def _running(c, jid: str) -> list[str] | None:
    """The hosts of Slurm job ``jid`` while it runs, else None."""
    out = _sh(c, f"squeue -h -j {jid} -o '%T|%N' 2>/dev/null || true").strip()
    state, _, nodes = out.partition("|")
    return _sh(c, f"scontrol show hostnames {nodes}").split() if state == "RUNNING" else None


@pytest.mark.cluster
@pytest.mark.timeout(600)
def test_the_site_controller_takes_a_registration_only_from_the_owner_of_the_slurm_job(slurm):  # noqa: F811
    c = slurm
    keys = "/cluster/keys"
    _sh(c, f"reshape keys --dir {keys} --client user-nobody >/dev/null && chown nobody {keys}/user-nobody.key_secret")
    _sh(c, f"mkdir -p {STATE} && nohup reshape daemon --slurm-site --endpoint tcp://0.0.0.0:5600 --state-dir {STATE} "
           f"--workdir /opt/reshape > {STATE}.log 2>&1 &")
    wait_for(lambda: c.exec("head", f"reshape status --endpoint {SITE}", check=False).returncode == 0, 60,
             every=0.3)
    nobody = "runuser -u nobody -- env RESHAPE_CLIENT_KEY=/cluster/keys/user-nobody.key_secret"
    sbatch = "sbatch --parsable -p small --chdir /tmp --output /dev/null"
    try:
        victim = _sh(c, f"{sbatch} -N 1 -J victim --wrap 'sleep 600'").strip()
        mine = _sh(c, f"{nobody} {sbatch} -N 1 -J mine --wrap 'sleep 600'").strip()
        waiting = _sh(c, f"{nobody} {sbatch} -N 1 -J later --begin now+3600 --wrap 'sleep 600'").strip()
        theirs = wait_for(lambda: _running(c, victim), 60)
        own = wait_for(lambda: _running(c, mine), 60)

        def requests(prefix: str, reqs: list) -> list[dict]:
            script = REQUESTS.format(site=SITE)
            out = _sh(c, f"cd /tmp && {prefix} python -c {shlex.quote(script)} {shlex.quote(json.dumps(reqs))}")
            return json.loads(out)

        def reg(alloc: str, hosts: list[str]) -> tuple[str, dict]:
            return "register", {"job": JOB, "allocation": alloc, "hosts": hosts * 2}

        steal, foreign, ghost, early, ok, again = requests(nobody, [
            reg(victim, theirs), reg(mine, theirs), reg("999999", own), reg(waiting, own), reg(mine, own),
            reg(mine, own)])
        assert steal.get("error") == "forbidden" and f"Slurm job {victim} belongs to root" in steal["message"], steal
        assert foreign.get("error") == "bad_hosts" and f"does not hold {theirs[0]}" in foreign["message"], foreign
        assert ghost.get("error") == "bad_hosts" and "Slurm does not know job 999999" in ghost["message"], ghost
        assert early.get("error") == "bad_hosts" and "is PENDING, not RUNNING" in early["message"], early
        assert "job_id" in ok and again == ok, (ok, again)
        # root, with the admin key, cannot take nobody's registration over
        (root,) = requests("", [reg(mine, own)])
        assert root.get("error") == "forbidden" and "by key:user-nobody" in root["message"], root
        # its owner's cancel ends its own Slurm job, and root's is untouched all along
        (cancel,) = requests(nobody, [("cancel", {"job_id": ok["job_id"]})])
        assert "error" not in cancel, cancel
        wait_for(lambda: _running(c, mine) is None, 60)
        assert _running(c, victim) == theirs
    finally:
        c.exec("head", "scancel --user root; scancel --user nobody; pkill -f '[d]aemon --slurm-site'", check=False)
