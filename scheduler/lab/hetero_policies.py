"""Lynch's (1999) space-sharing policies on networks of multiprocessor nodes: NS, SS, DNS, DSS.

Lynch (1999), "Parallel job scheduling on heterogeneous networks of
multiprocessor workstations". A network is a tuple of nodes,
each ``size`` processors of one ``speed``; a job is ``threads`` SPMD threads
whose allocation is a set of *partitions* (node, processors, threads). Threads
never move between nodes once a job starts; the dynamic policies may change a
job's processor count inside a node (folding its threads), at no cost but the
folding penalty.

These policies place jobs on nodes, which the slot-count contract of
:mod:`scheduler.core.policy` leaves out ("placement is not a policy decision
there"), so they have their own small contract here: a frozen
:class:`NetSnapshot` in, a list of :class:`Place` / :class:`SetProcs`
decisions out, applied in order. They are still pure objects over plain data,
driven by :mod:`scheduler.lab.hetero`.

=======  =========================================================================
``ns``   Never-Span (§6.1): an arrival takes up to ``t`` free processors of the one
         node that gives it the fastest per-thread rate; processors freed by a
         departure are dealt one at a time, round-robin, to the queued jobs (FCFS),
         each job that gets one starting on that node.
``ss``   Span-Sometimes (§6.2): processors are added one at a time, best benefit
         first, while they bring the job's alternative capacity ``K_λ`` closer to
         the target ``K(S) / jobs in system``.
``dns``  Dynamic Never-Span (§6.3): the job goes to the node whose equipartition
         (with it) gives an average capacity per job closest to the target; that
         node's processors are re-equipartitioned among its jobs.
``dss``  Dynamic Span-Sometimes (§6.4): SS that may also steal processors from
         running jobs (never a victim's last processor on a node); victims keep
         their threads and fold.
=======  =========================================================================

Choices where the thesis is lost or ambiguous (each a parameter):

* alternative capacity, form B (notes §6.2):
  ``K_λ(A) = Σ_i K_i · (1 − λ (K(A) − K_i) / K(A))``; ``form="A"`` gives
  ``Σ_i K_i − λ (K(A) − K_i)``.
* direction of the spanning factor: ``lam = 1 − sigma`` (the §5.4 reading,
  σ = 0 never spans, σ = 1 ignores nodes) unless ``sigma_is_penalty=True``
  (the §4.2.1 reading, ``lam = sigma``). Default σ = 0.1 as in the results.
* SS/DSS always grant a first processor when one is free (work conserving),
  and stop at the first non-positive benefit (no dithering).
* ties: a node the job already uses, then more free processors, then lower
  node index; free processors before stolen ones.
* DNS re-equipartitions a node whenever its set of jobs changes (on a
  departure with an empty queue this hands the freed processors to the
  node's remaining jobs); uneven shares go to jobs in start order.
* DSS hands processors that a departure leaves idle (after the queue has
  had its turn) to running jobs folded on that node, in start order
  (``give_back=True``, the default). The thesis does not say; without it the
  idle processors wait for the next arrival and DSS on the single-node
  Network 1 is about twice as slow as DNS, whereas the thesis finds the two
  alike there (§5.1: "both reduce to equipartition variants"). SS, being
  adaptive, never changes a running job's allocation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from scheduler.core.policy import make, names, register

__all__ = [
    "PSI",
    "DNSPolicy",
    "DSSPolicy",
    "NSPolicy",
    "NetPolicy",
    "NetSnapshot",
    "Node",
    "Part",
    "Place",
    "QueuedJob",
    "RunningNetJob",
    "SSPolicy",
    "SetProcs",
    "alt_capacity",
    "d_comm",
    "equipartition",
    "fold_factor",
    "net_policy",
    "net_policy_names",
    "place_threads",
    "thread_rate",
]

PSI = 0.91


# --------------------------------------------------------------------------
# plain data
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class Node:
    """A shared-memory node: ``size`` processors of speed ``speed``."""

    size: int
    speed: float

    @property
    def capacity(self) -> float:
        return self.size * self.speed


@dataclass(frozen=True)
class Part:
    """A job's partition on one node: ``procs`` processors running ``threads`` threads."""

    node: int
    procs: int
    threads: int


@dataclass(frozen=True)
class QueuedJob:
    job_id: int
    threads: int


