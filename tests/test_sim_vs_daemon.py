"""The same small workload through the daemon's core and through the simulator: same decisions.

The daemon's scheduling lives in ``scheduler.state.ClusterState`` (sans I/O:
events with ``now`` in, actions out; the ZeroMQ loop and ``mpiexec`` are a
shell around it). Here it is driven in virtual time by jobs that behave
exactly like the simulator's job model: each reports every iteration time at
its resize point and, when advised, redistributes for ``RedistModel.cost``
seconds before confirming with ``resized``. The simulator runs the same jobs.
Both use fresh ``easy`` + ``reshape`` policy objects from the registry.

Differences, and why they do not change the decisions compared here:

* the daemon numbers jobs from 1 in submission order; the simulator keeps the
  workload's ids (mapped below);
* the daemon logs a resize when the job confirms it (``expand``/``shrink``
  events) and the advice when it is given (``advise``); the simulator logs at
  the advice, so advice events are compared;
* both call ``RemapPolicy.shrink_requests`` while jobs wait; ReSHAPE's
  remap policy returns none by default, so it makes no difference for this
  pair (``tests/test_daemon_state.py`` compares a policy that does request
  shrinks);
* the simulator runs the Application Scheduler after every event, the daemon
  after submissions, exits and confirmed resizes; EASY starts nothing new
  after a resize point that only continued (nothing it reads has changed
  except ``now``, which only shrinks backfill windows).
"""

from __future__ import annotations

import heapq

import pytest

from scheduler.policy import JobSpec, app_policy, remap_policy
from scheduler.sim import JobModel, RedistModel, SimInput, simulate

pytest.importorskip("scheduler.state")
from scheduler.jobfile import validate_job
from scheduler.pool import default_pool
from scheduler.state import ClusterState

SLOTS = 8


def workload() -> list[SimInput]:
    rows = [  # (submit, size, resizable, iterations, work per iteration, A)
        (0.0, 2, True, 12, 40.0, 6.0),
        (5.0, 3, False, 4, 60.0, 3.0),
        (30.0, 4, True, 10, 80.0, 8.0),
        (200.0, 6, False, 3, 120.0, 6.0),
        (210.0, 1, True, 8, 10.0, 4.0),
        (400.0, 2, False, 5, 30.0, 2.0),
    ]
    out = []
    for i, (t, n, res, it, w, A) in enumerate(rows):
        model = JobModel(work=w, A=A, sigma=0.5, iterations=it)
        spec = JobSpec(i, f"j{i}", t, n, min_procs=1 if res else n,
                       max_procs=None if res else n, resizable=res,
                       walltime=model.run_time(n) * 1.2, iterations=it)
        out.append(SimInput(spec, model, model.run_time(n)))
    return out


def run_daemon_core(jobs: list[SimInput], redist: RedistModel, app: str = "easy",
                    remap: str = "reshape") -> list[tuple]:
    st = ClusterState(default_pool(SLOTS), app_policy(app), remap_policy(remap))
    heap: list = []
    seq = 0

    def push(t, kind, i):
        nonlocal seq
        seq += 1
        heapq.heappush(heap, (t, seq, kind, i))

    by_daemon: dict[int, int] = {}  # daemon id -> workload index
    to_daemon: dict[int, int] = {}
    iters = {i: 0 for i in range(len(jobs))}
    pending: dict[int, tuple[int, int]] = {}

    def launch(actions, now):
        for a in actions:
            i = by_daemon[a.job_id]
            n = st.jobs[a.job_id].nprocs
            push(now + jobs[i].model.iter_time(n), "iter", i)

    for i, j in enumerate(jobs):
        push(j.spec.submit_time, "arrive", i)
    while heap:
        now, _, kind, i = heapq.heappop(heap)
        j = jobs[i]
        if kind == "arrive":
            s = j.spec
            desc = validate_job({"command": ["app"], "name": s.name, "nprocs": s.nprocs,
                                 "min_procs": s.min_procs, "max_procs": s.max_procs,
                                 "resizable": s.resizable, "walltime": s.walltime,
                                 "iterations": s.iterations}, SLOTS)
            did = st.submit(desc, now)
            by_daemon[did], to_daemon[i] = i, did
            launch(st.schedule(now), now)
            continue
        did = to_daemon[i]
        n = st.jobs[did].nprocs
        if kind == "iter":
            iters[i] += 1
            if iters[i] >= j.model.iterations:
                st.finished(did, "done", None, now)
                launch(st.exited(did, 0, now), now)
                continue
            adv = st.resize_point(did, {"nprocs": n, "iteration": iters[i],
                                        "iter_time": j.model.iter_time(n)}, now)
            if adv.action in ("expand", "shrink") and adv.nprocs != n:
                pending[i] = (n, adv.nprocs)
                push(now + redist.cost(j.spec.nprocs, n, adv.nprocs), "redist", i)
            else:
                push(now + j.model.iter_time(n), "iter", i)
        else:
            old, new = pending.pop(i)
            launch(st.resized(did, old, new, redist.cost(j.spec.nprocs, old, new), None, now),
                   now)
            push(now + j.model.iter_time(new), "iter", i)
    out = []
    for e in st.events:
        i = by_daemon[e["job_id"]]
        if e["kind"] == "start":
            out.append((round(e["t"], 6), "start", i, e["nprocs"]))
        elif e["kind"] == "advise":
            action, sizes = e["detail"].split(":")[0].split()
            out.append((round(e["t"], 6), action, i, int(sizes.split("->")[1])))
    return out


@pytest.mark.parametrize(("app", "remap"), [("easy", "reshape"), ("easy-plus", "reshape-plus")])
def test_same_decisions_daemon_core_and_simulator(app, remap):
    jobs = workload()
    redist = RedistModel()
    daemon = run_daemon_core(jobs, redist, app, remap)
    res = simulate(jobs, SLOTS, app_policy(app), remap_policy(remap), redist=redist,
                   record=True)
    sim = [(round(d.time, 6), d.kind, d.job_id, d.nprocs) for d in res.decisions]
    assert any(k in ("expand", "shrink") for _, k, _, _ in sim)  # the workload exercises resizing
    assert sim == daemon
