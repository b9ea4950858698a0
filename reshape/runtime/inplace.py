"""A lost rank handled as a shrink, in place, with ULFM (Open MPI 5): ``RESHAPE_INPLACE=1``.

With ``RESHAPE_INPLACE=1`` (Open MPI only: ``RESHAPE_MPI=openmpi``; the launchers then add
``--with-ft ulfm``) a job written with :meth:`reshape.runtime.Resizer.run` survives the loss of
ranks (a node or a process that dies, ``kill -9``) without a restart:

1. **Detection.** The job's communicator returns errors instead of aborting
   (``MPI_ERRORS_RETURN``; the communicators the program splits from it inherit that), and its
   blocking point-to-point calls run as non-blocking ones (:mod:`reshape.runtime.ftcomm`: Open MPI's
   blocking ``MPI_Sendrecv`` crashes when its peer dies). The first rank whose MPI call reports a
   failed peer (``MPI_ERR_PROC_FAILED``) or a revoked communicator revokes ``rt.comm``; every other
   rank's next call on it fails too, and ranks waiting in :func:`reshape.mpiutil.until` on a
   communicator of their own (an ``Ibcast`` down a process column) notice the revocation there. The
   failure may surface in the program's step, in ``resize()``'s collectives or in a resize's data
   motion: :meth:`Resizer.run` catches it in all three.
2. **Shrink.** The survivors ``MPI_Comm_shrink`` the revoked communicator (old rank order kept).
3. **Recovery data.** Every rank keeps an in-memory copy of the registered arrays' blocks of one
   partner (its *buddy*). The blocks of rank ``r`` are kept by the nearest rank before it (mod p)
   that is no neighbour of ``r`` in the program's own messages and is on another host, else the
   nearest that is no neighbour, else the nearest on another host, else ``r - 1``
   (:func:`keepers`; the pattern is what the first steps on a size sent, :meth:`Buddies.place`).
   Copies are made every N iterations
   (``RESHAPE_BUDDY=every:N``, default ``every:10``), at every resize point, and at the first
   iteration on a new size (after a resize or a recovery). At a resize point and at the start of a
   size (but for the one after a recovery) they complete before the job goes on; the others travel
   with non-blocking messages while the job iterates. Arrays registered ``constant=True`` are sent
   once per size. A copy counts once it has fully arrived (tested at each iteration's start); each
   rank keeps its own copy of the same iteration to send from, and the last two of each. The
   survivors agree (one ``allgather``) on the newest iteration ``S`` for which every lost rank's
   keeper survived with a complete copy; where no such iteration exists (a rank and its keeper both
   lost), the newest complete checkpoint is read instead (``RESHAPE_CHECKPOINT``, or without it the
   ``auto`` checkpoints in-place recovery takes by default, :mod:`reshape.runtime.checkpoint`); with
   neither the job aborts with the reason reported (status ``lost``: the daemon may restart it
   from a checkpoint).
4. **Redistribution.** The blocks of iteration ``S`` (the survivors' own copies and the copies
   of the lost ranks' blocks) move from each array's layout at the old size to its layout at the
   new one (:func:`reshape.redistribution.schedule.make_plan`: any P -> Q).
5. **Rewind.** ``rt.iteration`` goes back to ``S``, the registered values to their copy of ``S``,
   and the loop carries on from there on the survivors. A per-iteration-deterministic program
   gives bit for bit the result of a run that never failed.
6. **The scheduler is told** (rank 0 of the survivors, ``lost`` message: old and new size, the
   lost ranks and why): it frees the lost ranks' slots, records the reason in the job's history,
   and may grow the job again later.

Steps 2-6, and a loss during a recovery or during an expansion: :mod:`reshape.runtime.recovery`. On
MPICH, which has no usable ULFM, ``RESHAPE_INPLACE=1`` is refused at ``init()`` with one line on
every rank; use ``RESHAPE_CHECKPOINT`` there (the daemon restarts a job that lost a rank from its
last checkpoint).
"""

from __future__ import annotations

import contextlib
import pickle
import socket
import time
from dataclasses import dataclass, field

