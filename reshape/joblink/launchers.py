"""Launchers: how a job's processes reach hosts, the one seam between reshape and the machine.

Hydra (MPICH's ``mpiexec``) starts one proxy per host, and the proxy forks
that host's ranks; it starts proxies through a *bootstrap launcher*. Ranks
spawned later (``MPI_Comm_spawn`` with a ``host`` info key, Sudarsan & Ribbens 2007 §3.2.1)
go through the same Hydra, so the launcher a job starts with is the launcher
of all its expansions. Each launcher here says:

* :meth:`Launcher.env`: the variables ``mpiexec`` and the job get
  (``HYDRA_LAUNCHER``/``HYDRA_LAUNCHER_EXEC``, and ``RESHAPE_LAUNCHER``);
* :meth:`Launcher.probe`: a command that succeeds only if a proxy can start on
  a host, run before spawning there (a host Hydra cannot reach makes it abort
  the whole job, so an expansion onto it is refused instead);
* whether it places ranks on hosts at all (``local`` does not).

``local`` one machine; Hydra forks. ``ssh`` Hydra's ssh launcher, passwordless
ssh to every node (the compose cluster). ``netns`` the network-namespace test
cluster (``reshape/joblink/hydra/netns-launch``). ``slurm`` inside Slurm jobs:
``reshape/joblink/hydra/slurm-launch`` runs each proxy as an ``srun`` step of the
Slurm job that holds the host, the allocation itself or an expander job
(``docs/slurm.md``). :func:`choose` picks one by name or from the environment
and says why.
"""

from __future__ import annotations

import os
import shutil
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from importlib.resources import files

from reshape.joblink import jobenv as E

__all__ = ["LAUNCHERS", "Launcher", "LauncherError", "choose", "from_env", "get", "is_local"]

# the Hydra launcher scripts, package data beside this module (executable: Hydra runs them by path)
_SCRIPTS = files(__package__) / "hydra"
LOCAL_NAMES = {"localhost", "127.0.0.1", "::1"}


class LauncherError(ValueError):
    """An unknown launcher name, or one that cannot work here."""


@dataclass(frozen=True)
class Launcher:
    name: str
    hydra: str | None          # HYDRA_LAUNCHER (None: Hydra's default)
    exec: str | None = None    # HYDRA_LAUNCHER_EXEC: a stand-in for ssh, called as ``EXEC [-x] HOST CMD``
    remote: bool = True        # places ranks on other hosts
    # why retired ranks may not be parked on their nodes (reuse, standby ranks), if they may not
    no_parking: str | None = None

    def env(self) -> dict[str, str]:
        """What ``mpiexec`` (and so every process of the job) gets."""
        out = {E.LAUNCHER: self.name}
        if self.hydra:
            out["HYDRA_LAUNCHER"] = self.hydra
        if self.exec:
            out["HYDRA_LAUNCHER_EXEC"] = self.exec
        return out

    def probe(self, host: str, timeout: float) -> list[str] | None:
        """argv that succeeds only if Hydra can start a proxy on ``host`` (``None``: nothing to check)."""
        if is_local(host):
            return None
        if self.exec:
            return [self.exec, host, "true"]
        if self.name == "ssh":
            return ["ssh", "-o", "BatchMode=yes", "-o", f"ConnectTimeout={max(1, int(timeout))}", host, "true"]
        return None


LAUNCHERS: dict[str, Launcher] = {
    "local": Launcher("local", None, remote=False),
    "ssh": Launcher("ssh", "ssh"),
    # Hydra's lsf bootstrap is the same external launch as ssh (``EXEC -n HOST CMD``)
    "netns": Launcher("netns", "lsf", str(_SCRIPTS / "netns-launch")),
    # a node goes back to Slurm empty: a rank parked there would be killed with its expander job
    "slurm": Launcher("slurm", "ssh", str(_SCRIPTS / "slurm-launch"),
                      no_parking="nodes given back to Slurm must be empty"),
}


def get(name: str) -> Launcher:
    try:
        return LAUNCHERS[name]
    except KeyError:
        raise LauncherError(f"unknown launcher {name!r}: use one of {', '.join(LAUNCHERS)}") from None


def is_local(host: str) -> bool:
    if host in LOCAL_NAMES or host in (socket.gethostname(), socket.getfqdn()):
        return True
    try:
        return socket.gethostbyname(host) == "127.0.0.1"
    except OSError:
        return False


def in_slurm_job(env: Mapping[str, str] = os.environ) -> bool:
    return bool(env.get("SLURM_JOB_ID")) and shutil.which("srun") is not None


def choose(name: str | None, hosts: list[str], env: Mapping[str, str] = os.environ) -> tuple[Launcher, str]:
    """The launcher for a pool of ``hosts``, and why: ``name`` if given, else from where we run."""
    if name:
        la = get(name)
        if la.name == "slurm" and not in_slurm_job(env):
            raise LauncherError("launcher 'slurm' needs a Slurm job (SLURM_JOB_ID) and srun on PATH")
        if not la.remote and any(not is_local(h) for h in hosts):
            raise LauncherError(f"launcher {name!r} runs on this machine only, the pool has "
                                f"{sorted(h for h in set(hosts) if not is_local(h))}")
        return la, "chosen"
    if in_slurm_job(env):
        return LAUNCHERS["slurm"], f"inside Slurm job {env['SLURM_JOB_ID']}"
    if all(is_local(h) for h in hosts):
        return LAUNCHERS["local"], "every pool host is this machine"
    return LAUNCHERS["ssh"], "remote hosts and no Slurm job"


def from_env(env: Mapping[str, str] = os.environ) -> Launcher:
    """The launcher a running job was started with (``RESHAPE_LAUNCHER``, else Hydra's variables)."""
    if env.get(E.LAUNCHER) in LAUNCHERS:
        return LAUNCHERS[env[E.LAUNCHER]]
    exe = env.get("HYDRA_LAUNCHER_EXEC") or None
    hydra = env.get("HYDRA_LAUNCHER", "ssh")
    return Launcher("custom" if exe else hydra, hydra, exe)
