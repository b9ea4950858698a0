"""The resource-manager edge: what a resource manager does for the scheduler core.

The core (``scheduler.core.state``) schedules over a :class:`~scheduler.core.pool.Pool`;
a :class:`ResourceManager` says which nodes exist and which are ours (the
pool it builds, and nodes it marks as held by others), grants more, takes
some back, and notices losses. The daemon polls it once per tick for core
actions, like every other edge (``scheduler.daemon.loop``): it never
blocks the loop (slow commands run in its own thread), and it changes the
nodes only by reporting the core's node events (``NodeGranted``,
``NodeReleased``, ``NodeDown``, ``NodeDraining``, ``LeaseEnded``:
``scheduler.core.events``) to its ``ManagerPort`` (``report``), and jobs through
``request_shrink``, so the same rules hold whatever manages the nodes.

Jobs reach the core in one of two ways: submitted to the daemon, which
queues and launches them (Job Startup), or started by the resource manager
itself and *adopted* (:meth:`ResourceManager.adopt`, the ``register``
request: a Slurm batch script that registers with a site controller). An
adopted job's end and kill are the manager's (:meth:`ResourceManager.kill`).

Implementations: :mod:`scheduler.rm.fixed` (one machine, a pool file, an
existing Slurm allocation: nodes never change hands),
:mod:`scheduler.rm.slurm.manager` (Slurm as the resource manager of one
job's daemon: nodes are granted by expander jobs and given back) and
:mod:`scheduler.rm.slurm.site` (one controller for every malleable job of a
Slurm partition). A new manager is one package that registers itself;
``docs/daemon.md`` ("Adding a resource manager") says how.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from scheduler.core.jobfile import JobDesc
    from scheduler.core.pool import Pool
    from scheduler.core.state import ManagerPort

__all__ = ["ResourceManager"]


class ResourceManager(ABC):
    """One resource manager, as the daemon drives it.

    Lifecycle: :meth:`pool` (once, before the core exists), :meth:`attach`
    (once the core has restored its journal), :meth:`start` (the daemon
    serves), :meth:`step` (every tick), :meth:`stop` (the daemon ends).
    """

    #: short name shown by ``reshape status`` (``daemon.rm.kind``)
    kind: str = "?"
    #: where the pool comes from, for the daemon's start-up line
    source: str = ""
    #: a SIGTERM to the daemon means the nodes are being taken away (the allocation ends):
    #: the jobs are ended with it rather than left for a restarted daemon to adopt
    jobs_end_with_daemon: bool = False
    #: who the daemon's senders are (``scheduler.daemon.accounts.Accounts``), set by the daemon
    accounts: Any = None

    @abstractmethod
    def pool(self, saved_slots: int | None) -> Pool:
        """The pool to schedule over; ``saved_slots``: the size the journal recorded, if any."""

    @property
    def launcher(self) -> str | None:
        """The launcher this manager's nodes need (``reshape.joblink.launchers``), if it prescribes one."""
        return None

    def attach(self, state: ManagerPort, now: float) -> None:  # noqa: B027 - optional hook
        """The core exists (journal restored): mark what is not ours, adopt what is."""

    def start(self) -> None:  # noqa: B027 - optional hook
        """Start talking to the manager (threads, connections)."""

    def step(self, state: ManagerPort, now: float) -> list:
        """Apply what the manager did and saw since the last step; queue what it must do next.
        Returns the core's actions (launches, kills) that resulted."""
        return []

    def stop(self, jobs_running: bool, killing: bool) -> None:  # noqa: B027 - optional hook
        """The daemon ends; ``jobs_running``: jobs stay for a restarted daemon to adopt;
        ``killing``: every job is being killed (give everything back)."""

    def check_submit(self, desc: JobDesc) -> None:  # noqa: B027 - optional hook
        """Raise :class:`scheduler.core.actions.StateError` if this daemon does not take submitted jobs."""

    def adopt(self, state: ManagerPort, desc: JobDesc, allocation: str, hosts: list[str], now: float,
              owner: str | None, restart: tuple[int | None, list[str]] | None = None) -> int:
        """A job the manager started in ``allocation`` registers (``register``): its job id. ``restart``: it
        is registered already and asks for its next attempt on ``hosts`` (exit status, nodes lost)."""
        from scheduler.core.actions import StateError

        raise StateError("not_supported", "this daemon starts its own jobs ('reshape submit'); 'register' is "
                                          "for jobs a resource manager started (reshape daemon --slurm-site)")

    def kill(self, state: ManagerPort, job_ids: list[int]) -> set[int]:
        """End these jobs' processes where the manager started them; the ids it took care of
        (the daemon kills the others' processes itself)."""
        return set()

    def info(self) -> dict[str, Any]:
        """What ``reshape status --json`` shows under ``daemon.rm``."""
        return {"kind": self.kind, "source": self.source}
