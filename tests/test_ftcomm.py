"""The job's communicator under in-place recovery (reshape.runtime.ftcomm): its blocking point-to-point
calls, carried out as non-blocking ones, give what MPI's own give, on both MPIs; and the fault
injection that tests second losses (several faults, the ``recover`` point).
"""

import pytest

from reshape import faults
from tests.test_openmpi import OPEN, needs_ompi


def test_several_faults_parse_and_a_bad_one_is_named():
    specs = faults.parse_all("iteration5:rank2:kill,recover:rank0:kill")
    assert [(s.where, s.who, s.how) for s in specs] == [("iteration5", "rank2", "kill"), ("recover", "rank0", "kill")]
    with pytest.raises(ValueError, match="WHERE 'recovr' is not one of join, transfer, retire, recover"):
        faults.parse_all("iteration5:rank2:kill,recovr:rank0:kill")


@pytest.mark.procs
@pytest.mark.parametrize("mpi", ["mpich", pytest.param("openmpi", marks=needs_ompi)])
def test_ftcomm_calls_give_what_mpi_gives_and_note_their_peers(mpirun, mpi):
    res = mpirun(3, ["-m", "tests.mpi.ftcomm_calls"], env=OPEN if mpi == "openmpi" else {"RESHAPE_MPI": "mpich"})
    assert "ftcomm ok [[1, 2], [0, 2], [0, 1]]" in res.stdout, res.stdout + res.stderr
