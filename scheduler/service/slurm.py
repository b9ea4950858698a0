"""Slurm: the pool of the allocation the daemon runs in, and a pool that grows and shrinks through Slurm.

**Inside an allocation** (``salloc -N 3 reshape daemon``, or the same in an
``sbatch`` script): :func:`allocation_pool` reads ``SLURM_JOB_NODELIST`` (a
hostlist expression) and ``SLURM_JOB_CPUS_PER_NODE`` (``2(x3)`` form), one
slot per CPU; ranks reach the nodes with the ``slurm`` launcher
(``reshape.joblink.launchers``).

**Growing through Slurm** (``reshape daemon --slurm-grow``, run for one job
by ``reshape submit --slurm``; docs/slurm.md). The pool is the partition's
nodes; the ones Slurm gave us are up, the others down ("not ours"). The
Remap Scheduler decides as everywhere; :class:`Broker` (pure) turns what it
would do into Slurm operations, and :class:`SlurmEdge` (a thread) runs them:

* *grow*: when a running job would expand with one more node
  (``ClusterState.would_grow``), no other user's job is pending and Slurm
  has an idle node, submit an **expander job** (``-N 1``, named
  ``reshape-expand-<our job id>``, its script only waits while our job runs).
  When it runs, its node joins the pool and the job expands onto it at its
  next resize point, its new ranks started as steps of the expander job
  (``slurm-launch``). If Slurm grants nothing within ``grant_timeout`` the
  request is cancelled, the jobs keep their sizes, and nothing is asked for
  three more grant timeouts. This is the DMR/MaM
  mechanism; Slurm 22.05 has no way to grow a running job in place.
* *shrink*: when another user's job is pending, whole nodes no job uses go
  back to Slurm (``scontrol update JobId=N NodeList=<kept>`` on the job that
  holds them, our allocation or an expander; ``scancel`` of an expander left
  with no node), and if that is not enough the
  job holding the last nodes is asked to shrink off them (``shrink_request``)
  so that Slurm can start the pending job there. A granted node unused for
  ``idle_release`` seconds is returned too.

The node our batch script runs on (the daemon's) is never released.
"""

from __future__ import annotations

import contextlib
import os
import queue
import shlex
import socket
import subprocess
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

import hostlist

from scheduler.core.pool import Node, Pool, PoolError

__all__ = [
    "AskShrink",
    "Broker",
    "Cancel",
    "Drain",
    "Grant",
    "Lost",
    "Release",
    "SlurmEdge",
    "SlurmError",
    "SlurmJob",
    "Submit",
    "allocation_pool",
    "expander_name",
    "growing_pool",
    "parse_squeue",
    "partition_pool",
]

SQUEUE_FORMAT = "%i|%j|%T|%u|%D|%N|%r"
WAITING_FOR_NODES = ("Resources", "Priority")  # pending reasons that mean "needs nodes"


class SlurmError(RuntimeError):
    """A Slurm command failed; the message has the command and its error."""


def expander_name(main: str) -> str:
    return f"reshape-expand-{main}"


def allocation_pool(env: Mapping[str, str] = os.environ) -> Pool:
    """The pool of the Slurm allocation we run in: its nodes, one slot per allocated CPU."""
    nodelist, cpus = env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST"), env.get("SLURM_JOB_CPUS_PER_NODE")
    if not nodelist or not cpus:
        raise PoolError("not inside a Slurm allocation: SLURM_JOB_NODELIST and SLURM_JOB_CPUS_PER_NODE are unset")
    try:
        hosts = hostlist.expand_hostlist(nodelist)
        counts = hostlist.parse_slurm_tasks_per_node(cpus)
    except hostlist.BadHostlist as e:
        raise PoolError(f"cannot read the Slurm allocation (SLURM_JOB_NODELIST={nodelist!r}, "
                        f"SLURM_JOB_CPUS_PER_NODE={cpus!r}): {e}") from None
    if len(counts) != len(hosts):
        raise PoolError(f"SLURM_JOB_CPUS_PER_NODE={cpus!r} gives {len(counts)} counts for {len(hosts)} nodes "
                        f"({nodelist})")
    return Pool([Node(h, c) for h, c in zip(hosts, counts, strict=True)])


