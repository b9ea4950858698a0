"""Job files (TOML) and their validation; the daemon re-validates every submitted job.

::

    name = "lu"
    command = ["python", "-m", "apps.lu", "--n", "2400"]
    nprocs = 4            # initial size
    min_procs = 2         # optional (default 1)
    max_procs = 16        # optional (default: the whole pool)
    sizes = [2, 4, 8]     # optional explicit legal sizes
    divides = 2400        # optional: legal sizes divide this ("must divide N"); "2d": each grid side does
    topology = "2d"       # "2d": nearly-square grids (smallest side grows), or "1d"

The legal sizes these fields allow are :func:`scheduler.core.policy.legal_sizes`.
    resizable = true      # false: a static job, never resized
    walltime = 600        # optional estimate in seconds (used by backfill)
    arrival_delay = 0     # optional: enter the queue this many seconds after submission
    launch = "mpi"        # "mpi": mpiexec -n <size>; "single": one process emulating <size>
    resize_timeout = 120  # optional: seconds one resize may take; then the job is aborted
    iterations = 50       # optional: iteration count (with walltime: resizes keep the deadline)
    checkpoint = "every:10"   # optional: checkpoints of the registered arrays (RESHAPE_CHECKPOINT)
    checkpoint_dir = "ckpt"   # optional: where (default: the daemon's --checkpoint-root/job-ID)
    max_restarts = 3      # with checkpoint: restarts after a lost rank, node or mpiexec (default 3)
    [env]                 # optional extra environment variables
    FOO = "1"

A leading ``python``/``python3`` in ``command`` is replaced by the daemon's
interpreter so jobs run in the same environment.
"""

from __future__ import annotations

import difflib
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from reshape.joblink.jobenv import MPI_FLAVOURS as FLAVOURS
from reshape.joblink.jobenv import RESIZE_TIMEOUT_DEFAULT as DEFAULT_RESIZE_TIMEOUT
from reshape.joblink.jobenv import parse_every
from reshape.joblink.protocol import MAX_SIZES
from reshape.redistribution.layout import nearly_square_grid
from scheduler.core.policy import JobSpec, legal_sizes
from scheduler.core.tomlfile import read_toml

__all__ = ["DEFAULT_MAX_RESTARTS", "DEFAULT_RESIZE_TIMEOUT", "FIELDS", "JobDesc", "JobFileError", "load_job_file",
           "narrow_spec", "validate_job"]

# every field a job file may have, with its meaning (``reshape submit --help``; docs/daemon.md, "Job files")
FIELDS = {
    "command": "argv run under mpiexec (required); a leading python becomes the daemon's interpreter",
    "nprocs": "initial size (required)",
    "name": "label (default: from the command)",
    "min_procs": "smallest size (default 1)",
    "max_procs": "largest size (default: the pool)",
    "sizes": "explicit legal sizes, e.g. [2, 4, 8]",
    "divides": "legal sizes divide this (1-D), or each grid side does (2-D)",
    "topology": '"1d" (default) or "2d": nearly-square grids, the smaller side grows',
    "resizable": "false: never resized (default true)",
    "walltime": "limit in seconds at the requested size (backfill; killed after it plus --overtime)",
    "iterations": "the job's iteration count, if known: with walltime, a resize that would make the job "
                  "overrun its deadline is not advised",
    "arrival_delay": "join the queue this many seconds after submission (default 0)",
    "launch": '"mpi" (default): mpiexec -n SIZE; "single": one process emulating SIZE',
    "env": "table of extra environment variables",
    "resize_timeout": f"seconds one resize may take, then the job is aborted (default {DEFAULT_RESIZE_TIMEOUT:g})",
    "checkpoint": '"every:N" (iterations), "seconds:T" or "auto" (spaced by their cost): checkpoints of the '
                  "registered arrays; a job that "
                  "loses a rank, a node or mpiexec is restarted from the last one",
    "checkpoint_dir": "where the checkpoints go (default: the daemon's --checkpoint-root/job-ID; shared by the nodes)",
    "max_restarts": "restarts after such losses before the job fails (default 3; with checkpoint)",
    "mpi": '"mpich" or "openmpi": the MPI the job runs on (default: the daemon\'s --mpi, else mpich)',
}
_KEYS = set(FIELDS)


