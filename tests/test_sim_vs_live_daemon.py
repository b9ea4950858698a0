"""The same small workload through the live daemon and through the simulator: same decisions.

The simulator is a lab for the daemon's policies only if both decide alike. A
real ``reshape daemon`` process (ZeroMQ, wall clock, 8 slots) runs five
emulated jobs (``apps.emujob``, ``launch = "single"``: one sleeping process
per job that talks to the daemon at every resize point);
the simulator runs the same jobs with
:class:`scheduler.lab.emumodel.AmdahlOverheadModel` and
:class:`scheduler.lab.emumodel.EmuRedistModel`, whose iteration and
redistribution times are emujob's to the bit. The profiles both sides build
are therefore identical (emujob reports its modelled times, not measured
ones); only *when* things happen differs. Compared: each job's sequence of
(decision, size), and the global order of decisions.

The workload exercises expansion into idle slots, the sweet-spot return
(rule 3 is not reached: the queue decides first), shrink-to-admit (rule 2),
an EASY backfill and a late resizable job that expands (sim times, seconds):

* j0 resizable from 2 (sweet spot 4-5) expands 2->3->4->5 at 2.4, 4.5, 6.5;
* j1 rigid 2 starts on arrival at 1.2;
* j2 rigid 5 arrives at 7.7, does not fit; j3 rigid 1 (walltime 1.5 s)
  arrives at 8.1 and is backfilled (it ends long before j2's reservation);
* at its resize point 8.44, j0 shrinks to 2 to admit j2, which starts when
  the redistribution ends;
* j2 ends at 9.4; at its resize point 11.0, j0 (back at 2) grows to 3 again,
  a size it ran faster at (``reshape_remap``, rule 4);
* j4 resizable from 1 arrives at 10.5 and expands 1->2->3->4 once alone.

Differences allowed, and why:

* **Job ids**: the daemon numbers jobs from 1 in submission order; the
  simulator keeps the workload's ids (``daemon id = index + 1``).
* **When a resize is logged**: the daemon logs ``advise`` when it advises and
  ``expand``/``shrink`` when the job confirms; the simulator logs at the
  advice, so ``advise`` events are compared.
* **Times are not compared.** A live job starts later than its decision
  (mpiexec, Python start-up: a few tenths of a second on a loaded machine),
  each resize point costs a round trip and slots return when the process has
  exited, so live events come a little *later* than the simulator's, never
  earlier (the sleeps are the model's times); measured lag here 0.05-0.15 s.
  Arrivals lag least (the daemon holds each job for its ``arrival_delay``
  and admits it on its next loop turn). Decisions can only differ if the lag
  moves a resize point or a job end across an arrival, so every arrival lies
  at least 0.34 s *before* the next simulated event that could see it (j3 at
  8.1 vs j0's resize point 8.44; the others 0.5 s or more) and at least
  1.1 s after the previous one (lag budget). With that design the per-job
  sequences must be identical.
* **Global order**: decisions of different jobs closer than ``TIE`` seconds
  in simulated time are compared as a set (their live order may flip with the
  lag); every other pair must be in the same order.
* **Rigid jobs**: the simulator gives a rigid job one finish event; the live
  job still reports every iteration and the daemon answers ``continue``
  ("static job") without asking the remap policy, so no decision differs.

The comparison can fail: the same live run compared with a simulation using
the ``static`` remap policy (no resizing) must not match.
"""

from __future__ import annotations

import time
from collections import Counter

import pytest

from scheduler.core.policy import JobSpec, app_policy, remap_policy
from scheduler.lab import SimInput, simulate
from scheduler.lab.emumodel import AmdahlOverheadModel, EmuRedistModel
from tests.helpers import DaemonProc, wait_for

pytestmark = pytest.mark.procs

SLOTS = 8
REDIST = 0.1  # emujob --redist: a resize p -> q sleeps 0.1 * (1 + min/max) s
TIE = 0.5  # seconds: decisions of different jobs closer than this may swap live

# (arrival s, size, resizable, model); see the module docstring for the timeline
ROWS = [
    (0.0, 2, True, AmdahlOverheadModel(4.0, 0.05, 0.16, 6)),
    (1.2, 2, False, AmdahlOverheadModel(2.0, 0.0, 0.0, 3)),
    (7.7, 5, False, AmdahlOverheadModel(2.0, 0.0, 0.0, 2)),
    (8.1, 1, False, AmdahlOverheadModel(1.0, 0.0, 0.0, 1)),
    (10.5, 1, True, AmdahlOverheadModel(2.0, 0.05, 0.1, 4)),
]

Decisions = list[tuple[float, str, int, int]]  # (time, kind, workload index, size)


