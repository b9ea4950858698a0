"""Launch ``mpiexec`` runs as supervised processes and clean up after them.

Used by the tests, the benchmarks and the scheduler's Job Startup. Hydra's
proxies and the ranks call ``setsid`` themselves, so a run cannot be found by
session or process group. Instead every process of a run inherits an
environment variable with a unique tag (Hydra passes the environment to the
proxies, the ranks and any rank spawned later by ``MPI_Comm_spawn``), and
:func:`tagged_pids` / :func:`kill_tagged` find and kill them by that tag, even
after the launcher itself died.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import psutil

from reshape.joblink import jobenv as E
from reshape.joblink import mpis

__all__ = [
    "TAG_VAR",
    "MPIRunError",
    "ipc_files",
    "kill_session",
    "kill_tagged",
    "mpi_env",
    "mpiexec_path",
    "mpirun",
    "new_tag",
    "relaunch",
    "selected_mpi",
    "session_pids",
    "sweep_ipc",
    "sweep_sessions",
    "tagged_pids",
    "under_mpiexec",
    "unheld_ipc_files",
]

TAG_VAR = E.RUN_TAG


class MPIRunError(RuntimeError):
    """An ``mpiexec`` run failed or timed out."""


def mpiexec_path(env: Mapping[str, str] | None = None) -> str:
    """The launcher of the MPI a run uses (``RESHAPE_MPI``, :mod:`reshape.joblink.mpis`)."""
    return selected_mpi(env).launcher


def selected_mpi(env: Mapping[str, str] | None = None) -> mpis.MPI:
    """The MPI of a run with environment ``env`` (default: ours); MPIRunError if not installed."""
    try:
        return mpis.selected(os.environ if env is None else env)
    except (ValueError, mpis.MPIUnavailable) as e:
        raise MPIRunError(str(e)) from None


def mpi_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """Environment for MPI ranks: the selected MPI's settings (:meth:`reshape.joblink.mpis.MPI.env`),
    one BLAS thread per rank, unbuffered output."""
    env = dict(os.environ)
    if extra:
        env.update(extra)
    env.update(selected_mpi(env).env(env))
    env.setdefault("OMP_NUM_THREADS", "1")
    env.setdefault("OPENBLAS_NUM_THREADS", "1")
    env.setdefault("MKL_NUM_THREADS", "1")
    env.setdefault("PYTHONUNBUFFERED", "1")
    # MPICH: yield early when polling (helps a little when oversubscribed).
    env.setdefault("MPIR_CVAR_POLLS_BEFORE_YIELD", "10")
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


def new_tag() -> str:
    return f"{os.getpid()}-{uuid.uuid4().hex}"


def _tags(tag: str | Iterable[str]) -> set[str]:
    return {tag} if isinstance(tag, str) else set(tag)


def tagged_pids(tag: str | Iterable[str], var: str = TAG_VAR) -> list[int]:
    """Live processes of this user (of any user, for root) whose environment has ``var`` set to ``tag``
    (or one of several tags).

    One scan of the process table however many tags are given.
    """
    want = _tags(tag)
    out = []
    me = os.getuid()
    for p in psutil.process_iter(["uids", "status"]):
        try:
            # root sees every user's processes: a root daemon runs jobs as their owners
            if p.info["uids"] is None or (me and p.info["uids"].real != me) or p.info["status"] == psutil.STATUS_ZOMBIE:
                continue
            if p.pid != os.getpid() and p.environ().get(var) in want:
                out.append(p.pid)
        except (psutil.Error, OSError):
            continue
    return out


def kill_tagged(tag: str | Iterable[str], var: str = TAG_VAR, grace: float = 1.0) -> list[int]:
    """SIGTERM every tagged process at once, SIGKILL what is left after ``grace``; returns the pids found.

    Processes spawned meanwhile (e.g. by ``MPI_Comm_spawn``) are caught by a rescan before SIGKILL.
    """
    want = _tags(tag)
    found = tagged_pids(want, var) if want else []
    pids = found
    leftovers = ipc_files(found)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        end = time.monotonic() + grace
        while pids and time.monotonic() < end:
            time.sleep(0.05)
            pids = [p for p in pids if _alive(p)]
        pids = tagged_pids(want, var)
        if not pids:
            break
        leftovers |= ipc_files(pids)
    remove_files(leftovers)
    return found


IPC_PREFIXES = ("/dev/shm/mpich_shm_", os.path.join(tempfile.gettempdir(), "hydra_"),
                "/dev/shm/sm_segment.")  # Open MPI's shared-memory segments (mapped, not held open)
SESSION_PREFIX = os.path.join(tempfile.gettempdir(), "ompi.")  # PRRTE's session directory, ompi.<prterun pid>


def ipc_files(pids: Iterable[int]) -> set[str]:
    """Files MPICH, Hydra and Open MPI leave behind when their processes are killed, held open or
    mapped by ``pids``: the ranks' shared-memory segments (``/dev/shm/mpich_shm_*``,
    ``/dev/shm/sm_segment.*``) and the proxies' hwloc topology files (``$TMPDIR/hydra_*``).
    Collected before a kill, removed after it (:func:`kill_tagged`)."""
    out: set[str] = set()
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                path = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if path.startswith(IPC_PREFIXES) and not path.endswith(" (deleted)"):
                out.add(path)
        try:
            with open(f"/proc/{pid}/maps") as f:
                mapped = [line[line.index("/"):].rstrip("\n") for line in f if "sm_segment." in line]
        except OSError:
            continue
        out.update(p for p in mapped if p.startswith(IPC_PREFIXES) and not p.endswith(" (deleted)"))
    return out


def sweep_sessions() -> list[str]:
    """Remove Open MPI's session directories (``$TMPDIR/ompi.<pid>``) whose ``prterun`` is gone: PRRTE
    leaves them after a job that spawned, and always after a kill. Returns what it removed."""
    import shutil

    base, prefix = os.path.split(SESSION_PREFIX)
    me, gone = os.getuid(), []
    try:
        names = os.listdir(base)
    except OSError:
        return []
    for n in names:
        pid = n[len(prefix):]
        if not n.startswith(prefix) or not pid.isdigit() or _alive(int(pid)):
            continue
        path = os.path.join(base, n)
        try:
            st = os.lstat(path)
        except OSError:
            continue
        if (st.st_uid == me or me == 0) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
            gone.append(path)
    return gone


SWEEP_AGE = 2.0  # seconds: younger unheld files may belong to a run that is starting


def sweep_ipc(min_age: float = SWEEP_AGE) -> list[str]:
    """Remove :func:`unheld_ipc_files`: what ranks killed by Hydra itself (an abort, a lost rank)
    leave behind, which nothing held by a running job can be. Returns what it removed."""
    gone = unheld_ipc_files(min_age)
    remove_files(gone)
    return gone + sweep_sessions()


def unheld_ipc_files(min_age: float = 0.0) -> list[str]:
    """This user's (every user's, for root) MPICH/Hydra files (:data:`IPC_PREFIXES`) older than
    ``min_age`` seconds that no live process holds open."""
    me, now = os.getuid(), time.time()
    candidates = []
    for d, prefix in ((os.path.dirname(p), os.path.basename(p)) for p in IPC_PREFIXES):
        try:
            names = os.listdir(d)
        except OSError:
            continue
        for n in names:
            if n.startswith(prefix):
                path = os.path.join(d, n)
                try:
                    st = os.stat(path)
                except OSError:
                    continue
                if (st.st_uid == me or me == 0) and now - st.st_mtime > min_age:
                    candidates.append(path)
    if not candidates:
        return []
    held = ipc_files(int(p) for p in os.listdir("/proc") if p.isdigit())
    return [p for p in candidates if p not in held]


def remove_files(paths: Iterable[str]) -> None:
    for path in paths:
        with contextlib.suppress(OSError):
            os.unlink(path)


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _settle(tag: str, wait: float = 2.0, failed: bool = False) -> list[int]:
    """Give the run's processes ``wait`` seconds to exit after mpiexec did, then kill the rest
    (and remove the files of ranks Hydra killed: :func:`sweep_ipc`). After a failed run (an
    ``MPI_Abort`` a second after the start) the files of the ranks Hydra killed may be younger
    than the sweep's minimum age: they are waited out and swept too."""
    end = time.monotonic() + wait
    while time.monotonic() < end and tagged_pids(tag):
        time.sleep(0.05)
    left = kill_tagged(tag)
    sweep_ipc()
    if failed and unheld_ipc_files():
        time.sleep(SWEEP_AGE + 0.1)
        sweep_ipc()
    return left


