"""The ``reshape`` command: one entry point, with subcommands contributed by each part.

Each part adds its subcommands through an ``add_commands(subparsers)``
function that registers parsers whose ``func`` attribute runs the command:

* ``apps.redistribution_demo`` -> ``redistribution-demo``
* ``scheduler.tools.netns`` -> ``netns`` (a network-namespace test cluster)
* ``scheduler.service.commands`` -> the daemon, job and workload commands (``daemon``, ``submit``, ``demo``, ...)
* ``scheduler.lab.simulate_cli`` -> ``simulate``
"""

from __future__ import annotations

import argparse
import importlib
import sys

PARTS = ("apps.redistribution_demo", "scheduler.tools.netns", "scheduler.service.commands",
         "scheduler.lab.simulate_cli")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="reshape",
        description="Resizable MPI jobs: run the scheduler daemon, submit and watch jobs, "
        "simulate policies on workload traces, and demonstrate redistribution.",
    )
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    for name in PARTS:
        try:
            mod = importlib.import_module(name)
        except ModuleNotFoundError as e:
            if e.name and name.startswith(e.name):
                continue  # that part is not installed in this tree
            raise
        mod.add_commands(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
