"""Retired ranks kept for reuse: a shrink parks them, a later expansion takes them back instead of spawning.

A spawned rank costs an interpreter, the imports and ``MPI_Init`` (0.2 s of CPU
each here, most of an expansion's time). A job that shrinks to admit a queued
job often grows again when that job ends, so with reuse on
(``RESHAPE_REUSE=1`` or ``init(reuse=True)``, MaM's "reuse" mode) the ranks a
shrink retires do not leave: they keep the communicator they retired from (a
*pool*) and wait on it, sleeping, for a word from rank 0. An expansion that
parked ranks can cover (its new ranks on the hosts the scheduler named)
calls them back: rank 0 tells them who is coming, they make a
communicator of their own (``MPI_Comm_create_group`` over the pool), and
``MPI_Intercomm_create`` joins them to the running ranks through the pool.
Parked ranks of several pools (shrinks in steps, standbys and a shrink) are
called back pool by pool (:meth:`Reserve.pick`: the pool that covers most
first), each pool's ranks merged in before the next joins, they among the
running ranks from then on; when parked ranks cover only part of the
expansion, the rest is spawned over the communicator they all joined.
From there an expansion proceeds as after a spawn (merge, hand-over,
redistribution, relabelling). If no parked rank fits, the expansion spawns as
usual and the parked ranks stay parked. ``finish()`` (or, failing that, the end of rank 0's
interpreter) tells every parked rank to leave; they then finalize MPI with the
job. Standby ranks (``RESHAPE_STANDBY=K``) are parked ranks from the start:
spawned at ``init()``, they park at once on the communicator of their spawn
(:meth:`Parking.stand_by`), so the first expansion can call them back too.

What a parked rank holds: its process and its interpreter's memory (its array
blocks moved away), no CPU (it sleeps up to 10 ms between checks), and no slot
in the scheduler's books: the scheduler may give the core to another job.
A rank called back resumes *inside* the ``resize()`` that retired it:
``resize()`` returns ``action="expand"`` there and ``rt.iteration`` is the
job's; code after ``resize()`` in the loop body must use ``rt.iteration``
rather than the loop variable it had when it retired.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

from mpi4py import MPI

from reshape import faults
from reshape.mpiutil import release
from reshape.redistribution import placement
from reshape.runtime.darray import DistArray
from reshape.runtime.job import Job, retire
from reshape.runtime.results import ResizeResult
from reshape.runtime.watchdog import Deadline

__all__ = ["CallBack", "CalledBack", "Parking", "Pool", "Reserve", "Step", "park", "rejoin"]

TAG_WORD = 7301  # rank 0 -> a parked rank: ("join", CallBack, step) or ("exit",)
TAG_GROUP = 7302  # MPI_Comm_create_group among the ranks called back
TAG_INTER = 7303  # MPI_Intercomm_create between the running ranks and them
PARK_SLEEP = 0.01  # the longest a parked rank sleeps between checks (s)
LOCAL = ("localhost", "127.0.0.1", "::1")


@dataclass
class Pool:
    """A communicator a shrink retired ranks from; rank 0 is the job's rank 0 in it."""

    comm: MPI.Intracomm
    parked: dict[int, str] = field(default_factory=dict)  # rank 0's view: pool rank -> host


class Step(NamedTuple):
    """Parked ranks of one pool called back together."""

    pool: int  # the pool's index in Reserve.pools
    members: tuple[int, ...]  # the parked ranks called back, by rank in the pool's communicator


class CallBack(NamedTuple):
    """Rank 0's choice for an expansion: parked ranks to call back, pool by pool, and what to spawn besides."""

    steps: tuple[Step, ...]  # in the order they join; each step's ranks take part in the later ones
    rest: int = 0  # new ranks no parked rank covers: spawned once the called-back ranks have joined
    rest_hosts: tuple[str, ...] = ()  # their hosts, one each (empty: wherever a spawn puts them)

    @property
    def members(self) -> tuple[int, ...]:
        """Every parked rank called back, by rank in its pool (for a count: pools number ranks alike)."""
        return tuple(r for st in self.steps for r in st.members)


