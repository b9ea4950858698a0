"""Resource managers: who owns the nodes the daemon schedules on (:mod:`scheduler.rm.base`).

``reshape daemon`` picks one from its options (:func:`add_options`,
:func:`from_args`): by default a fixed pool (:mod:`scheduler.rm.fixed`: the
pool file or ``--slots``, the Slurm allocation the daemon runs in, or this
machine); ``--slurm-grow`` makes Slurm the resource manager of one job's
daemon and ``--slurm-site`` starts the site controller of every malleable
job of a Slurm partition (:mod:`scheduler.rm.slurm.manager`,
:mod:`scheduler.rm.slurm.site`). Each manager is one module with one
:class:`~scheduler.rm.base.ResourceManager` class; its options are added here.
"""

from __future__ import annotations

import argparse

from scheduler.rm.base import ResourceManager

__all__ = ["ResourceManager", "add_options", "broker_params", "from_args"]


def add_options(p: argparse.ArgumentParser) -> None:
    """The daemon's options that choose and tune its resource manager."""
    g = p.add_argument_group("resource manager (default: a fixed pool: --config, --slots, the Slurm "
                             "allocation the daemon runs in, or this machine)")
    which = g.add_mutually_exclusive_group()
    which.add_argument("--slurm-site", action="store_true",
                       help="the site controller of every 'reshape submit --slurm' job of a Slurm partition: "
                            "run once, beside slurmctld (docs/slurm.md, \"Site mode\")")
    which.add_argument("--slurm-grow", action="store_true",
                       help="inside a Slurm job: the pool is the partition, grown with expander jobs and shrunk by "
                            "giving nodes back to Slurm (docs/slurm.md; 'reshape slurm-run' starts it)")
    g.add_argument("--partition", metavar="NAME", help="with --slurm-site: the partition (default: Slurm's default)")
    g.add_argument("--grant-timeout", type=float, default=10.0, metavar="SECONDS",
                   help="cancel an expander job Slurm has not started after this long (default 10)")
    g.add_argument("--idle-release", type=float, default=30.0, metavar="SECONDS",
                   help="give back a granted node unused for this long (default 30)")
    g.add_argument("--expire-margin", type=float, default=30.0, metavar="SECONDS",
                   help="vacate an expander this long before its time limit ends it (default 30)")
    g.add_argument("--no-moldable", action="store_true",
                   help="never start a waiting malleable job on fewer nodes than it asked for")
    g.add_argument("--no-shrink-to-start", action="store_true",
                   help="shrink running jobs for every waiting job that can start so, without weighing what it "
                        "costs them or checking Slurm's plan (the rule before the SD-Policy criterion)")
    g.add_argument("--max-stretch", type=float, default=2.0, metavar="FACTOR",
                   help="no shrink makes a malleable job run longer than FACTOR times its run at its requested "
                        "size (default 2)")
    g.add_argument("--shrink-criterion", choices=("slowdown", "turnaround"), default="slowdown",
                   help="what a shrink to start weighs (docs/slurm.md): slowdown (default; SD-Policy's test) the "
                        "seconds the shrunk jobs lose and the waiting job saves, each divided by its job's run time; "
                        "turnaround the seconds alone")
    g.add_argument("--moldable-cost", choices=("regrow", "bound"), default="bound",
                   help="what a moldable start costs the job itself: bound (default) its limit at the smaller size, "
                        "regrow what it loses if it grows back when Slurm would have started it (docs/slurm.md)")
    g.add_argument("--time-limits", choices=("charge", "measured", "off"), default="charge",
                   help="the Slurm time limit of a job that resized: charge (default) the walltime charging "
                        "rule's end (longer below its requested size), measured also brought down to the end "
                        "its measured progress gives, off left as submitted (docs/slurm.md)")


def broker_params(args: argparse.Namespace) -> dict:
    """The Slurm broker's parameters from the options (:class:`scheduler.rm.slurm.broker.Broker`)."""
    return {"grant_timeout": args.grant_timeout, "idle_release": args.idle_release,
            "expire_margin": args.expire_margin, "moldable": not args.no_moldable,
            "shrink_to_start": not args.no_shrink_to_start, "time_limits": args.time_limits,
            "max_stretch": args.max_stretch, "criterion": args.shrink_criterion,
            "regrow": args.moldable_cost == "regrow"}


def from_args(args: argparse.Namespace) -> ResourceManager | None:
    """The resource manager the options name; None: the daemon's default (a fixed pool).
    Raises ValueError (naming the option) where it cannot be used."""
    for name in ("grant_timeout", "idle_release", "expire_margin"):
        v = getattr(args, name)
        if not 0 <= v < float("inf"):
            raise ValueError(f"--{name.replace('_', '-')} must be a number of seconds >= 0, got {v}")
    if not 1.0 <= args.max_stretch < float("inf"):
        raise ValueError(f"--max-stretch must be a factor >= 1, got {args.max_stretch}")
    params = broker_params(args)
    if args.partition and not args.slurm_site:
        raise ValueError("--partition is for --slurm-site (--slurm-grow uses its own job's partition)")
    if args.slurm_site:
        from scheduler.rm.slurm.site import SlurmSite

        return SlurmSite(args.partition, params)
    if args.slurm_grow:
        from scheduler.rm.slurm.manager import SlurmGrow

        return SlurmGrow(params)
    return None
