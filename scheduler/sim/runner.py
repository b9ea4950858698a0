"""Named policy pairs and running several of them on the same trace.

``simulate --policy NAME`` maps NAME onto an (application policy, remap
policy) pair from the registry in :mod:`scheduler.policy`, the same objects
the daemon runs:

==============  ===================  ===========================
name            application policy   remap policy
==============  ===================  ===========================
``fcfs``        ``fcfs``             ``static``
``easy``        ``easy``             ``static``
``reshape``     ``easy``             ``reshape``
``reshape-squeeze`` ``easy-squeeze`` ``reshape``
``reshape-fcfs``  ``fcfs``           ``reshape``
``reshape-plus``  ``easy-plus``      ``reshape-plus`` (``borrow=True, reserve=0.2``)
``dep``         ``dep``              ``dep``
``dep-smooth``  ``dep``              ``dep`` (``min_interval=600`` s)
``sp:K``        ``sp`` (``k=K``)     none (SP never resizes)
==============  ===================  ===========================

The ``static`` remap policy always continues, so with it the engine skips
resize points altogether (same decisions, far fewer events). ``easy-squeeze``
is EASY plus seed 001's "squeeze a resizable job into the available
processors, add more later" (:mod:`scheduler.policies.moldable`); ``easy-plus``
is EASY with ``squeeze=True, give_back=True`` and ``reshape-plus`` the Remap
Scheduler with ``borrow=True, reserve=0.2`` (:mod:`scheduler.policies.easy`,
:mod:`scheduler.policies.reshape_remap`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from scheduler.policy import app_policy, remap_policy
from scheduler.sim.engine import Simulator
from scheduler.sim.jobmodel import RedistCost, RedistModel, SimInput

__all__ = ["POLICIES", "PolicyPair", "resolve", "run_policies"]


@dataclass(frozen=True)
class PolicyPair:
    app: str
    remap: str | None
    app_params: dict = field(default_factory=dict)
    remap_params: dict = field(default_factory=dict)


POLICIES: dict[str, PolicyPair] = {
    "fcfs": PolicyPair("fcfs", "static"),
    "easy": PolicyPair("easy", "static"),
    "reshape": PolicyPair("easy", "reshape"),
    "reshape-squeeze": PolicyPair("easy-squeeze", "reshape"),
    "reshape-fcfs": PolicyPair("fcfs", "reshape"),
    "reshape-plus": PolicyPair("easy-plus", "reshape-plus"),
    "dep": PolicyPair("dep", "dep"),
    "dep-smooth": PolicyPair("dep", "dep", remap_params={"min_interval": 600.0}),
}


def resolve(name: str) -> PolicyPair:
    """The pair for ``name``; ``sp:K`` is static partitioning with K partitions."""
    if name in POLICIES:
        return POLICIES[name]
    if name.startswith("sp:"):
        try:
            k = int(name[3:])
        except ValueError:
            k = 0
        if k < 1:
            raise ValueError(f"bad policy {name!r}: sp:K needs a positive integer K")
        return PolicyPair("sp", None, {"k": k})
    known = ", ".join([*sorted(POLICIES), "sp:K"])
    raise ValueError(f"unknown policy {name!r}; known: {known}")


def run_policies(
    jobs: list[SimInput],
    total_slots: int,
    names: list[str],
    *,
    redist: RedistCost | None = None,
    record: bool = False,
    progress: Callable[[str, int, int], None] | None = None,
) -> dict[str, dict]:
    """Simulate ``jobs`` under each named policy; ``{name: metrics + sim_seconds}``."""
    pairs = {n: resolve(n) for n in names}  # fail on a bad name before running anything
    out = {}
    for n, pair in pairs.items():
        app = app_policy(pair.app, **pair.app_params)
        remap = None
        if pair.remap is not None and pair.remap != "static":
            remap = remap_policy(pair.remap, **pair.remap_params)
        cb = (lambda d, t, n=n: progress(n, d, t)) if progress else None
        sim = Simulator(jobs, total_slots, app, remap, redist or RedistModel(), record, cb)
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
