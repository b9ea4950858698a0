"""The network-namespace test cluster: nodes, name resolution, the Hydra launcher, node loss, and a
resize across nodes (spawned ranks in another namespace with another IP; a shrink retires them).

Needs root for namespaces; the tests that make them skip with the reason otherwise.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
import time

import pytest

from reshape.joblink.auth import make_keys
from scheduler.testing import netns
from scheduler.testing.netns import LAUNCHER, NetnsCluster, NetnsError
from tests.helpers import wait_for

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PREFIX = f"t{os.getpid() % 10000:04d}"  # per process: concurrent test runs must not share a cluster
CRASH = f"x{os.getpid() % 10000:04d}"
WHY = netns.unavailable_reason()
pytestmark = pytest.mark.cluster
needs_root = pytest.mark.skipif(WHY is not None, reason=f"namespace cluster unavailable: {WHY}")


def leftovers(prefix: str) -> list[str]:
    """Namespaces, links and files of ``prefix`` still on the machine."""
    found = [ns for ns in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()
             if ns.startswith(prefix + "-")]
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    found += [w for w in links.split() if w.startswith(prefix + "-")]
    for d in (netns.ETC_NETNS, netns.STATE_ROOT):
        if os.path.isdir(d):
            found += [os.path.join(d, f) for f in os.listdir(d) if f == prefix or f.startswith(prefix + "-")]
    return found


@pytest.fixture(scope="module")
def cluster():
    c = NetnsCluster(("node1", "node2", "node3"), prefix=PREFIX)
    try:
        yield c.create()
    finally:
        c.destroy()
        assert not leftovers(PREFIX), f"cluster not fully removed: {leftovers(PREFIX)}"


# ------------------------------------------------------------ no root needed
@pytest.mark.parametrize("kw, msg", [
    ({"nodes": ("Node1",)}, "node name"),
    ({"nodes": ("head",)}, "node name"),
    ({"nodes": ("a", "a")}, "duplicate"),
    ({"prefix": "toolongprefix"}, "prefix"),
    ({"subnet": "8.8.8.0/24"}, "private"),
    ({"subnet": "10.77.0.0/30", "nodes": ("a", "b", "c")}, "addresses"),
])
def test_bad_cluster_descriptions_are_refused(kw, msg):
    with pytest.raises(ValueError, match=msg):
        NetnsCluster(**kw)


def test_addresses_head_first_then_nodes_in_order():
    c = NetnsCluster(("b", "a"), prefix="rnq", subnet="10.77.5.0/24")
    assert c.addresses == {"head": "10.77.5.1", "b": "10.77.5.2", "a": "10.77.5.3"}
    assert c.ns("a") == "rnq-a" and c.bridge == "rnq-br"
    with pytest.raises(NetnsError, match="unknown node"):
        c.ip("z")


# ------------------------------------------------------------ root
@needs_root
def test_each_node_has_its_own_ip_hostname_and_names(cluster):
    for node in ("node1", "node2"):
        out = cluster.run(node, ["sh", "-c", "hostname; ip -4 -o addr show eth0; getent hosts node3 head"]).stdout
        lines = out.splitlines()
        assert lines[0] == node
        assert f"inet {cluster.ip(node)}/24" in lines[1]
        assert lines[2].split() == [cluster.ip("node3"), "node3"]
        assert lines[3].split() == [cluster.ip("head"), "head"]
    # the machine's own /etc/hosts is untouched
    with open("/etc/hosts") as f:
        assert "node3" not in f.read()


@needs_root
def test_nodes_reach_each_other_over_tcp_only_inside_the_cluster(cluster):
    server = cluster.popen("node2", [sys.executable, "-c", (
        "import socket; s = socket.create_server(('0.0.0.0', 7777)); s.settimeout(10);"
        "c, a = s.accept(); c.sendall(a[0].encode()); c.close()")])
    try:
        client = (
            "import socket, time\n"
            "for _ in range(100):\n"
            "    try:\n"
            "        c = socket.create_connection(('node2', 7777), timeout=2); break\n"
            "    except ConnectionRefusedError: time.sleep(0.05)\n"
            "print(c.recv(100).decode())\n")
        out = cluster.run("node1", [sys.executable, "-c", client], timeout=20)
        assert out.stdout.strip() == cluster.ip("node1"), out.stderr
    finally:
        server.kill()
        server.wait()
    # the root namespace has no route into the cluster
    assert subprocess.run(["ip", "route", "get", cluster.ip("node2")], capture_output=True, text=True
                          ).stdout.find(cluster.bridge) < 0


@needs_root
def test_launcher_runs_commands_in_the_node_and_refuses_unknown_hosts(cluster):
    env = os.environ | cluster.mpi_env()
    out = subprocess.run([LAUNCHER, "-n", "node3", "hostname; echo $((1+2))"], env=env, capture_output=True, text=True)
    assert out.stdout.split() == ["node3", "3"]
    by_ip = subprocess.run([LAUNCHER, "-x", cluster.ip("node2"), "hostname"], env=env, capture_output=True, text=True)
    assert by_ip.stdout.strip() == "node2"
    bad = subprocess.run([LAUNCHER, "-x", "nowhere", "true"], env=env, capture_output=True, text=True)
    assert bad.returncode == 255 and "unknown host 'nowhere'" in bad.stderr


@needs_root
def test_killed_node_disappears_and_rejoins(cluster):
    sleeper = cluster.popen("node3", ["sleep", "60"])
    # nsenter enters the node's namespaces just after it starts: on a loaded machine, a moment later
    assert wait_for(lambda: sleeper.pid in cluster.pids("node3"), 10)
    killed = cluster.kill_node("node3")
    assert sleeper.pid in killed
    assert sleeper.wait(timeout=5) != 0
    assert "node3" not in cluster.up and f"{PREFIX}-node3" not in subprocess.run(
        ["ip", "netns", "list"], capture_output=True, text=True).stdout
    env = os.environ | cluster.mpi_env()
    down = subprocess.run([LAUNCHER, "-x", "node3", "true"], env=env, capture_output=True, text=True)
    assert down.returncode == 255 and "down" in down.stderr
    unreachable = cluster.run("node1", [sys.executable, "-c",
                                        "import socket; socket.create_connection(('node3', 7), timeout=1)"])
    assert unreachable.returncode != 0
    with pytest.raises(NetnsError, match="down"):
        cluster.popen("node3", ["true"])
    cluster.add_node("node3")
    assert cluster.run("node3", ["hostname"]).stdout.strip() == "node3"
    assert NetnsCluster.load(PREFIX).up == {"head", "node1", "node2", "node3"}


@needs_root
def test_cleanup_after_a_crash_is_complete_and_idempotent():
    crashed = NetnsCluster(("a", "b"), prefix=CRASH, subnet="10.77.9.0/24").create()
    crashed.popen("a", ["sleep", "60"], start_new_session=True)
    del crashed  # as if the process that made it died: nothing was torn down
    gone = netns.cleanup(CRASH)
    assert sorted(gone) == [f"{CRASH}-a", f"{CRASH}-b", f"{CRASH}-head"]
    assert not leftovers(CRASH)
    assert netns.cleanup(CRASH) == []


@needs_root
def test_ranks_on_different_nodes_talk_over_tcp_not_shared_memory(cluster):
    """UCX must see two nodes (own IPC namespace and /dev/shm per node), not one host."""
    prog = ("from mpi4py import MPI; import numpy as np; c = MPI.COMM_WORLD; a = np.ones(1000);"
            "c.Send(a, 1) if c.rank == 0 else c.Recv(a, 0); c.Barrier()")
    res = cluster.mpiexec(2, ["-c", prog], ["node1", "node2"], env={"UCX_PROTO_INFO": "y"}, timeout=60, cwd=ROOT)
    assert res.returncode == 0, res.stderr[-3000:]
    text = res.stdout + res.stderr
    assert "inter-node" in text and "tcp/eth0" in text
    assert not res.leftovers


def placements(stdout: str) -> dict[str, list]:
    """``tests.mpi.netns_expand``'s ``PLACEMENT <phase> <json>`` lines, by phase."""
    out = {}
    for line in stdout.splitlines():
        if line.startswith("PLACEMENT "):
            _, phase, places = line.split(" ", 2)
            out[phase] = json.loads(places)
    return out


