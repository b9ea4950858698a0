"""The scheduler core's jobs: the :class:`Job` record and the table that indexes them by state.

Jobs are indexed by state (the queue in arrival order, running jobs in the
order they started, jobs waiting for their arrival time) and queued jobs by
size (:class:`SizeIndex`, which EASY's backfill walks instead of the whole
queue), so a request costs the jobs it concerns rather than the whole history
or the whole queue. The policies' frozen views
(:class:`scheduler.core.policy.Snapshot`) are cached: a running job's view is
rebuilt only after it changed, and the queue is shown without a copy (:class:`QueueView`).
Every change to a job goes through :meth:`JobTable._mark` (or ``_event``, which
calls it): the journal writes the job, and its view is rebuilt.
:class:`scheduler.core.state.ClusterState` is a :class:`JobTable`.
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections.abc import Iterator, Sequence

from scheduler.core.actions import Decision, StateError
from scheduler.core.job import FINAL, Job, JobState
from scheduler.core.policy import JobSpec, RunningJob, Snapshot

__all__ = ["FINAL", "KILLING", "RECENT", "Job", "JobTable", "SizeIndex"]

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


class JobTable:
    """Jobs by id and by state, their events and decisions, and the policies' views of them.

    Expects ``pool``, ``jobs``, ``live``, ``events``, ``dirty``, ``recent`` and
    ``decisions`` (set by :class:`scheduler.core.state.ClusterState`)."""

    def _init_indexes(self) -> None:
        self._queued: list[tuple[float, int]] = []  # (arrival_time, job_id), sorted: the queue order
        self._queued_specs: list[JobSpec] = []  # their specs, in the same order
        self._queue_version = 0  # bumped on every queue change: the snapshots' QueueView checks it
        self._by_id: dict[int, JobSpec] = {}  # queued job id -> spec
        self._sized = SizeIndex(self._by_id)  # queued jobs by size, for backfill
        self._run: dict[int, Job] = {}  # running jobs in the order they started
        self._run_t: tuple[RunningJob, ...] | None = ()  # their views, cached until one changes
        self._views: dict[int, RunningJob | None] = {}  # job id -> its view (None: to rebuild), start order
        self._stale: set[int] = set()  # running jobs whose view must be rebuilt
        self._pos: dict[int, int] | None = {}  # job id -> its index in the running tuple (None: to rebuild)
        self._waiting: dict[int, Job] = {}
        self._announced: tuple[tuple[float, int], ...] | None = ()  # the snapshots' view of them (None: to rebuild)
        self._killing: dict[int, Job] = {}  # cancelling or ending: their kill not yet confirmed (they hold their slots)
        self._snap: Snapshot | None = None  # the last snapshot, reused while nothing it shows changed

    # ---------------------------------------------------------------- helpers
    def _job(self, job_id: int) -> Job:
        if job_id not in self.jobs:
            raise StateError("unknown_job", f"no job {job_id}")
        return self.jobs[job_id]

    def _running(self, job_id: int) -> Job:
        j = self._job(job_id)
        if j.state != JobState.RUNNING:
            raise StateError("not_running", f"job {job_id} is {j.state}, not running")
        return j

    def _mark(self, j: Job) -> None:
        """``j`` changed: journal it; a running job's policy view is rebuilt. Every change to a
        running job goes through here (or :meth:`_event`, which calls it)."""
        self.dirty.add(j.job_id)
        if j.state == JobState.RUNNING:
            j._view = None
            self._stale.add(j.job_id)
            self._run_t = None

    def _event(self, now: float, job: Job, kind: str, detail: str = "") -> None:
        self._mark(job)
        self.events.append({"t": now, "job_id": job.job_id, "kind": kind, "nprocs": job.nprocs,
                            "busy": self.pool.total - self.pool.free, "detail": detail})

    def _decided(self, now: float, kind: str, job_id: int, nprocs: int) -> None:
        if self.decisions is not None:
            self.decisions.append(Decision(now, kind, job_id, nprocs))

    def _unindex(self, j: Job) -> None:
        if j.state == JobState.QUEUED:
            k = (j.arrival_time, j.job_id)
            i = bisect.bisect_left(self._queued, k)
            if i < len(self._queued) and self._queued[i] == k:
                del self._queued[i]
                del self._queued_specs[i]
                self._sized.remove(self._by_id.pop(j.job_id), k)
            self._queue_version += 1
        elif j.state == JobState.RUNNING:
            self._run.pop(j.job_id, None)
            self._views.pop(j.job_id, None)
            self._stale.discard(j.job_id)
            self._run_t = self._pos = None
        elif j.state == JobState.WAITING:
            self._waiting.pop(j.job_id, None)
            self._announced = None
        elif j.state in KILLING:
            self._killing.pop(j.job_id, None)

    def _index(self, j: Job) -> None:
        if j.state == JobState.QUEUED:
            k = (j.arrival_time, j.job_id)
            i = bisect.bisect_right(self._queued, k)
            self._queued.insert(i, k)
            self._queued_specs.insert(i, j.spec)
            self._by_id[j.job_id] = j.spec
            self._sized.add(j.spec, k)
            self._queue_version += 1
        elif j.state == JobState.RUNNING:
            self._run[j.job_id] = j
            self._views[j.job_id] = None
            self._stale.add(j.job_id)
            self._run_t = self._pos = None
        elif j.state == JobState.WAITING:
            self._waiting[j.job_id] = j
            self._announced = None
        elif j.state in KILLING:
            self._killing[j.job_id] = j
        if j.state in FINAL:
            self.live.pop(j.job_id, None)
        else:
            self.live[j.job_id] = j

    def _set(self, j: Job, state: JobState) -> None:
        self._unindex(j)
        j.state = state
        self._index(j)

    def busy(self) -> int:
        return self.pool.total - self.pool.free

    def queue(self, limit: int | None = None) -> list[Job]:
        """Queued jobs in arrival order (ties: submission order); the first ``limit`` if given."""
        keys = self._queued if limit is None else self._queued[:max(0, limit)]
        return [self.jobs[i] for _, i in keys]

    def running(self) -> list[Job]:
        """Running jobs in the order they started."""
        return list(self._run.values())

    def killing(self) -> list[Job]:
        """Jobs whose kill their node's monitor has not confirmed yet (cancelling or ending; they hold their slots)."""
        return list(self._killing.values())

    def _end(self, j: Job, state: str, now: float) -> None:
        self._set(j, state)
        j.end_time = now
        self.recent.append(j.job_id)

    @staticmethod
    def _pending_shrink(j: Job) -> int | None:
        """A shrink under way (advised, not confirmed), else a requested one."""
        if j.pending and not j.pending.expands:
            return j.pending.new
        return j.shrink_request

    def _view(self, j: Job) -> RunningJob:
        """The policy's frozen view of a running job, rebuilt only after the job changed (:meth:`_mark`)."""
        if j._view is None:
            j._view = RunningJob(j.spec, j.nprocs, j.start_time, j.profile.frozen(), j.iterations,
                                 self._pending_shrink(j), j.deadline, j.point_time)
        return j._view

    def snapshot(self, now: float) -> Snapshot:
        """The policies' view: cached tuples, rebuilt in the part that changed (one job's view, the
        queue's tuple), with the queue's size index and the running jobs' positions."""
        if self._run_t is None:
            views = self._views
            for i in self._stale:
                views[i] = self._view(self._run[i])
            self._stale.clear()
            self._run_t = tuple(views.values())  # type: ignore[arg-type]  # none is stale now
        if self._pos is None:
            self._pos = {i: k for k, i in enumerate(self._views)}
        head = self.jobs[self._queued[0][1]].reservation if self._queued else None
        if self._announced is None:
            self._announced = tuple(sorted((j.arrival_time, j.spec.nprocs) for j in self._waiting.values()
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

