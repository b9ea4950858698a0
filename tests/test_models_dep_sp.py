"""Islam, Prodromidis & Squillante's DEP vs SP analytic model (exponential CTMC), cross-checked by simulation."""

from __future__ import annotations

import pytest

from scheduler.lab.models.dep_sp import dep_ctmc, mmk_response_time, simulate_dep, sp_star

N = 8


def rates(job_seconds: float, overhead: float, alpha: float = 0.9):
    """mu[i]: per-job rate on P/i nodes with speedup p**alpha; gamma[i] = 1/overhead."""
    mu = [0.0] + [(N / i) ** alpha / (job_seconds * N**alpha) for i in range(1, N + 1)]
    gamma = [0.0] + [1.0 / overhead] * N
    return mu, gamma


@pytest.mark.parametrize("U", [0.2, 0.5, 0.8])
def test_ctmc_agrees_with_discrete_event_simulation(U):
    mu, gamma = rates(100.0, 5.0)
    lam = U * N * mu[N]
    c = dep_ctmc(lam, mu, gamma, N)
    s = simulate_dep(lam, mu, gamma, N, jobs=60_000, seed=3)
    assert s["T"] == pytest.approx(c["T"], rel=0.05)
    assert s["p_r"] == pytest.approx(c["p_r"], abs=0.02)


def test_erlang_c_reduces_to_mm1():
    assert mmk_response_time(0.5, 1.0, 1) == pytest.approx(1 / (1.0 - 0.5))


def test_small_overhead_dep_wins_at_heavy_load_large_overhead_loses_everywhere():
    # Islam, Prodromidis & Squillante §6: DEP beats SP* when overhead << job time, especially at heavy load
    mu, gamma = rates(1000.0, 2.0)
    lam = 0.8 * N * mu[N]
    assert sp_star(lam, mu, N)[0] / dep_ctmc(lam, mu, gamma, N)["T"] > 1.0
    # W3-like (execution : overhead about 6 : 1): DEP degrades at all loads
    mu, gamma = rates(60.0, 10.0)
    for U in (0.1, 0.3, 0.5, 0.7):
        lam = U * N * mu[N]
        assert sp_star(lam, mu, N)[0] / dep_ctmc(lam, mu, gamma, N)["T"] < 1.0


def test_bad_input():
    mu, gamma = rates(100.0, 5.0)
    with pytest.raises(ValueError, match="unstable"):
        dep_ctmc(N * mu[N] * 1.01, mu, gamma, N)
    with pytest.raises(ValueError):
        dep_ctmc(0.001, mu[:3], gamma, N)


def test_sp_simulation_matches_erlang_c_and_burstier_arrivals_wait_longer():
    import random
    import statistics

    from scheduler.lab.models.dep_sp import arrival_sampler, simulate_sp

    assert simulate_sp(1.4, 0.5, 4, jobs=60_000, seed=2) == pytest.approx(mmk_response_time(1.4, 0.5, 4), rel=0.05)
    assert simulate_sp(1.4, 0.5, 4, jobs=60_000, seed=2, cv=3.0) > 1.2 * mmk_response_time(1.4, 0.5, 4)
    gaps = [g() for g in [arrival_sampler(2.0, 3.0, random.Random(1))] for _ in range(100_000)]
    assert statistics.fmean(gaps) == pytest.approx(0.5, rel=0.03)
    assert statistics.pstdev(gaps) / statistics.fmean(gaps) == pytest.approx(3.0, rel=0.1)
    with pytest.raises(ValueError, match="cv must be >= 1"):
        arrival_sampler(1.0, 0.5, random.Random(0))


def test_dep_under_hyperexponential_arrivals_is_slower():
    mu, gamma = rates(100.0, 5.0)
    lam = 0.5 * N * mu[N]
    assert simulate_dep(lam, mu, gamma, N, jobs=30_000, seed=1, cv=3.0)["T"] > dep_ctmc(lam, mu, gamma, N)["T"]
