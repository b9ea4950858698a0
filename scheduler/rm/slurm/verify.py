"""The site controller believes only Slurm: every ``register`` checked against ``slurmctld`` before it acts.

The controller (``reshape daemon --slurm-site``, :mod:`scheduler.rm.slurm.site`) runs as root or
as the user that submits expanders, and acts on the Slurm jobs of the jobs registered with it:
``scancel`` of a job and its expanders on ``reshape cancel``, ``scontrol update ... NodeList=`` to
give nodes back. So a registration is taken only when Slurm vouches for every word of it
(``scontrol show job -o ID``): the job exists, is ``RUNNING``, belongs to the sender's local
account (its ``UserId``; a CURVE key's account is the key directory's ``accounts.toml``,
``scheduler.daemon.accounts``), and holds every host named (its ``NodeList``). Anything else is
refused in one line naming what did not match: ``bad_hosts`` for a job or hosts that are not
so, ``forbidden`` for someone else's job. A job is registered by its owner only: a retry by the
same account re-attaches to the job it registered; anyone else is refused, so nobody registers
another's job first (no hijack). The controller then acts only on what it verified
(:class:`Verified`): the main jobs registered so, and expander jobs it submitted itself (a job
someone else named ``reshape-expand-N`` is not one: :func:`own_expanders`). A job Slurm requeued resumes
only when Slurm says the allocation registering is a new attempt of it (``Restarts=`` at least 1), with the
same checks.

Still trusted: Slurm (``slurmctld`` and the ``scontrol``/``squeue`` on the controller's PATH), and
the accounts table the admin keeps.
"""

from __future__ import annotations

import os
import pwd
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import hostlist

from scheduler.core.actions import StateError
from scheduler.rm.slurm.view import SlurmError, SlurmJob, run

if TYPE_CHECKING:
    from scheduler.core.job import Job

__all__ = ["SlurmFacts", "Verified", "mismatch", "own_expanders", "parse_show_job", "show_job"]

_KEY = re.compile(r" (?=[A-Za-z][A-Za-z0-9_:/]*=)")  # scontrol -o: a new Key= after a space
_USER = re.compile(r"^(?P<name>[^()]*)\((?P<uid>\d+)\)$")  # UserId=alice(1001)
EXPANDER_PREFIX = "reshape-expand-"


@dataclass(frozen=True)
class SlurmFacts:
    """What Slurm says about one job."""

    job_id: str
    state: str
    user: str
    uid: int | None
    nodes: tuple[str, ...]
    restarts: int = 0  # how many times Slurm requeued it (``Restarts=``): a new batch attempt each


def show_job(job_id: str) -> str:
    """``scontrol show job -o ID`` (SlurmError when Slurm knows no such job, or cannot be asked)."""
    return run(["scontrol", "show", "job", "-o", job_id], timeout=5.0)


def parse_show_job(text: str) -> list[SlurmFacts]:
    """``scontrol show job -o`` lines: one record per job (an array or heterogeneous job prints several).
    A value may hold ``=`` (``TRES=cpu=8,node=4``) or be empty, so a line splits only before a space
    and a ``Key=``."""
    out = []
    for line in text.splitlines():
        if not line.strip():
            continue
        f = dict(part.split("=", 1) for part in _KEY.split(line.strip()) if "=" in part)
        m = _USER.match(f.get("UserId", ""))
        nodes = f.get("NodeList", "")
        hosts = tuple(hostlist.expand_hostlist(nodes)) if nodes and nodes != "(null)" else ()
        out.append(SlurmFacts(f.get("JobId", ""), f.get("JobState", "?"), m["name"] if m else f.get("UserId", "?"),
                              int(m["uid"]) if m else None, hosts,
                              int(r) if (r := f.get("Restarts", "0")).isdigit() else 0))
    return out


