"""Seed 003's claim on this machine: the model predicts a real MPI job's slowdown within 15%.

A 2-rank CPU-bound, loosely synchronous job (one rank per core, uniform
partition) runs dedicated, then with real CPU-bound competitor processes
pinned to its cores. The prediction is ``X_ded * sd`` with ``sd`` from the
uniform-partition model over each core's local slowdown (Eq. 8, the count of
competitors on that core + 1). Competitors are killed in ``finally``.

Each competitor runs in its own session, like an independent user's job:
with Linux autogroup (``/proc/sys/kernel/sched_autogroup_enabled``) the CPU
is shared round-robin between sessions, not processes, so two competitors
started from one session would count as one (measured: x2 instead of x3).

The machine is shared with other work, so each measurement takes the best of
two runs (the least disturbed one); the dedicated time is the best measured
right before and right after the loaded runs. A miss in both rounds is a failure
only on an idle machine whose two CPUs are independent (checked then, see
:func:`_shared_core`) and that measures the loaded run repeatably (the two
rounds within 15% of each other; a virtual machine's CPU share can vary more)
and shares a CPU evenly between competing processes (a loop with ``k`` competitors
runs ``k + 1`` times slower, within 15%: the model's premise, :func:`_unfair_share`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import psutil
import pytest

from scheduler.lab.models.slowdown import aggregate_slowdown, local_slowdown

pytestmark = pytest.mark.procs

SPIN = "import os,sys\nos.sched_setaffinity(0,{int(sys.argv[1])})\nwhile True: pass\n"


def _run(mpirun, iters=25, fractions=None) -> float:
    extra = [",".join(map(str, fractions))] if fractions else []
    res = mpirun(2, ["-m", "tests.mpi.slowdown_job", str(iters), *extra], timeout=60)
    line = [x for x in res.stdout.splitlines() if x.startswith("{")][-1]
    return json.loads(line)["seconds"]


def _best(mpirun, n=2, fractions=None) -> float:
    return min(_run(mpirun, fractions=fractions) for _ in range(n))


def _busy(cores) -> list[float] | None:
    """Per-core load over one second, if any of ``cores`` is busier than 25% (else None)."""
    busy = psutil.cpu_percent(interval=1.0, percpu=True)
    return busy if max(busy[c] for c in cores) > 25 else None


def _kernel_seconds(core: int, n: int = 3_000_000) -> float:
    """Time of a fixed Python loop pinned to ``core`` (this process, affinity restored after)."""
    saved = os.sched_getaffinity(0)
    try:
        os.sched_setaffinity(0, {core})
        t0 = time.perf_counter()
        s = 0.0
        for i in range(n):
            s += (i % 7) * 0.5
        return time.perf_counter() - t0
    finally:
        os.sched_setaffinity(0, saved)


def _loaded_ratio(core: int, spin_core: int, k: int) -> float:
    """How much slower a loop pinned to ``core`` runs while ``k`` CPU-bound processes (each in its own
    session) spin on ``spin_core``, best of a few runs each way."""
    alone = min(_kernel_seconds(core) for _ in range(3))
    spins = [subprocess.Popen([sys.executable, "-c", SPIN, str(spin_core)], start_new_session=True)
             for _ in range(k)]
    try:
        time.sleep(0.2)
        loaded = min(_kernel_seconds(core) for _ in range(3))
    finally:
        for p in spins:
            p.kill()
        for p in spins:
            p.wait(timeout=10)
    return loaded / alone


def _shared_core(cores) -> float | None:
    """How much slower a loop on ``cores[0]`` runs while ``cores[1]`` is busy, if by more than 8%.

    The model treats the two CPUs as independent. On a virtual machine they can be two hardware
    threads of one host core, so a rank slows down when the other CPU works, whatever runs on its
    own: then the dedicated run is not dedicated (both ranks busy at once) while in the loaded run
    the rank with the idle partner speeds up, and the measured slowdown comes out below the model's.
    """
    ratio = _loaded_ratio(cores[0], cores[1], 1)
    return ratio if ratio > 1.08 else None


def _unfair_share(cores, competitors) -> str | None:
    """Whether a loop pinned to a core with ``k`` competitors (each in its own session) runs ``k + 1`` times
    slower, as the model's local slowdown assumes (Eq. 8), within 15%; if not, on which core by how much."""
    for core, k in zip(cores, competitors, strict=True):
        if k and abs((ratio := _loaded_ratio(core, core, k)) - (k + 1)) / (k + 1) > 0.15:
            return f"CPU {core} with {k} competitor(s): a loop ran {ratio:.2f}x slower, not {k + 1}x"
    return None


