"""A multi-node test cluster on one machine: one Linux network namespace per node.

Each node is a network namespace ``<prefix>-<node>`` with one IP on a private
test subnet (default ``10.77.0.0/24``). The head namespace ``<prefix>-head``
holds a bridge ``<prefix>-br``; every other node is joined to it by a veth
pair (``<prefix>-v<i>`` on the bridge, ``eth0`` inside the node). The root
namespace is not touched: nothing is routed out of the cluster, and deleting
the namespaces deletes every link, so teardown cannot leave a veth behind.

A node is more than a network namespace: a holder process (``sleep``) keeps
the node's own UTS namespace (hostname = node name, so
``socket.gethostname()`` tells nodes apart), IPC namespace and mount
namespace (a private ``/dev/shm`` tmpfs and the cluster's hosts file over
``/etc/hosts``), and every process of the node is started in all four with
``nsenter``. Without the private IPC namespace and ``/dev/shm``, MPICH's UCX
netmod sees ranks of different namespaces as one host (same kernel, same
boot id) and talks over System V shared memory and CMA, so the network path
would never be used; with them it picks ``tcp/eth0`` between nodes, as on
real nodes. Name resolution uses only the hosts file: ``ip netns exec``
bind-mounts ``/etc/netns/<ns>/hosts`` over ``/etc/hosts`` for the holder,
and the node's processes inherit its mount namespace; the machine's own
``/etc/hosts`` is never edited.

Processes in a node: :meth:`NetnsCluster.argv` wraps a command to run there,
:meth:`NetnsCluster.popen` starts it, :meth:`NetnsCluster.pids` lists what
runs there, :meth:`NetnsCluster.kill_node` kills it all and removes the node
(a node that "disappears"), :meth:`NetnsCluster.add_node` brings it back.

Hydra across namespaces: ``reshape/joblink/hydra/netns-launch`` is an ``ssh``
stand-in for ``mpiexec -launcher ssh -launcher-exec ...``; it runs each Hydra
proxy inside the target node's namespace. :meth:`NetnsCluster.mpi_env` gives
the environment that makes ``mpiexec`` (run in the head) use it, and
``docs/cluster.md`` records what MPICH needs across namespaces.

Cleanup is by name prefix and idempotent (:func:`cleanup`), so a crashed run
is cleaned up by the next one. Everything needs root (``CAP_NET_ADMIN``):
:func:`unavailable_reason` says why a cluster cannot be made here.
"""

from __future__ import annotations

import argparse
import contextlib
import ipaddress
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from reshape.joblink import jobenv as E
from reshape.joblink.launch import MPIRunError, RunResult, kill_session, mpi_env, mpiexec_path
from reshape.joblink.launchers import LAUNCHERS

__all__ = [
    "DEFAULT_PREFIX",
    "DEFAULT_SUBNET",
    "LAUNCHER",
    "NetnsCluster",
    "NetnsError",
    "add_commands",
    "cleanup",
    "cluster",
    "unavailable_reason",
]

DEFAULT_PREFIX = "rnc"
DEFAULT_SUBNET = "10.77.0.0/24"
HEAD = "head"
BRIDGE_MAC = "02:52:53:48:00:01"  # locally administered, fixed (see create())
STATE_ROOT = "/run/reshape-netns"
ETC_NETNS = "/etc/netns"
LAUNCHER = LAUNCHERS["netns"].exec
_NAME = re.compile(r"^[a-z][a-z0-9]{0,7}$")
_PREFIX = re.compile(r"^[a-z][a-z0-9]{0,4}$")


class NetnsError(RuntimeError):
    """A cluster operation failed (the message says which command and why)."""


def _ip(*args: str, check: bool = True, ns: str | None = None) -> subprocess.CompletedProcess:
    cmd = ["ip", *(["-n", ns] if ns else []), *args]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if check and res.returncode != 0:
        raise NetnsError(f"{' '.join(cmd)}: {res.stderr.strip() or res.stdout.strip()}")
    return res