import numpy as np
from mpi4py import MPI

from reshape import mpiutil
from reshape.redistribution.schedule import make_plan
from reshape.runtime import ftcomm

__all__ = ["Buddies", "RankLost", "failure"]

TAG = 7300  # tags of the buddy messages: TAG + array index (values: TAG - 1)
TAG_RECOVER = 7400  # recovery transfers: TAG_RECOVER + transfer index
KEEP = 2  # copies of each kind kept


class RankLost(RuntimeError):
    """A recovery could not be made (no copy, no checkpoint, or a failure during the recovery)."""


def failure(e: BaseException) -> bool:
    """True for an MPI error that says a peer was lost or the communicator was revoked (ULFM)."""
    if not isinstance(e, MPI.Exception):
        return False
    # ERR_IN_STATUS: a Waitall of the program's with a lost peer among its requests; a recovery in which
    # no rank turns out lost re-raises it (recover)
    codes = {getattr(MPI, n, None) for n in ("ERR_PROC_FAILED", "ERR_PROC_FAILED_PENDING", "ERR_REVOKED",
                                             "ERR_IN_STATUS")}
    try:
        return e.Get_error_class() in codes
    except MPI.Exception:
        return False


def keepers(hosts: list[str], peers: list[set[int]] | None = None) -> list[int]:
    """``keepers(hosts, peers)[r]``: the rank that keeps rank ``r``'s blocks, the nearest rank before ``r``
    (cyclically) that is not one of its neighbours in the job's communication pattern (``peers[r]``: the
    ranks ``r`` exchanged messages with, either way) and is on another host; else the nearest that is no
    neighbour; else the nearest on another host; else ``r - 1``. A rank's neighbours are then never its
    only copy holders where the pattern allows it (a failure that takes a rank often takes the ranks
    blocked on it: docs/mpi.md)."""
    p = len(hosts)
    near = [set() for _ in range(p)]
    for r, ps in enumerate(peers or ()):
        for q in ps:
            if 0 <= q < p and q != r:
                near[r].add(q)
                near[q].add(r)
    out = []
    for r in range(p):
        before = [k % p for k in range(r - 1, r - p, -1)]
        tiers = ([k for k in before if k not in near[r] and hosts[k] != hosts[r]],
                 [k for k in before if k not in near[r]], [k for k in before if hosts[k] != hosts[r]])
        out.append(next((t[0] for t in tiers if t), (r - 1) % p))
    return out


@dataclass
class Copy:
    """A set of blocks of one rank at one iteration (own, or a partner's), and the values."""

    iteration: int
    blocks: dict[str, np.ndarray]
    values: bytes | None = None


