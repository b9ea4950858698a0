"""Running several named policy presets (``scheduler.core.policies.presets``) on the same trace."""

from __future__ import annotations

import time
from collections.abc import Callable

from scheduler.core.policy import preset
from scheduler.lab.jobmodel import RedistCost, RedistModel, SimInput
from scheduler.lab.simulator import Simulator

__all__ = ["run_policies"]


def run_policies(
    jobs: list[SimInput],
    total_slots: int,
    names: list[str],
    *,
    redist: RedistCost | None = None,
    record: bool = False,
    progress: Callable[[str, int, int], None] | None = None,
) -> dict[str, dict]:
    """Simulate ``jobs`` under each named preset; ``{name: metrics + sim_seconds}``.

    A ``static`` remap policy never resizes, so the simulated jobs then skip
    their resize points (same decisions, far fewer events).
    """
    pairs = {n: preset(n) for n in names}  # fail on a bad name before running anything
    out = {}
    for n, pair in pairs.items():
        app, remap = pair.build()
        cb = (lambda d, t, n=n: progress(n, d, t)) if progress else None
        sim = Simulator(jobs, total_slots, app, None if pair.remap == "static" else remap,
                        redist or RedistModel(), record, cb, keep_ended=False)
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
