"""Lynch's (1999) machine and job model and its event-driven simulator.

Machine: nodes of ``size`` processors at one ``speed`` (total capacity 12800
in every preset). Inside a node communication is free; between nodes every
remote partner costs the same, with no contention (notes §1).

Job progress rate (notes §5.1, reconstructed): a job of ``t`` threads with
partitions (node i, ``k_i`` processors, ``t_i`` threads) does useful work per
thread at

    g_i = thread_rate(s_i, k_i, t_i) / (1 + c · D(t) · f_i),   f_i = (t − t_i)/(t − 1)

and, its threads synchronising often, the job advances at ``R = min_i g_i``;
it finishes when its per-thread work ``W`` is done. ``f_i`` is the fraction of
a thread's partners that sit on other nodes (we use ``t − 1`` partners, the
notes' first choice). Rates are recomputed at every allocation change and the
completion rescheduled (a version counter voids stale completion events).

The event loop follows :mod:`scheduler.lab.simulator`: a ``(time, seq)`` heap,
policy output validated before it is applied (:class:`scheduler.core.actions.PolicyError`
naming the policy and the decision), per-job records and metrics from
:mod:`scheduler.core.metrics`. Metrics: mean response time (MRT, departure −
arrival) after discarding the first ``warmup`` jobs, mean partitions per
job, utilisation, and a saturation flag when the queue passes ``max_queue``.
"""

from __future__ import annotations

import argparse
import heapq
import json
import math
import random
import statistics
import sys
import time
from dataclasses import dataclass, field

from scheduler.core.actions import PolicyError
from scheduler.core.metrics import JobRecord
from scheduler.lab.hetero_policies import (
    PSI,
    NetPolicy,
    NetSnapshot,
    Node,
    Part,
    Place,
    QueuedJob,
    RunningNetJob,
    SetProcs,
    d_comm,
    net_policy,
    net_policy_names,
    thread_rate,
)
from scheduler.lab.workloads.lynch import HeteroJob, generate

__all__ = [
    "NETWORKS",
    "NetResult",
    "NetSimulator",
    "add_command",
    "cv",
    "job_rate",
    "network",
    "random_network",
    "run_network_policies",
    "skewness",
]

C_RATIO = 2.0


def _uniform(n: int, size: int, speed: float) -> tuple[Node, ...]:
    return tuple(Node(size, speed) for _ in range(n))


def _sizes(sizes: list[int], speed: float = 100.0) -> tuple[Node, ...]:
    return tuple(Node(s, speed) for s in sizes)


def _speeds(speeds: list[float], size: int = 8) -> tuple[Node, ...]:
    return tuple(Node(size, s) for s in speeds)


# Networks 1, 11-16 (substitutes with the thesis's CVs: notes §7.1) and 35-40.
NETWORKS: dict[str, tuple[Node, ...]] = {
    "1": (Node(128, 100.0),),
    "11": _speeds([80.0] * 8 + [120.0] * 8),
    "12": _speeds([60.0] * 4 + [70.0] * 4 + [100.0] * 4 + [170.0] * 4),
    "13": _speeds([50.0] * 12 + [250.0] * 4),
    "14": _sizes([1, 4, 4, 4, *[8] * 9, 11, 16, 16]),
    "15": _sizes([1, 1, 1, 2, 4, 4, *[8] * 7, 16, 16, 27]),
    "16": _sizes([1, 1, 1, 2, 2, 2, 2, 4, 4, 4, 4, 8, 16, 16, 29, 32]),
    "35": _uniform(16, 1, 800.0),
    "36": _uniform(16, 2, 400.0),
    "37": _uniform(16, 4, 200.0),
    "38": _uniform(16, 8, 100.0),
    "39": _uniform(16, 10, 80.0),
    "40": _uniform(16, 16, 50.0),
}