@dataclass(frozen=True)
class RunningNetJob:
    job_id: int
    threads: int
    parts: tuple[Part, ...]


@dataclass(frozen=True)
class NetSnapshot:
    """What a network policy sees; ``free[i]`` is node i's idle processor count."""

    now: float
    nodes: tuple[Node, ...]
    free: tuple[int, ...]
    queue: tuple[QueuedJob, ...]  # FCFS
    running: tuple[RunningNetJob, ...]  # start order

    @property
    def capacity(self) -> float:
        return sum(n.capacity for n in self.nodes)

    @property
    def jobs_in_system(self) -> int:
        return len(self.queue) + len(self.running)


@dataclass(frozen=True)
class Place:
    """Start queued job ``job_id`` on ``parts`` (threads per node fixed from now on)."""

    job_id: int
    parts: tuple[Part, ...]


@dataclass(frozen=True)
class SetProcs:
    """Give running job ``job_id`` ``procs`` processors on ``node`` (its threads there stay)."""

    job_id: int
    node: int
    procs: int


Event = Literal["arrival", "departure"]


# --------------------------------------------------------------------------
# model pieces shared with the simulator
# --------------------------------------------------------------------------


def fold_factor(x: float, psi: float = PSI) -> float:
    """Folding efficiency φ(x) at ``x`` threads per processor: ``ψ^log2(x)`` for x > 1.

    The thesis's formula is lost (notes §2.2); this mild form (φ(128) ≈ 0.52)
    keeps speedup monotone in processors and small re-allocations cheap, as
    the text requires.
    """
    return 1.0 if x <= 1.0 else psi ** math.log2(x)


def thread_rate(speed: float, procs: int, threads: int, psi: float = PSI) -> float:
    """Per-thread compute rate of ``threads`` threads folded onto ``procs`` processors."""
    if procs >= threads:
        return speed
    x = threads / procs
    return speed / x * fold_factor(x, psi)


def d_comm(x: int) -> float:
    """Bytes sent per instruction by an ``x``-thread job: log-linear fit to SPLASH-2 (Table 3.1).

    The fitted formula is lost; a least-squares fit of all seven points in
    log2 space gives ``0.0789 + 0.2151 log2 x`` (notes §4). D(1) = 0.
    """
    return 0.0 if x <= 1 else 0.0789 + 0.2151 * math.log2(x)


def equipartition(total: int, demands: list[int]) -> list[int]:
    """Water-filling split of ``total`` processors, each share capped at its demand.

    Leftover single processors go to the earliest entries (start order).
    """
    alloc = [0] * len(demands)
    left = total
    active = [i for i, d in enumerate(demands) if d > 0]
    while left > 0 and active:
        share, extra = divmod(left, len(active))
        if share == 0:
            for i in active[:extra]:
                alloc[i] += 1
            break
        for i in active:
            g = min(share, demands[i] - alloc[i])
            alloc[i] += g
            left -= g
        active = [i for i in active if alloc[i] < demands[i]]
    return alloc


def alt_capacity(caps: list[float], lam: float, form: str = "B") -> float:
    """Alternative capacity ``K_λ`` of a job holding capacity ``caps[i]`` on each of its nodes.

    Reconstructed (notes §6.2): the capacity with, at each node, a deduction
    that grows with the capacity the job has *elsewhere* (its remote
    communication there). Both forms equal K for a single node or λ = 0.
    """
    k = sum(caps)
    if k <= 0:
        return 0.0
    if form == "A":
        return sum(c - lam * (k - c) for c in caps)
    return sum(c * (1.0 - lam * (k - c) / k) for c in caps)


def place_threads(threads: int, procs: dict[int, int], nodes: tuple[Node, ...]) -> tuple[Part, ...]:
    """Spread ``threads`` over a processor set in proportion to capacity (notes §5.3).

    Node i gets ``floor(t K_i / K)`` threads, the remainder one at a time to
    the largest deficit (ties: lower node index); a node with fewer threads
    than processors keeps one processor per thread, and a node with no thread
    is dropped. Partitions come out in node order.
    """
    used = sorted(n for n, k in procs.items() if k > 0)
    if threads < 1 or not used:
        raise ValueError("need at least one thread and one processor")
    caps = {n: procs[n] * nodes[n].speed for n in used}
    total = sum(caps.values())
    ideal = {n: threads * caps[n] / total for n in used}
    got = {n: math.floor(ideal[n] + 1e-9) for n in used}
    rest = threads - sum(got.values())
    while rest > 0:
        n = max(used, key=lambda m: (ideal[m] - got[m], -m))
        got[n] += 1
        rest -= 1
    return tuple(Part(n, min(procs[n], got[n]), got[n]) for n in used if got[n] > 0)