@needs_root
def test_expansion_spawns_ranks_on_another_node_and_shrink_retires_them(cluster):
    res = cluster.mpiexec(2, ["-m", "tests.mpi.netns_expand", "node2,node2"], ["node1"], timeout=90, cwd=ROOT,
                          env={"PYTHONPATH": ROOT})
    assert res.returncode == 0, f"{res.stdout[-3000:]}\n{res.stderr[-3000:]}"
    phases = placements(res.stdout)
    assert list(phases) == ["it0-size2", "it1-size4", "it2-size2", "end-size2"], res.stdout
    a, b = cluster.ip("node1"), cluster.ip("node2")
    assert [(p[1], p[2]) for p in phases["it0-size2"]] == [("node1", a)] * 2
    grown = phases["it1-size4"]  # by comm rank: relabelling may interleave the new ranks (redistribution.placement)
    assert sorted((p[1], p[2]) for p in grown) == [("node1", a)] * 2 + [("node2", b)] * 2
    originals = [p[3] for p in phases["it0-size2"]]
    assert grown[0][3] == originals[0] and {p[3] for p in grown if p[1] == "node1"} == set(originals)
    # the shrink keeps the originals (the most senior ranks), in their first order, and retires the new ones
    assert [(p[1], p[2], p[3]) for p in phases["end-size2"]] == [(p[1], p[2], p[3]) for p in phases["it0-size2"]]
    retired = [json.loads(line.split(" ", 1)[1]) for line in res.stdout.splitlines() if line.startswith("RETIRED")]
    assert [sorted(r) for r in retired] == [sorted(p[3] for p in grown if p[1] == "node2")]
    assert not res.leftovers, f"processes left in the nodes after the job: {res.leftovers}"


