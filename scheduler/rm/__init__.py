"""Resource managers: who owns the nodes the daemon schedules on (:mod:`scheduler.rm.base`).

``reshape daemon`` picks one from its options (:func:`add_options`,
:func:`from_args`): by default a fixed pool (:mod:`scheduler.rm.fixed`: the
pool file or ``--slots``, the Slurm allocation the daemon runs in, or this
machine); ``--slurm-grow`` makes Slurm the resource manager of one job's
daemon (:mod:`scheduler.rm.slurm_grow`). Each manager is one module with one
:class:`~scheduler.rm.base.ResourceManager` class, and its options are added here.
"""

from __future__ import annotations

import argparse

from scheduler.rm.base import ResourceManager

__all__ = ["ResourceManager", "add_options", "from_args"]


def add_options(p: argparse.ArgumentParser) -> None:
    """The daemon's options that choose and tune its resource manager."""
    g = p.add_argument_group("resource manager (default: a fixed pool: --config, --slots, the Slurm "
                             "allocation the daemon runs in, or this machine)")
    g.add_argument("--slurm-grow", action="store_true",
                   help="inside a Slurm job: the pool is the partition, grown with expander jobs and shrunk by "
                        "giving nodes back to Slurm (docs/slurm.md)")
    g.add_argument("--grant-timeout", type=float, default=10.0, metavar="SECONDS",
                   help="with --slurm-grow: cancel an expander job not started after this long (default 10)")
    g.add_argument("--idle-release", type=float, default=30.0, metavar="SECONDS",
                   help="with --slurm-grow: give back a granted node unused for this long (default 30)")


def from_args(args: argparse.Namespace) -> ResourceManager | None:
    """The resource manager the options name; None: the daemon's default (a fixed pool).
    Raises ValueError (naming the option) where it cannot be used."""
    if args.slurm_grow:
        from scheduler.rm.slurm_grow import SlurmGrow

        return SlurmGrow({"grant_timeout": args.grant_timeout, "idle_release": args.idle_release})
    return None
