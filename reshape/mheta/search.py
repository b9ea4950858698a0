"""Searches for a GEN_BLOCK row split: GBS, GS, GA and SA (Nakazawa 2005, ch. 4).

The problem (§4.2): choose non-negative integers ``x`` with ``sum(x) == S``
minimising ``max_i f_i(x_i)``; ``f_i`` is node ``i``'s unblocked time
(computation + I/O + message overheads) from MHETA. GBS and GS use the per-node
costs ``f(i, x_i)``; GA and SA use the full objective (the predicted iteration
time with blocking) when one is given, else ``max_i f_i``.

Every search is *anytime*: it records the best objective found so far with its
timestamp (``SearchResult.trace``) and stops when its wall-clock budget is
spent, returning the best so far.

Choices where the thesis is silent or ambiguous:

* Random starts are uniform over all compositions of ``S`` into ``P`` parts
  (stars and bars), shifted by ``min_rows``.
* GBS lines 6-9 (the transfer amount): a bisection for the crossing point of
  ``f_0(x_0 - t)`` (non-increasing in ``t``) and ``f_j(x_j + t)``
  (non-decreasing), taking the ``t >= 1`` that minimises the pair's maximum.
  The literal ``(x_j + x_0)/2`` arithmetic fails when ``x_j > x_0``.
* GS moves rows from the maximum node to the minimum node with the same
  bisection, and stops when the minimum node cannot take one more row while
  staying below the maximum (thesis §4.2.2: it compares only those two).
* GA: cumulative boundaries encoding (Fig. 4.3), population 100, the two best
  kept as parents, two-point crossover, mutation probability 5% moving one
  boundary by up to 5% of ``S``; non-monotone children are dropped (replaced
  by fresh random members).
* SA: the tailored transition (remove a random number of rows from the
  maximum node, hand them out with weights ``F_max - F_i + eps``), Boltzmann
  acceptance with ``K_B * T0 = 0.05 * F(start)``, geometric cooling 0.9 every
  ``n_iters = 20`` proposals, restart (zero the maximum node) after
  ``n_iters`` proposals without improvement.
* ``min_rows`` (default 0) is a lower bound on every ``x_i``; GBS stays optimal
  with it (substitute ``y = x - min_rows``).
"""

from __future__ import annotations

import itertools
import math
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

__all__ = [
    "NodeCost",
    "SearchError",
    "SearchResult",
    "certify",
    "descend",
    "exhaustive",
    "ga",
    "gbs",
    "gs",
    "random_split",
    "sa",
]

NodeCost = Callable[[int, int], float]
Objective = Callable[[Sequence[int]], float]


class SearchError(ValueError):
    """Impossible search input (no nodes, too few rows for ``min_rows``, ...)."""


@dataclass
class SearchResult:
    """Best split found, its objective, and the best-so-far trace ``[(seconds, value)]``."""

    split: tuple[int, ...]
    value: float
    trace: list[tuple[float, float]] = field(default_factory=list)
    evaluations: int = 0
    certified: bool = False  # GBS/GS: the optimality certificate holds at the end
    seconds: float = 0.0

    def best_at(self, t: float) -> float:
        """Best objective reached within ``t`` seconds (``inf`` before the first)."""
        v = math.inf
        for ts, val in self.trace:
            if ts > t:
                break
            v = val
        return v


class _Clock:
    def __init__(self, budget: float | None, objective: Objective | None, f: NodeCost | None):
        self.t0 = time.perf_counter()
        self.budget = math.inf if budget is None else float(budget)
        self.objective = objective
        self.f = f
        self.best: tuple[int, ...] | None = None
        self.value = math.inf
        self.trace: list[tuple[float, float]] = []
        self.evals = 0

    def out(self) -> bool:
        return time.perf_counter() - self.t0 >= self.budget

    def score(self, x: Sequence[int]) -> float:
        self.evals += 1
        if self.objective is not None:
            v = float(self.objective(x))
        else:
            assert self.f is not None
            v = max(self.f(i, xi) for i, xi in enumerate(x))
        if v < self.value:
            self.value, self.best = v, tuple(int(a) for a in x)
            self.trace.append((time.perf_counter() - self.t0, v))
        return v

    def result(self, certified: bool = False) -> SearchResult:
        assert self.best is not None
        return SearchResult(self.best, self.value, self.trace, self.evals, certified,
                            time.perf_counter() - self.t0)