# ---------------------------------------------------------------------- squeue / sinfo output
@dataclass(frozen=True)
class SlurmJob:
    id: str
    name: str
    state: str
    user: str
    num_nodes: int
    nodes: tuple[str, ...]
    reason: str


def parse_squeue(text: str) -> list[SlurmJob]:
    """``squeue -h -o '%i|%j|%T|%u|%D|%N|%r'`` lines."""
    out = []
    for line in text.splitlines():
        parts = line.strip().split("|")
        if len(parts) != 7:
            continue
        jid, name, state, user, nn, nodes, reason = parts
        hosts = tuple(hostlist.expand_hostlist(nodes)) if nodes and nodes != "(null)" else ()
        out.append(SlurmJob(jid, name, state, user, int(nn) if nn.isdigit() else 0, hosts, reason))
    return out


def partition_pool(text: str, held: set[str]) -> Pool:
    """``sinfo -h -N -o '%N %c'`` lines as a pool: every node of the partition, slots = CPUs.
    Nodes not in ``held`` are down: not ours until Slurm gives them to us."""
    nodes: dict[str, int] = {}
    for line in text.split("\n"):
        parts = line.split()
        if len(parts) == 2 and parts[1].isdigit():
            nodes.setdefault(parts[0], int(parts[1]))
    missing = held - set(nodes)
    if missing:
        raise PoolError(f"our allocation's nodes {sorted(missing)} are not in the partition ({sorted(nodes)})")
    pool = Pool([Node(h, c) for h, c in nodes.items()])
    for h in nodes:
        if h not in held:
            pool.set_down(h)
    return pool


# ---------------------------------------------------------------------- broker (pure)
@dataclass(frozen=True)
class Submit:
    """Ask Slurm for ``nodes`` more nodes (one expander job)."""

    nodes: int = 1


@dataclass(frozen=True)
class Grant:
    host: str
    job: str
    waited: float = 0.0  # seconds from the expander's submission to seeing it run


@dataclass(frozen=True)
class Release:
    host: str
    job: str
    why: str


@dataclass(frozen=True)
class Lost:
    host: str
    why: str


@dataclass(frozen=True)
class Drain:
    """Place nothing new on ``host`` (``on``), or offer it again (not ``on``)."""

    host: str
    on: bool = True


@dataclass(frozen=True)
class Cancel:
    job: str
    why: str


@dataclass(frozen=True)
class AskShrink:
    job_id: int
    nprocs: int
    why: str
    drop: tuple[str, ...] = ()


