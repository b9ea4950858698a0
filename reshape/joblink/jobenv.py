"""Every ``RESHAPE_*`` environment variable, by name, in one place (``docs/protocol.md`` §6).

*Job environment*: what the daemon's Job Startup gives every process of a job
(``scheduler.daemon.startup.start_job``); ranks spawned later inherit it through
Hydra. *Tuning*: what a user may set for a run. *Tools*: what the CLI, node
monitors and test launchers read. Code names a variable only through this
module, so a rename or a new variable is one edit here plus its line in the
protocol document.
"""

from __future__ import annotations

import os

__all__ = [
    "ABORT_ON_ERROR",
    "ALLOW_NEW_SIZES",
    "BACKGROUND",
    "BUDDY",
    "CHECKPOINT",
    "CHECKPOINT_DIR",
    "CLIENT_KEY",
    "DAEMON",
    "DEBUG",
    "FAULT",
    "FAULT_ONCE",
    "HOSTS",
    "INPLACE",
    "JOB_ENV",
    "JOB_ID",
    "JOB_TAG",
    "KEEP_BLOCKS",
    "KEYS",
    "LAUNCHER",
    "MAX_PROCS",
    "MPI",
    "NETNS_HOSTS",
    "NETNS_PREFIX",
    "NPROCS",
    "ONECOPY",
    "PAGES",
    "PLAN",
    "PLAN_EVERY",
    "REDIST_METHOD",
    "RELABEL",
    "RESIZE_TIMEOUT",
    "REUSE",
    "RUN_TAG",
    "SCHEDULER",
    "SCHEDULER_TIMEOUT",
    "STANDBY",
    "STATE_DIR",
    "TRACES",
    "WAIT",
    "default_state_dir",
    "flag",
    "parse_every",
]

# -- job environment (set by the daemon for every process of a job)
SCHEDULER = "RESHAPE_SCHEDULER"            # the daemon's endpoint, for the job's resize client
JOB_ID = "RESHAPE_JOB_ID"                  # the job's id at the daemon
NPROCS = "RESHAPE_NPROCS"                  # ranks started
HOSTS = "RESHAPE_HOSTS"                    # one host name per starting rank, comma separated
RESIZE_TIMEOUT = "RESHAPE_RESIZE_TIMEOUT"  # seconds one resize may take (job file's resize_timeout)
JOB_TAG = "RESHAPE_JOB_TAG"                # finds every process of the job, also after a daemon restart
LAUNCHER = "RESHAPE_LAUNCHER"              # how ranks reach hosts: local | ssh | netns | slurm
KEYS = "RESHAPE_KEYS"                      # directory of the CURVE keys (also for the CLI)
JOB_ENV = (SCHEDULER, JOB_ID, NPROCS, HOSTS, RESIZE_TIMEOUT, JOB_TAG, LAUNCHER)

# -- tuning (set by the user)
PLAN = "RESHAPE_PLAN"                      # a scripted resize plan instead of a daemon (advice.py)
PLAN_EVERY = "RESHAPE_PLAN_EVERY"
MAX_PROCS = "RESHAPE_MAX_PROCS"
ALLOW_NEW_SIZES = "RESHAPE_ALLOW_NEW_SIZES"
REDIST_METHOD = "RESHAPE_REDIST_METHOD"    # circulant | alltoallv | checkpoint
BACKGROUND = "RESHAPE_BACKGROUND"          # 1: constant arrays move while the job keeps iterating
RELABEL = "RESHAPE_RELABEL"                # 0: keep position j on the j-th senior rank at resizes (placement.py)
REUSE = "RESHAPE_REUSE"                    # 1: a shrink parks retired ranks for a later expansion (parking.py)
STANDBY = "RESHAPE_STANDBY"                # K: spawn K ranks at start that park at once (a warm pool; needs REUSE)
SCHEDULER_TIMEOUT = "RESHAPE_SCHEDULER_TIMEOUT"
ABORT_ON_ERROR = "RESHAPE_ABORT_ON_ERROR"  # 0: an uncaught error does not MPI_Abort the job
FAULT = "RESHAPE_FAULT"                    # WHERE:WHO:HOW fault injection (faults.py)
FAULT_ONCE = "RESHAPE_FAULT_ONCE"          # a file: inject only if it does not exist, then make it (once per job)
WAIT = "RESHAPE_WAIT"                      # spin | poll while waiting on redistribution requests
DEBUG = "RESHAPE_DEBUG"                    # 1: a reshape.UsageError prints its traceback, not one line
ONECOPY = "RESHAPE_ONECOPY"                # 0: no memfd arrays, no direct reads between ranks of a host (nodecopy.py)
KEEP_BLOCKS = "RESHAPE_KEEP_BLOCKS"        # 0: freed blocks are unmapped, not kept for reuse (pages.py)
PAGES = "RESHAPE_PAGES"                    # auto | huge | small: the pages of fresh blocks a move writes (pages.py)
CHECKPOINT = "RESHAPE_CHECKPOINT"          # every:N | seconds:T | auto: checkpoints of the arrays (checkpoint.py)
CHECKPOINT_DIR = "RESHAPE_CHECKPOINT_DIR"  # where; a complete checkpoint there is resumed from at start
INPLACE = "RESHAPE_INPLACE"                # 1: a lost rank is recovered in place with ULFM (Open MPI; inplace.py)
BUDDY = "RESHAPE_BUDDY"                    # every:N: in-memory copies of a partner's blocks (default every:10)

