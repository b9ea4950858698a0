"""The pytest-mpi tests of ``tests/mpi_ranks/`` on 1, 2 and 4 ranks, as part of the ordinary run.

Each size is one ``mpiexec -n K python -m pytest --with-mpi tests/mpi_ranks`` under the ``mpirun``
fixture (oversubscribed on two cores; every process of the run is gone afterwards, even on a
failure or a timeout). A test that hangs in a collective fails on its rank after ``--timeout``,
with its stack, before the whole run is stopped.
"""

from __future__ import annotations

import re

import pytest


@pytest.mark.parametrize("n", [1, 2, 4])
def test_rank_tests_pass_on_every_rank(mpirun, n):
    res = mpirun(n, ["-m", "pytest", "--with-mpi", "-q", "--color=no", "-p", "no:cacheprovider", "--timeout", "60",
                     "tests/mpi_ranks"], timeout=240)
    summaries = re.findall(r"(\d+) passed(?:, (\d+) skipped)? in ", res.stdout)  # one line per rank
    assert len(summaries) == n and len(set(summaries)) == 1, res.stdout[-6000:]
    assert int(summaries[0][0]) >= 20, res.stdout[-6000:]  # they ran, not skipped (no --with-mpi: all skip)
