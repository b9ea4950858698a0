"""The scheduler core's jobs: the :class:`Job` record and the table that indexes them by state.

Jobs are indexed by state (the queue in arrival order, running jobs in the
order they started, jobs waiting for their arrival time) and queued jobs by
size (:class:`SizeIndex`, which EASY's backfill walks instead of the whole
queue), so a request costs the jobs it concerns rather than the whole history
or the whole queue. The policies' frozen views
(:class:`scheduler.core.policy.Snapshot`) are cached: a running job's view is
rebuilt only after it changed, and the queue is shown without a copy (:class:`QueueView`).
Every change to a job goes through :meth:`JobTable.mark` (or ``event``, which
calls it): the journal writes the job, and its view is rebuilt.
:class:`scheduler.core.state.ClusterState` holds one :class:`JobTable` (``table``), which every other
part of the core is given.
"""

from __future__ import annotations

import bisect
import collections
import heapq
import math
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from scheduler.core.actions import Decision, StateError
from scheduler.core.job import FINAL, Job, JobState
from scheduler.core.policy import JobSpec, RunningJob, Snapshot

if TYPE_CHECKING:
    from scheduler.core.pool import Pool

__all__ = ["FINAL", "KILLING", "RECENT", "Job", "JobTable", "SizeIndex", "pending_shrink"]

RECENT = 10  # ended jobs listed by ``status``
KILLING = (JobState.CANCELLING, JobState.ENDING)  # kill ordered to the node monitor that runs the job, unconfirmed


class QueueView(Sequence):
    """The queue as a snapshot shows it, without copying it: a snapshot per submission would otherwise
    copy the whole queue. Valid until the queue next changes (a policy uses a snapshot within the call
    that received it); a stale view raises rather than show another queue. Slices are tuples."""

    __slots__ = ("_owner", "_specs", "_version")

    def __init__(self, owner: JobTable, specs: list[JobSpec], version: int):
        self._owner, self._specs, self._version = owner, specs, version

    def _live(self) -> list[JobSpec]:
        if self._owner._queue_version != self._version:
            raise RuntimeError("stale snapshot: the queue changed after it was taken")
        return self._specs

    def __len__(self) -> int:
        return len(self._live())

    def __getitem__(self, i):
        got = self._live()[i]
        return tuple(got) if isinstance(i, slice) else got

    def __iter__(self) -> Iterator[JobSpec]:
        return iter(self._live())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and tuple(self) == tuple(other)

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return f"QueueView({len(self)} jobs)"

    def fitting(self, limit: int, within: float = math.inf, short: int = 0) -> Iterator[JobSpec]:
        """:class:`scheduler.core.policy.QueueIndex`: through the core's :class:`SizeIndex`."""
        self._live()
        return self._owner._sized.fitting(limit, within, short)

    def fits_any(self, limit: int) -> bool:
        """Whether a queued job needs at most ``limit`` slots (the smallest size in the index)."""
        self._live()
        sizes = self._owner._sized.sizes
        return bool(sizes) and sizes[0] <= limit