@dataclass
class Reserve:
    """The pools a running rank belongs to; rank 0 also knows who is parked where."""

    pools: list[Pool] = field(default_factory=list)

    def keep(self, comm: MPI.Intracomm, retired: dict[int, str]) -> None:
        """A staying rank after a shrink from ``comm``: keep it as a pool (``retired``: rank 0's record)."""
        self.pools.append(Pool(comm, dict(retired)))

    @property
    def parked(self) -> int:
        return sum(len(p.parked) for p in self.pools)

    def parked_hosts(self) -> tuple[str, ...]:
        """Rank 0: the hosts of every parked rank, one entry per rank (:meth:`pick` can call them all
        back), for the scheduler to place an expansion there."""
        return tuple(sorted(h for p in self.pools for h in p.parked.values()))

    def pick(self, n: int, hosts: tuple[str, ...] | list[str]) -> CallBack | None:
        """Rank 0: parked ranks to cover as many of ``n`` new ranks on ``hosts`` (one host per rank; any host
        if none) as the pools can, taking first the pool that covers the most (the most recent on a tie),
        then the next that covers any of the rest; None if no parked rank fits.

        Each pool taken is one more call-back step (an ``MPI_Intercomm_create`` and a merge, milliseconds)
        against a spawn's tenths of a second. The new ranks no parked rank covers are spawned (``rest``),
        on the hosts left over.
        """
        here = socket.gethostname()
        want = list(hosts)  # the hosts still to cover ([]: any host)
        left, steps = n, []
        while left:
            best, rest = None, want
            for idx in range(len(self.pools) - 1, -1, -1):
                if all(st.pool != idx for st in steps):
                    members, unmet = _cover(sorted(self.pools[idx].parked.items()), want, left, here)
                    if members and (best is None or len(members) > len(best.members)):
                        best, rest = Step(idx, members), unmet
            if best is None:
                break
            steps.append(best)
            left, want = left - len(best.members), rest
        return CallBack(tuple(steps), left, tuple(want)) if steps else None

    def call_back(self, comm: MPI.Intracomm, cb: CallBack, k: int) -> MPI.Intercomm:
        """The running ranks (collective over ``comm``): join the parked ranks of ``cb``'s step ``k``,
        telling each of them the whole call-back and its step (they take part in the later ones)."""
        if comm.rank == 0:
            step = cb.steps[k]
            pool = self.pools[step.pool]
            MPI.Request.Waitall([pool.comm.isend(("join", cb, k), dest=r, tag=TAG_WORD) for r in step.members])
            for r in step.members:
                del pool.parked[r]
            return comm.Create_intercomm(0, pool.comm, step.members[0], TAG_INTER)
        return comm.Create_intercomm(0, MPI.COMM_SELF, 0, TAG_INTER)

    def release(self) -> None:
        """Rank 0: tell every parked rank to leave (at the job's end)."""
        reqs = []
        for pool in self.pools:
            reqs += [pool.comm.isend(("exit",), dest=r, tag=TAG_WORD) for r in pool.parked]
            pool.parked.clear()
        MPI.Request.Waitall(reqs)


def park(pool: MPI.Intracomm, max_sleep: float = PARK_SLEEP) -> tuple[CallBack, int] | None:
    """A retired rank: wait, sleeping, for rank 0's word: the expansion's call-back and the step that
    calls this rank back, or None to leave."""
    req = pool.irecv(source=0, tag=TAG_WORD)
    delay = 1e-4
    while True:
        done, word = req.test()
        if done:
            return (word[1], word[2]) if word[0] == "join" else None
        time.sleep(delay)
        delay = min(2 * delay, max_sleep)


def rejoin(pool: MPI.Intracomm, members: tuple[int, ...]) -> MPI.Intercomm:
    """A parked rank called back: the intercommunicator to the running ranks (remote group), as after a spawn."""
    mine = pool.Create_group(pool.group.Incl(list(members)), TAG_GROUP)
    inter = mine.Create_intercomm(0, pool, 0, TAG_INTER)
    mine.Free()
    return inter