def network(spec: str) -> tuple[Node, ...]:
    """A preset by number, or ``SIZExSPEED,SIZExSPEED,...`` (e.g. ``8x100,8x150``)."""
    if spec in NETWORKS:
        return NETWORKS[spec]
    if spec.startswith(("size:", "speed:")):  # size:CV[:SEED] / speed:CV[:SEED]
        kind, *rest = spec.split(":")
        try:
            return random_network(kind, float(rest[0]), int(rest[1]) if len(rest) > 1 else 0)
        except (ValueError, IndexError) as e:
            raise ValueError(f"bad network {spec!r}: {e}") from None
    try:
        nodes = tuple(Node(int(a), float(b)) for a, b in (x.split("x") for x in spec.split(",")))
    except ValueError:
        raise ValueError(
            f"bad network {spec!r}: give a preset ({', '.join(NETWORKS)}) or SIZExSPEED,... "
        ) from None
    if not nodes or any(n.size < 1 or not n.speed > 0 for n in nodes):
        raise ValueError(f"bad network {spec!r}: sizes must be >= 1 and speeds > 0")
    return nodes


def cv(values: list[float]) -> float:
    """Coefficient of variation with the population standard deviation."""
    m = statistics.fmean(values)
    return statistics.pstdev(values) / m if m else 0.0


def skewness(values: list[float]) -> float:
    """Standard sample skewness (adjusted Fisher-Pearson); 0 for constant values."""
    n = len(values)
    m = statistics.fmean(values)
    s = statistics.stdev(values) if n > 1 else 0.0
    if n < 3 or s == 0:
        return 0.0
    return n / ((n - 1) * (n - 2)) * sum(((x - m) / s) ** 3 for x in values)