@needs_root
def test_expansion_onto_a_dead_node_is_refused_and_the_job_continues(cluster):
    """The runtime probes the launcher before spawning: Hydra would otherwise abort the whole job."""
    cluster.kill_node("node3")
    try:
        res = cluster.mpiexec(1, ["-m", "tests.mpi.resize_hosts", "node3"], ["node1"], timeout=60, cwd=ROOT,
                              env={"PYTHONPATH": ROOT})
        assert res.returncode == 0, f"{res.stdout[-3000:]}\n{res.stderr[-3000:]}"
        assert "not reachable" in res.stdout and "final size 1 data OK" in res.stdout
        assert not res.leftovers
    finally:
        cluster.add_node("node3")


@needs_root
def test_daemon_in_the_head_runs_a_job_across_nodes(tmp_path):
    """The real daemon in the head namespace, pool node1+node2: a 4-rank job gets 2 ranks on each node."""
    pool = tmp_path / "pool.toml"
    pool.write_text('[[node]]\nhost = "node1"\nslots = 2\n\n[[node]]\nhost = "node2"\nslots = 2\n')
    keys = str(tmp_path / "keys")  # the daemon listens on the cluster network: clients authenticate
    make_keys(keys)
    with netns.cluster(("node1", "node2"), prefix=f"d{os.getpid() % 10000:04d}", subnet="10.77.1.0/24") as c:
        env = os.environ | c.mpi_env() | {"PYTHONPATH": ROOT}
        ep = f"tcp://{c.ip('head')}:5555"
        daemon = c.popen("head", [sys.executable, "-m", "scheduler.cli", "daemon", "--endpoint", ep, "--config",
                                  str(pool), "--state-dir", str(tmp_path / "state"), "--workdir", ROOT,
                                  "--keys", keys],
                         env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

        def cli(*args):
            return c.run("head", [sys.executable, "-m", "scheduler.cli", *args, "--endpoint", ep, "--keys", keys],
                         env=env, cwd=ROOT)

        try:
            for _ in range(100):
                if cli("status").returncode == 0:
                    break
                time.sleep(0.1)
            assert "submitted job 1" in cli("submit", "docker/jobs/hello.toml").stdout
            for _ in range(150):
                st = json.loads(cli("status", "--json").stdout)
                if not st["running"] and not st["queue"] and not st["waiting"]:
                    break
                time.sleep(0.2)
            log = cli("log", "1").stdout
            ranks = sorted(re.findall(r"rank (\d) on (node\d)", log))
            assert ranks == [("0", "node1"), ("1", "node1"), ("2", "node2"), ("3", "node2")], log
            assert st["free_slots"] == 4
        finally:
            daemon.kill()
            daemon.wait()


# ------------------------------------------------------------ node monitors, node loss, access (root)
JOB = """
import sys, time
from mpi4py import MPI
from reshape.joblink.protocol import ResizePoint
from reshape.joblink.client import SchedulerClient
comm = MPI.COMM_WORLD
client = SchedulerClient.from_env() if comm.rank == 0 else None
for it in range(int(sys.argv[1])):
    time.sleep(1.0)
    if client:
        client.advise(ResizePoint(job_id=client.job_id, iteration=it + 1, nprocs=comm.size, grid=(comm.size,),
                                  iter_time=1.0))
req = comm.Ibarrier()
while not req.Test():
    time.sleep(0.01)
if client:
    client.finished()
    print("errors", client.errors, flush=True)
"""


REQUEST = """
import json, sys
from reshape.joblink.client import Connection
conn = Connection(sys.argv[1], 10.0, keys=sys.argv[2])
print(json.dumps(conn.request(sys.argv[3], json.loads(sys.argv[4])).body))
"""


class Head:
    """The daemon in the head namespace (pool node1..node3, 2 slots each, CURVE keys, 3 s node timeout)
    and a node monitor in each node; everything is killed and the cluster removed at the end."""

    def __init__(self, c: NetnsCluster, tmp):
        self.c, self.tmp = c, tmp
        self.keys = str(tmp / "keys")
        make_keys(self.keys)
        pool = tmp / "pool.toml"
        pool.write_text("".join(f'[[node]]\nhost = "{n}"\nslots = 2\n\n' for n in c.nodes))
        self.state = str(tmp / "state")
        self.env = os.environ | c.mpi_env() | {"PYTHONPATH": ROOT}
        self.ep = f"tcp://{c.ip('head')}:5555"
        self.err = open(tmp / "daemon.err", "ab")  # noqa: SIM115
        self.daemon = c.popen("head", [sys.executable, "-m", "scheduler.cli", "daemon", "--endpoint", self.ep,
                                       "--config", str(pool), "--state-dir", self.state, "--workdir", ROOT,
                                       "--keys", self.keys, "--node-timeout", "3", "--require-monitors"],
                              env=self.env, cwd=ROOT, stdout=self.err, stderr=self.err)
        self.monitors: dict[str, subprocess.Popen] = {}
        for n in c.nodes:
            self.monitor(n)
        self.wait(lambda: all(n["state"] == "up" for n in self.status()["nodes"]), 20)

    def monitor(self, node: str) -> None:
        log = open(self.tmp / f"nodemon-{node}.log", "ab")  # noqa: SIM115
        # the daemon runs a job's mpiexec on its first node (the default for a pool of other hosts): there Hydra
        # tells the proxies to call back to the node's own address
        self.monitors[node] = self.c.popen(node, [sys.executable, "-m", "scheduler.cli", "nodemon", "--daemon", self.ep,
                                                  "--node", node, "--keys", self.keys],
                                           env=self.env | {"HYDRA_IFACE": "eth0"}, cwd=ROOT, stdout=log, stderr=log)
        log.close()

    def req(self, type_, body=None):
        """One authenticated request from the head namespace (the root namespace has no route to the cluster)."""
        out = self.c.run("head", [sys.executable, "-c", REQUEST, self.ep, self.keys, type_, json.dumps(body or {})],
                         env=self.env, cwd=ROOT, timeout=30)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)

    def status(self) -> dict:
        """``reshape status`` run in node3 (over the cluster network, authenticated), checked for consistency."""
        out = self.c.run(self.c.nodes[-1], [sys.executable, "-m", "scheduler.cli", "status", "--json", "--endpoint",
                                            self.ep, "--keys", self.keys], env=self.env, cwd=ROOT, timeout=20)
        assert out.returncode == 0, out.stderr
        st = json.loads(out.stdout)
        assert st["free_slots"] == st["total_slots"] - sum(j["nprocs"] for j in st["running"]), st
        assert st["total_slots"] == sum(n["slots"] for n in st["nodes"] if n["state"] == "up"), st
        for j in st["running"]:
            assert all(h in {n["host"] for n in st["nodes"] if n["state"] == "up"} for h in j["hosts"]), st
        return st

    def job(self, jid: int) -> dict:
        st = self.status()
        for j in st["running"] + st["queue"]:
            if j["job_id"] == jid:
                return j
        return {"job_id": jid, "state": "ended"}

    def wait(self, pred, timeout):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            v = pred()
            if v:
                return v
            time.sleep(0.2)
        raise AssertionError(f"condition not met within {timeout}s; daemon log:\n{self.log()}")

    def log(self) -> str:
        self.err.flush()
        with open(self.tmp / "daemon.err", errors="replace") as f:
            return f.read()[-3000:]

    def close(self) -> None:
        for p in [*self.monitors.values(), self.daemon]:
            if p.poll() is None:
                p.kill()
            p.wait()
        self.err.close()