class JobFileError(ValueError):
    """A job description that cannot run; the message says which field and why."""


MAX_INT = 1 << 31  # sizes, counts: anything larger is a mistake, not a cluster
DEFAULT_MAX_RESTARTS = 3
MAX_SECONDS = 1e9  # about 31 years: delays, walltimes, timeouts
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class JobDesc:
    """A validated job description (:func:`validate_job`): the job file's fields with their defaults.

    Frozen: the submitted description is never rewritten (what a job announces later is
    :class:`scheduler.core.job.Job`'s own). :meth:`to_dict` is the form on the wire and in the
    journal; :meth:`from_dict` reads it back, rows journaled before a field existed included.
    """

    name: str
    command: tuple[str, ...]
    nprocs: int
    min_procs: int = 1
    max_procs: int | None = None  # None: up to the whole pool
    sizes: tuple[int, ...] | None = None  # explicit legal sizes, sorted without repeats
    divides: int | None = None
    topology: str = "1d"
    resizable: bool = True
    walltime: float | None = None
    arrival_delay: float = 0.0
    launch: str = "mpi"
    env: Mapping[str, str] = field(default_factory=dict)  # read-only (a mapping proxy)
    iterations: int | None = None
    resize_timeout: float = DEFAULT_RESIZE_TIMEOUT
    checkpoint: str | None = None
    checkpoint_dir: str | None = None
    max_restarts: int = DEFAULT_MAX_RESTARTS
    mpi: str | None = None  # None: the daemon's --mpi

    def __post_init__(self) -> None:
        object.__setattr__(self, "command", tuple(self.command))
        object.__setattr__(self, "sizes", tuple(self.sizes) if self.sizes else None)
        object.__setattr__(self, "env", MappingProxyType(dict(self.env)))

    def to_dict(self) -> dict[str, Any]:
        """The description as a plain dict (``mpi`` only when set), as jobs are journaled and submitted."""
        return {"name": self.name, "command": list(self.command), "nprocs": self.nprocs,
                "min_procs": self.min_procs, "max_procs": self.max_procs,
                "sizes": list(self.sizes) if self.sizes else None, "divides": self.divides,
                "topology": self.topology, "resizable": self.resizable, "walltime": self.walltime,
                "arrival_delay": self.arrival_delay, "launch": self.launch, "env": dict(self.env),
                "iterations": self.iterations, "resize_timeout": self.resize_timeout,
                "checkpoint": self.checkpoint, "checkpoint_dir": self.checkpoint_dir,
                "max_restarts": self.max_restarts, **({"mpi": self.mpi} if self.mpi else {})}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> JobDesc:
        """A description :meth:`to_dict` wrote (a journal row); no validation. A row journaled before a
        field existed reads as it always did: no ``resize_timeout`` (or none) is the default, no
        ``max_restarts`` is 0 (no restarts)."""
        known = {k: v for k, v in d.items() if k in _KEYS}
        known["resize_timeout"] = d.get("resize_timeout") or DEFAULT_RESIZE_TIMEOUT
        known["max_restarts"] = d.get("max_restarts", 0)
        known["arrival_delay"] = d.get("arrival_delay", 0.0)
        return cls(**known)

    def with_env(self, extra: Mapping[str, str]) -> JobDesc:
        """The description with ``extra`` added to its ``env`` (what the daemon gives the job on top)."""
        return replace(self, env={**self.env, **extra})

    def spec(self, job_id: int, submit_time: float) -> JobSpec:
        """The policies' view of the description (:class:`scheduler.core.policy.JobSpec`)."""
        return JobSpec(
            job_id=job_id, name=self.name, submit_time=submit_time, nprocs=self.nprocs,
            min_procs=self.min_procs, max_procs=self.max_procs, sizes=self.sizes, divides=self.divides,
            topology=self.topology, resizable=self.resizable, walltime=self.walltime,
            command=self.command, iterations=self.iterations)


