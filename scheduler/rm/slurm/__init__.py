"""Slurm as the resource manager (docs/slurm.md): its two managers and their daemon options.

``--slurm-grow`` (:class:`scheduler.rm.slurm.manager.SlurmGrow`): Slurm as the resource manager
of one job's daemon; ``--slurm-site`` (:class:`scheduler.rm.slurm.site.SlurmSite`): the site
controller of every malleable job of a partition. Both read the broker's options
(:class:`scheduler.rm.slurm.broker.Broker`), registered here once (:mod:`scheduler.rm.registry`).
The rest of the package: the pure broker (``broker``, ``ops``), Slurm's backfill plan (``plan``),
starting waiting jobs earlier (``admit``), time limits (``limits``), checks against Slurm
(``verify``), Slurm's commands (``view``) and the thread that runs them, with its messages (``edge``).
"""

from __future__ import annotations

import argparse

from scheduler.rm.registry import Options, register

__all__ = ["OPTIONS", "broker_params"]


def _add(g: argparse._ArgumentGroup) -> None:
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
    g.add_argument("--max-stretch", type=float, default=3.0, metavar="FACTOR",
                   help="no shrink makes a malleable job run longer than FACTOR times its run at its requested "
                        "size (default 3; 1.1 protects each job more and starts queued work later: docs/slurm.md)")
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


def _check(args: argparse.Namespace) -> None:
    for name in ("grant_timeout", "idle_release", "expire_margin"):
        v = getattr(args, name)
        if not 0 <= v < float("inf"):
            raise ValueError(f"--{name.replace('_', '-')} must be a number of seconds >= 0, got {v}")
    if not 1.0 <= args.max_stretch < float("inf"):
        raise ValueError(f"--max-stretch must be a factor >= 1, got {args.max_stretch}")
    if args.partition and not args.slurm_site:
        raise ValueError("--partition is for --slurm-site (--slurm-grow uses its own job's partition)")


#: the options both Slurm managers read
OPTIONS = Options(_add, _check)


def broker_params(args: argparse.Namespace) -> dict:
    """The Slurm broker's parameters from the options (:class:`scheduler.rm.slurm.broker.Broker`)."""
    return {"grant_timeout": args.grant_timeout, "idle_release": args.idle_release,
            "expire_margin": args.expire_margin, "moldable": not args.no_moldable,
            "shrink_to_start": not args.no_shrink_to_start, "time_limits": args.time_limits,
            "max_stretch": args.max_stretch, "criterion": args.shrink_criterion,
            "regrow": args.moldable_cost == "regrow"}


@register("slurm-site", "the site controller of every 'reshape submit --slurm' job of a Slurm partition: "
                        "run once, beside slurmctld (docs/slurm.md, \"Site mode\")", OPTIONS)
def _site(args: argparse.Namespace):
    from scheduler.rm.slurm.site import SlurmSite

    return SlurmSite(args.partition, broker_params(args))


@register("slurm-grow", "inside a Slurm job: the pool is the partition, grown with expander jobs and shrunk by "
                        "giving nodes back to Slurm (docs/slurm.md; 'reshape slurm-run' starts it)", OPTIONS)
def _grow(args: argparse.Namespace):
    from scheduler.rm.slurm.manager import SlurmGrow

    return SlurmGrow(broker_params(args))
