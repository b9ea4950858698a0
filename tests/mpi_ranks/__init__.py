"""Tests whose body runs on every rank of ``MPI.COMM_WORLD`` (pytest-mpi).

Run them with ``mpiexec -n K python -m pytest --with-mpi tests/mpi_ranks`` for any K >= 1 (the
suite runs K = 1, 2, 4 from ``tests/test_mpi_ranks.py``); without ``--with-mpi`` pytest-mpi
skips them. Every test is collective: all ranks run the same tests in the same order and reach
the same verdict through :func:`assert_on_every_rank`, so one rank's failure never leaves the
others waiting in the next test's collective. Programs that spawn or retire ranks stay whole
programs under ``tests/mpi/``, run by the ``mpirun`` fixture.
"""

from __future__ import annotations

from mpi4py import MPI

comm = MPI.COMM_WORLD


def assert_on_every_rank(problems: list[str]) -> None:
    """Pass on every rank, or fail on every rank listing every rank's problems."""
    every = comm.allgather(list(problems))
    bad = [f"rank {r}: {p}" for r, ps in enumerate(every) for p in ps]
    assert not bad, f"{len(bad)} problem(s) on {comm.size} ranks:\n" + "\n".join(bad[:30])
