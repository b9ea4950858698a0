"""In-place recovery's steps 2-6 (:mod:`reshape.runtime.inplace`): shrink, rebuild, rewind, tell; and the
losses that strike while one runs.

:func:`recover` runs on every survivor once :meth:`reshape.runtime.Resizer.run` caught a lost rank:
it shrinks the job's communicator, rebuilds every registered array and value at the newest iteration
the survivors can (the buddy copies, else the newest checkpoint), rewinds to it and tells the
scheduler. Two losses that used to end the job are recovered too:

* **A loss during a recovery** (a survivor dies while the blocks move, say). ULFM reports it to some
  survivors and not to others, so the rebuilt state is taken only once every survivor agrees that it
  got there (``MPIX_Comm_agree``, whose outcome ULFM makes the same on every survivor); else the
  shrunk communicator is revoked and the recovery starts over from a new shrink of the job's
  communicator, with the ranks lost meanwhile counted among the lost (up to :data:`ATTEMPTS` times).
* **A loss during an expansion** (a running rank, or one of the new ranks, dies while the blocks move
  to the new ranks). The expansion is undone: the new ranks leave (:func:`leave_expansion`), and the
  running ranks that survive rebuild the state of the resize point, where every keeper holds a
  complete copy (:meth:`Buddies.cover`), on themselves. The scheduler hears ``lost`` from the size
  before the expansion, which abandons the expansion and frees its slots. An expansion that ended is
  followed at once by complete copies at the new size; a loss in between uses the checkpoint.

Per-iteration-deterministic programs give bit for bit the result of a run that never failed.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from dataclasses import dataclass, field

import numpy as np
from mpi4py import MPI

from reshape import faults, mpiutil
from reshape.runtime import ftcomm
from reshape.runtime.inplace import RankLost, choose, failure, move

__all__ = ["ATTEMPTS", "Expanding", "leave_expansion", "recover"]

ATTEMPTS = 4  # shrinks one recovery may take (each after a further loss)


@dataclass
class Expanding:
    """An expansion under way in a job with in-place recovery: what a loss during it goes back to."""

    size: int  # the running ranks before it
    rank: int  # this rank's place among them
    generation: object  # their communicator (the buddy copies' generation)
    merged: MPI.Intracomm | None = None  # the running ranks and the new ones (running ranks first), once merged


@dataclass
class Rebuilt:
    """What a recovery rebuilt, before every survivor agreed to take it."""

    iteration: int
    source: str
    lost: list[int]
    olds: list[int]
    dists: dict = field(default_factory=dict)
    values: dict = field(default_factory=dict)
    data_seconds: float = 0.0
    rewound: int = 0  # iterations run again
    restarts: int = 0  # times the recovery started over after a further loss


def _revoke(comm) -> None:
    with contextlib.suppress(MPI.Exception):
        comm.Revoke()  # the others' next call on it fails too


def leave_expansion(merged: MPI.Intracomm) -> None:
    """A new rank of an expansion that lost a rank: take part in the running ranks' shrink of the merged
    communicator and in their split, which leaves this rank out, then exit (status 0, without
    ``MPI_Finalize``: docs/mpi.md). Does not return."""
    _revoke(merged)
    with contextlib.suppress(MPI.Exception):
        merged.Shrink().Split(MPI.UNDEFINED, 0)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def recover(rt, err: BaseException, agreed: bool = False) -> None:
    """Recover job ``rt`` in place from the lost ranks behind ``err`` (module docstring); :class:`RankLost`
    when nothing can be recovered. ``agreed``: this rank took part in the agreement that ends
    :meth:`Resizer.run`'s loop on the job's communicator (which this recovery's own agreement on it
    stands for on the ranks that did not get there)."""
    t0, wall = time.perf_counter(), time.time()
    exp, rt._expanding = rt._expanding, None
    if exp is not None and exp.merged is None:
        exp = None  # lost before the new ranks merged: the running ranks' communicator is still the job's
    old = exp.merged if exp is not None else rt.comm
    p = exp.size if exp is not None else old.size
    ftcomm.abandon_posted()  # the program's requests an error left pending are never freed
    _revoke(old)
    mpiutil.watch(None)  # rt.comm is the revoked one until the recovery ends
    if exp is None and not agreed:
        _agree(old, 0)  # a rank that finished the loop meanwhile learns of the recovery (Resizer._leave_loop)
    for attempt in range(1, ATTEMPTS + 1):
        new = old.Shrink()
        new.Set_errhandler(MPI.ERRORS_RETURN)
        t_shrunk = time.perf_counter()
        got = None
        try:
            if exp is not None:  # the new ranks leave (leave_expansion); the running ones go on, in their order
                whole, new = new, new.Split(0, exp.rank)
                whole.Free()
                new.Set_errhandler(MPI.ERRORS_RETURN)
            faults.hit("recover", new.rank, new.size)
            got = _rebuild(rt, old, new, exp, err)
        except Exception as e:
            if not failure(e):
                raise
            _revoke(new)  # the survivors still in the rebuild's calls on it fail too, and come to agree
            err = e
        if _agree(new, int(got is not None)):  # every survivor rebuilt the same state, or every one starts over
            break
        _revoke(new)
        with contextlib.suppress(MPI.Exception):
            new.Free()
        if attempt == ATTEMPTS:
            raise RankLost(f"ranks kept being lost while recovering ({ATTEMPTS} attempts; "
                           f"{type(err).__name__}: {err})") from err
    got.restarts = attempt - 1
    faults.hit("recovered", new.rank, new.size)
    _apply(rt, old, new, got, exp is not None)
    _tell(rt, p, new, got, exp, (time.perf_counter() - t0, t_shrunk - t0, got.data_seconds), wall)


def _agree(comm, flag: int) -> int:
    """``MPIX_Comm_agree(comm, flag)``: the AND of every survivor's flag, the same on all of them; 0 where a
    member failed before it took part (ULFM raises ``MPI_ERR_PROC_FAILED`` on every survivor then)."""
    try:
        return int(comm.Agree(flag))
    except Exception as e:
        if not failure(e):
            raise
        return 0


def _rebuild(rt, old, new, exp: Expanding | None, err: BaseException) -> Rebuilt:
    """The survivors' state at the newest iteration they can recover (collective over ``new``): the
    arrays at their layouts on ``new.size`` ranks and the values; nothing of ``rt`` changes."""
    from reshape.runtime.darray import DistArray

    p, me_old = (exp.size, exp.rank) if exp is not None else (old.size, old.rank)
    q = new.size
    olds = new.allgather(me_old)
    lost = sorted(set(range(p)) - set(olds))
    if not lost and exp is None:  # an MPI error that was no lost rank
        raise RankLost(f"{type(err).__name__}: {err} (no rank of the job was lost)") from err
    b = rt._buddies
    usable = b is not None and b.generation is (exp.generation if exp is not None else old)
    holdings = new.allgather(b.holdings() if usable else {"own": [], "kept": {}})
    s = choose(holdings, olds, p, b.keepers) if usable else None
    if s is None:
        return _from_checkpoint(rt, new, lost, olds, p, usable, err)
    alive = {o: i for i, o in enumerate(olds)}
    holder = {i: alive[i] if i in alive else alive[b.keepers[i]] for i in range(p)}
    t = time.perf_counter()
    moved = move(new, rt.arrays, p, q, holder, lambda i, name: b.blocks(me_old, i, s, name))
    values = new.bcast(b.values(s) if new.rank == 0 else None, 0)
    dists = {}
    for name, reg in rt.arrays.items():
        lay = reg.rule(q)
        dists[name] = DistArray(lay, moved[name], new, tuple(range(lay.nprocs)))
    return Rebuilt(s, "buddy copies", lost, olds, dists, values, time.perf_counter() - t)


def _from_checkpoint(rt, new, lost: list[int], olds: list[int], p: int, usable: bool,
                     err: BaseException) -> Rebuilt:
    """Where no buddy copy covers the lost ranks: the newest complete checkpoint, read in place."""
    from reshape.runtime import checkpoint

    got, refused = None, ""
    if rt._ckpt is not None:
        rt._ckpt.forget()
        try:
            got = checkpoint.restore(new, rt._ckpt.directory)
        except checkpoint.Refused as e:
            refused = f" ({e})"
    if got is None:
        why = (f"rank{'s' * (len(lost) > 1)} {', '.join(map(str, lost))} of {p} lost "
               f"({type(err).__name__}: {err}); no buddy copy {'survived' if usable else 'of this size yet'} "
               f"and no checkpoint to recover from{refused}")
        raise RankLost(why)
    dists = {}
    for name, reg in rt.arrays.items():
        local = reg.local
        dt = new.allgather(local.dtype.str if local is not None else "")
        dtype = np.dtype(next((d for d in dt if d), "f8"))
        dists[name] = checkpoint.restored_array(got, new, name, reg.layout.shape, dtype, reg.rule)
    return Rebuilt(int(got.meta["iteration"]), f"checkpoint {got.path}", lost, olds, dists, got.values)


def _apply(rt, old, new, got: Rebuilt, expansion: bool) -> None:
    """Make the agreed state the job's: its communicator, arrays, values and iteration (local)."""
    if rt._ckpt is not None:
        rt._ckpt.forget()
    b = rt._buddies
    if b is not None:
        b.abandon()
        b.recovered = True
    if not expansion:  # an expansion's merged communicator is left: sends to the new ranks may still be pending
        with contextlib.suppress(MPI.Exception):
            old.Free()
    rt.comm = new
    mpiutil.watch(rt)
    for name, reg in rt.arrays.items():
        reg.dist = got.dists[name]
    rt.values.clear()
    rt.values.update(got.values)
    got.rewound = max(0, rt.iteration - got.iteration)  # at a resize point the step of rt.iteration is done
    rt.iteration = got.iteration
    keys, q = rt._job.keys, new.size
    rt._job.keys = [keys[o] for o in got.olds] if all(o < len(keys) for o in got.olds) else [(0, r) for r in range(q)]
    rt._times.clear()
    rt._last_redist = None
    rt._pending_join = None
    if not rt.history or rt.history[-1] != q:
        rt.history.append(q)


