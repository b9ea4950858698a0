"""The one-copy path through the resize runtime: arrays stay memfd-backed across resizes, the ranks read
each other's blocks directly, blocking and background, with the same data as with RESHAPE_ONECOPY=0."""

import re

import pytest

pytestmark = pytest.mark.procs


@pytest.mark.parametrize("background", ["0", "1"])
def test_resizes_read_peers_directly_and_agree_with_the_mpi_path(mpirun, background):
    reads = {}
    for onecopy in ("1", "0"):
        res = mpirun(1, ["-m", "tests.mpi.onecopy_resize"], timeout=120,
                     env={"RESHAPE_PLAN": "1,2,4,2", "RESHAPE_ONECOPY": onecopy, "RESHAPE_BACKGROUND": background})
        m = re.search(r"final size 2 direct reads (\d+) data OK", res.stdout)
        assert m, res.stdout + res.stderr
        reads[onecopy] = int(m.group(1))
    assert reads["1"] > 0 and reads["0"] == 0, reads