@dataclass
class RunResult:
    returncode: int
    stdout: str
    stderr: str
    leftovers: list[int]  # pids of the run still alive after mpiexec exited (then killed)


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
    tag = new_tag()
    run_env = mpi_env({**(env or {}), TAG_VAR: tag})
    cmd = [*selected_mpi(run_env).argv(n, env=run_env), *mpiexec_args, sys.executable, *argv]
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=run_env, cwd=cwd, start_new_session=True,
    )
    sid = proc.pid
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_tagged(tag)
        kill_session(sid)
        out, err = proc.communicate()
        raise MPIRunError(
            f"timeout after {timeout}s: {' '.join(cmd)}\n--- stdout\n{out[-4000:]}\n--- stderr\n{err[-4000:]}"
        ) from None
    finally:
        if proc.poll() is None:
            kill_tagged(tag)
            kill_session(sid)
    left = _settle(tag, failed=proc.returncode != 0)
    res = RunResult(proc.returncode, out, err, left)
    if check and proc.returncode != 0:
        raise MPIRunError(
            f"exit {proc.returncode}: {' '.join(cmd)}\n--- stdout\n{out[-6000:]}\n--- stderr\n{err[-6000:]}"
        )
    return res


def under_mpiexec() -> bool:
    """True inside a rank started by an MPI launcher."""
    return any(k in os.environ for k in ("PMI_RANK", "PMI_SIZE", "PMIX_RANK", "OMPI_COMM_WORLD_SIZE"))


def relaunch(module: str, nranks: int, argv: list[str], timeout: float = 3600.0) -> int:
    """Run ``python -m module argv`` under ``mpiexec -n nranks``, echo its output, return its exit code."""
    try:
        res = mpirun(nranks, ["-m", module, *argv], timeout=timeout, check=False)
    except MPIRunError as e:
        print(e, file=sys.stderr)
        return 1
    sys.stdout.write(res.stdout)
    sys.stderr.write(res.stderr)
    return res.returncode