def unavailable_reason() -> str | None:
    """Why a namespace cluster cannot be made here, or None when it can."""
    if sys.platform != "linux":
        return "network namespaces need Linux"
    if os.geteuid() != 0:
        return "network namespaces need root (CAP_NET_ADMIN); run the tests as root"
    for tool in ("ip", "unshare", "nsenter"):
        if shutil.which(tool) is None:
            return f"'{tool}' is not installed (iproute2 / util-linux)"
    return None


def _namespaces() -> list[str]:
    res = _ip("netns", "list", check=False)
    return [line.split()[0] for line in res.stdout.splitlines() if line.strip()]


def _ns_pids(ns: str) -> list[int]:
    res = _ip("netns", "pids", ns, check=False)
    return [int(x) for x in res.stdout.split() if x.isdigit()]


def _kill_pids(pids: Sequence[int], grace: float = 1.0) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for p in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(p, sig)
        end = time.monotonic() + grace
        while time.monotonic() < end and any(_alive(p) for p in pids):
            time.sleep(0.02)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False


def _remove_ns(ns: str) -> None:
    _kill_pids(_ns_pids(ns))
    _ip("netns", "del", ns, check=False)
    shutil.rmtree(os.path.join(ETC_NETNS, ns), ignore_errors=True)


def cleanup(prefix: str = DEFAULT_PREFIX) -> list[str]:
    """Remove every namespace, hosts file and state dir of clusters named ``prefix``; returns the namespaces.

    Kills the processes still running in them first. Idempotent: safe after a
    crash, on a half-made cluster, or when nothing is there.
    """
    gone = []
    for ns in _namespaces():
        if ns.startswith(prefix + "-"):
            _remove_ns(ns)
            gone.append(ns)
    if os.path.isdir(ETC_NETNS):
        for d in os.listdir(ETC_NETNS):
            if d.startswith(prefix + "-"):
                shutil.rmtree(os.path.join(ETC_NETNS, d), ignore_errors=True)
    shutil.rmtree(os.path.join(STATE_ROOT, prefix), ignore_errors=True)
    return gone


