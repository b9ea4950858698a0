"""Who a sender is on this machine, and what that lets it do (docs/cluster.md, "Who may do what").

A sender is ``uid:N`` (the kernel's word: an ``ipc://`` socket, loopback TCP), ``key:NAME`` (a CURVE
key; its local account is the key directory's ``accounts.toml``, ``reshape.joblink.auth``),
``peer:unidentified`` or None (a caller inside the daemon). Its rights are its account's:

* **admin** (cancel anyone's job, stop the daemon, speak for any node): root and the daemon's own
  user, and keys whose account is one of them. Nobody else, whatever the key's name.
* **jobs** (``submit``, ``register``): a daemon running as root runs each job as its sender's
  account (``uid:N``: that uid; a key: its account's uid), so it refuses a key with no account, or
  whose account does not exist here. A daemon not running as root can run jobs only as itself, so
  it takes jobs only from its own user (and root), unless ``--accept-users`` names the accounts it
  also runs jobs for (as itself; ``*``: anyone identified); those are not admins.
* a node's key (``node-HOST``) speaks for node HOST only: it has no account and runs nothing.
"""

from __future__ import annotations

import os
import pwd
from collections.abc import Mapping
from dataclasses import dataclass, field

from scheduler.core.actions import StateError

__all__ = ["Accounts"]


def _name_of(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


@dataclass
class Accounts:
    """The key -> account table and this daemon's rules (module docstring)."""

    keys: Mapping[str, str] = field(default_factory=dict)  # key name -> account name
    accept: frozenset[str] = frozenset()  # a non-root daemon: accounts besides its own it runs jobs for ("*": any)
    table: str = "accounts.toml"  # where the keys' accounts come from (for messages)
    me: int = field(default_factory=os.geteuid)
    _uids: dict[str, int | None] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if self.accept and self.me == 0:
            raise ValueError("--accept-users is for a daemon that does not run as root (a root daemon runs every "
                             "user's job as that user)")

    # ---------------------------------------------------------------- who
    def account(self, who: str | None) -> str | None:
        """The account name of a sender (None: it has none)."""
        if who is None:
            return _name_of(self.me)
        if who.startswith("uid:") and who[4:].isdigit():
            return _name_of(int(who[4:]))
        if who.startswith("key:"):
            return self.keys.get(who[4:])
        return None

    def uid(self, who: str | None) -> int | None:
        """The uid of a sender's account on this host (None: no account, or one this host lacks)."""
        if who is None:
            return self.me
        if who.startswith("uid:") and who[4:].isdigit():
            return int(who[4:])
        name = self.keys.get(who[4:]) if who.startswith("key:") else None
        if name is None:
            return None
        if name not in self._uids:
            try:
                self._uids[name] = pwd.getpwnam(name).pw_uid
            except KeyError:
                self._uids[name] = None
        return self._uids[name]

    def is_admin(self, who: str | None) -> bool:
        """Root, the daemon's own user, a key whose account is one of them, a caller in the daemon."""
        return who is None or self.uid(who) in (0, self.me)

    # ---------------------------------------------------------------- jobs
    def check_job(self, who: str | None, what: str = "job") -> None:
        """Raise ``StateError('forbidden')`` unless this daemon runs jobs for ``who`` (module docstring)."""
        if who is None:
            return
        uid = self.uid(who)
        if uid is None:
            why = (f"has no local account in {self.table}" if who.startswith("key:") and who[4:] not in self.keys
                   else f"has no account on this host ({self.account(who)!r} in {self.table} does not exist here)"
                   if who.startswith("key:") else "cannot be identified")
            raise StateError("forbidden", f"{who} {why}: this daemon runs no {what} for it")
        if self.me == 0 or uid in (0, self.me) or "*" in self.accept or self.account(who) in self.accept:
            return
        raise StateError("forbidden", f"this daemon runs as {_name_of(self.me)} and runs only its own jobs, not "
                                      f"{who}'s ({self.account(who)}): reshape daemon --accept-users names others")

    def run_as(self, owner: str | None) -> int | None:
        """The uid a job of ``owner`` runs as when not the daemon's own (None: as the daemon's user).
        Only a daemon running as root runs jobs as others; ValueError for an owner with no account
        (journaled by an older daemon, or a key whose account was removed)."""
        if self.me != 0 or owner is None:
            return None
        uid = self.uid(owner)
        if uid is None:
            raise ValueError(f"{owner} has no local account (see {self.table}): not run as root")
        return uid or None

    def job_uid(self, owner: str | None) -> int:
        """The uid a job of ``owner`` runs as, always named (a node monitor's start order carries it)."""
        uid = self.run_as(owner)
        return self.me if uid is None else uid