def _measure(mpirun, cores, competitors, partitioning="uniform") -> tuple[float, float, float]:
    """(dedicated, measured, predicted) seconds for one round. ``load-dependent``: the loaded run
    gives each rank work in proportion to its core's available capacity, 1 / sd_a (Eq. 2)."""
    sds = [local_slowdown(k) for k in competitors]
    fractions = None
    if partitioning == "load-dependent":
        cap = [1 / s for s in sds]
        fractions = [c / sum(cap) for c in cap]
    x_ded = _best(mpirun)
    procs = []
    try:
        for core, k in zip(cores, competitors, strict=True):
            for _ in range(k):
                procs.append(
                    subprocess.Popen([sys.executable, "-c", SPIN, str(core)],
                                     start_new_session=True)
                )
        x = _best(mpirun, fractions=fractions)
    finally:
        for p in procs:
            p.kill()
        for p in procs:
            p.wait(timeout=10)
    x_ded = min(x_ded, _best(mpirun))  # dedicated again: a disturbed first measurement is not the baseline
    sd = aggregate_slowdown(sds, partitioning=partitioning)
    return x_ded, x, x_ded * sd


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two cores")
@pytest.mark.parametrize(("competitors", "partitioning"), [
    ((1, 0), "uniform"), ((2, 0), "uniform"), ((2, 1), "uniform"), ((1, 0), "load-dependent")],
    ids=["sd2", "sd3", "imbalanced-3-2", "load-dependent-4/3"])
def test_slowdown_model_predicts_real_contention(mpirun, competitors, partitioning):
    """Up to two rounds; a miss in both is a failure only if the machine is idle afterwards (other
    work on the machine makes "dedicated" not dedicated, and the claim cannot be checked then)."""
    cores = sorted(os.sched_getaffinity(0))[:2]
    if (busy := _busy(cores)) is not None:
        pytest.skip(f"machine busy ({busy}% per core): the contention check needs idle cores")
    rounds, loaded = [], []
    for _ in range(2):
        x_ded, x, predicted = _measure(mpirun, cores, competitors, partitioning)
        err = abs(x - predicted) / x
        rounds.append(f"dedicated {x_ded:.2f}s, measured {x:.2f}s, predicted {predicted:.2f}s")
        loaded.append(x)
        if err <= 0.15:
            return
    if (spread := max(loaded) / min(loaded) - 1) > 0.15:
        pytest.skip(f"the same loaded run measured {spread:.0%} apart in two rounds (more than the 15% the claim "
                    f"allows): this machine does not share its CPUs repeatably, the claim cannot be checked: {rounds}")
    if (busy := _busy(cores)) is not None:
        pytest.skip(f"machine became busy ({busy}% per core) during the contention check: {rounds}")
    if (shared := _shared_core(cores)) is not None:
        pytest.skip(f"CPUs {cores} are not independent (a loop on one runs {shared:.2f}x slower while the "
                    f"other is busy, as for two hardware threads of one core): {rounds}")
    if (unfair := _unfair_share(cores, competitors)) is not None:
        pytest.skip(f"this machine does not share a CPU evenly between competing processes, the model's premise "
                    f"({unfair}): {rounds}")
    raise AssertionError(f"model off by more than 15% in both rounds: {rounds}")