@dataclass
class NetnsCluster:
    """``nodes`` compute nodes plus a head, as namespaces (see the module docstring).

    The head gets the subnet's first host address, the nodes the following
    ones in order. Node names are short lowercase words (they also name links).
    """

    nodes: tuple[str, ...] = ("node1", "node2", "node3", "node4")
    prefix: str = DEFAULT_PREFIX
    subnet: str = DEFAULT_SUBNET
    addresses: dict[str, str] = field(default_factory=dict)
    up: set[str] = field(default_factory=set)
    _holders: dict[str, subprocess.Popen] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if not _PREFIX.match(self.prefix):
            raise ValueError(f"cluster prefix {self.prefix!r}: use 1-5 lowercase letters/digits, "
                             "starting with a letter")
        names = [HEAD, *self.nodes]
        for n in self.nodes:
            if not _NAME.match(n) or n == HEAD:
                raise ValueError(f"node name {n!r}: use 1-8 lowercase letters/digits, starting with a letter, "
                                 f"not {HEAD!r}")
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate node names in {self.nodes}")
        net = ipaddress.ip_network(self.subnet)
        if not net.is_private or net.version != 4:
            raise ValueError(f"subnet {self.subnet}: use a private IPv4 subnet such as {DEFAULT_SUBNET}")
        hosts = list(net.hosts())
        if len(hosts) < len(names):
            raise ValueError(f"subnet {self.subnet} has {len(hosts)} addresses for {len(names)} nodes")
        self.addresses = {n: str(hosts[i]) for i, n in enumerate(names)}

    @classmethod
    def load(cls, prefix: str = DEFAULT_PREFIX) -> NetnsCluster:
        """The cluster ``prefix`` made earlier (e.g. by ``reshape netns up``), with the nodes now up."""
        path = os.path.join(STATE_ROOT, prefix, "cluster.json")
        try:
            with open(path) as f:
                desc = json.load(f)
        except FileNotFoundError:
            raise NetnsError(f"no namespace cluster {prefix!r} (no {path}): make one with 'reshape netns up'") from None
        c = cls(tuple(desc["nodes"]), desc["prefix"], desc["subnet"])
        for node in (HEAD, *c.nodes):
            with contextlib.suppress(NetnsError):
                c.holder_pid(node)
                c.up.add(node)
        return c

    # ------------------------------------------------------------ naming
    @property
    def head(self) -> str:
        return HEAD

    @property
    def bridge(self) -> str:
        return f"{self.prefix}-br"

    @property
    def state_dir(self) -> str:
        return os.path.join(STATE_ROOT, self.prefix)

    @property
    def hosts_file(self) -> str:
        """The cluster's hosts file (``IP name`` lines), also read by the launcher."""
        return os.path.join(self.state_dir, "hosts")

    def ns(self, node: str) -> str:
        """The namespace of ``node`` (``head`` or a compute node)."""
        self._known(node)
        return f"{self.prefix}-{node}"

    def ip(self, node: str) -> str:
        self._known(node)
        return self.addresses[node]

    def _known(self, node: str) -> None:
        if node not in self.addresses:
            raise NetnsError(f"unknown node {node!r}: the cluster has {', '.join(self.addresses)}")

    # ------------------------------------------------------------ life cycle
    def create(self) -> NetnsCluster:
        """Make the head, the bridge and every node; on failure remove what was made and raise."""
        why = unavailable_reason()
        if why:
            raise NetnsError(f"cannot make a namespace cluster: {why}")
        cleanup(self.prefix)
        try:
            os.makedirs(self.state_dir, exist_ok=True)
            self._write_hosts()
            head = self.ns(HEAD)
            _ip("netns", "add", head)
            self._etc(HEAD)
            _ip("link", "set", "lo", "up", ns=head)
            _ip("link", "add", self.bridge, "type", "bridge", ns=head)
            # A bridge without its own MAC takes the lowest MAC of its ports, so adding or
            # removing a node could change the head's MAC and strand the nodes' ARP entries
            # for seconds (healthy nodes then missed heartbeats). Pin a locally administered one.
            _ip("link", "set", self.bridge, "address", BRIDGE_MAC, ns=head)
            plen = ipaddress.ip_network(self.subnet).prefixlen
            _ip("addr", "add", f"{self.ip(HEAD)}/{plen}", "dev", self.bridge, ns=head)
            _ip("link", "set", self.bridge, "up", ns=head)
            self._start_holder(HEAD)
            self.up.add(HEAD)
            for node in self.nodes:
                self.add_node(node)
            with open(os.path.join(self.state_dir, "cluster.json"), "w") as f:
                json.dump({"prefix": self.prefix, "subnet": self.subnet, "nodes": list(self.nodes),
                           "addresses": self.addresses}, f)
        except BaseException:
            cleanup(self.prefix)
            raise
        return self

    def add_node(self, node: str) -> None:
        """Create (or re-create, after :meth:`kill_node`) compute node ``node`` and join it to the bridge."""
        if node == HEAD:
            raise NetnsError("the head is made by create()")
        ns, head = self.ns(node), self.ns(HEAD)
        if ns in _namespaces():
            _remove_ns(ns)
        i = self.nodes.index(node) + 1
        outer = f"{self.prefix}-v{i}"
        plen = ipaddress.ip_network(self.subnet).prefixlen
        _ip("netns", "add", ns)
        self._etc(node)
        _ip("link", "set", "lo", "up", ns=ns)
        _ip("link", "add", outer, "netns", head, "type", "veth", "peer", "name", "eth0", "netns", ns)
        _ip("link", "set", outer, "master", self.bridge, ns=head)
        _ip("link", "set", outer, "up", ns=head)
        _ip("addr", "add", f"{self.ip(node)}/{plen}", "dev", "eth0", ns=ns)
        _ip("link", "set", "eth0", "up", ns=ns)
        self._start_holder(node)
        self.up.add(node)

    def _start_holder(self, node: str) -> None:
        """Start the process that keeps ``node``'s UTS, IPC and mount namespaces; record its pid."""
        ready = os.path.join(self.state_dir, f"{node}.ready")
        with contextlib.suppress(FileNotFoundError):
            os.unlink(ready)
        script = ('hostname "$0" && mount -t tmpfs -o mode=1777,size=256m tmpfs /dev/shm '
                  '&& touch "$1" && exec sleep infinity')
        proc = subprocess.Popen(
            ["ip", "netns", "exec", self.ns(node), "unshare", "--uts", "--ipc", "--mount", "--propagation",
             "private", "sh", "-c", script, node, ready],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True,
        )
        end = time.monotonic() + 10.0
        while not os.path.exists(ready):
            if proc.poll() is not None:
                raise NetnsError(f"node {node}: could not set up its namespaces: {proc.stderr.read().strip()}")
            if time.monotonic() > end:
                proc.kill()
                raise NetnsError(f"node {node}: namespace holder did not start within 10 s")
            time.sleep(0.01)
        proc.stderr.close()
        self._holders[node] = proc
        with open(self._pidfile(node), "w") as f:
            f.write(f"{proc.pid}\n")

    def _pidfile(self, node: str) -> str:
        return os.path.join(self.state_dir, f"{node}.pid")

    def holder_pid(self, node: str) -> int:
        """Pid of the process holding ``node``'s namespaces (``nsenter -t PID`` enters the node)."""
        try:
            with open(self._pidfile(node)) as f:
                pid = int(f.read())
        except (FileNotFoundError, ValueError):
            raise NetnsError(f"node {node!r} is down") from None
        if not _alive(pid):
            raise NetnsError(f"node {node!r} is down (its namespace holder {pid} is gone)")
        return pid

    def kill_node(self, node: str) -> list[int]:
        """Kill every process in ``node`` and delete its namespace (its veth goes with it); returns the pids."""
        if node == HEAD:
            raise NetnsError("kill_node is for compute nodes; use destroy() for the whole cluster")
        ns = self.ns(node)
        pids = _ns_pids(ns)
        _remove_ns(ns)
        self.up.discard(node)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self._pidfile(node))
        holder = self._holders.pop(node, None)
        if holder is not None:
            holder.wait()
        return pids

    def destroy(self) -> None:
        """Remove the whole cluster (idempotent)."""
        cleanup(self.prefix)
        self.up.clear()
        for holder in self._holders.values():
            holder.wait()
        self._holders.clear()

    def __enter__(self) -> NetnsCluster:
        return self.create()

    def __exit__(self, *exc) -> None:
        self.destroy()

    def _write_hosts(self) -> None:
        lines = ["127.0.0.1 localhost"] + [f"{ip} {n}" for n, ip in self.addresses.items()]
        with open(self.hosts_file, "w") as f:
            f.write("\n".join(lines) + "\n")

    def _etc(self, node: str) -> None:
        d = os.path.join(ETC_NETNS, self.ns(node))
        os.makedirs(d, exist_ok=True)
        shutil.copyfile(self.hosts_file, os.path.join(d, "hosts"))

    # ------------------------------------------------------------ processes
    def argv(self, node: str, argv: Sequence[str], cwd: str | None = None) -> list[str]:
        """``argv`` wrapped to run in ``node`` (all its namespaces; in ``cwd``, default the current directory)."""
        wd = cwd or os.getcwd()
        return ["nsenter", "-t", str(self.holder_pid(node)), "-n", "-u", "-i", "-m", f"--wd={wd}", *argv]

    def popen(self, node: str, argv: Sequence[str], **kw) -> subprocess.Popen:
        """Start ``argv`` in ``node`` (``subprocess.Popen`` keywords pass through)."""
        if node not in self.up:
            raise NetnsError(f"node {node!r} is down")
        return subprocess.Popen(self.argv(node, argv, kw.pop("cwd", None)), **kw)

    def run(self, node: str, argv: Sequence[str], timeout: float = 30.0, **kw) -> subprocess.CompletedProcess:
        """Run ``argv`` in ``node`` to completion (captures text output unless told otherwise)."""
        kw.setdefault("capture_output", True)
        kw.setdefault("text", True)
        return subprocess.run(self.argv(node, argv, kw.pop("cwd", None)), timeout=timeout, **kw)

    def pids(self, node: str) -> list[int]:
        """Processes running in ``node``'s namespace now."""
        return _ns_pids(self.ns(node))

    def mpi_env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        """Environment for ``mpiexec`` run in the head so that Hydra launches its proxies into the nodes.

        ``HYDRA_LAUNCHER_EXEC`` = the namespace launcher. ``HYDRA_LAUNCHER=lsf``:
        Hydra's lsf bootstrap is the same external launch as ssh (it runs
        ``EXEC -n HOST COMMAND``, where ssh gets ``EXEC -x HOST COMMAND``), and
        the resize runtime probes TCP port 22 of new hosts only for the ssh and
        rsh launchers (nodes here run no sshd), trusting other launchers.
        ``HYDRA_IFACE`` = the bridge, so that proxies call back to the head's
        cluster address (by default Hydra sends the machine's hostname, which
        the nodes cannot resolve). ``RESHAPE_NETNS_*`` tell the launcher the
        cluster.
        """
        env = {
            **LAUNCHERS["netns"].env(),
            "HYDRA_IFACE": self.bridge,
            E.NETNS_HOSTS: self.hosts_file,
            E.NETNS_PREFIX: self.prefix,
        }
        env.update(extra or {})
        return env

    def mpiexec(self, n: int, argv: Sequence[str], hosts: Sequence[str], *, timeout: float = 60.0,
                env: dict[str, str] | None = None, cwd: str | None = None) -> RunResult:
        """Run ``mpiexec -hosts HOSTS -n n python argv...`` from the head; kill whatever is left afterwards.

        Every process the run leaves in any node (proxies, ranks spawned by
        resizes) is killed when it ends or times out. Raises ``MPIRunError``
        on timeout; the exit status is in the result.
        """
        for h in hosts:
            self._known(h)
        cmd = [mpiexec_path(), "-hosts", ",".join(hosts), "-n", str(n), sys.executable, *argv]
        proc = subprocess.Popen(
            self.argv(HEAD, cmd, cwd), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=mpi_env({**self.mpi_env(), **(env or {})}), start_new_session=True,
        )
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_session(proc.pid)
            self._kill_jobs()
            out, err = proc.communicate()
            raise MPIRunError(f"timeout after {timeout}s: {' '.join(cmd)}\n--- stdout\n{out[-4000:]}\n"
                              f"--- stderr\n{err[-4000:]}") from None
        finally:
            if proc.poll() is None:
                kill_session(proc.pid)
        left = self._kill_jobs()
        return RunResult(proc.returncode, out, err, left)

    def _kill_jobs(self) -> list[int]:
        """Kill every process in the cluster except the namespace holders; returns their pids."""
        keep = {h.pid for h in self._holders.values()}
        pids = [p for node in self.up for p in self.pids(node) if p not in keep and p != os.getpid()]
        _kill_pids(pids)
        return pids