def _int(d: dict, k: str, lo: int = 1) -> int | None:
    v = d.get(k)
    if v is None:
        return None
    if not isinstance(v, int) or isinstance(v, bool):
        raise JobFileError(f"{k!r} must be an integer >= {lo}, got {_kind(v)} {v!r}"[:300])
    if v < lo:
        raise JobFileError(f"{k!r} must be an integer >= {lo}, got {v}")
    if v >= MAX_INT:
        raise JobFileError(f"{k!r} must be at most {MAX_INT - 1:,} (more is a mistake, not a cluster), got {v}"[:300])
    return v


def _kind(v: Any) -> str:
    """``v``'s type as a job file's author knows it (TOML's words)."""
    return {bool: "the boolean", str: "the string", float: "the number", list: "the list",
            dict: "the table"}.get(type(v), f"a {type(v).__name__}")


def _unknown(fields: set) -> str:
    """The message for unknown fields, with the nearest known name for each (a typo's fix)."""
    parts = []
    for k in sorted(map(str, fields)):
        near = difflib.get_close_matches(k, sorted(_KEYS), n=1, cutoff=0.6)
        parts.append(f"{k!r}" + (f" (did you mean {near[0]!r}?)" if near else ""))
    return (f"unknown job field{'s' * (len(parts) > 1)} {', '.join(parts)}; known: {', '.join(sorted(_KEYS))}"
            )[:600]


def _command(d: dict) -> list[str]:
    cmd = d.get("command")
    if cmd is None:
        raise JobFileError("'command' is required: the program and its arguments as a list of strings, "
                           'e.g. command = ["python", "app.py"]')
    if isinstance(cmd, str):
        try:
            words = shlex.split(cmd)
        except ValueError:
            words = cmd.split()
        example = "[" + ", ".join(f'"{w}"' for w in words[:6]) + (", ..." if len(words) > 6 else "") + "]"
        raise JobFileError(f"'command' must be a list of strings, not one string: write command = {example}"[:300])
    if not isinstance(cmd, list) or not cmd or not all(isinstance(c, str) and c for c in cmd):
        raise JobFileError(f"'command' must be a non-empty list of non-empty strings, got {cmd!r}"[:300])
    return cmd


def _num(d: dict, k: str) -> float | None:
    v = d.get(k)
    if v is None:
        return None
    if not isinstance(v, int | float) or isinstance(v, bool) or not 0 <= v < MAX_SECONDS:
        raise JobFileError(f"{k!r} must be a number of seconds in [0, {MAX_SECONDS:g}), got {v!r}"[:300])
    return float(v)


def _text(s: str) -> bool:
    """A string a process can be given: no NUL byte (argv and the environment are C strings)."""
    return "\0" not in s


def _sizes(d: dict[str, Any]) -> list[int] | None:
    """The job file's ``sizes``, sorted without repeats (None if absent)."""
    sizes = d.get("sizes")
    if sizes is not None:
        if not isinstance(sizes, list) or not sizes or not all(
                isinstance(s, int) and not isinstance(s, bool) and s >= 1 for s in sizes):
            raise JobFileError("'sizes' must be a non-empty list of positive integers")
        sizes = sorted(set(sizes))
    return sizes


def _env(d: dict[str, Any]) -> dict[str, str]:
    """The job file's ``env`` table: variable names to values without NUL."""
    env = d.get("env", {})
    if not isinstance(env, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                            for k, v in env.items()):
        raise JobFileError("'env' must be a table of string values")
    for k, v in env.items():
        if not _ENV_NAME.match(k):
            raise JobFileError(f"'env': {k[:100]!r} is not a variable name (letters, digits, _; not first a digit)")
        if not _text(v):
            raise JobFileError(f"'env': the value of {k} must not contain NUL bytes")
    return env