# -- tools
DAEMON = "RESHAPE_DAEMON"                  # the CLI's and node monitors' daemon endpoint
STATE_DIR = "RESHAPE_STATE_DIR"            # the daemon's journal, logs and default keys
CLIENT_KEY = "RESHAPE_CLIENT_KEY"
RUN_TAG = "RESHAPE_RUN_TAG"                # tags processes of a run started by reshape.joblink.launch.mpirun
NETNS_HOSTS = "RESHAPE_NETNS_HOSTS"        # the namespace cluster's hosts file (netns-launch)
NETNS_PREFIX = "RESHAPE_NETNS_PREFIX"
MPI = "RESHAPE_MPI"                        # mpich (default) | openmpi: the MPI launchers start (mpis.py)
TRACES = "RESHAPE_TRACES"                  # where benchmarks find SWF traces

# the values some of them take, shared by the runtime and the scheduler's core
RESIZE_TIMEOUT_DEFAULT = 120.0             # seconds for one whole resize (spawn, merge, redistribution)
LAUNCHER_NAMES = ("local", "ssh", "netns", "slurm")  # RESHAPE_LAUNCHER's values (launchers.py)
MPI_FLAVOURS = ("mpich", "openmpi")        # RESHAPE_MPI's values (mpis.py)


def default_state_dir() -> str:
    """``$RESHAPE_STATE_DIR``, else ``~/.reshape``: the daemon's journal, logs, socket and default keys."""
    return os.environ.get(STATE_DIR) or os.path.join(os.path.expanduser("~"), ".reshape")


_YES, _NO = ("1", "true", "yes", "on"), ("0", "false", "no", "off", "")


def flag(name: str, default: bool = False, env: dict[str, str] | None = None) -> bool:
    """A yes/no variable: 1/true/yes/on or 0/false/no/off (unset: ``default``); else a ValueError naming it."""
    raw = (env if env is not None else os.environ).get(name)
    if raw is None:
        return default
    val = raw.strip().lower()
    if val in _YES:
        return True
    if val in _NO:
        return False
    raise ValueError(f"{name}={raw!r}: expected 1/true/yes/on or 0/false/no/off")


CHECKPOINT_AUTO_FACTOR = 50.0  # "auto": a checkpoint once the time since the last one is this many times its cost


def parse_every(text: str) -> tuple[str, float] | None:
    """``every:N`` -> ``("every", N)``, ``seconds:T`` -> ``("seconds", T)``, ``auto`` -> ``("auto",``
    :data:`CHECKPOINT_AUTO_FACTOR` ``)`` (checkpoints spaced by their measured cost); None if malformed."""
    if text == "auto":
        return "auto", CHECKPOINT_AUTO_FACTOR
    kind, _, value = text.partition(":")
    try:
        x = float(value) if kind == "seconds" else int(value)
    except ValueError:
        return None
    if kind not in ("every", "seconds") or not 0 < x < float("inf"):
        return None
    return kind, x