@contextlib.contextmanager
def cluster(nodes: Sequence[str] = ("node1", "node2"), prefix: str = DEFAULT_PREFIX,
            subnet: str = DEFAULT_SUBNET) -> Iterator[NetnsCluster]:
    """A cluster for the ``with`` block; always removed afterwards."""
    c = NetnsCluster(tuple(nodes), prefix, subnet)
    try:
        yield c.create()
    finally:
        c.destroy()


# ---------------------------------------------------------------- command line
def add_commands(subparsers) -> None:
    """``reshape netns up|down|status|exec``: manage a namespace cluster by hand."""
    p = subparsers.add_parser("netns", help="a multi-node test cluster of network namespaces on this machine (root)")
    sub = p.add_subparsers(dest="netns_command", metavar="ACTION", required=True)
    up = sub.add_parser("up", help="make the cluster (replacing one of the same prefix)")
    up.add_argument("--nodes", type=int, default=4, help="number of compute nodes node1..nodeN (default 4)")
    up.add_argument("--prefix", default=DEFAULT_PREFIX, help=f"name prefix (default {DEFAULT_PREFIX})")
    up.add_argument("--subnet", default=DEFAULT_SUBNET, help=f"private test subnet (default {DEFAULT_SUBNET})")
    up.set_defaults(func=_cmd_up)
    down = sub.add_parser("down", help="remove the cluster and everything running in it")
    down.add_argument("--prefix", default=DEFAULT_PREFIX)
    down.set_defaults(func=_cmd_down)
    st = sub.add_parser("status", help="nodes, addresses, state and process counts")
    st.add_argument("--prefix", default=DEFAULT_PREFIX)
    st.set_defaults(func=_cmd_status)
    ex = sub.add_parser("exec", help="run a command in a node (mpiexec in 'head' uses the node launcher)")
    ex.add_argument("--prefix", default=DEFAULT_PREFIX)
    ex.add_argument("node")
    ex.add_argument("argv", nargs=argparse.REMAINDER, help="the command (after --)")
    ex.set_defaults(func=_cmd_exec)
    kill = sub.add_parser("kill", help="make a node disappear (kill its processes, delete its namespace)")
    kill.add_argument("--prefix", default=DEFAULT_PREFIX)
    kill.add_argument("node")
    kill.set_defaults(func=_cmd_kill)
    rejoin = sub.add_parser("rejoin", help="bring a killed node back")
    rejoin.add_argument("--prefix", default=DEFAULT_PREFIX)
    rejoin.add_argument("node")
    rejoin.set_defaults(func=_cmd_rejoin)


