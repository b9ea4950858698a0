"""Seed 003 with a real MPI job: competitors slow it down in the order the model predicts.

How close the model comes (seed 003 §5 claims 15%) is a timing claim and is measured by
``python -m benchmarks.slowdown`` (docs/reproduction.md); on a shared machine it cannot be a
pass/fail test. What must hold on any machine whose two CPUs run the job's two ranks is the
order, with room for noise: with one competitor the load-dependent partition (model 4/3) beats
the uniform one (2), two competitors (3) slow the job more than one, each by at least 10%, and
two slow it by at least half.
"""

from __future__ import annotations

import os

import pytest

from benchmarks.slowdown import CASES, measure

pytestmark = pytest.mark.procs


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two cores")
def test_competitors_slow_a_real_job_in_the_models_order():
    cores = sorted(os.sched_getaffinity(0))[:2]
    names = ["load-dependent-4/3", "sd2", "sd3"]
    rounds = []
    for _ in range(2):  # a second round only if the first was disturbed
        sd = {}
        for name in names:
            competitors, partitioning = CASES[name]
            x_ded, x, _ = measure(cores, competitors, partitioning)
            sd[name] = x / x_ded
        rounds.append({k: round(v, 2) for k, v in sd.items()})
        if sd["sd2"] >= 1.1 * sd[names[0]] and sd["sd3"] >= 1.1 * sd["sd2"] and sd["sd3"] >= 1.5:
            return
    raise AssertionError(f"measured slowdowns not in the model's order (4/3 < 2 < 3) in two rounds: {rounds}")