@dataclass
class Broker:
    """Slurm's view plus the daemon's, in; pool changes and Slurm operations, out (module docstring)."""

    main: str
    main_nodes: list[str]
    batch_host: str
    grant_timeout: float = 10.0
    idle_release: float = 30.0
    held: dict[str, str] = field(default_factory=dict)      # host -> the Slurm job holding it for us
    requested: dict[str, float] = field(default_factory=dict)  # pending expander id -> submitted at
    submitting: bool = False
    idle_since: dict[str, float] = field(default_factory=dict)
    draining: set[str] = field(default_factory=set)  # held hosts promised back to Slurm
    given: dict[str, int] = field(default_factory=dict)  # waiting Slurm job -> nodes given back for it
    quiet_until: float = 0.0  # after a request Slurm did not grant, ask again only after 3 grant timeouts

    def __post_init__(self) -> None:
        for h in self.main_nodes:
            self.held.setdefault(h, self.main)

    def submitted(self, job: str | None, now: float) -> None:
        self.submitting = False
        if job:
            self.requested[job] = now

    def released(self, host: str) -> None:
        self.held.pop(host, None)
        self.idle_since.pop(host, None)
        self.draining.discard(host)

    def kept(self, job: str) -> list[str]:
        """The hosts Slurm job ``job`` still holds for us (empty: cancel it, it holds nothing we use)."""
        return [h for h, j in self.held.items() if j == job]

    def step(self, now: float, jobs: list[SlurmJob], idle_nodes: int, used: Mapping[str, int],
             grow_nodes: int, running: list[tuple[int, int, int, list[str]]]) -> list:
        """One look at Slurm. ``used``: slots in use per held host; ``grow_nodes``: nodes more the
        Remap Scheduler would expand a job onto if Slurm's idle nodes were ours (0: none);
        ``running``: (job id, nprocs, min_procs, hosts) of resizable jobs."""
        ops: list = []
        name = expander_name(self.main)
        mine = {j.id: j for j in jobs if j.name == name}
        for j in mine.values():
            if j.state == "RUNNING" and j.id in self.requested:
                waited = now - self.requested.pop(j.id)
                for h in j.nodes:
                    self.held[h] = j.id
                    ops.append(Grant(h, j.id, waited))
            elif j.state == "PENDING" and j.id in self.requested and now - self.requested[j.id] > self.grant_timeout:
                del self.requested[j.id]
                self.quiet_until = now + 3 * self.grant_timeout
                ops.append(Cancel(j.id, f"Slurm granted no node in {self.grant_timeout:g} s ({j.reason})"))
        for jid in [k for k in self.requested if k not in mine]:
            del self.requested[jid]  # cancelled or failed outside our control
        for h, jid in list(self.held.items()):
            if jid != self.main and (jid not in mine or mine[jid].state != "RUNNING"):
                del self.held[h]
                ops.append(Lost(h, f"expander job {jid} ended"))
        free = [h for h, jid in self.held.items() if not used.get(h) and h != self.batch_host]
        for h in list(self.idle_since):
            if h not in free:
                del self.idle_since[h]
        for h in free:
            self.idle_since.setdefault(h, now)
        waiting = [j for j in jobs if j.state == "PENDING" and j.name != name and j.reason in WAITING_FOR_NODES]
        self.draining &= set(self.held)
        if not waiting:
            ops += [Drain(h, False) for h in sorted(self.draining)]
            self.draining.clear()
            self.given.clear()
        else:
            w = waiting[0]
            self.given = {w.id: self.given.get(w.id, 0)}  # nodes given for a job that started count no more
            want = w.num_nodes - self.given[w.id]
            why = f"Slurm job {w.id} is waiting for {w.num_nodes} node(s)"
            ops += [Cancel(jid, why) for jid in self.requested]
            self.requested.clear()
            # the nodes promised back: free ones first, then the last nodes of the jobs asked to shrink
            for h in free:
                if len(self.draining) >= want:
                    break
                self.draining.add(h)
                ops.append(Drain(h))
            short = want - len(self.draining)
            if short > 0:
                for op in self._shrinks(short, running, why):
                    ops.append(op)
                    for h in op.drop:
                        if h not in self.draining:
                            self.draining.add(h)
                            ops.append(Drain(h))
            out = [h for h in sorted(self.draining) if h in free]
            self.given[w.id] += len(out)
            ops += [Release(h, self.held[h], why) for h in out]
            return ops
        for h in free:
            if now - self.idle_since[h] > self.idle_release and not grow_nodes:
                ops.append(Release(h, self.held[h], f"unused for {self.idle_release:g} s"))
        if (grow_nodes > 0 and not free and not self.requested and not self.submitting and idle_nodes > 0
                and now >= self.quiet_until):
            self.submitting = True
            ops.append(Submit(min(grow_nodes, idle_nodes)))
        return ops

    def _shrinks(self, nodes: int, running, why: str) -> list[AskShrink]:
        """Ask the jobs holding the last nodes to give up ``nodes`` whole nodes (retired ranks are the last)."""
        out = []
        for job_id, nprocs, min_procs, hosts in sorted(running, key=lambda r: -r[1]):
            order = list(dict.fromkeys(hosts))
            drop = [h for h in reversed(order) if h != self.batch_host and h in self.held][:nodes]
            k = nprocs  # the ranks on the dropped hosts must be the job's last ranks
            while k > 0 and hosts[k - 1] in drop:
                k -= 1
            if drop and min_procs <= k < nprocs:
                gone = tuple(dict.fromkeys(hosts[k:]))
                out.append(AskShrink(job_id, k, why, gone))
                nodes -= len(gone)
            if nodes <= 0:
                break
        return out