def _check(p: int, s: int, min_rows: int) -> None:
    if p < 1:
        raise SearchError(f"need at least one node, got {p}")
    if s < 0 or min_rows < 0:
        raise SearchError(f"rows ({s}) and min_rows ({min_rows}) must be non-negative")
    if p * min_rows > s:
        raise SearchError(f"{s} rows cannot give {p} nodes at least {min_rows} rows each")


def random_split(p: int, s: int, rng: random.Random, min_rows: int = 0) -> list[int]:
    """A split drawn uniformly from all compositions of ``s`` into ``p`` parts >= ``min_rows``."""
    _check(p, s, min_rows)
    free = s - p * min_rows
    # stars and bars: p-1 distinct bars among free + p - 1 slots
    bars = sorted(rng.sample(range(free + p - 1), p - 1)) if p > 1 else []
    out, prev = [], -1
    for b in [*bars, free + p - 1]:
        out.append(b - prev - 1 + min_rows)
        prev = b
    return out


def _start(p: int, s: int, start, rng, min_rows: int) -> list[int]:
    _check(p, s, min_rows)
    if start is None:
        return random_split(p, s, rng, min_rows)
    x = [int(a) for a in start]
    if len(x) != p or sum(x) != s or min(x) < min_rows:
        raise SearchError(f"start {x} is not a split of {s} rows over {p} nodes (>= {min_rows})")
    return x


def _transfer(f: NodeCost, src: int, xs: int, dst: int, xd: int, min_rows: int) -> int:
    """Rows ``t >= 1`` to move from ``src`` to ``dst`` minimising the pair's maximum."""
    hi = xs - min_rows  # largest possible t
    lo = 1
    # largest t in [1, hi] with f_dst(xd + t) <= f_src(xs - t); bisection (monotone costs)
    if f(dst, xd + 1) > f(src, xs - 1):
        return 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if f(dst, xd + mid) <= f(src, xs - mid):
            lo = mid
        else:
            hi = mid - 1
    t = lo
    if t + 1 <= xs - min_rows:
        a = max(f(src, xs - t), f(dst, xd + t))
        b = max(f(src, xs - t - 1), f(dst, xd + t + 1))
        if b < a:
            t += 1
    return t


def certify(f: NodeCost, x: Sequence[int], min_rows: int = 0) -> bool:
    """GBS's optimality certificate (Theorem 4) for monotone non-decreasing ``f``.

    With ``b`` a node of maximum cost: if ``x_b == min_rows`` or every other node
    ``j`` has ``f_j(x_j + 1) >= f_b(x_b)``, no split has a smaller maximum.
    """
    vals = [f(i, xi) for i, xi in enumerate(x)]
    b = max(range(len(x)), key=lambda i: vals[i])
    if x[b] <= min_rows:
        return True
    return all(f(j, x[j] + 1) >= vals[b] for j in range(len(x)) if j != b)


def descend(objective: Objective, x: Sequence[int], clock: _Clock, min_rows: int = 0) -> list[int]:
    """Steepest descent on the full objective from ``x`` (within ``clock``'s budget).

    A step tries moving ``t`` in 1, 2, 4, ... rows from one node to another,
    and, when no such move helps, ``t`` rows from each of two nodes to a third
    (two nodes tied at a section's maximum must both shed rows before the
    maximum falls); it takes the move that lowers the objective most and stops
    when none does. GBS's finish when blocking matters (see :func:`gbs`).
    """
    x = list(x)
    cur = clock.score(x)
    p = len(x)

    def best_move(donors: list[tuple[int, ...]]) -> tuple[float, tuple | None]:
        best, move = cur, None
        for ds in donors:
            t = 1
            while t <= min(x[d] for d in ds) - min_rows and not clock.out():
                for j in range(p):
                    if j in ds:
                        continue
                    for d in ds:
                        x[d] -= t
                    x[j] += len(ds) * t
                    v = clock.score(x)
                    for d in ds:
                        x[d] += t
                    x[j] -= len(ds) * t
                    if v < best:
                        best, move = v, (ds, j, t)
                t *= 2
        return best, move

    while not clock.out():
        best, move = best_move([(i,) for i in range(p)])
        if move is None:
            best, move = best_move(list(itertools.combinations(range(p), 2)))
        if move is None:
            break
        ds, j, t = move
        for d in ds:
            x[d] -= t
        x[j] += len(ds) * t
        cur = best
    return x


