"""Redistribution under real MPI: bit-exact over many layout pairs, and refusal of bad input."""

import pytest

pytestmark = pytest.mark.procs


@pytest.mark.parametrize("case", ["1d", "2d", "genblock", "methods"])
def test_bit_exact_pairs_on_6_ranks(mpirun, case):
    res = mpirun(6, ["-m", "tests.mpi.redist_pairs", case], timeout=240)
    assert f"{case}: OK" in res.stdout


def test_methods_on_3_ranks(mpirun):
    res = mpirun(3, ["-m", "tests.mpi.redist_pairs", "methods"], timeout=120)
    assert "methods: OK" in res.stdout


def test_bad_input_raises_on_every_rank_and_writes_nothing(mpirun):
    res = mpirun(4, ["-m", "tests.mpi.redist_bad"], timeout=60)
    assert "bad-input: OK" in res.stdout
