"""Out-of-core applications and the split integration, under mpiexec."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.procs

HETERO = ('{"element_time": 1e-6, "nodes": [{"memory": 6000, "cpu": 0.5}, {"memory": 100000},'
          ' {"memory": 9000, "read_bw": 5e6, "write_bw": 5e6}]}')


@pytest.mark.parametrize("prefetch", [False, True])
def test_ooc_jacobi_matches_in_core(mpirun, prefetch):
    argv = ["-m", "apps.ooc_jacobi", "--rows", "50", "--cols", "40", "--iters", "4",
            "--counts", "12,25,13", "--nodes", HETERO, "--check"]
    res = mpirun(3, argv + (["--prefetch"] if prefetch else []), timeout=60)
    assert "check against in-core run: ok" in res.stdout


def test_job_redistributed_to_chosen_split(mpirun):
    res = mpirun(4, ["-m", "tests.mpi.shared_resize_split"], timeout=90)
    assert "result ok" in res.stdout


def test_bad_distribution_is_refused(mpirun):
    res = mpirun(2, ["-m", "apps.ooc_jacobi", "--rows", "20", "--counts", "5,5"],
                 timeout=60, check=False)
    assert res.returncode != 0
    assert "must give each of 2 ranks >= 1 row and sum to 20" in res.stderr
    assert "Traceback" not in res.stderr


CG_NODES = ('{"element_time": 1e-6, "nodes": [{"memory": 20000, "cpu": 0.5}, {"memory": 100000},'
            ' {"memory": 20000, "read_bw": 5e6, "write_bw": 5e6}]}')


@pytest.mark.parametrize("prefetch", [False, True])
def test_ooc_cg_matches_in_core(mpirun, prefetch):
    argv = ["-m", "apps.ooc_cg", "--rows", "50", "--cols", "40", "--iters", "8",
            "--counts", "12,25,13", "--nodes", CG_NODES, "--check"]
    res = mpirun(3, argv + (["--prefetch"] if prefetch else []), timeout=60)
    assert "check against in-core run: ok" in res.stdout


def test_a_failing_rank_fails_the_whole_run_at_once(mpirun):
    """Rank 1 cannot keep CG's vectors: the run ends at once with its message, not at a timeout."""
    import glob
    import tempfile

    nodes = '{"nodes": [{"memory": 1000000}, {"memory": 10000}, {"memory": 1000000}]}'
    before = set(glob.glob(f"{tempfile.gettempdir()}/reshape-ooc-*"))
    res = mpirun(3, ["-m", "apps.ooc_cg", "--rows", "60", "--cols", "40", "--nodes", nodes],
                 timeout=60, check=False)  # a run that waits for a dead rank would end at this timeout: an error
    assert res.returncode != 0
    assert "aborting the job: rank 1: StructureError: node 1: 10000 bytes of memory cannot keep" in res.stderr
    assert set(glob.glob(f"{tempfile.gettempdir()}/reshape-ooc-*")) <= before  # scratch removed


@pytest.mark.parametrize("prefetch", [False, True])
def test_ooc_lanczos_matches_in_core(mpirun, prefetch):
    """Lanczos (Nakazawa's (2005) third application): alpha, beta and v as the in-core serial run."""
    argv = ["-m", "apps.ooc_lanczos", "--rows", "50", "--cols", "40", "--iters", "8",
            "--counts", "12,25,13", "--nodes", CG_NODES, "--check"]
    res = mpirun(3, argv + (["--prefetch"] if prefetch else []), timeout=60)
    assert "check against in-core run: ok" in res.stdout


CPUS = '{"element_time": 1e-6, "nodes": [{"cpu": 0.5}, {}, {"cpu": 2.0}]}'


def test_pipelined_wavefront_matches_one_process(mpirun):
    """The pipeline pattern's program: tiles flow down the rank chain; same grid as one process."""
    argv = ["-m", "apps.ooc_wavefront", "--rows", "50", "--cols", "40", "--iters", "4",
            "--counts", "12,25,13", "--nodes", CPUS, "--check"]
    res = mpirun(3, argv, timeout=60)
    assert "check against one-process run: ok" in res.stdout

