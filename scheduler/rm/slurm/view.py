"""Slurm's commands and what they print: the I/O half of the Slurm resource managers.

:func:`run` runs one command with a timeout (a clear :class:`SlurmError` when
it fails); :func:`parse_squeue` and :func:`partition_pool` read ``squeue`` and
``sinfo``; :func:`look`, :func:`submit_expander` and :func:`cancel_expanders`
are what the Slurm thread (:mod:`scheduler.rm.slurm.edge`) runs. Expander jobs
(DMR/MaM's mechanism: Slurm 22.05 cannot grow a running job in place) are named
:func:`expander_name` and only wait while their main job runs (:func:`expander_script`).
"""

from __future__ import annotations

import os
import pwd
import re
import shlex
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import hostlist

from scheduler.core.pool import Node, Pool, PoolError

if TYPE_CHECKING:
    from scheduler.core.jobfile import JobDesc

__all__ = ["MALLEABLE", "SQUEUE_FORMAT", "SlurmError", "SlurmJob", "cancel_expanders", "duration", "expander_minutes",
           "expander_name", "expander_script", "final_states", "idle_nodes", "look", "malleable_comment",
           "parse_squeue", "partition_args", "partition_pool", "resized", "resized_jobs", "resizes_once", "run",
           "submit_expander"]

# id, name, state, user, nodes wanted, nodes held, reason, priority, start (predicted while pending), end,
# submit, time limit, comment (last: it may hold '|'); times as epoch seconds (SLURM_TIME_FORMAT=%s below),
# "N/A" or "Unknown" when Slurm has none
SQUEUE_FORMAT = "%i|%j|%T|%u|%D|%N|%r|%Q|%S|%e|%V|%l|%k"
MALLEABLE = "reshape-malleable"  # a pending job's comment: submitted with 'reshape submit --slurm' to a controller
EXPANDER_NICE = 10000  # expanders come after every waiting job of normal priority (Slurm's backfill decides)


class SlurmError(RuntimeError):
    """A Slurm command failed; the message has the command and its error."""


def _me() -> str:
    """This process's user: the submitter of its expanders (a job of that name someone else submitted is not one)."""
    return pwd.getpwuid(os.geteuid()).pw_name


def expander_name(main: str) -> str:
    return f"reshape-expand-{main}"


# ---------------------------------------------------------------------- squeue / sinfo output
@dataclass(frozen=True)
class SlurmJob:
    id: str
    name: str
    state: str
    user: str
    num_nodes: int
    nodes: tuple[str, ...]
    reason: str
    priority: int = 0
    start: float | None = None  # running: when it started; pending: the start Slurm's backfill predicts
    end: float | None = None  # running: its time limit; None: none known
    submit: float | None = None
    limit: float | None = None  # its time limit in seconds (None: none)
    comment: str = ""

    def malleable_sizes(self) -> tuple[int, ...]:
        """A pending ``reshape submit --slurm`` job's legal sizes up to its requested one (its comment)."""
        head, _, sizes = self.comment.partition(" sizes=")
        if head != MALLEABLE:
            return ()
        return tuple(int(x) for x in sizes.split(",") if x.isdigit())


def malleable_comment(desc: JobDesc) -> str:
    """The comment a job for a site controller is submitted with (``MALLEABLE sizes=...``): its legal sizes
    up to its requested one, at which the controller may start it (a moldable start, docs/slurm.md)."""
    from scheduler.core.policy import legal_sizes

    return f"{MALLEABLE} sizes={','.join(map(str, legal_sizes(desc.spec(0, 0.0), desc.nprocs)[-64:]))}"


def _time(text: str) -> float | None:
    try:
        t = float(text)
    except ValueError:
        return None
    return t if t > 0 else None


def duration(text: str) -> float | None:
    """A Slurm duration (``[days-][hours:]minutes:seconds``, ``UNLIMITED``) in seconds; None for none."""
    days, _, rest = text.strip().rpartition("-")
    parts = rest.split(":")
    if not all(x.isdigit() for x in parts) or not 1 <= len(parts) <= 3 or (days and not days.isdigit()):
        return None
    secs = [int(x) for x in parts]
    secs = ([0] * (3 - len(secs)) + secs) if len(secs) > 1 else [0, secs[0], 0]  # a lone number: minutes
    return float(int(days or 0) * 86400 + secs[0] * 3600 + secs[1] * 60 + secs[2])