def _tell(rt, p: int, new, got: Rebuilt, exp: Expanding | None, times: tuple[float, float, float],
          wall: float) -> None:
    """Record the recovery, say it (rank 0 of the survivors) and tell the scheduler ``lost``."""
    from reshape.runtime.results import ResizeResult

    parts = np.array(times)
    try:
        new.Allreduce(np.array(times), parts, op=MPI.MAX)
    except Exception as e:  # a survivor lost since the agreement: this rank's own times; the job's next call
        if not failure(e):  # on the communicator fails on every rank, and the next recovery takes it
            raise
        parts = np.array(times)
        _revoke(new)
    secs, q, lost = float(parts[0]), new.size, got.lost
    what = f"lost rank{'s' * (len(lost) > 1)} {', '.join(map(str, lost))} of {p}" if lost else "lost a new rank"
    if exp is not None:
        what += f" during an expansion from {p} (undone)"
    if got.restarts:
        what += f" (the recovery started over {got.restarts} time{'s' * (got.restarts > 1)}: a rank was lost during it)"
    reason = f"{what}; resumed at iteration {got.iteration} from {got.source}"
    rt.results.append(ResizeResult("lost", p, q, secs, reason=reason))
    rt.recoveries.append({"old": p, "new": q, "lost": lost, "iteration": got.iteration, "rewound": got.rewound,
                          "source": got.source, "seconds": secs, "shrink_seconds": float(parts[1]),
                          "data_seconds": float(parts[2]), "failed_seen_at": wall, "expansion": exp is not None,
                          "restarts": got.restarts})
    if new.rank != 0:
        return
    say(f"{reason} ({secs:.3f} s: revoke and shrink {parts[1]:.3f} s, data {parts[2]:.3f} s; {got.rewound} "
        f"iteration{'s' * (got.rewound != 1)} to run again); continuing on {q} process{'es' * (q > 1)} at "
        f"{time.time():.3f}")
    if rt.advisor is None:  # rank 0 was lost: this rank speaks to the scheduler from now on
        from reshape.joblink.advice import advisor_from_env

        try:
            rt.advisor = advisor_from_env()
        except Exception as e:
            say(f"cannot reach the scheduler after losing rank 0: {e}")
    tell = getattr(rt.advisor, "lost", None)
    if tell is not None:
        try:
            tell(p, q, lost, reason, secs)
        except Exception as e:
            say(f"advisor error after a lost rank: {e}")


def say(text: str) -> None:
    print(f"[reshape] {text}", file=sys.stderr, flush=True)