def _fail(msg: str) -> int:
    print(f"reshape netns: {msg}", file=sys.stderr)
    return 1


def _cmd_up(args) -> int:
    try:
        if args.nodes < 1 or args.nodes > 64:
            return _fail(f"--nodes {args.nodes}: use 1..64")
        c = NetnsCluster(tuple(f"node{i}" for i in range(1, args.nodes + 1)), args.prefix, args.subnet).create()
    except (ValueError, NetnsError) as e:
        return _fail(str(e))
    _print_status(c)
    print(f"run MPI from the head (its environment selects the node launcher): "
          f"reshape netns exec {HEAD} -- mpiexec -hosts {','.join(c.nodes[:2])} -n 2 python ...")
    return 0


def _cmd_down(args) -> int:
    why = unavailable_reason()
    if why:
        return _fail(why)
    gone = cleanup(args.prefix)
    print(f"removed {len(gone)} namespaces" + (f": {' '.join(sorted(gone))}" if gone else ""))
    return 0


def _print_status(c: NetnsCluster) -> None:
    for node in (HEAD, *c.nodes):
        state = "up" if node in c.up else "down"
        n = len(c.pids(node)) if state == "up" else 0
        print(f"{node:10s} {c.ip(node):15s} {state:5s} ns={c.ns(node)} processes={n}")


