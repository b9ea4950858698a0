"""ScaLAPACK's ``pdgemr2d`` as a redistribution baseline (used by :mod:`benchmarks.redistribution`).

The C harness (``benchmarks/c/pdgemr2d.c``) is compiled when the benchmark
runs, with Debian's MPICH and ScaLAPACK (``apt-get install -y
libscalapack-mpich-dev``: it brings ``mpicc.mpich`` and ``mpiexec.mpich``),
and run as a separate program under Debian's ``mpiexec.mpich``: the Python
ranks use the pip ``mpich`` wheel, a different MPICH build, and the two
never talk to each other. The harness gets the environment without the
launcher's variables of the run that started it (``PMI_*``, ``HYDRA_*`` ...),
so the nested ``mpiexec.mpich`` starts a job of its own.
Where the compiler, the launcher or the library is missing, :func:`build`
returns why and the benchmark skips the baseline with one line.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "c", "pdgemr2d.c")
CC, MPIEXEC, LIB = "mpicc.mpich", "mpiexec.mpich", "scalapack-mpich"
_LAUNCHER_VARS = ("PMI_", "PMIX_", "HYDRA_", "MPIR_", "MPICH_", "OMPI_", "I_MPI_")


def build(workdir: str | None = None) -> tuple[str | None, str | None]:
    """Compile the harness; ``(path, None)``, or ``(None, why not)``."""
    for tool in (CC, MPIEXEC):
        if shutil.which(tool) is None:
            return None, f"{tool} not found (apt-get install -y libscalapack-mpich-dev)"
    out = os.path.join(workdir or tempfile.mkdtemp(prefix="reshape-pdgemr2d-"), "pdgemr2d")
    res = subprocess.run([CC, "-O2", "-o", out, SOURCE, f"-l{LIB}"], capture_output=True, text=True)
    if res.returncode != 0:
        return None, f"cannot build the pdgemr2d harness: {(res.stderr or res.stdout).strip().splitlines()[-1:]}"
    return out, None


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(_LAUNCHER_VARS)}
    env.setdefault("UCX_LOG_LEVEL", "error")  # Debian's MPICH runs over UCX, which warns at exit
    return env


def run(exe: str, n: int, nb: int, pgrid: tuple[int, int], qgrid: tuple[int, int], reps: int,
        timeout: float = 300.0, pause: float = 0.0) -> list[float]:
    """Slowest-rank seconds of ``reps`` pdgemr2d calls moving n x n from ``pgrid`` to ``qgrid`` (nb x nb blocks),
    each ``pause`` seconds after the previous one freed its memory."""
    nprocs = max(pgrid[0] * pgrid[1], qgrid[0] * qgrid[1])
    cmd = [MPIEXEC, "-n", str(nprocs), exe, str(n), str(nb), *map(str, pgrid), *map(str, qgrid), str(reps),
           str(pause)]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=_env())
    lines = [ln.split() for ln in res.stdout.splitlines()]
    wrong = [ln for ln in lines if ln and ln[0] == "pdgemr2d_wrong"]
    times = [ln for ln in lines if ln and ln[0] == "pdgemr2d_s"]
    if res.returncode != 0 or wrong or not times:
        raise RuntimeError(f"pdgemr2d harness failed ({' '.join(cmd)}): rc {res.returncode}, "
                           f"{wrong or res.stderr.strip()[-300:]}")
    return [float(x) for x in times[0][1:]]
