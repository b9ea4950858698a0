"""Islam, Prodromidis & Squillante's analytic model of DEP vs SP(K), exponential case, as a CTMC.

The paper solves a phase-type model (details in Squillante, IBM RC 19950,
not available); this is the exponential special case reconstructed in the
notes (§3.4, an assumption to be cross-checked by simulation, which
:func:`simulate_dep` does). State ``(n, phase)``: ``n`` jobs in the system,
phase E (executing) or R (repartitioning); ``m = min(n, N)``.

* ``0 --lambda--> (1, R)`` (an arrival to an empty system is a repartition);
* ``(n, E)``: arrival -> ``(n+1, R)`` if ``n < N`` else ``(n+1, E)``;
  departure at rate ``m * mu[m]`` -> ``(n-1, R)`` if ``2 <= n <= N``,
  ``0`` if ``n = 1``, ``(n-1, E)`` if ``n > N`` (the queue head takes the
  freed partition, no repartition);
* ``(n, R)``: ends at rate ``gamma[m]`` -> ``(n, E)``; no progress and no
  departures meanwhile; an arrival with ``n < N`` restarts it among ``n+1``
  jobs (-> ``(n+1, R)``), with ``n >= N`` it joins the queue (``(n+1, R)``).

Outputs: mean response time ``T = L / lambda`` (Little), and ``p_r``, the
steady-state probability of repartitioning. The chain is truncated at
``n_max`` (default: enough that the tail mass is below 1e-12 at the given load,
checked). SP(K) is M/M/K with per-server rate ``mu_S`` (Erlang C).

Beyond the chain, :func:`simulate_dep` and :func:`simulate_sp` take
hyperexponential arrivals (``cv > 1``: the paper's second arrival process,
§3.3; a balanced two-phase H2 with the given coefficient of variation, mean
``1/lambda``), where neither the chain nor Erlang C applies.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

import numpy as np

__all__ = ["arrival_sampler", "dep_ctmc", "mmk_response_time", "simulate_dep", "simulate_sp", "sp_star"]


def _rates(mu: Sequence[float], gamma: Sequence[float], N: int) -> None:
    if len(mu) != N + 1 or len(gamma) != N + 1:
        raise ValueError("mu and gamma are indexed 1..N (give N+1 values, index 0 unused)")
    if any(x <= 0 for x in mu[1:]) or any(x <= 0 for x in gamma[1:]):
        raise ValueError("rates must be positive")


def dep_ctmc(lam: float, mu: Sequence[float], gamma: Sequence[float], N: int,
             n_max: int | None = None) -> dict[str, float]:
    """Solve the DEP chain; ``mu[i]``/``gamma[i]`` are per-job service / repartition rates at i jobs."""
    _rates(mu, gamma, N)
    if lam <= 0:
        raise ValueError("arrival rate must be positive")
    if lam >= N * mu[N]:
        raise ValueError(f"unstable: lambda={lam} >= N*mu_N={N * mu[N]}")
    if n_max is None:
        rho = lam / (N * mu[N])
        n_max = N + 20 + int(math.log(1e-14) / math.log(max(rho, 1e-9)) * 1.5)
    # index: 0 -> empty; (n, E) -> 2n-1; (n, R) -> 2n
    S = 2 * n_max + 1
    Q = np.zeros((S, S))

    def E(n):
        return 2 * n - 1

    def R(n):
        return 2 * n

    Q[0, R(1)] += lam
    for n in range(1, n_max + 1):
        m = min(n, N)
        if n < n_max:
            Q[E(n), R(n + 1) if n < N else E(n + 1)] += lam
            Q[R(n), R(n + 1)] += lam
        dep = m * mu[m]
        if n == 1:
            Q[E(n), 0] += dep
        elif n <= N:
            Q[E(n), R(n - 1)] += dep
        else:
            Q[E(n), E(n - 1)] += dep
        Q[R(n), E(n)] += gamma[m]
    np.fill_diagonal(Q, -Q.sum(axis=1))
    A = np.vstack([Q.T, np.ones(S)])
    b = np.zeros(S + 1)
    b[-1] = 1.0
    pi, *_ = np.linalg.lstsq(A, b, rcond=None)
    tail = pi[E(n_max)] + pi[R(n_max)]
    if tail > 1e-8:
        raise ValueError(f"truncation at n_max={n_max} too small (tail mass {tail:.2g})")
    L = sum(n * (pi[E(n)] + pi[R(n)]) for n in range(1, n_max + 1))
    p_r = sum(pi[R(n)] for n in range(1, n_max + 1))
    return {"T": float(L / lam), "L": float(L), "p_r": float(p_r)}


def mmk_response_time(lam: float, mu_s: float, K: int) -> float:
    """M/M/K mean response time (Erlang C): SP(K) with partitions of rate ``mu_s``."""
    a = lam / mu_s
    if a >= K:
        return math.inf
    s = sum(a**k / math.factorial(k) for k in range(K))
    top = a**K / math.factorial(K) * K / (K - a)
    C = top / (s + top)
    return 1 / mu_s + C / (K * mu_s - lam)


def sp_star(lam: float, mu: Sequence[float], N: int) -> tuple[float, int]:
    """``(T_SP*, K*)``: best SP(K) over divisors K of N, with ``mu_S = mu[K]``."""
    best = (math.inf, 0)
    for K in range(1, N + 1):
        if N % K == 0:
            best = min(best, (mmk_response_time(lam, mu[K], K), K))
    return best


def arrival_sampler(lam: float, cv: float, rng: random.Random):
    """Interarrival times of mean ``1/lam``: exponential for ``cv = 1``, else the balanced
    two-branch hyperexponential of Lynch's (1999) generator
    (:func:`scheduler.lab.workloads.lynch.hyperexp_interarrivals`) with coefficient of variation ``cv``."""
    from scheduler.lab.workloads.lynch import hyperexp_interarrivals

    if lam <= 0:
        raise ValueError("arrival rate must be positive")
    if cv == 1.0:
        return lambda: rng.expovariate(lam)
    if not cv > 1.0:
        raise ValueError(f"cv must be >= 1 (exponential or hyperexponential), got {cv}")
    return lambda: hyperexp_interarrivals(rng, 1, 1.0 / lam, cv)[0]


def simulate_sp(lam: float, mu_s: float, K: int, jobs: int = 200_000, seed: int = 0,
                cv: float = 1.0) -> float:
    """Mean response time of SP(K): FCFS, K partitions of rate ``mu_s``, ``Exp(1)`` work per job."""
    if K < 1 or mu_s <= 0:
        raise ValueError("K must be >= 1 and mu_s > 0")
    rng = random.Random(seed)
    gap = arrival_sampler(lam, cv, rng)
    free_at = [0.0] * K  # when each partition frees (FCFS: the earliest free one serves next)
    t = total = 0.0
    warm = jobs // 10
    for i in range(jobs):
        t += gap()
        k = min(range(K), key=free_at.__getitem__)
        start = max(t, free_at[k])
        free_at[k] = start + rng.expovariate(1.0) / mu_s
        if i >= warm:
            total += free_at[k] - t
    return total / (jobs - warm)


def simulate_dep(lam: float, mu: Sequence[float], gamma: Sequence[float], N: int,
                 jobs: int = 200_000, seed: int = 0, cv: float = 1.0) -> dict[str, float]:
    """Discrete-event simulation of DEP with per-job work: the chain's cross-check.

    Each job brings ``Exp(1)`` work and progresses at rate ``mu[m]`` while ``m``
    jobs run and no repartition is under way; repartitions last
    ``Exp(gamma[m])`` and restart on an arrival (the chain's assumptions, but
    simulated job by job with FCFS queueing and per-job response times).
    ``cv > 1``: hyperexponential arrivals (:func:`arrival_sampler`).
    """
    _rates(mu, gamma, N)
    rng = random.Random(seed)
    gap = arrival_sampler(lam, cv, rng)
    t = 0.0
    next_arr = gap()
    running: list[list[float]] = []  # [remaining work, arrival time]
    queue: list[float] = []
    reconf_end = math.inf
    done = 0
    total_resp = 0.0
    t_reconf = 0.0
    warm = jobs // 10
    t_warm = None
    while done < jobs:
        m = len(running)
        if reconf_end < math.inf or m == 0:
            t_dep = math.inf
        else:
            k = min(range(m), key=lambda i: running[i][0])
            t_dep = t + running[k][0] / mu[m]
        t_next = min(next_arr, t_dep, reconf_end)
        dt = t_next - t
        if reconf_end < math.inf:
            if t_warm is not None:
                t_reconf += dt
        elif m:
            for r in running:
                r[0] -= dt * mu[m]
        t = t_next
        if t == next_arr:
            next_arr = t + gap()
            if len(running) < N:
                running.append([rng.expovariate(1.0), t])
                reconf_end = t + rng.expovariate(gamma[len(running)])
            else:
                queue.append(t)
        elif t == reconf_end:
            reconf_end = math.inf
        else:
            _, a = running.pop(k)
            done += 1
            if done == warm:
                t_warm, total_resp, t_reconf = t, 0.0, 0.0
            elif done > warm:
                total_resp += t - a
            if queue:
                running.append([rng.expovariate(1.0), queue.pop(0)])
            elif running:
                reconf_end = t + rng.expovariate(gamma[len(running)])
    return {"T": total_resp / (done - warm), "p_r": t_reconf / (t - t_warm)}
