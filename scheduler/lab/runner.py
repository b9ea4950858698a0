"""Running several named policy presets (``scheduler.core.policies.presets``) on the same trace, and
comparing the resizing ones with the baselines a user would pick."""

from __future__ import annotations

import time
from collections.abc import Callable

from scheduler.core.policy import preset
from scheduler.lab.jobmodel import RedistCost, RedistModel, SimInput
from scheduler.lab.simulator import Simulator

__all__ = ["BASELINES", "against_baselines", "resizes", "run_policies", "with_baselines"]

#: The baselines every resizing preset is compared with: rigid EASY, and EASY with the same squeezed
#: starts that never resizes (what moldability alone gives).
BASELINES = ("easy", "moldable-easy")


def resizes(name: str) -> bool:
    """Whether the preset ``name`` may resize running jobs (its remap policy is not ``static``)."""
    return preset(name).remap != "static"


def with_baselines(names: list[str]) -> list[str]:
    """``names`` plus :data:`BASELINES` when a resizing preset is among them (baselines first)."""
    if not any(resizes(n) for n in names):
        return list(names)
    return [*(b for b in BASELINES if b not in names), *names]


def against_baselines(results: dict[str, dict]) -> dict[str, dict]:
    """For each resizing preset in ``results`` (``run_policies``' output): rigid EASY's mean turnaround
    over its own (``turnaround_easy_over``, if ``easy`` ran) and the best non-resizing preset's
    (``turnaround_best_nonresizing_over``: resizing's own gain), with that preset's name."""
    flat = [n for n in results if not resizes(n)]
    if not flat:
        return {}
    best = min(flat, key=lambda n: results[n]["mean_turnaround"])
    out = {}
    for n, m in results.items():
        if n in flat:
            continue
        row = {"best_nonresizing": best,
               "turnaround_best_nonresizing_over": results[best]["mean_turnaround"] / m["mean_turnaround"]}
        if "easy" in results:
            row["turnaround_easy_over"] = results["easy"]["mean_turnaround"] / m["mean_turnaround"]
        out[n] = row
    return out


def run_policies(
    jobs: list[SimInput],
    total_slots: int,
    names: list[str],
    *,
    redist: RedistCost | None = None,
    record: bool = False,
    progress: Callable[[str, int, int], None] | None = None,
    limits: str = "wall-clock",
) -> dict[str, dict]:
    """Simulate ``jobs`` under each named preset; ``{name: metrics + sim_seconds}``.

    A ``static`` remap policy never resizes, so the simulated jobs then skip
    their resize points (same decisions, far fewer events). ``limits``: the
    simulator's (:class:`scheduler.lab.simulator.Simulator`).
    """
    pairs = {n: preset(n) for n in names}  # fail on a bad name before running anything
    out = {}
    for n, pair in pairs.items():
        app, remap = pair.build()
        cb = (lambda d, t, n=n: progress(n, d, t)) if progress else None
        sim = Simulator(jobs, total_slots, app, None if pair.remap == "static" else remap,
                        redist or RedistModel(), record, cb, keep_ended=False, limits=limits)
        t0 = time.perf_counter()
        res = sim.run()
        m = res.metrics()
        m["sim_seconds"] = time.perf_counter() - t0
        m["policy"] = n
        m["pair"] = [pair.app, pair.remap]
        if record:
            m["result"] = res
        out[n] = m
    return out
