"""Launch ``mpiexec`` runs as supervised process groups and clean up after them.

Used by the tests, the benchmarks and the scheduler's Job Startup: every run
gets its own session (``setsid``) so that the run, its Hydra proxies and any
ranks spawned later by ``MPI_Comm_spawn`` can be found and killed together,
even after the launcher itself died.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass

import psutil

__all__ = ["MPIRunError", "kill_session", "mpi_env", "mpiexec_path", "mpirun", "session_pids"]


class MPIRunError(RuntimeError):
    """An ``mpiexec`` run failed or timed out."""


def mpiexec_path() -> str:
    """The ``mpiexec`` next to this Python (the ``mpich`` wheel's), else the one on PATH."""
    here = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    if os.access(here, os.X_OK):
        return here
    found = shutil.which("mpiexec")
    if not found:
        raise MPIRunError("no mpiexec found: install the 'mpich' package (pip install mpich)")
    return found


def mpi_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """Environment for MPI ranks: one BLAS thread per rank, unbuffered output."""
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", "1")
    env.setdefault("OPENBLAS_NUM_THREADS", "1")
    env.setdefault("MKL_NUM_THREADS", "1")
    env.setdefault("PYTHONUNBUFFERED", "1")
    # MPICH: yield early when polling (helps a little when oversubscribed).
    env.setdefault("MPIR_CVAR_POLLS_BEFORE_YIELD", "10")
    if extra:
        env.update(extra)
    return env


def session_pids(sid: int) -> list[int]:
    out = []
    for p in psutil.process_iter(["pid"]):
        try:
            if os.getsid(p.pid) == sid:
                out.append(p.pid)
        except (ProcessLookupError, PermissionError, psutil.Error):
            continue
    return out


def kill_session(sid: int, grace: float = 2.0) -> list[int]:
    """SIGTERM then SIGKILL every process of session ``sid``; returns the pids found."""
    pids = [p for p in session_pids(sid) if p != os.getpid()]
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for p in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(p, sig)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and any(psutil.pid_exists(p) and _alive(p) for p in pids):
            time.sleep(0.05)
    return pids


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@dataclass
class RunResult:
    returncode: int
    stdout: str
    stderr: str
    leftovers: list[int]  # pids of the run's session still alive at exit (then killed)


def mpirun(
    n: int,
    argv: list[str],
    *,
    timeout: float = 120.0,
    env: dict[str, str] | None = None,
    check: bool = True,
    cwd: str | None = None,
    mpiexec_args: tuple[str, ...] = (),
) -> RunResult:
    """Run ``mpiexec -n n python argv...``; always leaves no process of the run behind.

    Raises MPIRunError on timeout, or on a non-zero exit when ``check``.
    """
    cmd = [mpiexec_path(), "-n", str(n), *mpiexec_args, sys.executable, *argv]
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=mpi_env(env), cwd=cwd, start_new_session=True,
    )
    sid = proc.pid
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_session(sid)
        out, err = proc.communicate()
        raise MPIRunError(
            f"timeout after {timeout}s: {' '.join(cmd)}\n--- stdout\n{out[-4000:]}\n--- stderr\n{err[-4000:]}"
        ) from None
    finally:
        if proc.poll() is None:
            kill_session(sid)
    time.sleep(0.05)
    left = kill_session(sid, grace=1.0)
    res = RunResult(proc.returncode, out, err, left)
    if check and proc.returncode != 0:
        raise MPIRunError(
            f"exit {proc.returncode}: {' '.join(cmd)}\n--- stdout\n{out[-6000:]}\n--- stderr\n{err[-6000:]}"
        )
    return res