# per test process: two runs of these tests on one machine must not remove each other's cluster
MON_PREFIX = f"m{os.getpid() % 10000:04d}"


@pytest.fixture
def head(tmp_path):
    with netns.cluster(("node1", "node2", "node3"), prefix=MON_PREFIX, subnet="10.77.2.0/24") as c:
        h = Head(c, tmp_path)
        try:
            yield h
        finally:
            h.close()
    assert not leftovers(MON_PREFIX), leftovers(MON_PREFIX)


@needs_root
def test_node_loss_fails_its_job_the_rest_continue_status_stays_right_and_the_node_rejoins(head):
    c = head.c
    a = head.req("submit", {"job": {"name": "talker", "command": ["python", "-c", JOB, "8"], "nprocs": 2,
                                    "resizable": False}})["job_id"]
    b = head.req("submit", {"job": {"name": "victim", "command": ["python", "-c", "import time; from mpi4py "
                                    "import MPI; time.sleep(60)"], "nprocs": 2, "resizable": False}})["job_id"]
    st = head.wait(lambda: (s := head.status()) and len(s["running"]) == 2 and s, 20)
    hosts = {j["job_id"]: j["hosts"] for j in st["running"]}
    assert hosts == {a: ["node1"], b: ["node2"]}
    head.wait(lambda: any(n["host"] == "node2" and n["jobs"] == [b] for n in head.status()["nodes"]), 20)
    t0 = time.monotonic()
    c.kill_node("node2")  # monitor, proxy and ranks gone, namespace deleted
    down_after = None
    while time.monotonic() - t0 < 15:
        st = head.status()  # consistent at every poll
        node2 = next(n for n in st["nodes"] if n["host"] == "node2")
        if node2["state"] == "down" and down_after is None:
            down_after = time.monotonic() - t0
            assert node2["reason"].startswith("no heartbeat for "), node2  # the node timeout, not a lost job
            assert st["total_slots"] == 4 and st["capacity_slots"] == 6
            assert b not in [j["job_id"] for j in st["running"]]
        if down_after is not None and head.job(a)["state"] == "ended":
            break
        time.sleep(0.2)
    assert down_after is not None, "node2 never went down"
    print(f"\nnode2 killed -> marked down after {down_after:.1f} s (node timeout 3 s)")
    hist = head.req("history")
    jobs = {j["job_id"]: j for j in hist["jobs"]}
    assert jobs[b]["state"] == "failed", jobs[b]
    assert jobs[a]["runner"] == "node1", jobs[a]  # by default its mpiexec ran on its first node, by its monitor
    assert jobs[a]["state"] == "done" and jobs[a]["iterations"] == 8, (
        jobs[a]["error"], head.status()["daemon"], jobs[a]["node_report"], hist["node_events"],
        head.req("log", {"job_id": a})["text"][-1500:])
    assert ("node2", "down") in [(e["host"], e["kind"]) for e in hist["node_events"]]
    # the journal has every job and node event
    db = sqlite3.connect(os.path.join(head.state, "journal.sqlite"))
    states = dict(db.execute("SELECT job_id, state FROM jobs"))
    assert states == {a: "done", b: "failed"}
    kinds = [(j, k) for j, k in db.execute("SELECT job_id, kind FROM events ORDER BY seq") if k != "advise"]
    assert [k for j, k in kinds if j == b] == ["submit", "start", "end"]
    assert [k for j, k in kinds if j == a] == ["submit", "start", "end"]
    nodes = [(h, k) for h, k in db.execute("SELECT host, kind FROM node_events ORDER BY seq")]
    assert sorted(nodes[:3]) == [("node1", "up"), ("node2", "up"), ("node3", "up")]
    assert nodes[3:] == [("node2", "down")]
    assert dict(db.execute("SELECT host, state FROM nodes")) == {"node1": "up", "node2": "down", "node3": "up"}
    db.close()
    # the node comes back: a new namespace and a new monitor; a job using every node then runs
    c.add_node("node2")
    head.monitor("node2")
    head.wait(lambda: head.status()["total_slots"] == 6, 15)
    hello = {"name": "hello", "nprocs": 6, "resizable": False, "command": [
        "python", "-c", "from mpi4py import MPI; import socket, sys; "
        "sys.stdout.write(f'rank {MPI.COMM_WORLD.rank} on {socket.gethostname()}\\n')"]}
    h = head.req("submit", {"job": hello})["job_id"]
    head.wait(lambda: head.job(h)["state"] == "ended", 40)
    log = head.req("log", {"job_id": h})["text"]
    assert sorted(re.findall(r"rank \d on (node\d)", log)) == ["node1"] * 2 + ["node2"] * 2 + ["node3"] * 2, log
    assert next(j for j in head.req("history")["jobs"] if j["job_id"] == h)["state"] == "done"
    assert ("node2", "rejoin") in [(e["host"], e["kind"]) for e in head.req("history")["node_events"]][-1:]