def _cmd_status(args) -> int:
    try:
        _print_status(NetnsCluster.load(args.prefix))
    except NetnsError as e:
        return _fail(str(e))
    return 0


def _cmd_exec(args) -> int:
    argv = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
    if not argv:
        return _fail("exec: no command given (reshape netns exec NODE -- COMMAND ...)")
    try:
        c = NetnsCluster.load(args.prefix)
        if args.node not in c.up:
            c._known(args.node)
            return _fail(f"node {args.node!r} is down")
        return subprocess.call(c.argv(args.node, argv), env=os.environ | (c.mpi_env() if args.node == HEAD else {}))
    except NetnsError as e:
        return _fail(str(e))


def _cmd_kill(args) -> int:
    try:
        pids = NetnsCluster.load(args.prefix).kill_node(args.node)
    except NetnsError as e:
        return _fail(str(e))
    print(f"node {args.node} removed; killed {len(pids)} processes")
    return 0


def _cmd_rejoin(args) -> int:
    try:
        c = NetnsCluster.load(args.prefix)
        if args.node in c.up:
            return _fail(f"node {args.node!r} is up")
        c.add_node(args.node)
    except NetnsError as e:
        return _fail(str(e))
    print(f"node {args.node} is back at {c.ip(args.node)}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m scheduler.testing.netns ACTION ...`` (the same as ``reshape netns``)."""
    parser = argparse.ArgumentParser(prog="python -m scheduler.testing.netns")
    add_commands(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["netns", *(sys.argv[1:] if argv is None else argv)])
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