def parse_squeue(text: str) -> list[SlurmJob]:
    """``squeue -h -o SQUEUE_FORMAT`` lines (with ``SLURM_TIME_FORMAT=%s``); the first seven or eleven
    fields alone (older formats) are read too."""
    out = []
    for line in text.splitlines():
        parts = line.strip().split("|", 12)
        if len(parts) not in (7, 11, 13):
            continue
        jid, name, state, user, nn, nodes, reason = parts[:7]
        hosts = tuple(hostlist.expand_hostlist(nodes)) if nodes and nodes != "(null)" else ()
        extra = {}
        if len(parts) >= 11:
            prio, start, end, submit = parts[7:11]
            extra = {"priority": int(prio) if prio.isdigit() else 0, "start": _time(start), "end": _time(end),
                     "submit": _time(submit)}
        if len(parts) == 13:
            extra |= {"limit": duration(parts[11]), "comment": parts[12].strip()}
        out.append(SlurmJob(jid, name, state, user, int(nn) if nn.isdigit() else 0, hosts, reason, **extra))
    return out


def partition_pool(text: str, held: set[str]) -> Pool:
    """``sinfo -h -N -o '%N %c'`` lines as a pool: every node of the partition, slots = CPUs.
    Nodes not in ``held`` are down: not ours until Slurm gives them to us."""
    nodes: dict[str, int] = {}
    for line in text.split("\n"):
        parts = line.split()
        if len(parts) == 2 and parts[1].isdigit():
            nodes.setdefault(parts[0], int(parts[1]))
    missing = held - set(nodes)
    if missing:
        raise PoolError(f"our allocation's nodes {sorted(missing)} are not in the partition ({sorted(nodes)})")
    if not nodes:
        raise PoolError("the partition has no nodes (sinfo listed none)")
    return Pool([Node(h, c) for h, c in nodes.items()], down=[h for h in nodes if h not in held])


# ---------------------------------------------------------------------- commands
def run(argv: list[str], timeout: float = 15.0) -> str:
    env = {**os.environ, "SLURM_TIME_FORMAT": "%s"}
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env)
    except FileNotFoundError:
        raise SlurmError(f"{argv[0]} not found: is this a Slurm node?") from None
    except subprocess.TimeoutExpired:
        raise SlurmError(f"{shlex.join(argv)} did not answer in {timeout:g} s") from None
    if r.returncode != 0:
        raise SlurmError(f"{shlex.join(argv)} failed: {(r.stderr or r.stdout).strip()}")
    return r.stdout


def expander_script(main: str) -> str:
    """The expander job's script: hold the node while job ``main`` runs (3 misses in a row: it ended; a
    ``squeue`` that fails, as under a busy ``slurmctld``, is no miss)."""
    return (f"miss=0; while [ $miss -lt 3 ]; do "
            f"if q=$(squeue -h -t R -o %i); then "
            f"if echo \"$q\" | grep -qx {main}; then miss=0; else miss=$((miss+1)); fi; fi; "
            f"sleep 2; done")


def resizes_once(config: str) -> bool:
    """Whether Slurm refuses every update of a job after its first shrink (``scontrol show config``: no
    accounting storage, so a resized job never gets the database index an update waits for)."""
    return "accounting_storage/none" in config or "AccountingStorageType" not in config


def resized(text: str, names: Mapping[str, str]) -> set[str]:
    """Which of the jobs ``names`` (id -> name, as ``squeue`` lists them) ``scontrol show job -o`` output (one
    line each) shows resized (``ResizeTime`` set): without accounting Slurm takes no further update of them
    (:func:`resizes_once`). Each line starts with its ``JobId``; the job's name, the one field before
    ``ResizeTime`` its owner chooses, is cut out before reading it, so a name holding ``ResizeTime=`` or
    ``JobId=`` says nothing."""
    out = set()
    for line in text.splitlines():
        m = re.match(r"JobId=(\d+) ", line)
        if m is None or m.group(1) not in names:
            continue
        rest = line[m.end():].removeprefix(f"JobName={names[m.group(1)]} ")
        t = re.search(r"(?:^| )ResizeTime=(\S+)", rest)
        if t and t.group(1) not in ("None", "Unknown", "(null)"):
            out.add(m.group(1))
    return out