# --------------------------------------------------------------------------
# policies
# --------------------------------------------------------------------------


class NetPolicy:
    """A network policy: ``decide(snap, event)`` returns decisions applied in order."""

    name = "?"

    def decide(self, snap: NetSnapshot, event: Event) -> list[Place | SetProcs]:  # pragma: no cover
        raise NotImplementedError


def _register(name: str):
    def deco(cls):
        cls.name = name
        return register("net", name)(cls)

    return deco


def net_policy(name: str, **params) -> NetPolicy:
    """Build the network policy called ``name`` (``ns``, ``ss``, ``dns``, ``dss``)."""
    return make("net", name, **params)


def net_policy_names() -> list[str]:
    return names("net")


@_register("ns")
class NSPolicy(NetPolicy):
    """Never-Span: greedy, one node per job, allocation fixed for life (§6.1)."""

    def __init__(self, psi: float = PSI):
        self.psi = psi

    def decide(self, snap: NetSnapshot, event: Event) -> list[Place | SetProcs]:
        free = list(snap.free)
        queue = list(snap.queue)
        out: list[Place | SetProcs] = []
        if event == "departure" and len(queue) > 1:
            # deal each node's free processors one at a time over the queue (FCFS)
            for n in range(len(free)):
                if not free[n] or not queue:
                    continue
                got = {q.job_id: 0 for q in queue}
                progress = True
                while free[n] and progress:
                    progress = False
                    for q in queue:
                        if free[n] and got[q.job_id] < q.threads:
                            got[q.job_id] += 1
                            free[n] -= 1
                            progress = True
                for q in list(queue):
                    if got[q.job_id]:
                        out.append(Place(q.job_id, (Part(n, got[q.job_id], q.threads),)))
                        queue.remove(q)
        for q in list(queue):
            cands = [n for n in range(len(free)) if free[n] > 0]
            if not cands:
                break
            n = max(cands, key=lambda m, q=q: (
                thread_rate(snap.nodes[m].speed, min(free[m], q.threads), q.threads, self.psi), -m))
            k = min(free[n], q.threads)
            free[n] -= k
            out.append(Place(q.job_id, (Part(n, k, q.threads),)))
        return out


@_register("dns")
class DNSPolicy(NetPolicy):
    """Dynamic Never-Span: node equipartition, closest average capacity to target (§6.3)."""

    def decide(self, snap: NetSnapshot, event: Event) -> list[Place | SetProcs]:
        nodes = snap.nodes
        k_t = snap.capacity / max(snap.jobs_in_system, 1)
        on: list[list[tuple[int, int]]] = [[] for _ in nodes]  # (job_id, threads) in start order
        cur: dict[tuple[int, int], int] = {}
        for r in snap.running:
            for p in r.parts:
                on[p.node].append((r.job_id, p.threads))
                cur[(r.job_id, p.node)] = p.procs
        changed: set[int] = set()
        placed: dict[int, int] = {}
        for q in snap.queue:
            best = None
            for n, node in enumerate(nodes):
                if len(on[n]) + 1 > node.size:
                    continue
                alloc = equipartition(node.size, [t for _, t in on[n]] + [q.threads])
                avg = node.speed * sum(alloc) / (len(on[n]) + 1)
                key = (abs(avg - k_t), n)
                if best is None or key < best[0]:
                    best = (key, n)
            if best is None:
                break  # every node holds one job per processor; later jobs cannot fit either
            n = best[1]
            on[n].append((q.job_id, q.threads))
            placed[q.job_id] = n
            changed.add(n)
        if event == "departure":
            changed.update(n for n, f in enumerate(snap.free) if f > 0 and on[n])
        out: list[Place | SetProcs] = []
        new_parts: dict[int, Part] = {}
        shrink: list[SetProcs] = []
        grow: list[SetProcs] = []
        for n in sorted(changed):
            alloc = equipartition(nodes[n].size, [t for _, t in on[n]])
            for (jid, t), k in zip(on[n], alloc, strict=True):
                if jid in placed and placed[jid] == n:
                    new_parts[jid] = Part(n, k, t)
                elif cur[(jid, n)] > k:
                    shrink.append(SetProcs(jid, n, k))
                elif cur[(jid, n)] < k:
                    grow.append(SetProcs(jid, n, k))
        out.extend(shrink)
        out.extend(Place(q.job_id, (new_parts[q.job_id],)) for q in snap.queue if q.job_id in new_parts)
        out.extend(grow)
        return out