STRANGER = """
import sys, zmq, zmq.auth
ctx = zmq.Context()
s = ctx.socket(zmq.DEALER)
s.linger = 0
if len(sys.argv) > 2:  # a CURVE client with a key pair the daemon does not know
    pub, sec = zmq.auth.load_certificate(sys.argv[2])
    s.curve_publickey, s.curve_secretkey = pub, sec
    s.curve_serverkey = zmq.auth.load_certificate(sys.argv[3])[0]
s.connect(sys.argv[1])
s.send(b'{"v": 1, "type": "status", "seq": 1, "job_id": null, "body": {}}')
print("answered" if s.poll(2000) else "refused")
"""


@needs_root
def test_clients_without_the_key_are_refused_on_the_cluster_network_while_others_keep_working(head, tmp_path):
    c = head.c
    a = head.req("submit", {"job": {"name": "talker", "command": ["python", "-c", JOB, "6"], "nprocs": 2,
                                    "resizable": False}})["job_id"]
    head.wait(lambda: head.job(a).get("iterations", 0) >= 1, 20)
    served = head.status()["daemon"]["served"]
    plain = c.run("node2", [sys.executable, "-c", STRANGER, head.ep], cwd=ROOT, timeout=20)
    assert plain.stdout.strip() == "refused", plain.stderr
    make_keys(str(tmp_path / "stranger"))
    unknown = c.run("node2", [sys.executable, "-c", STRANGER, head.ep, str(tmp_path / "stranger/client.key_secret"),
                              os.path.join(head.keys, "server.key")], cwd=ROOT, timeout=20)
    assert unknown.stdout.strip() == "refused", unknown.stderr
    nokeys = c.run("node2", [sys.executable, "-m", "scheduler.cli", "status", "--endpoint", head.ep],
                   env={k: v for k, v in head.env.items() if k != "RESHAPE_KEYS"} | {"HOME": str(tmp_path)},
                   cwd=ROOT, timeout=20)
    assert nokeys.returncode == 1 and "reshape keys" in nokeys.stderr  # the CLI says what is missing
    st = head.status()  # the authenticated client, the job and the monitors were not disturbed
    assert st["daemon"]["refused"] >= 2 and st["daemon"]["served"] > served
    assert all(n["state"] == "up" for n in st["nodes"])
    log = head.log()
    assert f"refused client {c.ip('node2')}: key" in log and "handshake failed" in log
    head.wait(lambda: head.job(a)["state"] == "ended", 30)
    j = next(j for j in head.req("history")["jobs"] if j["job_id"] == a)
    assert j["state"] == "done" and j["iterations"] == 6, j


