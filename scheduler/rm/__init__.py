"""Resource managers: who owns the nodes the daemon schedules on (:mod:`scheduler.rm.base`).

``reshape daemon`` picks one from its options (:func:`add_options`,
:func:`from_args`): by default a fixed pool (:mod:`scheduler.rm.fixed`: the
pool file or ``--slots``, the Slurm allocation the daemon runs in, or this
machine); otherwise the manager whose flag is given, from the registry
(:mod:`scheduler.rm.registry`) that each manager's package fills:
``--slurm-grow`` makes Slurm the resource manager of one job's daemon and
``--slurm-site`` starts the site controller of every malleable job of a Slurm
partition (:mod:`scheduler.rm.slurm`). docs/daemon.md ("Adding a resource
manager") says how a new one joins.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil

from scheduler.rm.base import ResourceManager
from scheduler.rm.registry import managers, option_sets

__all__ = ["ResourceManager", "add_options", "from_args"]


def _load_builtin() -> None:
    """Import every package of ``scheduler.rm`` (as ``scheduler.core.policies`` does its modules):
    each registers its managers; a package is imported once, so each registers once."""
    for m in pkgutil.iter_modules(__path__):
        if m.ispkg:
            importlib.import_module(f"{__name__}.{m.name}")


def add_options(p: argparse.ArgumentParser) -> None:
    """The daemon's options that choose and tune its resource manager."""
    _load_builtin()
    g = p.add_argument_group("resource manager (default: a fixed pool: --config, --slots, the Slurm "
                             "allocation the daemon runs in, or this machine)")
    which = g.add_mutually_exclusive_group()
    for m in managers():
        which.add_argument(m.flag, action="store_true", help=m.help)
    for opts in option_sets():
        opts.add(g)


def from_args(args: argparse.Namespace) -> ResourceManager | None:
    """The resource manager the options name; None: the daemon's default (a fixed pool).
    Raises ValueError (naming the option) where it cannot be used."""
    _load_builtin()
    for opts in option_sets():
        opts.check(args)
    for m in managers():
        if getattr(args, m.dest, False):
            return m.build(args)
    return None