def mismatch(facts: list[SlurmFacts], allocation: str, hosts: Iterable[str], account: str | None,
             uid: int | None, requeued: bool = False) -> tuple[str, str] | None:
    """(error code, one line) naming what of a registration Slurm does not vouch for, or None. ``requeued``:
    it says it is a new batch attempt of a job Slurm requeued, which Slurm must have done."""
    mine = [f for f in facts if f.job_id == allocation]
    if len(mine) != 1 or len(facts) != 1:
        return "bad_hosts", f"Slurm job {allocation} is not one plain job (an array or heterogeneous job?)"
    f = mine[0]
    if f.state != "RUNNING":
        return "bad_hosts", f"Slurm job {allocation} is {f.state}, not RUNNING"
    if requeued and f.restarts < 1:
        return "bad_hosts", f"Slurm job {allocation} was never requeued (Restarts=0): not a new attempt of it"
    if not ((uid is not None and f.uid == uid) or (account is not None and f.user == account)):
        who = f"{account} (uid {uid})" if uid is not None else account or "a sender with no local account"
        return "forbidden", f"Slurm job {allocation} belongs to {f.user} (uid {f.uid}), not to {who}"
    foreign = sorted(set(hosts) - set(f.nodes))
    if foreign:
        return "bad_hosts", (f"Slurm job {allocation} does not hold {', '.join(foreign)[:300]} (it holds "
                             f"{hostlist.collect_hostlist(list(f.nodes)) or 'no node'})")
    return None


def own_expanders(jobs: list[SlurmJob], me: str) -> list[SlurmJob]:
    """Slurm's view without jobs named like an expander that this controller's user did not submit: a user
    who names a job ``reshape-expand-N`` does not lend its nodes to job N, nor have them taken back."""
    return [j for j in jobs if not j.name.startswith(EXPANDER_PREFIX) or j.user == me]


@dataclass
class Verified:
    """The Slurm jobs this controller checked (registered, or re-checked at restart): the only ones it
    cancels, shrinks or gives nodes of (module docstring). ``show``: how Slurm is asked (a test's own)."""

    accounts: Any = None  # the daemon's scheduler.daemon.accounts.Accounts (None: no sender is named)
    show: Callable[[str], str] = show_job
    me: str = field(default_factory=lambda: pwd.getpwuid(os.geteuid()).pw_name)
    jobs: set[str] = field(default_factory=set)

    def use(self, accounts: Any) -> None:
        """The daemon's accounts, set once it has them."""
        self.accounts = accounts

    def _account(self, who: str | None) -> tuple[str | None, int | None]:
        if self.accounts is None:
            return None, None
        return self.accounts.account(who), self.accounts.uid(who)

    def register(self, allocation: str, hosts: list[str], who: str | None, requeued: bool = False) -> None:
        """Slurm vouches for a registration by ``who`` (None: a caller inside the controller), or
        StateError naming what did not match; ``requeued``: of a new batch attempt after a requeue
        (:func:`mismatch`)."""
        if who is not None:
            account, uid = self._account(who)
            try:
                facts = parse_show_job(self.show(allocation))
            except SlurmError as e:
                raise StateError("bad_hosts", f"Slurm does not know job {allocation}: "
                                              f"{str(e).splitlines()[-1][:200]}") from None
            bad = mismatch(facts, allocation, hosts, account, uid, requeued)
            if bad:
                raise StateError(*bad)
        self.jobs.add(allocation)

    def reattach(self, j: Job, who: str | None) -> int:
        """A registration of an allocation already registered: its job, for its owner (the same account)
        only; anyone else is refused."""
        same = who is None or who == j.owner or (
            (uid := self._account(who)[1]) is not None and uid == self._account(j.owner)[1])
        if not same:
            raise StateError("forbidden", f"Slurm job {j.allocation} is registered (reshape job {j.job_id}) by "
                                          f"{j.owner}; {who} may not register it")
        return j.job_id

    def recheck(self, j: Job, seen: dict[str, SlurmJob]) -> str | None:
        """At restart, a journaled job against Slurm's queue: why it may not be acted on, or None (verified)."""
        q = seen.get(j.allocation or "")
        if q is None:
            return None  # gone from Slurm: it ends with its Slurm job, nothing to act on
        account, uid = self._account(j.owner) if j.owner is not None else (q.user, None)
        if q.user != account and not (uid is not None and _uid_of(q.user) == uid):
            return f"registered by {j.owner}, but Slurm job {j.allocation} is {q.user}'s"
        self.jobs.add(j.allocation or "")
        return None


def _uid_of(name: str) -> int | None:
    try:
        return pwd.getpwnam(name).pw_uid
    except KeyError:
        return None