def _cover(free: list[tuple[int, str]], want: list[str], left: int,
           here: str) -> tuple[tuple[int, ...], list[str]]:
    """The parked ranks of one pool (``free``: rank, host) that cover the hosts in ``want`` (with none,
    up to ``left`` ranks anywhere), and the hosts they leave uncovered."""
    if not want:
        return tuple(r for r, _ in free[:left]), []
    free, members, unmet = list(free), [], []
    for w in want:
        k = next((i for i, (_, ph) in enumerate(free) if ph == (here if w in LOCAL else w)), None)
        if k is None:
            unmet.append(w)
        else:
            members.append(free.pop(k)[0])
    return tuple(members), unmet


class CalledBack(BaseException):
    """A parked rank was called back by an expansion: unwinds its shrink; ``resize()`` returns ``result``."""

    def __init__(self, result: ResizeResult):
        super().__init__(result)
        self.result = result


class Parking:
    """Retiring a shrink's ranks, or parking them for reuse, over the job's :class:`~reshape.runtime.job.Job`.

    ``deadline`` bounds the resize; ``reserve`` holds the pools of parked ranks; ``join(inter,
    called_back=(cb, k))`` joins a rank called back to the running ones
    (:meth:`reshape.runtime.spawning.Joiner.join`); ``reuse``: a shrink parks the ranks it retires
    instead of letting them leave.
    """

    def __init__(self, job: Job, deadline: Deadline, reserve: Reserve, join: Callable[..., object],
                 reuse: bool = False):
        self.job = job
        self.deadline = deadline
        self.reserve = reserve
        self.join = join
        self.reuse = reuse

    def retire_others(self, ranks: tuple[int, ...]) -> None:
        """A shrink's end, once the arrays are on ``ranks``: the others retire (or park); the rest renumber."""
        job = self.job
        keep = job.rank in ranks
        self.deadline.phase("retiring ranks")
        if not keep:
            faults.hit("retire", job.rank, job.size)
        hosts = job.comm.gather(socket.gethostname(), root=0) if self.reuse else None
        new_comm = placement.renumber(job.comm, ranks)
        if not self.reuse:
            release(job.comm)
            if not keep:
                retire()
        elif keep:  # the old communicator stays: the retired ranks wait on it
            retired = {r: hosts[r] for r in range(job.size) if r not in ranks} if job.rank == 0 else {}
            self.reserve.keep(job.comm, retired)
        else:
            self.park()
        job.settle_on(new_comm, ranks)

    def park(self) -> None:
        """A rank retired with reuse on: wait on the old communicator until called back or told to leave.

        Called back, it joins the running ranks as a spawned rank does and unwinds
        to ``resize()`` (:class:`CalledBack`); told to leave, it retires.
        """
        job = self.job
        t0, n = self.wait_parked(job.comm)
        for name, (lay, local) in job.pending_arrays.items():
            job.arrays[name].dist = DistArray(lay, local, job.comm, tuple(range(lay.nprocs)))
        job.pending_arrays.clear()
        if job.in_body:  # the loop's own increment brings it to the job's next iteration
            job.iteration -= 1
        raise CalledBack(ResizeResult("expand", job.size - n, job.size, spawn_seconds=time.perf_counter() - t0,
                                      reason="called back from the parked ranks"))

    def stand_by(self, pool: MPI.Intracomm) -> None:
        """A standby rank (spawned at the job's start): park on ``pool`` at once. Called back, it has
        joined the running ranks, and ``init()`` returns as on a spawned rank; told to leave, it retires."""
        self.job.comm = pool
        self.wait_parked(pool)

    def wait_parked(self, pool: MPI.Intracomm) -> tuple[float, int]:
        """Sleep on ``pool`` for rank 0's word, then join the running ranks (``(when the call-back came,
        how many new ranks the expansion brought)``), or retire if told to leave (does not return)."""
        self.deadline.disarm()
        word = park(pool)
        if word is None:
            retire()
        cb, k = word
        t0 = time.perf_counter()
        inter = rejoin(pool, cb.steps[k].members)
        self.reserve.keep(pool, {})
        self.join(inter, called_back=(cb, k))
        return t0, len(cb.members) + cb.rest

    def release(self) -> None:
        """Rank 0: tell the parked ranks to leave (finish(), or the interpreter's exit without it)."""
        if self.job.rank == 0 and self.reserve.parked:
            self.reserve.release()
