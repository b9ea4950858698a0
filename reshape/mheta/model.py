"""MHETA: per-iteration time of any GEN_BLOCK split from one instrumented iteration.

Nakazawa 2005 ch. 5. Inputs: the application structure
(:mod:`reshape.mheta.structure`) and a :class:`Profile` measured in one
iteration under BLOCK (per node: per-stage computation time ``T_phi``, seek
overheads ``O_r``/``O_w``, per-row read/write latencies ``r(m)``/``w(m)``,
memory; and the microbenchmarked communication costs).

Equations mapped to code (``_stage_time``, ``_send_overhead``, ``evaluate``):

* computation ``T_phi' = T_phi * W'/W`` with ``W`` the rows held (§5.3.1);
* ``N_L = ceil(rows / ICLA)`` pieces from :func:`plan_memory`;
* synchronous I/O (Eq. 5.1) ``N_L (O_r + O_w) + (r + w) * rows``: the thesis
  writes ``N_L * T_r(M_iota)``; we charge the rows really moved, so a partial
  last piece costs its own rows (exact for our streaming, documented choice);
* prefetch (Eq. 5.2 unrolled, Fig. 5.7) as :meth:`LocalStore.stream` does it:
  the first piece's read in full, the read of piece ``k+1`` (its seek
  included: it runs in the background thread) hidden behind the computation
  and write-back of piece ``k``, ``T_A = (T_phi + writes) / N_L`` under the
  candidate split: ``O_r + T_r(first) + sum_k max(0, O_r + T_r(k) - T_A) +
  N_L O_A`` plus the writes. (The thesis's loop waits before the write-back
  and charges ``O_r`` in full; ours overlaps both, and the model follows the
  code it predicts.)
* ``T_gamma = T_phi + sum T_psi``, ``T_tau = sum T_gamma`` (per section);
* send overhead ``O_S + (O_r + r * M_q`` if the message's source is out of
  core) (§5.3.2);
* nearest neighbour (Eqs. 5.11, 5.12): per-node send-completion times,
  waiting for the slowest sender; reduction (Eqs. 5.7-5.9 generalised): the
  root waits for every contribution, computes ``T_r``, sends the result in
  rank order; pipeline (Eqs. 5.4, 5.5 and the ``T_p`` recurrence): per tile
  wait for the upper neighbour;
* sections accumulate on a per-node clock of absolute times (§5.3.4);
  ``T_I(i)`` is node ``i``'s clock at the end, the prediction ``max_i T_I(i)``.

``node_cost(i, x)`` is ``f_i(x)``, node ``i``'s time without blocking
(computation + I/O + send/receive overheads), monotone in ``x``, for GBS/GS.
Nearest-neighbour links join consecutive nodes that hold rows; every node
takes part in reductions.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from reshape.mheta.structure import AppStructure, Section, Stage, StructureError, max_resident_rows, plan_memory

__all__ = ["CommProfile", "Mheta", "NodeProfile", "Prediction", "Profile", "load_profile"]


@dataclass(frozen=True)
class NodeProfile:
    """One node's measurements from the instrumented BLOCK iteration."""

    rows: int
    memory: int
    compute: dict[str, float]  # stage -> T_phi seconds
    read_seek: float = 0.0  # O_r
    write_seek: float = 0.0  # O_w
    read_row: dict[str, float] = field(default_factory=dict)  # array -> r(m), s/row
    write_row: dict[str, float] = field(default_factory=dict)  # array -> w(m), s/row
    async_overhead: float = 0.0  # O_A


@dataclass(frozen=True)
class CommProfile:
    """Microbenchmarked message costs: overheads, latency + per-byte transfer, T_r."""

    send_overhead: float = 0.0
    recv_overhead: float = 0.0
    latency: float = 0.0
    per_byte: float = 0.0
    reduce_time: float = 0.0

    def transfer(self, nbytes: int) -> float:
        return self.latency + self.per_byte * nbytes


@dataclass(frozen=True)
class Profile:
    nodes: tuple[NodeProfile, ...]
    comm: CommProfile

    def to_dict(self) -> dict:
        return {"nodes": [asdict(n) for n in self.nodes], "comm": asdict(self.comm)}

    @classmethod
    def from_dict(cls, d: dict) -> Profile:
        return cls(tuple(NodeProfile(**n) for n in d["nodes"]), CommProfile(**d["comm"]))

    def dump(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=1))