class SizeIndex:
    """Queued jobs by size and walltime, for EASY's backfill.

    For each size: the queue keys ``(arrival, job id)`` of its jobs, sorted, and
    the same jobs sorted by walltime (``None``: infinite). :meth:`fitting`
    yields the queued jobs of at most ``limit`` slots that could end within
    ``within`` seconds or need at most ``short`` slots, in queue order, costing
    the jobs it yields (plus a search per size) instead of the whole queue:
    what the core's snapshots' queue (:class:`QueueView`) answers ``fitting`` with.
    Updated in place on every queue change (a search plus a list insertion).
    """

    def __init__(self, specs: dict[int, JobSpec]):
        self.specs = specs  # job id -> spec of every queued job (shared with the JobTable)
        self.by_size: dict[int, list[tuple[float, int]]] = {}
        self.by_wall: dict[int, list[tuple[float, float, int]]] = {}  # (walltime, arrival, id) per size
        self.sizes: list[int] = []  # the sizes present, ascending

    @staticmethod
    def _wall(spec: JobSpec, key: tuple[float, int]) -> tuple[float, float, int]:
        return (math.inf if spec.walltime is None else spec.walltime, *key)

    def add(self, spec: JobSpec, key: tuple[float, int]) -> None:
        n = spec.nprocs
        lst = self.by_size.get(n)
        if lst is None:
            self.by_size[n] = [key]
            self.by_wall[n] = [self._wall(spec, key)]
            bisect.insort(self.sizes, n)
        else:
            bisect.insort(lst, key)
            bisect.insort(self.by_wall[n], self._wall(spec, key))

    @staticmethod
    def _drop(lst: list, item) -> None:
        i = bisect.bisect_left(lst, item)
        if i < len(lst) and lst[i] == item:
            del lst[i]

    def remove(self, spec: JobSpec, key: tuple[float, int]) -> None:
        n = spec.nprocs
        lst = self.by_size.get(n)
        if lst is None:
            return
        self._drop(lst, key)
        self._drop(self.by_wall[n], self._wall(spec, key))
        if not lst:
            del self.by_size[n], self.by_wall[n]
            del self.sizes[bisect.bisect_left(self.sizes, n)]

    def fitting(self, limit: int, within: float = math.inf, short: int = 0) -> Iterator[JobSpec]:
        """Queued jobs of at most ``limit`` slots with a walltime of at most ``within`` seconds or at most
        ``short`` slots, in queue order; costs the jobs taken from it and a search per size."""
        sizes = self.sizes[:bisect.bisect_right(self.sizes, limit)]
        specs = self.specs
        if within == math.inf:
            lists = [self.by_size[n] for n in sizes]
            keys = lists[0] if len(lists) == 1 else heapq.merge(*lists)
            return (specs[k[1]] for k in keys)
        out: list[tuple[float, int]] = []
        for n in sizes:
            if n <= short:
                out += self.by_size[n]
            else:
                lst = self.by_wall[n]
                out += [(a, i) for _, a, i in lst[:bisect.bisect_right(lst, (within, math.inf, math.inf))]]
        out.sort()
        return (specs[k[1]] for k in out)


def pending_shrink(j: Job) -> int | None:
    """A shrink under way (advised, not confirmed), else a requested one."""
    if j.pending and not j.pending.expands:
        return j.pending.new
    return j.shrink_request