def _why_illegal(nprocs: int, sizes: list[int] | None, topology: str, divides: int | None) -> str:
    """Why ``nprocs`` is not a legal size of the job."""
    if sizes and nprocs not in sizes:
        return f"not one of 'sizes' {sizes}"[:300]
    if topology == "2d":
        r, c = nearly_square_grid(nprocs)
        return f"the sides of its {r}x{c} grid must divide {divides}"
    return f"it does not divide {divides}"


def validate_job(d: Any, pool_slots: int | None = None) -> JobDesc:
    """Check a job description (a job file's table, a ``submit`` body's ``job``); returns it with defaults."""
    if not isinstance(d, dict):
        raise JobFileError("a job must be a table of fields")
    unknown = set(d) - _KEYS
    if unknown:
        raise JobFileError(_unknown(unknown))
    cmd = _command(d)
    if not all(_text(c) for c in cmd):
        raise JobFileError("'command' must not contain NUL bytes")
    name = d.get("name", cmd[-1] if len(cmd) == 1 else cmd[min(2, len(cmd) - 1)])
    if not isinstance(name, str) or not name or len(name) > 100 or not _text(name):
        raise JobFileError("'name' must be a string of 1-100 characters without NUL")
    nprocs = _int(d, "nprocs")
    if nprocs is None:
        raise JobFileError("'nprocs' (initial size) is required")
    min_procs = _int(d, "min_procs") or 1
    max_procs = _int(d, "max_procs")
    divides = _int(d, "divides")
    iterations = _int(d, "iterations")
    sizes = _sizes(d)
    topology = d.get("topology", "1d")
    if topology not in ("1d", "2d"):
        raise JobFileError(f"'topology' must be '1d' or '2d', got {topology!r}")
    resizable = d.get("resizable", True)
    if not isinstance(resizable, bool):
        raise JobFileError("'resizable' must be true or false")
    launch = d.get("launch", "mpi")
    if launch not in ("mpi", "single"):
        raise JobFileError(f"'launch' must be 'mpi' or 'single', got {launch!r}")
    env = _env(d)
    resize_timeout = _num(d, "resize_timeout")
    if resize_timeout is not None and not 0 < resize_timeout < 1e9:
        raise JobFileError(f"'resize_timeout' must be a number of seconds > 0, got {d['resize_timeout']!r}")
    checkpoint = d.get("checkpoint")
    if checkpoint is not None and (not isinstance(checkpoint, str) or parse_every(checkpoint) is None):
        raise JobFileError(f"'checkpoint' must be \"every:N\" (iterations, N >= 1), \"seconds:T\" (T > 0) or "
                           f"\"auto\", got {checkpoint!r}"[:300])
    ckdir = d.get("checkpoint_dir")
    if ckdir is not None and (not isinstance(ckdir, str) or not ckdir.strip() or not _text(ckdir)):
        raise JobFileError(f"'checkpoint_dir' must be a directory path, got {ckdir!r}"[:300])
    max_restarts = _int(d, "max_restarts", 0)
    mpi = d.get("mpi")
    if mpi is not None and mpi not in FLAVOURS:
        raise JobFileError(f"'mpi' must be one of {', '.join(map(repr, FLAVOURS))}, got {mpi!r}"[:300])
    if max_procs is not None and max_procs < min_procs:
        raise JobFileError(f"max_procs {max_procs} < min_procs {min_procs}")
    if not min_procs <= nprocs <= (max_procs or nprocs):
        raise JobFileError(f"nprocs {nprocs} outside [min_procs={min_procs}, "
                           f"max_procs={'the pool' if max_procs is None else max_procs}]")
    if pool_slots is not None and nprocs > pool_slots:
        raise JobFileError(f"nprocs {nprocs} exceeds the pool ({pool_slots} slots)")
    out = JobDesc(name=name, command=tuple(cmd), nprocs=nprocs, min_procs=min_procs, max_procs=max_procs,
                  sizes=sizes, divides=divides, topology=topology, resizable=resizable, walltime=_num(d, "walltime"),
                  arrival_delay=_num(d, "arrival_delay") or 0.0, launch=launch, env=env, iterations=iterations,
                  resize_timeout=resize_timeout or DEFAULT_RESIZE_TIMEOUT, checkpoint=checkpoint,
                  checkpoint_dir=ckdir, max_restarts=DEFAULT_MAX_RESTARTS if max_restarts is None else max_restarts,
                  mpi=mpi or None)
    spec = out.spec(0, 0.0)
    if not legal_sizes(spec, pool_slots or nprocs, (nprocs,)):
        raise JobFileError(f"nprocs {nprocs} is not a legal size: {_why_illegal(nprocs, sizes, topology, divides)}")
    return out


