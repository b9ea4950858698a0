"""Shared fixtures: launching real MPI runs under mpiexec, with cleanup."""

from __future__ import annotations

import os
import sys
import time

import pytest

from reshape.launch import mpirun as _mpirun
from reshape.launch import unheld_ipc_files
from tests.helpers import DaemonProc

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(autouse=True, scope="session")
def _no_ipc_leftovers():
    """The suite leaves no ``/dev/shm/mpich_shm_*`` or ``$TMPDIR/hydra_*`` file behind: every kill
    path removes them (``reshape.launch``). Files there before the run are not the suite's."""
    before = set(unheld_ipc_files())
    yield
    deadline = time.monotonic() + 5.0  # a daemon's reaper may still be sweeping
    while (left := set(unheld_ipc_files()) - before) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not left, f"the test suite left MPICH/Hydra files behind: {sorted(left)}"


@pytest.fixture
def mpirun():
    """``mpirun(n, argv, timeout=..., env=...)``: run ``python argv`` on ``n`` ranks.

    ``argv`` usually starts with ``-m tests.mpi.<program>``. The run happens in
    its own session; every process of it (ranks, proxies, spawned ranks) is
    killed when it ends, passes, fails or times out, and the test fails if any
    process had to be killed after a successful exit.
    """

    def run(n, argv, *, timeout=120.0, env=None, check=True, allow_leftovers=False):
        res = _mpirun(n, list(argv), timeout=timeout, env=env, check=check, cwd=ROOT)
        if not allow_leftovers and res.returncode == 0:
            assert not res.leftovers, f"processes left behind by the run: {res.leftovers}"
        return res

    return run


@pytest.fixture(autouse=True, scope="session")
def _pythonpath():
    """Make ``python -m tests.mpi.X`` importable in ranks."""
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = ROOT + (os.pathsep + old if old else "")
    sys.path.insert(0, ROOT)
    yield
    if old is None:
        os.environ.pop("PYTHONPATH", None)
    else:
        os.environ["PYTHONPATH"] = old


@pytest.fixture
def daemon(tmp_path):
    """``daemon(slots, app=..., remap=..., extra=(...))``: a real daemon on a free loopback port;
    it and every job it journaled are killed at the end, even when the test fails."""
    made: list[DaemonProc] = []

    def start(slots: int = 4, **kw) -> DaemonProc:
        d = DaemonProc(str(tmp_path), slots, **kw)
        made.append(d)
        return d

    try:
        yield start
    finally:
        for d in made:
            d.cleanup()


def pytest_terminal_summary(terminalreporter):
    """One line on the cluster tier when it ran (its steps' seconds, and the failure-to-free-slots times)."""
    import sys as _sys

    mod = _sys.modules.get("tests.compose_cluster")
    if mod is not None and mod.TIMINGS:
        times = ", ".join(f"{k} {v:.1f}" for k, v in mod.TIMINGS.items() if k != "start")
        notes = "".join(f"; {k}: {v}" for k, v in mod.NOTES.items())
        terminalreporter.write_line(f"cluster tier (s): {times}{notes}")