@_register("ss")
class SSPolicy(NetPolicy):
    """Span-Sometimes: add processors while they bring ``K_λ`` closer to the target (§6.2)."""

    steal = False

    def __init__(
        self,
        sigma: float = 0.1,
        *,
        sigma_is_penalty: bool = False,
        form: str = "B",
        first_always: bool = True,
        give_back: bool = True,
    ):
        if not 0.0 <= sigma <= 1.0:
            raise ValueError(f"sigma must be in [0, 1], got {sigma}")
        if form not in ("A", "B"):
            raise ValueError(f"form must be 'A' or 'B', got {form!r}")
        self.sigma = sigma
        self.lam = sigma if sigma_is_penalty else 1.0 - sigma
        self.form = form
        self.first_always = first_always
        self.give_back = give_back

    def _kl(self, procs: dict[int, int], nodes: tuple[Node, ...]) -> float:
        return alt_capacity([k * nodes[n].speed for n, k in procs.items() if k > 0], self.lam, self.form)

    def decide(self, snap: NetSnapshot, event: Event) -> list[Place | SetProcs]:
        nodes = snap.nodes
        free = list(snap.free)
        k_t = snap.capacity / max(snap.jobs_in_system, 1)
        victims = {r.job_id: {p.node: p.procs for p in r.parts} for r in snap.running}
        out: list[Place | SetProcs] = []
        for q in snap.queue:
            a: dict[int, int] = {}
            while sum(a.values()) < q.threads:
                base = abs(k_t - self._kl(a, nodes))
                best = None
                for n in range(len(nodes)):
                    if free[n] <= 0:
                        continue
                    a2 = dict(a)
                    a2[n] = a2.get(n, 0) + 1
                    gain = base - abs(k_t - self._kl(a2, nodes))
                    key = (gain, 1, n in a, free[n], -n)
                    if best is None or key > best[0]:
                        best = (key, n, None)
                if self.steal:
                    for vid, vp in victims.items():
                        vbase = abs(k_t - self._kl(vp, nodes))
                        for n, k in vp.items():
                            if k < 2:
                                continue
                            a2 = dict(a)
                            a2[n] = a2.get(n, 0) + 1
                            vp2 = dict(vp)
                            vp2[n] = k - 1
                            gain = (base - abs(k_t - self._kl(a2, nodes))) + (
                                vbase - abs(k_t - self._kl(vp2, nodes)))
                            key = (gain, 0, n in a, k, -n)
                            if best is None or key > best[0]:
                                best = (key, n, vid)
                if best is None:
                    break
                gain = best[0][0]
                if gain <= 1e-12 and not (self.first_always and not a):
                    break
                _, n, vid = best
                a[n] = a.get(n, 0) + 1
                if vid is None:
                    free[n] -= 1
                else:
                    victims[vid][n] -= 1
                    out.append(SetProcs(vid, n, victims[vid][n]))
            if not a:
                continue
            parts = place_threads(q.threads, a, nodes)
            for p in parts:
                free[p.node] += a[p.node] - p.procs
            for n in a:
                if all(p.node != n for p in parts):
                    free[n] += a[n]
            out.append(Place(q.job_id, parts))
        if self.steal and self.give_back and event == "departure":
            out.extend(_give_back(snap, free, victims))
        return out


def _give_back(snap: NetSnapshot, free: list[int], procs: dict[int, dict[int, int]]) -> list[SetProcs]:
    """Hand idle processors to running jobs folded on that node (start order)."""
    out = []
    for r in snap.running:
        for p in r.parts:
            k = procs[r.job_id][p.node]
            add = min(free[p.node], p.threads - k)
            if add > 0:
                free[p.node] -= add
                procs[r.job_id][p.node] = k + add
                out.append(SetProcs(r.job_id, p.node, k + add))
    return out


@_register("dss")
class DSSPolicy(SSPolicy):
    """Dynamic Span-Sometimes: SS plus stealing from running jobs (§6.4)."""

    steal = True