def resized_jobs(names: Mapping[str, str]) -> set[str]:
    """Which of the jobs ``names`` (id -> name) Slurm resized (:func:`resized`), asked at once."""
    return resized(run(["scontrol", "show", "job", "-o"]), names) if names else set()


IDLE_STATES = ("idle", "planned")  # sinfo %T of a node with no job (``planned``: kept for a pending job)


def idle_nodes(text: str) -> int:
    """How many nodes ``sinfo -h -N -o '%N %T'`` lists as plain ``idle`` or ``planned``, each once. ``planned``
    (Slurm 22.05 on) is an idle node Slurm's backfill keeps for a pending job, the very nodes a moldable
    start or a borrowing expander is for; not counted, the controller saw none while a large job waited,
    and started it on nothing (as seen on real Slurm). Not ``sinfo -t idle``: it also counts a node whose
    last job is still ``completing`` (Slurm places nothing there until its epilog is done) and, without a
    partition, a node once per partition it is in."""
    return len({p[0] for p in (line.split() for line in text.splitlines()) if len(p) == 2 and p[1] in IDLE_STATES})


def partition_args(name: str | None) -> list[str]:
    return ["-p", name] if name else []


def look(part: list[str], watch: tuple[str, ...] = ()) -> tuple[list[SlurmJob], int]:
    """Every job of the partition and its number of idle nodes; those of ``watch`` (job ids) that are no
    longer queued with their final state (``COMPLETED``, ``FAILED``, ...) while Slurm still knows them."""
    jobs = parse_squeue(run(["squeue", "-h", *part, "-o", SQUEUE_FORMAT]))
    idle = idle_nodes(run(["sinfo", "-h", "-N", *part, "-o", "%N %T"]))
    listed = {j.id for j in jobs}
    return jobs + [j for i in watch if i not in listed for j in final_states([i])], idle


def final_states(ids: list[str]) -> list[SlurmJob]:
    """Jobs ``ids`` in any state, finished ones included (for ``MinJobAge`` after they end); an id Slurm
    has forgotten, or a ``squeue`` that fails, gives none."""
    try:
        return parse_squeue(run(["squeue", "-h", "-t", "all", "-j", ",".join(ids), "-o", SQUEUE_FORMAT], 5.0))
    except SlurmError:
        return []


def cancel_expanders(main: str) -> None:
    """``scancel`` every expander job of job ``main`` that this user submitted."""
    run(["scancel", "--user", _me(), "--name", expander_name(main)])


def expander_minutes(deadline: float, now: float) -> int | None:
    """The time limit (whole minutes) an expander asked for at ``now`` gets so that it ends by ``deadline``
    (to the second, as ``--deadline`` takes it; 2 s for the submission to reach slurmctld); None: not one."""
    minutes = int((int(deadline) - now - 2.0) // 60)
    return minutes if minutes >= 1 else None


def submit_expander(main: str, nodes: int, part: list[str], deadline: float | None) -> str:
    """``sbatch`` an expander job of ``nodes`` nodes for job ``main``; its Slurm id. ``deadline``: when it
    must end (its main job's end, or the start Slurm predicts for the waiting job whose nodes it borrows).

    It gets ``--time`` of the whole minutes left (:func:`expander_minutes`): Slurm 22.05's backfill tests
    a pending job without one as running the partition's ``MaxTime`` (a year), so one asked for nodes kept
    for a waiting job would never start (reason ``Priority``). ``--deadline`` with ``--time-min=1`` makes
    Slurm bring the limit down to the minutes left if it starts later, and drop it once under one minute."""
    until: list[str] = []
    if deadline is not None:
        minutes = expander_minutes(deadline, time.time())
        if minutes is None:
            raise SlurmError(f"expander for job {main}: its deadline is less than a minute away")
        until = [f"--time={minutes}", "--time-min=1",
                 "--deadline", time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(deadline))]
    out = run(["sbatch", "--parsable", "-N", str(nodes), *part, *until, f"--nice={EXPANDER_NICE}",
               "--job-name", expander_name(main), "--output", "/dev/null", "--wrap", expander_script(main)])
    return out.strip().split(";")[0]
