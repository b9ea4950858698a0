"""The simulator handles each instant as one batch: every event at time t, then one scheduling pass.

Traces tie: jobs submitted in the same second, jobs with equal run times started together end
together. Before, each event was followed by its own pass, in the order the events happened to be
created, so the order of a trace's lines, or whether jobs reported resize points to a policy that
never resizes them, decided which queued job a freed slot went to (18% of mean turnaround on a
Lublin-Feitelson trace with exact estimates).
"""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.core.policy import JobSpec, app_policy, preset, remap_policy
from scheduler.lab import JobModel, RedistModel, SimInput, simulate

SLOTS = 8

# (submit, size, run time, resizable): few distinct values, so that arrivals and ends coincide
ROWS = st.lists(st.tuples(st.sampled_from([0.0, 10.0, 20.0, 40.0]), st.integers(1, SLOTS),
                          st.sampled_from([10.0, 20.0, 30.0]), st.booleans()), min_size=2, max_size=14)


def _jobs(rows) -> list[SimInput]:
    out = []
    for i, (t, n, run, res) in enumerate(rows):
        model = JobModel(work=run / 5 * n, A=float(n), sigma=0.0, iterations=5)
        spec = JobSpec(i, f"j{i}", t, n, min_procs=1 if res else n, max_procs=None if res else n,
                       resizable=res, walltime=2 * model.run_time(n), iterations=5)
        out.append(SimInput(spec, model, model.run_time(n)))
    return out


def _decisions(jobs, name: str) -> list[tuple]:
    pair = preset(name)
    app, remap = pair.build()
    res = simulate(jobs, SLOTS, app, None if pair.remap == "static" else remap, redist=RedistModel(1.0, 0.0),
                   record=True, check=True)
    return [(d.time, d.kind, d.job_id, d.nprocs) for d in res.decisions]


@settings(max_examples=80, deadline=None)
@given(ROWS, st.randoms(use_true_random=False), st.sampled_from(["easy", "moldable-easy", "reshape-plus", "dep"]))
def test_the_order_of_simultaneous_events_does_not_change_the_decisions(rows, rnd, name):
    """A trace's lines in another order (the same jobs, the same ids) give the same decisions."""
    jobs = _jobs(rows)
    shuffled = list(jobs)
    rnd.shuffle(shuffled)
    assert _decisions(shuffled, name) == _decisions(jobs, name)


@settings(max_examples=80, deadline=None)
@given(ROWS)
def test_resize_points_a_policy_never_acts_on_change_nothing(rows):
    """``moldable-easy`` decides the same whether its jobs report resize points to the ``static`` remap
    policy or run straight through: the same ends, in the same instants."""
    jobs = _jobs(rows)
    with_points = simulate(jobs, SLOTS, app_policy("easy-squeeze"), remap_policy("static"), record=True)
    without = simulate(jobs, SLOTS, app_policy("easy-squeeze"), None, record=True)
    assert with_points.decisions == without.decisions
    assert with_points.metrics()["mean_turnaround"] == without.metrics()["mean_turnaround"]


def test_jobs_ending_together_free_their_slots_for_one_pass():
    """Two 4-slot jobs end at t=10; a queued 8-slot job then starts at its full size. One at a time, the
    first end started the squeezable head on 4 slots (the first pass saw only those free)."""
    rows = [(0.0, 4, 10.0, False), (0.0, 4, 10.0, False), (1.0, 8, 30.0, True)]
    jobs = _jobs(rows)
    res = simulate(jobs, SLOTS, app_policy("easy-squeeze"), None, record=True)
    assert [(d.time, d.kind, d.job_id, d.nprocs) for d in res.decisions][-1] == (10.0, "start", 2, 8)


def test_announced_jobs_join_the_queue_at_their_arrival():
    """``notice``: a job is submitted ahead of its arrival (an arrival delay, as the workload benchmark
    submits) and starts no earlier than it arrives; the decisions are those without notice."""
    rng = random.Random(3)
    rows = [(float(rng.choice([0, 5, 40, 90])), rng.randint(1, SLOTS), float(rng.choice([10, 30])), rng.random() < .5)
            for _ in range(12)]
    jobs = _jobs(rows)
    plain = simulate(jobs, SLOTS, app_policy("easy"), None, record=True)
    told = simulate(jobs, SLOTS, app_policy("easy"), None, record=True, notice=1e9, check=True)
    assert told.decisions == plain.decisions
    assert [r.start >= r.submit for r in told.records] == [True] * len(jobs)
