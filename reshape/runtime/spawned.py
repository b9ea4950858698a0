"""The entry point of a rank spawned by an expansion: ``MPI_Init`` first, the imports after.

``python -m reshape.runtime.spawned -m MODULE ARGS`` (or ``... SCRIPT ARGS``) runs the
job's program as ``python -m MODULE ARGS`` would, but initialises MPI before
anything else. The running ranks' ``MPI_Comm_spawn_multiple`` returns once
every new rank is through ``MPI_Init``; they then wait for the merge without
spinning (:func:`reshape.runtime.spawning.merge`) while the new ranks import numpy,
the runtime and the application. Importing first, as the program itself does,
kept the running ranks polling inside the spawn call for the whole start-up,
taking the CPU the new ranks were starting on (an expansion on a busy node
took twice as long).
"""

from __future__ import annotations

import importlib
import os
import runpy
import sys

# in this order: MPI_Init (the running ranks' spawn call returns), then the heavy imports, while they sleep
FIRST = ("mpi4py.MPI", "numpy", "reshape.runtime.start")


def main(argv: list[str]) -> None:
    if not argv or (argv[0] == "-m" and len(argv) < 2):
        raise SystemExit("usage: python -m reshape.runtime.spawned (-m MODULE | SCRIPT) [ARGS...]")
    for name in FIRST:
        importlib.import_module(name)
    if argv[0] == "-m":
        sys.argv = argv[1:]
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = argv[:]
        sys.path[0] = os.path.dirname(os.path.abspath(argv[0]))  # as ``python SCRIPT`` sets it
        runpy.run_path(argv[0], run_name="__main__")


if __name__ == "__main__":
    main(sys.argv[1:])