def random_network(kind: str, target_cv: float, seed: int = 0, *, nodes: int = 16, tol: float = 0.02,
                   capacity: float = 12800.0) -> tuple[Node, ...]:
    """A random ``nodes``-node network of total ``capacity`` whose size or speed CV is ``target_cv``.

    For Networks 17-34, whose per-node values are lost (notes §7.1): ``kind``
    ``"size"`` varies node sizes in 1..32 at speed 100, ``"speed"`` varies
    speeds in 60..300 (steps of 10) at size 8. A random start is improved by
    random transfers between two nodes (total kept) that move the CV towards
    the target, until it is within ``tol``; seeds give networks of the same CV
    with different skewness (:func:`skewness`).
    """
    if kind not in ("size", "speed"):
        raise ValueError(f"kind must be 'size' or 'speed', got {kind!r}")
    rng = random.Random(f"net:{kind}:{target_cv}:{seed}")
    if kind == "size":
        lo, hi, step, total = 1, 32, 1, round(capacity / 100.0)
    else:
        lo, hi, step, total = 60, 300, 10, round(capacity / 8.0)
    if not nodes * lo <= total <= nodes * hi:
        raise ValueError(f"capacity {capacity} cannot be split over {nodes} nodes")
    vals = [total // nodes] * nodes
    for i in range((total - sum(vals)) // step):
        vals[i % nodes] += step
    for _ in range(200_000):
        err = abs(cv(vals) - target_cv)
        if err <= tol:
            break
        i, j = rng.randrange(nodes), rng.randrange(nodes)
        d = step * rng.randint(1, 4)
        if i == j or vals[i] - d < lo or vals[j] + d > hi:
            continue
        vals[i] -= d
        vals[j] += d
        if abs(cv(vals) - target_cv) > err and rng.random() > 0.05:
            vals[i] += d
            vals[j] -= d
    else:
        raise ValueError(f"no {kind} network with CV {target_cv} +- {tol} found")
    if kind == "size":
        return tuple(Node(v, 100.0) for v in vals)
    return tuple(Node(8, float(v)) for v in vals)


def job_rate(threads: int, parts: dict[int, list[int]] | tuple[Part, ...], nodes: tuple[Node, ...],
             c: float = C_RATIO, psi: float = PSI) -> float:
    """Per-thread progress rate ``R = min_i g_i`` of a job (module docstring)."""
    items = [(p.node, p.procs, p.threads) for p in parts] if isinstance(parts, tuple) else [
        (n, kt[0], kt[1]) for n, kt in parts.items()]
    dc = c * d_comm(threads)
    r = math.inf
    for n, k, t_i in items:
        f = (threads - t_i) / (threads - 1) if threads > 1 else 0.0
        r = min(r, thread_rate(nodes[n].speed, k, t_i, psi) / (1.0 + dc * f))
    return r


class _Run:
    __slots__ = ("imbalance", "job", "last", "nparts", "parts", "rate", "rem", "start", "version")

    def __init__(self, job: HeteroJob, now: float):
        self.job = job
        self.parts: dict[int, list[int]] = {}  # node -> [procs, threads]
        self.rem = job.work
        self.rate = 0.0
        self.last = now
        self.start = now
        self.version = 0
        self.nparts = 0
        self.imbalance = 1.0


@dataclass
class NetResult:
    policy: str
    records: list[JobRecord]
    partitions: list[int]
    busy_area: float
    processors: int
    saturated: bool = False
    warmup: int = 0
    imbalance: list[float] = field(default_factory=list)

    def metrics(self) -> dict[str, float]:
        kept = [(r, p) for r, p in zip(self.records, self.partitions, strict=True) if r.job_id >= self.warmup]
        if self.saturated or not kept:
            return {"policy": self.policy, "jobs": len(kept), "saturated": self.saturated,
                    "mrt": math.inf, "mean_partitions": math.nan, "utilization": math.nan}
        rs = [r for r, _ in kept]
        t0 = min(r.submit for r in self.records)
        t1 = max(r.finish for r in self.records)
        return {
            "policy": self.policy,
            "jobs": len(rs),
            "saturated": False,
            "mrt": statistics.fmean(r.turnaround for r in rs),
            "median_rt": statistics.median(r.turnaround for r in rs),
            "mean_wait": statistics.fmean(r.wait for r in rs),
            "mean_partitions": statistics.fmean(p for _, p in kept),
            "utilization": self.busy_area / (self.processors * max(t1 - t0, 1e-12)),
            "mean_imbalance": statistics.fmean(self.imbalance) if self.imbalance else 1.0,
        }


class NetSimulator:
    """Run ``jobs`` on ``nodes`` under a network policy (see the module docstring)."""

    def __init__(self, nodes: tuple[Node, ...], jobs: list[HeteroJob], policy: NetPolicy, *,
                 c: float = C_RATIO, psi: float = PSI, warmup: int = 0, max_queue: int | None = None):
        if not nodes:
            raise ValueError("a network needs at least one node")
        ids = [j.job_id for j in jobs]
        if len(set(ids)) != len(ids):
            raise ValueError("job ids must be unique")
        for j in jobs:
            if j.threads < 1 or not j.work > 0:
                raise ValueError(f"job {j.job_id}: needs >= 1 thread and positive work")
        self.nodes = nodes
        self.jobs = sorted(jobs, key=lambda j: (j.arrival, j.job_id))
        self.policy = policy
        self.c, self.psi = c, psi
        self.warmup = warmup
        self.max_queue = max_queue
        self.free = [n.size for n in nodes]
        self.procs = sum(n.size for n in nodes)
        self.now = 0.0
        self._queue: dict[int, HeteroJob] = {}  # insertion order = FCFS
        self._run: dict[int, _Run] = {}  # insertion order = start order
        self._heap: list[tuple[float, int, int, int]] = []
        self._seq = 0
        self._busy = 0.0
        self._held = 0
        self.records: list[JobRecord] = []
        self.partitions: list[int] = []
        self.imbalance: list[float] = []

    def snapshot(self) -> NetSnapshot:
        return NetSnapshot(
            self.now, self.nodes, tuple(self.free),
            tuple(QueuedJob(j.job_id, j.threads) for j in self._queue.values()),
            tuple(RunningNetJob(r.job.job_id, r.job.threads,
                                tuple(Part(n, kt[0], kt[1]) for n, kt in sorted(r.parts.items())))
                  for r in self._run.values()),
        )

    def _advance(self, t: float) -> None:
        self._busy += self._held * (t - self.now)
        self.now = t

    def _bad(self, d, why: str) -> PolicyError:
        return PolicyError(f"network policy {self.policy.name!r} at t={self.now:g}: {d!r}: {why}")

    def _rerate(self, r: _Run) -> None:
        r.rem = max(0.0, r.rem - r.rate * (self.now - r.last))
        r.last = self.now
        r.rate = job_rate(r.job.threads, r.parts, self.nodes, self.c, self.psi)
        rates = [thread_rate(self.nodes[n].speed, k, t, self.psi) for n, (k, t) in r.parts.items()]
        r.imbalance = max(r.imbalance, max(rates) / min(rates))
        r.version += 1
        self._seq += 1
        heapq.heappush(self._heap, (self.now + r.rem / r.rate, self._seq, r.job.job_id, r.version))

    def _apply(self, decisions: list) -> None:
        for d in decisions:
            if isinstance(d, Place):
                job = self._queue.get(d.job_id)
                if job is None:
                    raise self._bad(d, "job is not queued")
                nodes_used = [p.node for p in d.parts]
                if not d.parts or len(set(nodes_used)) != len(nodes_used):
                    raise self._bad(d, "needs one partition per node, at least one")
                if sum(p.threads for p in d.parts) != job.threads:
                    raise self._bad(d, f"threads do not add up to {job.threads}")
                for p in d.parts:
                    if not 0 <= p.node < len(self.nodes) or not 1 <= p.procs <= p.threads:
                        raise self._bad(d, f"partition {p} is not 1 <= procs <= threads on a real node")
                    if p.procs > self.free[p.node]:
                        raise self._bad(d, f"node {p.node} has {self.free[p.node]} free processors")
                del self._queue[d.job_id]
                r = _Run(job, self.now)
                for p in d.parts:
                    self.free[p.node] -= p.procs
                    self._held += p.procs
                    r.parts[p.node] = [p.procs, p.threads]
                r.nparts = len(d.parts)
                self._run[job.job_id] = r
                self._rerate(r)
            elif isinstance(d, SetProcs):
                r = self._run.get(d.job_id)
                if r is None or d.node not in r.parts:
                    raise self._bad(d, "no such running job partition")
                k, t = r.parts[d.node]
                if not 1 <= d.procs <= t:
                    raise self._bad(d, f"procs must be in [1, {t}] (threads on that node)")
                if d.procs - k > self.free[d.node]:
                    raise self._bad(d, f"node {d.node} has {self.free[d.node]} free processors")
                if d.procs != k:
                    self.free[d.node] -= d.procs - k
                    self._held += d.procs - k
                    r.parts[d.node][0] = d.procs
                    self._rerate(r)
            else:
                raise self._bad(d, "not a Place or SetProcs decision")

    def run(self) -> NetResult:
        saturated = False
        i, n = 0, len(self.jobs)
        heap = self._heap
        while i < n or heap:
            if heap and (i >= n or heap[0][0] <= self.jobs[i].arrival):
                t, _, jid, ver = heapq.heappop(heap)
                r = self._run.get(jid)
                if r is None or r.version != ver:
                    continue
                self._advance(t)
                del self._run[jid]
                for node, (k, _t) in r.parts.items():
                    self.free[node] += k
                    self._held -= k
                j = r.job
                self.records.append(JobRecord(jid, j.arrival, r.start, t, j.work / 100.0, j.threads))
                self.partitions.append(r.nparts)
                self.imbalance.append(r.imbalance)
                event = "departure"
            else:
                j = self.jobs[i]
                i += 1
                self._advance(j.arrival)
                self._queue[j.job_id] = j
                event = "arrival"
                if self.max_queue is not None and len(self._queue) > self.max_queue:
                    saturated = True
                    break
            self._apply(self.policy.decide(self.snapshot(), event))
            if not heap and self._queue and i >= n:
                raise PolicyError(
                    f"network policy {self.policy.name!r} left {len(self._queue)} job(s) queued on "
                    "an idle network")
        return NetResult(self.policy.name, self.records, self.partitions, self._busy, self.procs,
                         saturated, self.warmup, self.imbalance)


def run_network_policies(nodes: tuple[Node, ...], jobs: list[HeteroJob], names: list[str], *,
                         params: dict | None = None, **kw) -> dict[str, dict]:
    """Simulate the same jobs under each named policy; ``{name: metrics + sim_seconds}``."""
    policies = {n: net_policy(n, **(params or {}).get(n, {})) for n in names}
    out = {}
    for name, pol in policies.items():
        t0 = time.perf_counter()
        m = NetSimulator(nodes, jobs, pol, **kw).run().metrics()
        m["sim_seconds"] = time.perf_counter() - t0
        out[name] = m
    return out


# --------------------------------------------------------------------------
# command line: reshape hetero
# --------------------------------------------------------------------------


def _run_cli(args: argparse.Namespace) -> int:
    try:
        if args.jobs < 1:
            raise ValueError(f"--jobs must be >= 1, got {args.jobs}")
        if args.sigma is not None and not 0 <= args.sigma <= 1:
            raise ValueError(f"--sigma must be in [0, 1], got {args.sigma}")
        names = args.policy or ["ns", "ss", "dns", "dss"]
        for nm in names:
            net_policy(nm)
        nets = [(s, network(s)) for s in args.network]
        loads = args.load
        for ld in loads:
            if not ld > 0:
                raise ValueError(f"--load must be positive, got {ld}")
    except ValueError as e:
        print(f"reshape hetero: error: {e}", file=sys.stderr)
        return 2
    params = {n: {"sigma": args.sigma} for n in ("ss", "dss") if args.sigma is not None}
    rows = []
    for spec, nodes in nets:
        cap = sum(nd.capacity for nd in nodes)
        for ld in loads:
            mrt = {}
            for seed in range(args.seeds):
                jobs = generate(args.jobs, ld, seed, capacity=cap)
                res = run_network_policies(nodes, jobs, names, params=params, warmup=args.warmup,
                                           max_queue=args.max_queue)
                for nm, m in res.items():
                    mrt.setdefault(nm, []).append(m)
            for nm in names:
                ms = mrt[nm]
                rows.append({
                    "network": spec, "load": ld, "policy": nm,
                    "mrt": statistics.fmean(m["mrt"] for m in ms),
                    "mean_partitions": statistics.fmean(m["mean_partitions"] for m in ms),
                    "utilization": statistics.fmean(m["utilization"] for m in ms),
                    "saturated": sum(bool(m["saturated"]) for m in ms),
                    "sim_seconds": sum(m["sim_seconds"] for m in ms),
                })
    if args.json:
        print(json.dumps({"jobs": args.jobs, "seeds": args.seeds, "rows": rows}, indent=1))
        return 0
    print(f"{args.jobs} jobs x {args.seeds} seeds, warm-up {args.warmup}; MRT in seconds")
    print(f"{'network':>8} {'load':>5} {'policy':>6} {'MRT':>10} {'parts/job':>9} {'util':>6} {'sat':>4} {'sim s':>6}")
    for r in rows:
        print(f"{r['network']:>8} {r['load']:>5.2f} {r['policy']:>6} {r['mrt']:>10.0f} "
              f"{r['mean_partitions']:>9.2f} {r['utilization']:>6.3f} {r['saturated']:>4} {r['sim_seconds']:>6.2f}")
    return 0


def add_command(subparsers) -> None:
    """Register ``reshape hetero``: Lynch's (1999) policies on a network of multiprocessor nodes."""
    p = subparsers.add_parser(
        "hetero",
        help="Lynch 1999: NS/SS/DNS/DSS on a heterogeneous network of multiprocessor nodes",
        description="Simulate Lynch's (1999) space-sharing policies on generated Feitelson-model "
        f"workloads. Networks: {', '.join(NETWORKS)} or SIZExSPEED,...; policies: "
        f"{', '.join(net_policy_names())}.",
    )
    p.add_argument("--network", action="append", default=None, metavar="N",
                   help="network preset or SIZExSPEED,... (repeatable; default 13)")
    p.add_argument("--policy", action="append", metavar="NAME", help="ns, ss, dns, dss (repeatable)")
    p.add_argument("--load", type=float, action="append", default=None,
                   help="offered load (repeatable; default 0.3)")
    p.add_argument("--jobs", type=int, default=2000, help="jobs per run (default 2000)")
    p.add_argument("--seeds", type=int, default=3, help="replications (default 3)")
    p.add_argument("--warmup", type=int, default=100, help="jobs discarded at the start (default 100)")
    p.add_argument("--max-queue", type=int, default=1500, help="saturation guard (default 1500)")
    p.add_argument("--sigma", type=float, default=None, help="spanning factor for ss/dss (default 0.1)")
    p.add_argument("--json", action="store_true", help="print JSON")

    def _defaults(args: argparse.Namespace) -> int:
        args.network = args.network or ["13"]
        args.load = args.load or [0.3]
        return _run_cli(args)

    p.set_defaults(func=_defaults)
