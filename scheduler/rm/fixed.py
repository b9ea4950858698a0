"""Resource managers whose nodes never change hands: this machine, a pool file, a Slurm allocation.

Nodes may still go down and come back (node monitors, ``scheduler.core.nodestate``),
but nothing is granted or given back. :func:`fixed_pool` picks one the way
``reshape daemon`` does: the pool given (``--config``/``--slots``), else the
Slurm allocation the daemon runs in (``salloc -N 3 reshape daemon``: the
nodes of ``SLURM_JOB_NODELIST``, one slot per allocated CPU, reached with the
``slurm`` launcher), else this machine.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import hostlist

from scheduler.core.pool import Node, Pool, PoolError, default_pool
from scheduler.rm.base import ResourceManager

__all__ = ["FixedPool", "allocation_pool", "fixed_pool"]


class FixedPool(ResourceManager):
    """A pool built once: given, read from the environment, or this machine's CPUs."""

    kind = "fixed"

    def __init__(self, pool: Pool | None, source: str):
        self._pool, self.source = pool, source

    def pool(self, saved_slots: int | None) -> Pool:
        if self._pool is None:  # this machine: the journal's slot count survives a restart
            self._pool = default_pool(saved_slots)
        return self._pool

    @property
    def launcher(self) -> str | None:
        return self._pool.launcher if self._pool is not None else None


def allocation_pool(env: Mapping[str, str] = os.environ) -> Pool:
    """The pool of the Slurm allocation we run in: its nodes, one slot per allocated CPU."""
    nodelist, cpus = env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST"), env.get("SLURM_JOB_CPUS_PER_NODE")
    if not nodelist or not cpus:
        raise PoolError("not inside a Slurm allocation: SLURM_JOB_NODELIST and SLURM_JOB_CPUS_PER_NODE are unset")
    try:
        hosts = hostlist.expand_hostlist(nodelist)
        counts = hostlist.parse_slurm_tasks_per_node(cpus)
    except hostlist.BadHostlist as e:
        raise PoolError(f"cannot read the Slurm allocation (SLURM_JOB_NODELIST={nodelist!r}, "
                        f"SLURM_JOB_CPUS_PER_NODE={cpus!r}): {e}") from None
    if len(counts) != len(hosts):
        raise PoolError(f"SLURM_JOB_CPUS_PER_NODE={cpus!r} gives {len(counts)} counts for {len(hosts)} nodes "
                        f"({nodelist})")
    return Pool([Node(h, c) for h, c in zip(hosts, counts, strict=True)])


def fixed_pool(pool: Pool | None, env: Mapping[str, str] = os.environ) -> FixedPool:
    """The pool given, else the Slurm allocation we run in, else this machine."""
    if pool is not None:
        return FixedPool(pool, "the pool given (--config or --slots)")
    if env.get("SLURM_JOB_NODELIST"):
        return FixedPool(allocation_pool(env), f"Slurm allocation {env.get('SLURM_JOB_ID', '?')}")
    return FixedPool(None, "this machine")
