"""The ``reshape`` command: one entry point, with subcommands contributed by each part.

Each part adds its subcommands through an ``add_commands(subparsers)``
function that registers parsers whose ``func`` attribute runs the command:

* ``reshape.redistribution.demo`` -> ``redistribution-demo``
* ``scheduler.testing.netns`` -> ``netns`` (a network-namespace test cluster)
* ``scheduler.cli.parser`` -> the daemon, job and workload commands (``daemon``, ``submit``, ``demo``, ...)
* ``scheduler.lab.simulate_cli`` -> ``simulate``
* ``reshape.joblink.mpiexec_cli`` -> ``mpiexec`` (a program under MPICH or Open MPI)

``python -m scheduler.cli`` is the same command (``__main__.py``). The package holds the
command line's own modules: ``parser`` and ``commands`` (the daemon and job commands), ``slurm``
(``submit --slurm``, ``slurm-run``), ``demo`` and ``workload`` (the emulated workloads it runs).
"""

from __future__ import annotations

import argparse
import importlib
import re
import sys

PARTS = ("reshape.redistribution.demo", "scheduler.testing.netns", "scheduler.cli.parser",
         "scheduler.lab.simulate_cli", "reshape.joblink.mpiexec_cli")
# commands started by other programs, where start-up time is a job's: only their own part is imported
# ('slurm-run' is the body of every batch script 'submit --slurm' writes; the rest costs ~0.3 s)
ALONE = {"slurm-run": "scheduler.cli.slurm"}


def build_parser(parts: tuple[str, ...] = PARTS) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="reshape",
        description="Resizable MPI jobs: run the scheduler daemon, submit and watch jobs, "
        "simulate policies on workload traces, and demonstrate redistribution.",
    )
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    for name in parts:
        try:
            mod = importlib.import_module(name)
        except ModuleNotFoundError as e:
            if e.name and name.startswith(e.name):
                continue  # that part is not installed in this tree
            raise
        mod.add_commands(sub)
    describe(p)
    return p


def describe(parser: argparse.ArgumentParser) -> None:
    """Give every subcommand's own ``--help`` a description (its one-line help from the command
    list when it has none) and show reST's ``literal`` markup as plain text, recursively."""
    for action in parser._actions:
        if not isinstance(action, argparse._SubParsersAction):
            continue
        helps = {a.dest: a.help for a in action._choices_actions}
        for name, sub in action.choices.items():
            text = sub.description or helps.get(name)
            if text:
                sub.description = _plain(text[0].upper() + text[1:] + ("" if text.rstrip().endswith(".") else "."))
            describe(sub)


def _plain(text: str) -> str:
    return re.sub(r"``([^`]+)``", r"\1", text)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser((ALONE[argv[0]],) if argv and argv[0] in ALONE else PARTS)
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    return int(args.func(args) or 0)

