"""Job Startup (Sudarsan & Ribbens 2007 §3.1): run a job's ``mpiexec`` on its allocated hosts.

Each job runs in its own session (``start_new_session``) so the job, its
Hydra proxies and any ranks it spawns later can be killed together
(``reshape.joblink.launch.kill_session``); stdout and stderr go to a per-job log.
The job learns the daemon's address and its id from ``RESHAPE_SCHEDULER``
and ``RESHAPE_JOB_ID``, and the bound on one resize from
``RESHAPE_RESIZE_TIMEOUT`` (the job file's ``resize_timeout``).

Finding a job's processes: Hydra's proxies and ranks each call ``setsid``,
so neither the session nor the process tree of ``mpiexec`` (which a
``kill -9`` of ``mpiexec`` orphans) finds them all. Every process of a job
inherits ``RESHAPE_JOB_TAG`` (unique per daemon state directory and job), and
:func:`job_pids` finds processes by that tag, also after a daemon restart.
"""

from __future__ import annotations

import os
import pwd
import subprocess
import sys
from collections.abc import Iterable
from typing import Any

from reshape.joblink import jobenv as E
from reshape.joblink.launch import MPIRunError, kill_tagged, mpi_env, selected_mpi, tagged_pids
from reshape.joblink.launchers import Launcher, is_local
from scheduler.core.jobfile import JobDesc
from scheduler.daemon.statedir import open_private

__all__ = ["attempt_tag", "full_env", "job_argv", "job_env", "job_pids", "job_tag", "kill_job", "kill_jobs",
           "read_exit_status", "start_job", "tag_prefix", "user_ids"]

TAG = E.JOB_TAG


def tag_prefix(state_dir: str) -> str:
    """What every tag of a daemon's jobs starts with (a node monitor learns it at registration)."""
    return f"{os.path.abspath(state_dir)}#"


def attempt_tag(prefix: str, job_id: int, attempt: int = 0) -> str:
    """The tag of a job's attempt from its daemon's :func:`tag_prefix` (a restarted job's ends ``#ID~ATTEMPT``)."""
    return f"{prefix}{job_id}" + (f"~{attempt}" if attempt else "")


def job_tag(state_dir: str, job_id: int, attempt: int = 0) -> str:
    """The tag every process of a job's attempt carries (``RESHAPE_JOB_TAG``)."""
    return attempt_tag(tag_prefix(state_dir), job_id, attempt)


def job_pids(tag: str) -> list[int]:
    """Live processes of this user carrying ``RESHAPE_JOB_TAG=tag``."""
    return tagged_pids(tag, TAG)


def kill_job(tag: str, grace: float = 1.0) -> list[int]:
    """SIGTERM, then SIGKILL, every process of the job; returns the pids found."""
    return kill_jobs([tag], grace)


def kill_jobs(tags: Iterable[str], grace: float = 1.0) -> list[int]:
    """SIGTERM every process of all these jobs at once, SIGKILL what is left after ``grace``.

    One process-table scan per poll for all jobs, so stopping a daemon with
    many running jobs takes at most about ``2 * grace`` seconds, not that per job.
    """
    return kill_tagged(tags, TAG, grace)


LOCAL = {"localhost", "127.0.0.1", "::1"}


def job_argv(desc: JobDesc, hosts: list[str], env: dict[str, str] | None = None,
             reachable: dict[str, int] | None = None) -> list[str]:
    """``mpiexec -n K [-hosts h:n,...] command...`` for a job allocated ``hosts`` (one per slot), with
    the launcher of the MPI ``env`` selects (``RESHAPE_MPI``; :mod:`reshape.joblink.mpis`).
    ``reachable``: the other hosts the job may grow onto, with their slots (only Open MPI needs them at
    start: :meth:`reshape.joblink.mpis.MPI.argv`)."""
    cmd = list(desc.command)
    if cmd[0] in ("python", "python3"):
        cmd[0] = sys.executable
    n = 1 if desc.launch == "single" else len(hosts)
    remote = bool(set(hosts) - LOCAL)
    return selected_mpi(env).argv(n, hosts if remote else (), env, reachable if remote else None) + cmd