def gbs(
    f: NodeCost,
    p: int,
    s: int,
    *,
    start: Sequence[int] | None = None,
    rng: random.Random | None = None,
    budget: float | None = None,
    objective: Objective | None = None,
    min_rows: int = 0,
    finish: bool = False,
) -> SearchResult:
    """Generalized Binary Search (Fig. 4.2): optimal for monotone ``f`` when it completes.

    Nodes are sorted by decreasing cost; from the least-loaded node upward, the
    first ``j`` with ``f_j(x_j + 1) < f_0(x_0)`` receives rows from the
    bottleneck (bisection, see module notes); then re-sort and restart at the
    least-loaded node. Ends when no ``j`` passes the test: the certificate.

    GBS optimises ``max_i f_i``, the time *without* blocking (§4.2); the
    predicted time with blocking can be lower elsewhere (with a reduction per
    section it is the sum over sections of each section's slowest node, which
    GBS's per-node sums do not see: CG). With ``finish=True`` and an
    ``objective``, GBS's certified split is the start of :func:`descend` on the
    objective for the rest of the budget ("GBS-B"); ``certified`` still refers to GBS's
    own problem.
    """
    rng = rng or random.Random()
    clock = _Clock(budget, objective, f)
    x = _start(p, s, start, rng, min_rows)
    clock.score(x)
    vals = [f(i, xi) for i, xi in enumerate(x)]
    done = False
    while not clock.out():
        order = sorted(range(p), key=lambda i: -vals[i])
        top = order[0]
        moved = False
        if x[top] > min_rows:
            for j in reversed(order[1:]):
                if f(j, x[j] + 1) < vals[top]:
                    t = _transfer(f, top, x[top], j, x[j], min_rows)
                    x[top] -= t
                    x[j] += t
                    vals[top], vals[j] = f(top, x[top]), f(j, x[j])
                    moved = True
                    break
        if not moved:
            done = True
            break
        clock.score(x)
    if finish and objective is not None and done:
        descend(objective, clock.best or x, clock, min_rows)
    return clock.result(certified=done)


def gs(
    f: NodeCost,
    p: int,
    s: int,
    *,
    start: Sequence[int] | None = None,
    rng: random.Random | None = None,
    budget: float | None = None,
    objective: Objective | None = None,
    min_rows: int = 0,
) -> SearchResult:
    """Greedy Search (§4.2.2): move rows between the maximum and the minimum node only.

    One scan finds ``u = argmax f`` and ``d = argmin f``; rows move from ``u`` to
    ``d`` while ``f_d(x_d + 1) < f_u(x_u)``. GS can stall in a local optimum
    (the u/a/d example of the thesis); ``certified`` tells whether it stopped
    at a certified optimum.
    """
    rng = rng or random.Random()
    clock = _Clock(budget, objective, f)
    x = _start(p, s, start, rng, min_rows)
    clock.score(x)
    vals = [f(i, xi) for i, xi in enumerate(x)]
    while not clock.out():
        u = max(range(p), key=lambda i: vals[i])
        d = min(range(p), key=lambda i: vals[i])
        if u == d or x[u] <= min_rows or f(d, x[d] + 1) >= vals[u]:
            break
        t = _transfer(f, u, x[u], d, x[d], min_rows)
        x[u] -= t
        x[d] += t
        vals[u], vals[d] = f(u, x[u]), f(d, x[d])
        clock.score(x)
    return clock.result(certified=certify(f, x, min_rows))


def _to_bounds(x: Sequence[int]) -> list[int]:
    out, acc = [], 0
    for a in x:
        acc += a
        out.append(acc)
    return out


def _from_bounds(b: Sequence[int]) -> list[int]:
    return [b[0]] + [b[k] - b[k - 1] for k in range(1, len(b))]