@dataclass
class Buddies:
    """One rank's buddy copies (module docstring, step 3). Its methods are called by :class:`Resizer`."""

    every: int
    generation: object = None  # the communicator the copies belong to (a new one at each resize)
    size: int = 0
    keepers: list[int] = field(default_factory=list)
    own: list[Copy] = field(default_factory=list)  # newest last
    kept: dict[int, list[Copy]] = field(default_factory=dict)  # partner -> complete copies, newest last
    const_kept: dict[int, dict[str, np.ndarray]] = field(default_factory=dict)  # partner -> constant blocks
    _inflight: tuple[list[MPI.Request], dict[int, Copy], dict[int, dict[str, np.ndarray]]] | None = None
    dtypes: dict[str, np.dtype] = field(default_factory=dict)  # each array's dtype (set by the runtime)
    refreshes: int = 0
    recovered: bool = False  # a recovery just ended: its first copies travel while the job iterates again
    seconds: float = 0.0  # time spent posting and completing copies on this rank
    hosts: list[str] = field(default_factory=list)  # every rank's host, on this communicator
    placed: bool = False  # keepers chosen from the job's communication pattern too (refresh)

    def partners(self, me: int) -> list[int]:
        return [r for r, k in enumerate(self.keepers) if k == me and r != me]

    def poll(self, wait: bool = False) -> None:
        """Commit the copies in flight once they have all arrived (``wait``: wait for them)."""
        if self._inflight is None:
            return
        reqs, copies, consts = self._inflight
        if wait:
            mpiutil.wait_all(reqs)
        elif reqs and not MPI.Request.Testall(reqs):
            return
        self._inflight = None
        for r, c in copies.items():
            self.kept.setdefault(r, []).append(c)
            del self.kept[r][:-KEEP]
        for r, cs in consts.items():
            self.const_kept.setdefault(r, {}).update(cs)

    def abandon(self) -> None:
        """Forget the copies in flight on a revoked communicator (a recovery): ULFM completes their
        requests in error, which must not be taken for a new failure on the shrunk communicator."""
        if self._inflight is not None:
            with contextlib.suppress(MPI.Exception):
                MPI.Request.Testall(self._inflight[0])
            mpiutil.abandon(self._inflight[0])  # never freed while pending (mpiutil.abandon)
            self._inflight = None

    def due(self, rt) -> bool:
        return self.generation is not rt.comm or rt.iteration % self.every == 0

    def cover(self, rt, at: int) -> None:
        """At a resize point, before data moves: copies of the state to resume at ``at``, complete on every
        keeper (a rank lost in the resize then costs no iteration)."""
        self.refresh(rt, at)
        self.poll(wait=True)

    def refresh(self, rt, at: int | None = None) -> None:
        """Copy this rank's blocks and send them to its keeper; post the receives of its partners'.
        On a new communicator also one ``allgather`` of host names (collective); else messages only.
        ``at``: the iteration the copies resume at (default ``rt.iteration``)."""
        at = rt.iteration if at is None else at
        t0 = time.perf_counter()
        comm, me = rt.comm, rt.rank
        fresh = self.generation is not comm
        if fresh:
            self._inflight = None  # copies on an earlier communicator: never read again
            self.generation = None  # none of any size until the host names are in (a loss may end the allgather)
            self.own.clear()
            self.kept.clear()
            self.const_kept.clear()
            self.hosts = comm.allgather(socket.gethostname()) if comm.size > 1 else [socket.gethostname()]
            self.generation, self.size, self.placed = comm, comm.size, comm.size <= 2
            self.keepers = keepers(self.hosts)
        else:
            self.poll(wait=True)
            fresh = self.place(comm)
        names = sorted(rt.arrays)
        blocks = {}
        for n in names:
            reg = rt.arrays[n]
            if reg.local is not None:  # a constant array's block is never written: no copy needed
                blocks[n] = reg.local if reg.constant else np.array(reg.local, copy=True)
        self.dtypes.update({n: b.dtype for n, b in blocks.items()})
        self.own.append(Copy(at, blocks, pickle.dumps(rt.values, protocol=pickle.HIGHEST_PROTOCOL)))
        del self.own[:-KEEP]
        self.refreshes += 1
        if comm.size > 1:
            reqs: list[MPI.Request] = []
            keeper = self.keepers[me]
            for i, n in enumerate(names):
                if n in blocks and (fresh or not rt.arrays[n].constant):
                    reqs.append(comm.Isend(blocks[n], keeper, TAG + i))
            copies: dict[int, Copy] = {}
            consts: dict[int, dict[str, np.ndarray]] = {}
            for r in self.partners(me):
                c = copies[r] = Copy(at, {})
                for i, n in enumerate(names):
                    reg = rt.arrays[n]
                    lay = reg.rule(comm.size)
                    if (reg.constant and not fresh) or r >= lay.nprocs:
                        continue
                    buf = np.empty(lay.local_shape(r), dtype=self.dtypes.get(n, np.float64))
                    (consts.setdefault(r, {}) if reg.constant else c.blocks)[n] = buf
                    reqs.append(comm.Irecv(buf, r, TAG + i))
            self._inflight = (reqs, copies, consts)
            if fresh and not self.recovered:  # the first copies of a size (at the start, after a resize, with new
                self.poll(wait=True)  # keepers) are the only ones: complete them now, so that a loss is covered
        self.recovered = False
        self.seconds += time.perf_counter() - t0

    def place(self, comm) -> bool:
        """Once per communicator, at its first refresh after the program's steps ran on it: choose the keepers
        again from its communication pattern too (one ``allgather`` of each rank's peers, :func:`keepers`).
        True when they changed: the copies kept so far are dropped, and the next ones sent in full."""
        if self.placed:
            return False
        self.placed = True
        peers = comm.allgather(sorted(ftcomm.neighbours(comm)))
        new = keepers(self.hosts, [set(p) for p in peers])
        if new == self.keepers:
            return False
        self.keepers = new
        self.kept.clear()
        self.const_kept.clear()
        return True

    def holdings(self) -> dict:
        """What this rank can give a recovery: its own copies' iterations and, per partner, the
        iterations of the complete copies of it that it keeps."""
        return {"own": [c.iteration for c in self.own],
                "kept": {r: [c.iteration for c in cs] for r, cs in self.kept.items()}}

    def blocks(self, me_old: int, i: int, s: int, name: str) -> np.ndarray:
        """Old process ``i``'s block of ``name`` at iteration ``s``, as held here."""
        if i == me_old:
            return next(c for c in self.own if c.iteration == s).blocks[name]
        c = next(c for c in self.kept[i] if c.iteration == s)
        return c.blocks[name] if name in c.blocks else self.const_kept[i][name]

    def values(self, s: int) -> dict:
        return pickle.loads(next(c for c in self.own if c.iteration == s).values)