def load_profile(path: str | Path) -> Profile:
    return Profile.from_dict(json.loads(Path(path).read_text()))


@dataclass(frozen=True)
class Prediction:
    time: float  # max_i T_I(i)
    node_times: tuple[float, ...]  # T_I(i) with blocking
    unblocked: tuple[float, ...]  # f_i(x_i)


class Mheta:
    """The model for one application on one set of nodes (see module docstring)."""

    def __init__(self, app: AppStructure, profile: Profile):
        names = set(app.stage_names())
        for i, n in enumerate(profile.nodes):
            missing = names - set(n.compute)
            if missing:
                raise StructureError(f"profile of node {i} lacks stages {sorted(missing)}")
            unknown = set(n.compute) - names
            if unknown:
                raise StructureError(
                    f"profile of node {i} has unknown stages {sorted(unknown)} "
                    f"(structure {app.name!r} has {sorted(names)})"
                )
            if n.rows <= 0:
                raise StructureError(f"node {i} held no rows in the instrumented iteration")
        self.app = app
        self.profile = profile
        self.p = len(profile.nodes)
        self._plans: dict[tuple[int, int], dict[str, int | None]] = {}
        self._tau: dict[tuple[int, int, int], float] = {}
        # the most rows each node can run at all (its resident arrays in core); beyond: infinite time
        self.hold = tuple(max_resident_rows(app, n.memory) for n in profile.nodes)

    # ---- one node --------------------------------------------------------
    def plan(self, i: int, rows: int) -> dict[str, int | None]:
        key = (i, rows)
        if key not in self._plans:
            self._plans[key] = plan_memory(self.app, rows, self.profile.nodes[i].memory)
        return self._plans[key]

    def _stage_time(self, i: int, st: Stage, rows: int, tiles: int) -> float:
        n = self.profile.nodes[i]
        phi = n.compute[st.name] * (rows / n.rows if st.scales else 1.0) / tiles
        plan = self.plan(i, rows)
        ooc = [m for m in dict.fromkeys((*st.reads, *st.writes)) if plan.get(m) is not None and rows]
        writes = {m: math.ceil(rows / plan[m]) * n.write_seek + n.write_row.get(m, 0.0) * rows
                  for m in ooc if m in st.writes}
        t = phi + sum(writes.values())
        for m in ooc:
            if m not in st.reads:
                continue
            icla = plan[m]
            nl = math.ceil(rows / icla)
            r = n.read_row.get(m, 0.0)
            if st.prefetch and nl > 1:
                # the read of piece k+1 runs while piece k is computed and written back
                ta = (phi + sum(writes.values())) / nl
                hidden = sum(max(0.0, n.read_seek + r * min(icla, rows - k * icla) - ta) for k in range(1, nl))
                t += n.read_seek + r * min(icla, rows) + hidden + nl * n.async_overhead
            else:
                t += nl * n.read_seek + r * rows
        return t

    def section_work(self, i: int, k: int, rows: int) -> float:
        """``T_tau`` of section ``k`` on node ``i`` holding ``rows`` rows (all tiles); infinite
        beyond the rows the node can run at all (:attr:`hold`: its resident arrays do not fit)."""
        if rows > self.hold[i]:
            return math.inf
        key = (i, k, rows)
        v = self._tau.get(key)
        if v is None:
            sec = self.app.sections[k]
            v = sum(self._stage_time(i, st, rows, 1) for st in sec.stages)
            self._tau[key] = v
        return v

    def _send_overhead(self, i: int, sec: Section, rows: int) -> float:
        c = self.profile.comm
        o = c.send_overhead
        src = sec.comm.source
        if src is not None and 0 < rows <= self.hold[i] and self.plan(i, rows).get(src) is not None:
            n = self.profile.nodes[i]
            o += n.read_seek + n.read_row.get(src, 0.0) * min(sec.comm.source_rows, rows)
        return o

    def node_cost(self, i: int, rows: int) -> float:
        """``f_i(x_i)``: node ``i``'s unblocked time (computation + I/O + overheads)."""
        c = self.profile.comm
        t = 0.0
        for k, sec in enumerate(self.app.sections):
            t += self.section_work(i, k, rows)
            pat = sec.comm.pattern
            if pat == "none" or self.p == 1:
                continue
            o = self._send_overhead(i, sec, rows)
            if pat == "nearest-neighbour":
                deg = (i > 0) + (i < self.p - 1)
                t += deg * (o + c.recv_overhead)
            elif pat == "reduction":
                if i == sec.comm.root % self.p:
                    t += (self.p - 1) * (c.recv_overhead + o) + c.reduce_time
                else:
                    t += o + c.recv_overhead
            else:  # pipeline: one receive (not node 0) and one send (not the last) per tile
                t += sec.tiles * ((i > 0) * c.recv_overhead + (i < self.p - 1) * o)
        return t

    # ---- all nodes ---------------------------------------------------------
    def evaluate(self, x: Sequence[int]) -> Prediction:
        """Predicted per-iteration time of split ``x`` (with blocking), and each ``f_i``."""
        p = self.p
        if len(x) != p:
            raise StructureError(f"split {list(x)} has {len(x)} parts for {p} nodes")
        if sum(x) != self.app.rows or min(x) < 0:
            raise StructureError(
                f"split {list(x)} sums to {sum(x)}, but the array has {self.app.rows} rows"
            )
        c = self.profile.comm
        clock = [0.0] * p
        for k, sec in enumerate(self.app.sections):
            tau = [self.section_work(i, k, x[i]) for i in range(p)]
            osend = [self._send_overhead(i, sec, x[i]) for i in range(p)]
            pat = sec.comm.pattern if p > 1 else "none"
            q = c.transfer(sec.comm.bytes)
            if pat == "none":
                clock = [clock[i] + tau[i] for i in range(p)]
            elif pat == "nearest-neighbour":
                clock = self._nearest(clock, tau, osend, x, q)
            elif pat == "reduction":
                clock = self._reduction(clock, tau, osend, sec.comm.root % p, q)
            else:
                clock = self._pipeline(clock, tau, osend, sec.tiles, x, q)
        unblocked = tuple(self.node_cost(i, x[i]) for i in range(p))
        return Prediction(max(clock), tuple(clock), unblocked)

    def predict(self, x: Sequence[int]) -> float:
        return self.evaluate(x).time

    def _nearest(self, clock, tau, osend, x, q):
        c = self.profile.comm
        active = [i for i in range(len(x)) if x[i] > 0]
        nbrs = {i: [] for i in range(len(x))}
        for a, b in itertools.pairwise(active):
            nbrs[a].append(b)
            nbrs[b].append(a)
        ready = [clock[i] + tau[i] for i in range(len(x))]
        out = list(ready)
        for i in active:
            nb = sorted(nbrs[i])  # send order: lower neighbour first (Eq. 5.11)
            sent = ready[i] + len(nb) * osend[i]
            arrive = max(
                (ready[j] + (sorted(nbrs[j]).index(i) + 1) * osend[j] + q for j in nb),
                default=0.0,
            )
            out[i] = max(sent, arrive) + len(nb) * c.recv_overhead  # Eq. 5.12 wait
        return out

    def _reduction(self, clock, tau, osend, root, q):
        c = self.profile.comm
        p = len(clock)
        ready = [clock[i] + tau[i] for i in range(p)]
        arrive = max((ready[i] + osend[i] + q for i in range(p) if i != root), default=0.0)
        done = max(ready[root], arrive) + (p - 1) * c.recv_overhead + c.reduce_time  # Eq. 5.7
        out = [0.0] * p
        k = 0
        for i in range(p):
            if i == root:
                continue
            k += 1
            alpha = done + k * osend[root] + q  # T_alpha(i)
            out[i] = max(ready[i] + osend[i], alpha) + c.recv_overhead  # Eq. 5.9
        out[root] = done + (p - 1) * osend[root]
        return out

    def _pipeline(self, clock, tau, osend, tiles, x, q):
        c = self.profile.comm
        order = [i for i in range(len(x)) if x[i] > 0]
        out = [clock[i] + tau[i] for i in range(len(x))]
        prev_done: list[float] | None = None  # T_p(i-1, j) per tile
        for pos, i in enumerate(order):
            t = clock[i]
            done = []
            for j in range(tiles):
                if prev_done is not None:
                    t = max(t, prev_done[j] + q) + c.recv_overhead  # Eq. 5.5 / T_p recurrence
                t += tau[i] / tiles
                if pos < len(order) - 1:
                    t += osend[i]
                done.append(t)
            out[i] = t
            prev_done = done
        return out