class JobTable:
    """Jobs by id and by state, their events and decisions, and the policies' views of them.

    ``pool``: the slots (an event records how many are busy); ``record``: keep every applied
    decision in ``decisions``. ``events`` (allocation history) and ``dirty`` (jobs changed since
    the journal last wrote them) are the journal's; ``live`` holds the jobs not in a final state."""

    def __init__(self, pool: Pool, record: bool = False):
        self.pool = pool
        self.jobs: dict[int, Job] = {}
        self.next_id = 1
        self.events: list[dict[str, Any]] = []  # allocation history, appended to the journal
        self.dirty: set[int] = set()
        self.live: dict[int, Job] = {}  # jobs not in a final state (finished ones are not scanned)
        self.recent: collections.deque[int] = collections.deque(maxlen=RECENT)  # last ended jobs, newest last
        self.decisions: list[Decision] | None = [] if record else None
        self.queued: list[tuple[float, int]] = []  # (arrival_time, job_id), sorted: the queue order
        self._queued_specs: list[JobSpec] = []  # their specs, in the same order
        self._queue_version = 0  # bumped on every queue change: the snapshots' QueueView checks it
        self._by_id: dict[int, JobSpec] = {}  # queued job id -> spec
        self._sized = SizeIndex(self._by_id)  # queued jobs by size, for backfill
        self.started: dict[int, Job] = {}  # running jobs in the order they started
        self._run_t: tuple[RunningJob, ...] | None = ()  # their views, cached until one changes
        self._views: dict[int, RunningJob | None] = {}  # job id -> its view (None: to rebuild), start order
        self._stale: set[int] = set()  # running jobs whose view must be rebuilt
        self._pos: dict[int, int] | None = {}  # job id -> its index in the running tuple (None: to rebuild)
        self.waiting: dict[int, Job] = {}
        self._announced: tuple[tuple[float, int], ...] | None = ()  # the snapshots' view of them (None: to rebuild)
        self.unconfirmed: dict[int, Job] = {}  # cancelling or ending: kill not yet confirmed (they hold their slots)
        self._snap: Snapshot | None = None  # the last snapshot, reused while nothing it shows changed

    # ---------------------------------------------------------------- helpers
    def job(self, job_id: int) -> Job:
        if job_id not in self.jobs:
            raise StateError("unknown_job", f"no job {job_id}")
        return self.jobs[job_id]

    def running_job(self, job_id: int) -> Job:
        j = self.job(job_id)
        if j.state != JobState.RUNNING:
            raise StateError("not_running", f"job {job_id} is {j.state}, not running")
        return j

    def mark(self, j: Job) -> None:
        """``j`` changed: journal it; a running job's policy view is rebuilt. Every change to a
        running job goes through here (or :meth:`event`, which calls it)."""
        self.dirty.add(j.job_id)
        if j.state == JobState.RUNNING:
            j._view = None
            self._stale.add(j.job_id)
            self._run_t = None

    def event(self, now: float, job: Job, kind: str, detail: str = "") -> None:
        self.mark(job)
        self.events.append({"t": now, "job_id": job.job_id, "kind": kind, "nprocs": job.nprocs,
                            "busy": self.pool.total - self.pool.free, "detail": detail})

    def decided(self, now: float, kind: str, job_id: int, nprocs: int) -> None:
        if self.decisions is not None:
            self.decisions.append(Decision(now, kind, job_id, nprocs))

    def _unindex(self, j: Job) -> None:
        if j.state == JobState.QUEUED:
            k = (j.arrival_time, j.job_id)
            i = bisect.bisect_left(self.queued, k)
            if i < len(self.queued) and self.queued[i] == k:
                del self.queued[i]
                del self._queued_specs[i]
                self._sized.remove(self._by_id.pop(j.job_id), k)
            self._queue_version += 1
        elif j.state == JobState.RUNNING:
            self.started.pop(j.job_id, None)
            self._views.pop(j.job_id, None)
            self._stale.discard(j.job_id)
            self._run_t = self._pos = None
        elif j.state == JobState.WAITING:
            self.waiting.pop(j.job_id, None)
            self._announced = None
        elif j.state in KILLING:
            self.unconfirmed.pop(j.job_id, None)

    def index(self, j: Job) -> None:
        if j.state == JobState.QUEUED:
            k = (j.arrival_time, j.job_id)
            i = bisect.bisect_right(self.queued, k)
            self.queued.insert(i, k)
            self._queued_specs.insert(i, j.spec)
            self._by_id[j.job_id] = j.spec
            self._sized.add(j.spec, k)
            self._queue_version += 1
        elif j.state == JobState.RUNNING:
            self.started[j.job_id] = j
            self._views[j.job_id] = None
            self._stale.add(j.job_id)
            self._run_t = self._pos = None
        elif j.state == JobState.WAITING:
            self.waiting[j.job_id] = j
            self._announced = None
        elif j.state in KILLING:
            self.unconfirmed[j.job_id] = j
        if j.state in FINAL:
            self.live.pop(j.job_id, None)
        else:
            self.live[j.job_id] = j

    def set(self, j: Job, state: JobState) -> None:
        self._unindex(j)
        j.state = state
        self.index(j)

    def forget(self, job_id: int) -> None:
        """Drop an ended job's record (the simulator, once it recorded the job, keeps memory flat this way)."""
        j = self.jobs.get(job_id)
        if j is None or j.state not in FINAL:
            raise StateError("not_ended", f"job {job_id} has not ended")
        del self.jobs[job_id]
        self.dirty.discard(job_id)
        if job_id in self.recent:
            self.recent.remove(job_id)

    def restore(self, jobs: list[Job], next_id: int) -> None:
        """Reload journaled jobs; running jobs get their slots back and must reconnect."""
        ended = sorted((j for j in jobs if j.state in FINAL and j.end_time is not None), key=lambda j: j.end_time)
        self.recent.extend(j.job_id for j in ended[-RECENT:])
        for j in jobs:
            j.connected = False
            self.jobs[j.job_id] = j
            self.index(j)
            if j.state == JobState.RUNNING or j.state in KILLING:
                self.pool.claim(j.hosts)
                if j.pending and j.pending.expands:
                    self.pool.claim(j.pending.hosts)
        self.next_id = max([next_id, *(j.job_id + 1 for j in jobs)])

    def check(self) -> None:
        """The indexes agree with the jobs' states (tests call this after every event)."""
        queued = (j for j in self.live.values() if j.state == JobState.QUEUED)
        assert self.queued == sorted((j.arrival_time, j.job_id) for j in queued)
        assert self._queued_specs == [self.jobs[i].spec for _, i in self.queued]
        assert set(self._by_id) == {i for _, i in self.queued}
        assert sorted(k for lst in self._sized.by_size.values() for k in lst) == self.queued
        assert self._sized.sizes == sorted(self._sized.by_size) and all(self._sized.by_size.values())
        assert all(self._by_id[i].nprocs == n for n, lst in self._sized.by_size.items() for _, i in lst)
        assert list(self.started) == [i for i in self.started if self.jobs[i].state == JobState.RUNNING]
        assert set(self.started) == {i for i, j in self.live.items() if j.state == JobState.RUNNING}
        assert set(self.waiting) == {i for i, j in self.live.items() if j.state == JobState.WAITING}
        assert set(self.unconfirmed) == {i for i, j in self.live.items() if j.state in KILLING}
        assert list(self._views) == list(self.started) and self._stale <= set(self.started)
        assert self._pos is None or self._pos == {i: k for k, i in enumerate(self.started)}
        if self._run_t is not None:  # the cached view is the fresh one
            assert self._run_t == tuple(RunningJob(j.spec, j.nprocs, j.start_time, j.profile.frozen(), j.iterations,
                                                   pending_shrink(j), j.deadline, j.point_time)
                                        for j in self.started.values())

    def release_all(self, j: Job) -> None:
        """``j`` holds no slot any more (a pending expansion's either), nor a resize or shrink request."""
        self.pool.release(j.hosts)
        if j.pending and j.pending.expands:
            self.pool.release(j.pending.hosts)
        j.pending = None
        j.shrink_request = None
        j.hosts = []
        j.nprocs = 0

    def busy(self) -> int:
        return self.pool.total - self.pool.free

    def queue(self, limit: int | None = None) -> list[Job]:
        """Queued jobs in arrival order (ties: submission order); the first ``limit`` if given."""
        keys = self.queued if limit is None else self.queued[:max(0, limit)]
        return [self.jobs[i] for _, i in keys]

    def running(self) -> list[Job]:
        """Running jobs in the order they started."""
        return list(self.started.values())

    def killing(self) -> list[Job]:
        """Jobs whose kill their node's monitor has not confirmed yet (cancelling or ending; they hold their slots)."""
        return list(self.unconfirmed.values())

    def end(self, j: Job, state: str, now: float) -> None:
        self.set(j, state)
        j.end_time = now
        self.recent.append(j.job_id)

    def _view(self, j: Job) -> RunningJob:
        """The policy's frozen view of a running job, rebuilt only after the job changed (:meth:`mark`)."""
        if j._view is None:
            j._view = RunningJob(j.spec, j.nprocs, j.start_time, j.profile.frozen(), j.iterations,
                                 pending_shrink(j), j.deadline, j.point_time)
        return j._view

    def snapshot(self, now: float) -> Snapshot:
        """The policies' view: cached tuples, rebuilt in the part that changed (one job's view, the
        queue's tuple), with the queue's size index and the running jobs' positions."""
        if self._run_t is None:
            views = self._views
            for i in self._stale:
                views[i] = self._view(self.started[i])
            self._stale.clear()
            self._run_t = tuple(views.values())  # type: ignore[arg-type]  # none is stale now
        if self._pos is None:
            self._pos = {i: k for k, i in enumerate(self._views)}
        head = self.jobs[self.queued[0][1]].reservation if self.queued else None
        if self._announced is None:
            self._announced = tuple(sorted((j.arrival_time, j.spec.nprocs) for j in self.waiting.values()
                                           if j.allocation is None))  # (a requeued allocation's job: not coming here)
        total, free, last = self.pool.total, self.pool.free, self._snap
        if (last is not None and last.now == now and last.free_slots == free and last.total_slots == total
                and last.queue._version == self._queue_version  # type: ignore[attr-defined]
                and last.running is self._run_t and last.reserved == head
                and last.announced is self._announced):
            return last  # nothing changed since the last one (several policy calls per event)
        queue = last.queue if last is not None and last.queue._version == self._queue_version \
            else QueueView(self, self._queued_specs, self._queue_version)  # type: ignore[attr-defined]
        self._snap = Snapshot(now, total, free, queue, self._run_t, head, self._pos,  # type: ignore[arg-type]
                              self._announced)
        return self._snap