@needs_root
def test_reuse_across_nodes_calls_the_parked_ranks_back_on_their_node(cluster):
    """With reuse on, a shrink parks the ranks on node2, the next resize point reports them there, and
    the second expansion onto node2 calls the same processes back instead of spawning new ones."""
    res = cluster.mpiexec(2, ["-m", "tests.mpi.netns_expand", "node2,node2", "2"], ["node1"], timeout=120,
                          cwd=ROOT, env={"PYTHONPATH": ROOT, "RESHAPE_REUSE": "1"})
    assert res.returncode == 0, f"{res.stdout[-3000:]}\n{res.stderr[-3000:]}"
    phases = placements(res.stdout)
    assert list(phases) == ["it0-size2", "it1-size4", "it2-size2", "it3-size4", "it4-size2", "end-size2"]
    first = sorted(p[3] for p in phases["it1-size4"] if p[1] == "node2")
    again = sorted(p[3] for p in phases["it3-size4"] if p[1] == "node2")
    assert len(first) == 2 and again == first  # the same processes: called back, not spawned
    reports = [json.loads(line.split(" ", 1)[1]) for line in res.stdout.splitlines() if line.startswith("REPORT ")]
    assert reports[:4] == [[], [], ["node2", "node2"], []], reports
    assert not res.leftovers, f"processes left in the nodes after the job: {res.leftovers}"