# ---------------------------------------------------------------------- edge (I/O thread)
def run(argv: list[str], timeout: float = 15.0) -> str:
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except FileNotFoundError:
        raise SlurmError(f"{argv[0]} not found: is this a Slurm node?") from None
    except subprocess.TimeoutExpired:
        raise SlurmError(f"{shlex.join(argv)} did not answer in {timeout:g} s") from None
    if r.returncode != 0:
        raise SlurmError(f"{shlex.join(argv)} failed: {(r.stderr or r.stdout).strip()}")
    return r.stdout


def expander_script(main: str) -> str:
    """The expander job's script: hold the node while job ``main`` runs (3 misses in a row: it ended)."""
    return (f"miss=0; while [ $miss -lt 3 ]; do "
            f"if squeue -h -t R -o %i | grep -qx {main}; then miss=0; else miss=$((miss+1)); fi; "
            f"sleep 2; done")


def _partition(name: str | None) -> list[str]:
    return ["-p", name] if name else []


def growing_pool(params: Mapping[str, float], env: Mapping[str, str] = os.environ
                 ) -> tuple[Pool, Broker, SlurmEdge, str]:
    """For ``reshape daemon --slurm-grow``: the partition's nodes as the pool (the allocation's up),
    the broker (``params``: grant_timeout, idle_release), its Slurm thread, and a description."""
    main = env.get("SLURM_JOB_ID")
    if not main:
        raise SlurmError("--slurm-grow needs to run inside a Slurm job (no SLURM_JOB_ID)")
    ours = [n.host for n in allocation_pool(env).nodes]
    part = env.get("SLURM_JOB_PARTITION")
    pool = partition_pool(run(["sinfo", "-h", "-N", *_partition(part), "-o", "%N %c"]), set(ours))
    batch = env.get("SLURMD_NODENAME") or socket.gethostname()
    broker = Broker(main, ours, batch if batch in ours else ours[0], **params)
    what = f"Slurm partition {part or '(default)'}, growing through Slurm from allocation {main} ({','.join(ours)})"
    return pool, broker, SlurmEdge(main, part), what


class SlurmEdge:
    """Runs Slurm commands off the daemon's loop: a look every ``period`` s, operations as queued."""

    def __init__(self, main: str, partition: str | None, period: float = 1.0):
        self.main, self.period = main, period
        self.part = _partition(partition)
        self.inbox: queue.SimpleQueue = queue.SimpleQueue()   # to the daemon's loop
        self.outbox: queue.SimpleQueue = queue.SimpleQueue()  # from it
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="slurm", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, cancel_expanders: bool = True) -> None:
        self._stop.set()
        self.outbox.put(None)
        self._thread.join(timeout=10)
        if cancel_expanders:
            with contextlib.suppress(SlurmError):
                run(["scancel", "--name", expander_name(self.main)])

    def _look(self) -> None:
        jobs = parse_squeue(run(["squeue", "-h", *self.part, "-o", SQUEUE_FORMAT]))
        idle = sum(int(x) for x in run(["sinfo", "-h", *self.part, "-t", "idle", "-o", "%D"]).split() if x.isdigit())
        self.inbox.put(("view", jobs, idle))

    def _do(self, op) -> None:
        kind = op[0]
        if kind == "submit":
            t0 = time.time()
            try:
                out = run(["sbatch", "--parsable", "-N", str(op[1]), *self.part, "--job-name", expander_name(self.main),
                           "--output", "/dev/null", "--wrap", expander_script(self.main)])
                self.inbox.put(("submitted", out.strip().split(";")[0], t0, None))
            except SlurmError as e:
                self.inbox.put(("submitted", None, t0, str(e)))
        elif kind == "cancel":
            run(["scancel", op[1]])
        elif kind == "keep":  # shrink one of our Slurm jobs (allocation or expander) to these nodes
            run(["scontrol", "update", f"JobId={op[1]}", f"NodeList={','.join(op[2])}"])
        self.inbox.put(("done", kind, time.time()))

    def _run(self) -> None:
        last = 0.0
        while not self._stop.is_set():
            try:
                op = self.outbox.get(timeout=max(0.0, last + self.period - time.monotonic()))
            except queue.Empty:
                op = ()
            if op is None:
                break
            try:
                if op:
                    self._do(op)
                else:
                    last = time.monotonic()
                    self._look()
            except SlurmError as e:
                self.inbox.put(("error", str(e)))