def job_env(job_id: int, desc: JobDesc, hosts: list[str], endpoint: str, launcher: Launcher, tag: str,
            checkpoint_dir: str | None = None) -> dict[str, str]:
    """The variables Job Startup gives a job on top of the environment it starts in (docs/protocol.md,
    "Job environment"): the launcher's, the job file's ``mpi`` and ``env``, the daemon's group."""
    ckdir = checkpoint_dir or desc.checkpoint_dir  # none: the runtime's default directory
    ckpt = {E.CHECKPOINT: desc.checkpoint, **({E.CHECKPOINT_DIR: ckdir} if ckdir else {})} \
        if desc.checkpoint else {}
    return {**launcher.env(), **({E.MPI: desc.mpi} if desc.mpi else {}),
            **desc.env, TAG: tag, E.SCHEDULER: endpoint,
            E.JOB_ID: str(job_id), E.NPROCS: str(len(hosts)),
            E.HOSTS: ",".join(hosts),
            E.RESIZE_TIMEOUT: f"{desc.resize_timeout:g}", **ckpt}


def full_env(extra: dict[str, str]) -> dict[str, str]:
    """This process's environment with the job's variables and its MPI's settings; OSError when the
    job's MPI (``RESHAPE_MPI``) is not installed here."""
    try:
        env = mpi_env(extra)
    except MPIRunError as e:
        raise OSError(str(e)) from None
    env.pop(E.PLAN, None)
    return env


def user_ids(run_as: int | None, env: dict[str, str]) -> dict[str, Any]:
    """``subprocess.Popen`` arguments that run a process as ``run_as`` (None: as this process), with
    that user's ``HOME``, ``USER``, ``LOGNAME`` set in ``env``; OSError for a uid with no account."""
    if run_as is None:
        return {}
    try:
        pw = pwd.getpwuid(run_as)
    except KeyError:
        raise OSError(f"the job's owner, uid {run_as}, has no account here") from None
    env.update(HOME=pw.pw_dir, USER=pw.pw_name, LOGNAME=pw.pw_name)
    return {"user": run_as, "group": pw.pw_gid, "extra_groups": os.getgrouplist(pw.pw_name, pw.pw_gid)}


def start_job(job_id: int, desc: JobDesc, hosts: list[str], endpoint: str, launcher: Launcher,
              log_path: str | None, tag: str, cwd: str | None = None, exit_path: str | None = None,
              run_as: int | None = None, checkpoint_dir: str | None = None,
              reachable: dict[str, int] | None = None) -> subprocess.Popen:
    """Launch the job with ``launcher`` (its environment reaches every rank); raises OSError if it
    cannot start. ``log_path``: the job's output file (None: this process's standard output). ``run_as``: a uid
    to run it as (a root daemon runs each job as its owner).
    ``checkpoint_dir``: where a job with ``checkpoint`` writes and resumes (``RESHAPE_CHECKPOINT_DIR``).
    ``reachable``: the pool's hosts and slots, where the job may grow (:func:`job_argv`)."""
    env = full_env(job_env(job_id, desc, hosts, endpoint, launcher, tag, checkpoint_dir))
    remote = sorted(h for h in set(hosts) if not is_local(h))
    if env.get(E.MPI) == "openmpi" and remote and launcher.name != "ssh":
        raise OSError(f"a job on Open MPI reaches other hosts over ssh only, not with the {launcher.name!r} "
                      f"launcher (docs/mpi.md); it was given {remote[:4]}")
    if log_path is not None:
        os.makedirs(os.path.dirname(log_path) or ".", exist_ok=True)
    argv = job_argv(desc, hosts, env, reachable)
    ids = user_ids(run_as, env)
    # the wrapper gets the status file as its standard input, opened for writing: no path the
    # job's user would need to reach; mpiexec gets /dev/null as before
    # both never through a link (statedir.open_private); the log is the job's owner's (0600)
    status = open_private(exit_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC) if exit_path else subprocess.DEVNULL
    if exit_path:
        argv = ["/bin/sh", "-c", EXIT_WRAPPER, WRAPPER_NAME, *argv]
    try:
        log = open_private(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600, owner=run_as) \
            if log_path is not None else None
        try:
            return subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                    stdin=status, env=env, cwd=cwd, start_new_session=True, **ids)
        finally:
            if log is not None:
                os.close(log)
    finally:
        if exit_path:
            os.close(status)


# Runs the job's mpiexec and writes its exit status to its standard input (logs/job-N.exit, opened
# for writing by the daemon) before exiting with it: a daemon that restarted meanwhile (and so is
# not mpiexec's parent) still learns how the job ended.
WRAPPER_NAME = "reshape-job"  # its $0: node monitors tell it from the job's ranks by it
EXIT_WRAPPER = '"$@" </dev/null; rc=$?; echo $rc >&0; exit $rc'


def read_exit_status(path: str) -> int | None:
    """The exit status the wrapper recorded, or None (no file: it was killed, or never ran)."""
    try:
        with open(path) as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None