def workload() -> list[SimInput]:
    out = []
    for i, (t, n, res, m) in enumerate(ROWS):
        spec = JobSpec(i, f"j{i}", t, n, min_procs=1 if res else n,
                       max_procs=SLOTS if res else n, resizable=res,
                       # resizable jobs: no limit (seconds-long jobs have no room for the policies'
                       # 10 s redistribution prior, scheduler.core.walltime.REDIST_PRIOR)
                       walltime=None if res else round(1.5 * m.run_time(n), 3), iterations=m.iterations)
        out.append(SimInput(spec, m, m.run_time(n)))
    return out


def job_desc(j: SimInput) -> dict:
    s = j.spec
    return {"name": s.name, "command": j.model.argv(REDIST), "nprocs": s.nprocs,
            "min_procs": s.min_procs, "max_procs": s.max_procs, "resizable": s.resizable,
            "walltime": s.walltime, "iterations": s.iterations, "launch": "single",
            "arrival_delay": s.submit_time}


def run_simulator(jobs: list[SimInput], app: str, remap: str) -> Decisions:
    res = simulate(jobs, SLOTS, app_policy(app), remap_policy(remap),
                   redist=EmuRedistModel(REDIST), record=True)
    return [(d.time, d.kind, d.job_id, d.nprocs) for d in res.decisions]


def decisions_from_history(hist: dict, t0: float) -> Decisions:
    """``start`` and ``advise`` events of a daemon history, job ids mapped to workload indices."""
    out = []
    for e in hist["events"]:
        i = e["job_id"] - 1
        if e["kind"] == "start":
            out.append((e["t"] - t0, "start", i, e["nprocs"]))
        elif e["kind"] == "advise":
            action, sizes = e["detail"].split(":")[0].split()
            out.append((e["t"] - t0, action, i, int(sizes.split("->")[1])))
    return out


def per_job(ds: Decisions) -> dict[int, list[tuple[str, int]]]:
    out: dict[int, list[tuple[str, int]]] = {}
    for _, kind, i, n in ds:
        out.setdefault(i, []).append((kind, n))
    return out


def order_mismatch(sim: Decisions, live: Decisions, tie: float = TIE) -> str | None:
    """Why the global orders differ (None if they agree), ties within ``tie`` s unordered.

    Simulated decisions are cut into groups at gaps of at least ``tie``; the
    live decisions, in their order, must consist of the same groups in the
    same order, each group compared as a multiset.
    """
    groups: list[list] = []
    for d in sim:
        if groups and d[0] - groups[-1][-1][0] < tie:
            groups[-1].append(d)
        else:
            groups.append([d])
    rest = [d[1:] for d in live]
    for g in groups:
        want = Counter(d[1:] for d in g)
        got = Counter(rest[: len(g)])
        if want != got:
            return f"simulator group {sorted(want)} vs live {sorted(got)}"
        rest = rest[len(g):]
    return f"extra live decisions {rest}" if rest else None


def run_live(jobs: list[SimInput], state_dir: str, app: str, remap: str) -> tuple[dict, float]:
    """Run ``jobs`` on a real daemon; its history and the time the first job was submitted."""
    d = DaemonProc(state_dir, SLOTS, app=app, remap=remap)
    try:
        t0 = time.time()
        ids = [d.submit(**job_desc(j)) for j in jobs]
        assert ids == list(range(1, len(jobs) + 1))

        def idle() -> bool:
            st = d.req("status")
            return not st["running"] and not st["queue"] and not st["waiting"]

        wait_for(idle, 45, every=0.25)
        hist = d.req("history", timeout=15)
        bad = [j for j in hist["jobs"] if j["state"] != "done"]
        assert not bad, f"jobs did not finish cleanly: {bad}\n{d.stderr()}"
        return hist, t0
    finally:
        d.cleanup()


def test_same_decisions_live_daemon_and_simulator(tmp_path):
    app, remap = "easy", "reshape"
    jobs = workload()
    sim = run_simulator(jobs, app, remap)
    kinds = Counter(k for _, k, _, _ in sim)
    assert kinds["expand"] >= 4 and kinds["shrink"] >= 1  # the workload exercises resizing
    hist, t0 = run_live(jobs, str(tmp_path), app, remap)
    live = decisions_from_history(hist, t0)
    table = "\n".join(f"  sim {a[0]:6.2f} {a[1:]!s:22} live {b[0]:6.2f} {b[1:]}"
                      for a, b in zip(sim, live, strict=False))
    print(table)  # shown with pytest -s
    assert per_job(live) == per_job(sim), f"per-job decisions differ:\n{table}"
    assert order_mismatch(sim, live) is None, f"{order_mismatch(sim, live)}\n{table}"
    # live events lag the model, never lead it (sleeps are the model's times)
    assert all(b[0] >= a[0] - 0.05 for a, b in zip(sim, live, strict=True)), table
    # the comparison can fail: the same live run against the static remap policy
    static = run_simulator(jobs, app, "static")
    assert per_job(live) != per_job(static)
    assert order_mismatch(static, live) is not None