def narrow_spec(spec: JobSpec, announced: list[int] | tuple[int, ...], current: int | None = None) -> JobSpec:
    """``spec`` restricted to the sizes its running job announced (``hello``'s ``sizes``).

    A job's program knows constraints its job file does not state (the
    runtime's ``sizes`` test, its arrays' layouts) and announces every size
    it accepts among ``1..MAX_SIZES`` (``reshape.joblink.protocol.MAX_SIZES``,
    ``docs/protocol.md`` "Announced sizes"). The result is ``spec`` with
    ``sizes`` listing explicitly its legal sizes
    (:func:`scheduler.core.policy.legal_sizes`, among ``1..MAX_SIZES``) that the job
    announced, plus the size it started at (``spec.nprocs``) and ``current``,
    the size it runs at (default ``spec.nprocs``), if the job file allows
    them: a running job stays legal where it is, and the result still passes
    :func:`validate_job`, even if its program left them out.
    min/max/divides/topology are kept. Sizes above ``MAX_SIZES`` are not
    announced and so not legal after narrowing (but for those two).
    Idempotent: narrowing the result again with the same list changes nothing.

    Raises :class:`JobFileError` when no size is legal both by the job file
    and by the announcement (the job file and the program disagree; the
    message shows both), or when ``announced`` is not a list of sizes.

    The daemon's handler of ``hello`` calls it with the body's ``sizes`` and
    ``nprocs``: ``narrow_spec(job.spec, body["sizes"], body["nprocs"])``, and
    schedules the job by the result from then on.
    """
    if isinstance(announced, str | bytes) or not all(
            isinstance(p, int) and not isinstance(p, bool) and 1 <= p <= MAX_SIZES for p in announced):
        raise JobFileError(f"announced sizes must be integers in [1, {MAX_SIZES}]")
    cur = spec.nprocs if current is None else current
    both = legal_sizes(spec, MAX_SIZES, set(announced))
    if not both:
        mine = legal_sizes(spec, MAX_SIZES)
        raise JobFileError(
            f"job {spec.job_id} ({spec.name}): its program accepts none of the sizes its job file allows "
            f"(program: {_ranges(sorted(set(announced)))}; job file, up to {MAX_SIZES}: "
            f"{_ranges(mine) or 'none'})")
    ran = legal_sizes(spec, max(cur, spec.nprocs, MAX_SIZES), (spec.nprocs, cur))
    return replace(spec, sizes=tuple(sorted({*both, *ran})))


def _ranges(sizes: list[int], limit: int = 160) -> str:
    """``[1, 2, 3, 5, 8, 9]`` as ``"1-3, 5, 8-9"``, cut at about ``limit`` characters."""
    parts: list[str] = []
    i = 0
    while i < len(sizes):
        j = i
        while j + 1 < len(sizes) and sizes[j + 1] == sizes[j] + 1:
            j += 1
        parts.append(str(sizes[i]) if i == j else f"{sizes[i]}-{sizes[j]}")
        i = j + 1
    text = ", ".join(parts)
    return text if len(text) <= limit else text[:limit].rsplit(", ", 1)[0] + ", ..."


def load_job_file(path: str, pool_slots: int | None = None) -> JobDesc:
    data = read_toml(path, JobFileError)
    try:
        return validate_job(data, pool_slots)
    except JobFileError as e:
        raise JobFileError(f"{path}: {e}") from None