def ga(
    f: NodeCost | None,
    p: int,
    s: int,
    *,
    objective: Objective | None = None,
    rng: random.Random | None = None,
    budget: float = 1.0,
    population: int = 100,
    mutation: float = 0.05,
    min_rows: int = 0,
) -> SearchResult:
    """Genetic algorithm (§4.2.3) over cumulative row boundaries (Fig. 4.3); see module notes."""
    if f is None and objective is None:
        raise SearchError("ga needs per-node costs or an objective")
    rng = rng or random.Random()
    clock = _Clock(budget, objective, f)
    pop = [random_split(p, s, rng, min_rows) for _ in range(max(population, 2))]
    scored = []
    for x in pop:
        scored.append((clock.score(x), x))
        if clock.out():
            return clock.result()
    while not clock.out():
        scored.sort(key=lambda t: t[0])
        a, b = _to_bounds(scored[0][1]), _to_bounds(scored[1][1])
        nxt = scored[:2]
        while len(nxt) < population and not clock.out():
            if p > 2:
                c1, c2 = sorted(rng.sample(range(p - 1), 2))
                child = a[:c1] + b[c1:c2] + a[c2:]
            elif p == 2:
                child = list(rng.choice((a, b)))
            else:
                child = list(a)
            if rng.random() < mutation and p > 1:
                k = rng.randrange(p - 1)
                step = max(1, s // 20)
                child[k] += rng.randint(-step, step)
            child[-1] = s
            x = _from_bounds(child)
            if min(x) < min_rows or child[0] < 0:
                x = random_split(p, s, rng, min_rows)  # non-monotone child dropped
            nxt.append((clock.score(x), x))
        scored = nxt
    return clock.result()


def sa(
    f: NodeCost,
    p: int,
    s: int,
    *,
    objective: Objective | None = None,
    start: Sequence[int] | None = None,
    rng: random.Random | None = None,
    budget: float = 1.0,
    n_iters: int = 20,
    cooling: float = 0.9,
    min_rows: int = 0,
) -> SearchResult:
    """Simulated annealing (§4.2.4) with the thesis's tailored transition; see module notes."""
    rng = rng or random.Random()
    clock = _Clock(budget, objective, f)
    x = _start(p, s, start, rng, min_rows)
    cur = clock.score(x)
    temp = 0.05 * cur if 0 < cur < math.inf else 1.0
    stale = 0
    eps = 1e-12
    while not clock.out():
        for _ in range(n_iters):
            if clock.out():
                break
            vals = [f(i, xi) for i, xi in enumerate(x)]
            m = max(range(p), key=lambda i: vals[i])
            y = list(x)
            avail = y[m] - min_rows
            if avail <= 0 or p == 1:
                break
            k = rng.randint(1, avail)
            y[m] -= k
            others = [i for i in range(p) if i != m]
            # a node beyond what it can hold costs inf (MHETA): weigh as if just above the others
            fin = [v for v in vals if math.isfinite(v)]
            top = vals[m] if math.isfinite(vals[m]) else 2 * max(fin, default=0.0) + 1.0
            w = [top - vals[i] + eps if math.isfinite(vals[i]) else eps for i in others]
            for i in rng.choices(others, weights=w, k=k):
                y[i] += 1
            new = clock.score(y)
            if new < cur or rng.random() < math.exp(-(new - cur) / max(temp, eps)):
                improved = new < cur
                x, cur = y, new
                stale = 0 if improved else stale + 1
            else:
                stale += 1
            if stale >= n_iters:  # restart: zero the maximum node, spread its rows
                vals = [f(i, xi) for i, xi in enumerate(x)]
                m = max(range(p), key=lambda i: vals[i])
                y = list(x)
                k = y[m] - min_rows
                y[m] = min_rows
                others = [i for i in range(p) if i != m] or [m]
                for i in rng.choices(others, k=k):
                    y[i] += 1
                x, cur, stale = y, clock.score(y), 0
        temp *= cooling
    return clock.result()


def exhaustive(f: NodeCost, p: int, s: int, min_rows: int = 0) -> tuple[tuple[int, ...], float]:
    """The exact min-max split by enumeration (C(S+P-1, P-1) vectors; small cases only)."""
    _check(p, s, min_rows)
    best: tuple[tuple[int, ...], float] = ((), math.inf)
    tables = [[f(i, v) for v in range(s + 1)] for i in range(p)]

    def rec(i: int, left: int, acc: list[int], worst: float) -> None:
        nonlocal best
        if worst >= best[1]:
            return
        if i == p - 1:
            v = max(worst, tables[i][left])
            if v < best[1]:
                best = ((*acc, left), v)
            return
        for v in range(min_rows, left - min_rows * (p - 1 - i) + 1):
            rec(i + 1, left - v, [*acc, v], max(worst, tables[i][v]))

    rec(0, s, [], -math.inf)
    return best
