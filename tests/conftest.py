"""Shared fixtures: launching real MPI runs under mpiexec, with cleanup; and the test tiers.

Every test belongs to exactly one tier, given here at collection (``-m pure``, ``-m procs``,
``-m cluster`` select them):

* ``cluster``: marked so (the docker-compose cluster, Slurm, the network-namespace cluster);
* ``procs`` (the MPI tier): marked so, or using the ``mpirun`` or ``daemon`` fixture, or a
  pytest-mpi test (``@pytest.mark.mpi``, run on every rank under ``mpiexec ... --with-mpi``;
  ``tests/test_mpi_ranks.py`` does that, and a run holding it without ``--with-mpi`` leaves
  the rank tests out instead of listing them as skipped);
* ``pure``: everything else. A pure test runs inside pytest's own process; one that starts a
  process (``subprocess``, ``fork``, ``exec``, ``posix_spawn``...) fails, saying what it started,
  so a test that launches something without being marked is caught rather than slowing the tier.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time

import pytest

from reshape.joblink.launch import mpirun as _mpirun
from reshape.joblink.launch import unheld_ipc_files
from tests.helpers import DaemonProc

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

TIERS = ("pure", "procs", "cluster")
PROCESS_FIXTURES = frozenset({"mpirun", "daemon"})  # fixtures that start processes: their tests are procs
LAUNCH_EVENTS = frozenset({"subprocess.Popen", "os.fork", "os.forkpty", "os.posix_spawn", "os.exec", "os.spawn",
                           "os.system", "os.startfile", "pty.spawn"})
_launched: list[str] | None = None  # while a pure test runs: what it started


def _audit(event: str, args: tuple) -> None:
    if _launched is not None and event in LAUNCH_EVENTS:
        what = args[1] if event in ("subprocess.Popen", "os.posix_spawn", "os.exec", "os.spawn") else args
        _launched.append(f"{event} {str(what)[:200]} (thread {threading.current_thread().name})")


sys.addaudithook(_audit)  # cannot be removed; does nothing outside pure tests


def tier_of(item) -> str:
    """The one tier of a collected test (see the module docstring)."""
    if item.get_closest_marker("cluster"):
        return "cluster"
    if (item.get_closest_marker("procs") or item.get_closest_marker("mpi")
            or PROCESS_FIXTURES & set(getattr(item, "fixturenames", ()))):
        return "procs"
    return "pure"


RANK_TESTS_RUNNER = os.path.join(ROOT, "tests", "test_mpi_ranks.py")


@pytest.hookimpl(tryfirst=True)  # before ``-m`` selects by the markers added here
def pytest_collection_modifyitems(config, items):
    # pytest-mpi tests are run under mpiexec by tests/test_mpi_ranks.py: in a run that has it and no
    # --with-mpi they are deselected, rather than each reported as skipped
    if not (config.getoption("--with-mpi", False) or config.getoption("--only-mpi", False)) \
            and any(str(i.path) == RANK_TESTS_RUNNER for i in items):
        ranked = [i for i in items if i.get_closest_marker("mpi")]
        if ranked:
            items[:] = [i for i in items if not i.get_closest_marker("mpi")]
            config.hook.pytest_deselected(items=ranked)
    for item in items:
        explicit = [t for t in TIERS if item.get_closest_marker(t)]
        if len(explicit) > 1:
            raise pytest.UsageError(f"{item.nodeid}: marked with more than one tier: {explicit}")
        tier = tier_of(item)
        if tier not in explicit:
            item.add_marker(tier)


def pytest_sessionstart(session):
    """matplotlib builds its font cache at its first import by running ``fc-list``: built here, before any pure
    test is watched, so that on a new machine the first pure test that plots is not taken for one that starts
    processes."""
    with contextlib.suppress(ImportError):
        import matplotlib.font_manager  # noqa: F401


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """Watch a pure test from its first fixture's setup to its last fixture's teardown."""
    global _launched
    _launched = [] if item.get_closest_marker("pure") else None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item, nextitem):
    """A pure test (and its fixtures) may not start a process: it belongs in the procs tier."""
    global _launched
    try:
        res = yield
    finally:
        found, _launched = _launched, None
    if found:
        pytest.fail("a pure-tier test started processes (mark it procs, or use the mpirun/daemon fixture):\n  "
                    + "\n  ".join(found[:10]), pytrace=False)
    return res


@pytest.fixture(autouse=True, scope="session")
def _no_ipc_leftovers():
    """The suite leaves no ``/dev/shm/mpich_shm_*`` or ``$TMPDIR/hydra_*`` file behind: every kill
    path removes them (``reshape.joblink.launch``). Files there before the run are not the suite's."""
    before = set(unheld_ipc_files())
    yield
    deadline = time.monotonic() + 5.0  # a daemon's reaper may still be sweeping
    while (left := set(unheld_ipc_files()) - before) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not left, f"the test suite left MPICH/Hydra files behind: {sorted(left)}"


@pytest.fixture
def mpirun():
    """``mpirun(n, argv, timeout=..., env=..., cwd=ROOT)``: run ``python argv`` on ``n`` ranks.

    ``argv`` usually starts with ``-m tests.mpi.<program>``. The run happens in
    its own session; every process of it (ranks, proxies, spawned ranks) is
    killed when it ends, passes, fails or times out, and the test fails if any
    process had to be killed after a successful exit.
    """

    def run(n, argv, *, timeout=120.0, env=None, check=True, allow_leftovers=False, cwd=ROOT):
        res = _mpirun(n, list(argv), timeout=timeout, env=env, check=check, cwd=cwd)
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

    mod = _sys.modules.get("tests.helpers")
    if mod is not None and mod.TIMINGS:
        times = ", ".join(f"{k} {v:.1f}" for k, v in mod.TIMINGS.items() if k != "start")
        notes = "".join(f"; {k}: {v}" for k, v in mod.NOTES.items())
        terminalreporter.write_line(f"cluster tier (s): {times}{notes}")