def choose(holdings: list[dict], olds: list[int], p: int, keepers_: list[int]) -> int | None:
    """The newest iteration every survivor has its own copy of and every lost rank's keeper keeps."""
    alive = {o: i for i, o in enumerate(olds)}
    common = set.intersection(*(set(h["own"]) for h in holdings)) if holdings else set()
    for s in sorted(common, reverse=True):
        ok = True
        for d in range(p):
            if d in alive:
                continue
            k = keepers_[d] if d < len(keepers_) else None
            if k is None or k not in alive or s not in holdings[alive[k]]["kept"].get(d, []):
                ok = False
                break
        if ok:
            return s
    return None


def move(comm, arrays: dict, p: int, q: int, holder: dict[int, int], blocks_of) -> dict[str, np.ndarray | None]:
    """Each array's blocks at layout ``rule(p)`` (block of old process ``i`` held by new rank
    ``holder[i]``, ``blocks_of(i, name)`` there) to layout ``rule(q)`` on ranks ``0..q-1``. Messages
    go straight from and into the blocks through MPI vector types, local pieces through strided views
    (as the redistribution engine does: :mod:`reshape.redistribution.runcopy`)."""
    from reshape.redistribution import nodecopy, runcopy
    from reshape.redistribution.redistribute import _Types

    me = comm.rank
    out: dict[str, np.ndarray | None] = {}
    tag = TAG_RECOVER
    for name in sorted(arrays):
        reg = arrays[name]
        old, new = reg.rule(p), reg.rule(q)
        dtype = None
        for i in range(old.nprocs):
            if holder[i] == me:
                dtype = blocks_of(i, name).dtype.str
                break
        dtype = np.dtype(next((d for d in comm.allgather(dtype) if d), "f8"))
        base = mpiutil.mpi_type(dtype)
        local = nodecopy.empty(new.local_shape(me), dtype) if me < new.nprocs else None
        plan = make_plan(old, new, tuple(range(old.nprocs)), tuple(range(new.nprocs)))
        types, reqs = _Types(), []
        try:
            for k, t in enumerate(plan.transfers):
                src = holder[t.src]
                if src == me and t.dst == me:
                    runcopy.copy(blocks_of(t.src, name), t.send, local, t.recv)
                elif src == me:
                    reqs.append(comm.Isend(types.buffer(blocks_of(t.src, name), t, base, 0), t.dst, tag + k))
                elif t.dst == me:
                    reqs.append(comm.Irecv(types.buffer(local, t, base, 1), src, tag + k))
            mpiutil.wait_all(reqs)
        finally:
            types.free()
        out[name] = local
        tag += len(plan.transfers) + 1
    return out
