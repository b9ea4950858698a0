"""Checkpoints of a job's registered arrays and values, written while it iterates, and a restart at any size.

``RESHAPE_CHECKPOINT=every:N`` (after every N iterations), ``seconds:T`` (at the
first iteration end T seconds after the last one) or ``auto`` (by measured cost:
at the first iteration end, then once the iterations since the last checkpoint
started take :data:`AUTO_FACTOR` times what it cost the slowest rank (its copy,
its writer thread, the wait for it), and at least :data:`AUTO_MIN_SECONDS`: at
most about 2% of the run; the ranks count it in iterations from figures they
agree on when the checkpoint is committed, so no message decides it), and
``RESHAPE_CHECKPOINT_DIR`` (default ``reshape-checkpoints``), or a job file's
``checkpoint`` and ``checkpoint_dir``. At an iteration's end (``rt.resize()``)
a due checkpoint copies every registered array's local block and every
value, and a helper thread of each rank writes its copy with h5py to
``DIR/ckpt-ITER.part/rank-R.h5`` while the job goes on. A checkpoint counts
only when every rank has written it: at a later iteration end the ranks
agree (one reduction) that their writes are complete, and rank 0 writes
``meta.json`` (the iteration to resume at, the size, each array's shape, dtype
and layout, the values) and renames the directory to ``DIR/ckpt-ITER`` (one atomic
rename, in a helper thread of rank 0), then removes all but the last two complete ones. A checkpoint cut
off mid-write stays a ``.part`` directory and is never read. A write that
fails (disk full, permissions) is reported once and skipped; the job goes
on. Before a resize and at ``finish`` the pending checkpoint is completed
first, on the communicator that wrote it. What is written, and what is trusted
when it is read back (no pickle; only the job's user's directories and files):
:mod:`reshape.runtime.ckptfiles`.

**The fallback of in-place recovery.** With ``RESHAPE_INPLACE=1`` and no
``RESHAPE_CHECKPOINT``, checkpoints are ``auto``: in ``RESHAPE_CHECKPOINT_DIR``
if set, else in a directory of the run's own under ``reshape-checkpoints``
(``run-TIME-PID``), removed when the job finishes and never resumed from at a
later start; they serve a recovery whose lost ranks' buddy copies were lost too
(:mod:`reshape.runtime.inplace`).

**Moldable restart.** A job that starts where ``DIR`` holds a complete
checkpoint resumes from the newest one, at whatever size it starts with:
``rt.iteration`` continues at the checkpoint's, values come back, and each
array registered under a checkpointed name is filled from the blocks of the
ranks that wrote it (the redistribution plan from the checkpoint's layout,
at its size, to the layout at the new size: :func:`reshape.redistribution.schedule.make_plan`)
instead of its ``init``. The program must register it with the same shape,
dtype and layout rule (checked on every rank).
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import json
import math
import os
import shutil
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from reshape.joblink.jobenv import CHECKPOINT_AUTO_FACTOR as AUTO_FACTOR
from reshape.joblink.jobenv import parse_every
from reshape.mpiutil import allreduce, bcast_obj
from reshape.redistribution.layout import Layout
from reshape.redistribution.schedule import make_plan
from reshape.runtime import ckptfiles
from reshape.runtime.checks import agree

__all__ = ["AUTO_FACTOR", "AUTO_MIN_SECONDS", "Checkpointer", "Refused", "Restored", "from_settings", "latest",
           "parse_every", "restore", "restored_array", "resume"]

KEEP = 2  # complete checkpoints kept
DEFAULT_DIR = "reshape-checkpoints"
AUTO_MIN_SECONDS = 1.0  # ... and at least this long after it


class Refused(ValueError):
    """A checkpoint that must not be read (another user's, the old pickle format; the message says which)."""


def _name(iteration: int) -> str:
    return f"ckpt-{iteration:08d}"


def latest(directory: str) -> str | None:
    """The newest complete checkpoint in ``directory`` (one with ``meta.json``), or None."""
    try:
        names = sorted(n for n in os.listdir(directory) if n.startswith("ckpt-") and not n.endswith(".part"))
    except OSError:
        return None
    for n in reversed(names):
        if os.path.exists(os.path.join(directory, n, "meta.json")):
            return os.path.join(directory, n)
    return None


@dataclass
class Restored:
    """A complete checkpoint being resumed from (``meta.json`` and the values), the same on every rank."""

    path: str
    meta: dict[str, Any]
    values: dict[str, Any]

    def fill(self, name: str, old: Layout, new: Layout, rank: int, local: np.ndarray) -> None:
        """Fill ``local`` (this rank's block at layout ``new``) from the blocks written at layout ``old``."""
        import h5py  # only where checkpoints are read or written: a job's start does not pay for it

        plan = make_plan(old, new, tuple(range(old.nprocs)), tuple(range(new.nprocs)))
        for t in plan.transfers:
            if t.dst != rank:
                continue
            with h5py.File(os.path.join(self.path, f"rank-{t.src:05d}.h5"), "r") as f:
                block = f[name][...]
            local[np.ix_(*(r.index() for r in t.recv))] = block[np.ix_(*(r.index() for r in t.send))]


@functools.cache
def _h5py_import() -> threading.Thread:
    """h5py's import (40-200 ms) in the background, started once per process: during the first iterations,
    not in the first write."""
    t = threading.Thread(target=importlib.import_module, args=("h5py",), name="reshape-h5py", daemon=True)
    t.start()
    return t


@dataclass
class Checkpointer:
    """Periodic asynchronous checkpoints of one job (module docstring); every method is collective."""

    directory: str
    kind: str  # "every" | "seconds" | "auto"
    interval: float
    job: str = ""
    own: bool = False  # the fallback's own directory: removed at finish (module docstring)
    _thread: threading.Thread | None = None
    _committer: threading.Thread | None = None  # rank 0's commit of the last checkpoint every rank wrote
    _pending: tuple[int, str, dict[str, Any]] | None = None  # (iteration to resume at, .part path, meta)
    _error: list[str] = field(default_factory=list)
    _last: float = field(default_factory=time.monotonic)
    _copy: float = 0.0  # seconds the checkpoint in flight took this rank's main thread
    _wrote: float = 0.0  # seconds its writer thread took (h5py's import aside)
    cost: float | None = None  # what the last checkpoint cost the slowest rank (seconds; "auto" spaces them by it)
    next_at: int = 1  # "auto": the iteration count after which the next one is due (the same on every rank)
    _done: int = 0  # iterations completed at the last iteration end
    _started_at: int = 0  # ... when the checkpoint in flight started
    _prev_end: float | None = None  # when the last iteration ended (monotonic)
    _iter_time: float = 0.0  # seconds an iteration takes here (smoothed)
    written: list[int] = field(default_factory=list)  # iterations of the checkpoints committed here

    def at_iteration_end(self, rt) -> None:
        """``rt.resize()``'s first step: commit what every rank has written; start a due checkpoint."""
        now = time.monotonic()
        if self._prev_end is not None:
            dt = now - self._prev_end
            self._iter_time = dt if not self._iter_time else 0.7 * self._iter_time + 0.3 * dt
        self._prev_end = now
        self._done = done = rt.iteration + 1  # iterations completed (rt.iterations counts on after resize())
        self.settle(rt.comm)
        if self.due(rt.comm, done):
            self.start(rt.comm, done, rt.arrays, rt.values, done)

    def due(self, comm, done: int) -> bool:
        """Whether a checkpoint is due after ``done`` iterations (rank 0's clock decides ``seconds``; ``every``
        and ``auto`` decide from what every rank knows alike, with no message)."""
        if self.kind == "every":
            return done > 0 and done % int(self.interval) == 0
        if self.kind == "auto":
            return self._pending is None and done >= self.next_at
        if comm.rank != 0:
            return bool(bcast_obj(comm, None))
        return bool(bcast_obj(comm, time.monotonic() - self._last >= self.interval))

    def _schedule(self, cost: float, iter_time: float) -> None:
        """``auto``: the next checkpoint once ``interval`` times ``cost`` seconds (at least AUTO_MIN_SECONDS) of
        iterations of ``iter_time`` seconds have passed since the last one started (slowest rank's figures)."""
        gap = max(self.interval * cost, AUTO_MIN_SECONDS)
        steps = math.ceil(gap / iter_time) if iter_time > 0 else 1
        self.next_at = max(self._done + 1, self._started_at + max(1, steps))

    def start(self, comm, done: int, arrays: dict, values: dict, resume_at: int) -> None:
        """Copy every local block and value now; write them in a helper thread (one checkpoint in flight).
        A value a checkpoint cannot hold is the same :class:`reshape.runtime.checks.UsageError` on every rank."""
        self.settle(comm, wait=True)
        t0 = time.perf_counter()
        part = os.path.join(self.directory, _name(resume_at) + ".part")
        # every rank makes the directory (no barrier); a stale one of an attempt cut off at the same
        # iteration is written over, rank file by rank file, and is never read (no meta.json before commit)
        tree, extra, problem = None, {}, None
        if comm.rank == 0:
            try:
                tree, extra = ckptfiles.encode(values)
            except ckptfiles.ValueRefused as e:
                problem = str(e)
        agree(comm, problem, f"checkpoint at iteration {resume_at}")
        blocks = {n: np.array(a.local, copy=True) for n, a in arrays.items() if a.local is not None}
        extra = {k: np.array(v, copy=True) for k, v in extra.items()}
        meta = {"iteration": resume_at, "size": comm.size, "job": self.job, "time": time.time(),
                "arrays": {n: {"shape": list(a.layout.shape), "dtype": str(a.dist.dtype or a.local.dtype),
                               "layout": a.layout.describe()} for n, a in arrays.items()}, "values": tree}
        self._error.clear()
        self._thread = threading.Thread(target=self._write, args=(part, comm.rank, blocks, extra),
                                        name="reshape-checkpoint", daemon=True)
        self._thread.start()
        self._pending = (resume_at, part, meta)
        self._last = time.monotonic()
        self._started_at = done
        self._copy = time.perf_counter() - t0

    def forget(self) -> None:
        """Drop the checkpoint in flight (its ranks' communicator is gone: a rank was lost). Local."""
        if self._thread is not None:
            self._thread.join()
        self._pending = self._thread = None

    def _write(self, part: str, rank: int, blocks: dict[str, np.ndarray], extra: dict[str, np.ndarray]) -> None:
        try:
            import h5py

            t0 = time.perf_counter()
            problem = ckptfiles.make_dir(self.directory) or ckptfiles.make_dir(part)
            if problem:
                raise OSError(problem)
            with h5py.File(os.path.join(part, f"rank-{rank:05d}.h5"), "w") as f:
                for n, b in blocks.items():
                    f.create_dataset(n, data=b)
            if rank == 0:
                ckptfiles.write_arrays(part, extra)
            self._wrote = time.perf_counter() - t0
        except Exception as e:  # reported at the next agreement; the job goes on
            self._error.append(f"{type(e).__name__}: {e}")

    def settle(self, comm, wait: bool = False) -> None:
        """Commit the checkpoint in flight once every rank has written it (``wait``: wait for that)."""
        if self._pending is None:
            return
        t0 = time.perf_counter()
        if wait and self._thread is not None:
            self._thread.join()
        # one reduction: 3 someone still writing, else 2 someone failed, else 1 every rank has written; and the
        # slowest rank's cost of this checkpoint (its copy, its writer thread, this wait)
        mine = 3.0 if self._thread is not None and self._thread.is_alive() else 2.0 if self._error else 1.0
        most, cost, iter_time = allreduce(comm, np.array([mine, self._copy + self._wrote + time.perf_counter() - t0,
                                                          self._iter_time]))
        if most == 3.0:
            return  # someone is still writing: ask again at the next iteration's end
        self.cost = float(cost)
        if self.kind == "auto":
            self._schedule(self.cost, float(iter_time))
        resume_at, part, meta = self._pending
        self._pending = self._thread = None
        if comm.rank == 0:
            # rank 0 commits in the background too (meta.json, the rename, pruning): not on the job's path
            self._join_commit()
            self._committer = threading.Thread(target=self._commit, args=(resume_at, part, meta, most == 2.0),
                                               name="reshape-checkpoint-commit", daemon=True)
            self._committer.start()
        if wait:
            self._join_commit()

    def at_exit(self) -> None:
        """At the exit of a program that skipped ``finish()``: wait for this rank's writer and commit threads
        and h5py's import (local, no MPI). A daemon thread frozen inside h5py at the interpreter's end holds
        h5py's global lock, and the main thread's last deallocations then wait on it forever (the job never
        exits). The checkpoint in flight is not committed: no agreement is possible here; it stays a ``.part``."""
        for t in (self._thread, self._committer, _h5py_import()):
            if t is not None:
                t.join()

    def _join_commit(self) -> None:
        if self._committer is not None:
            self._committer.join()
            self._committer = None

    def _commit(self, resume_at: int, part: str, meta: dict[str, Any], failed: bool) -> None:
        if failed:
            why = "; ".join(self._error) or "a rank failed"
            print(f"[reshape] checkpoint at iteration {resume_at} not written ({why}); the job goes on "
                  "without it", file=sys.stderr, flush=True)
            shutil.rmtree(part, ignore_errors=True)
            return
        try:
            with open(os.path.join(part, "meta.json"), "w") as f:
                json.dump(meta, f)
            final = part[:-len(".part")]
            shutil.rmtree(final, ignore_errors=True)
            os.rename(part, final)  # the checkpoint counts from here on
        except OSError as e:
            print(f"[reshape] checkpoint at iteration {resume_at} not committed ({e}); the job goes on "
                  "without it", file=sys.stderr, flush=True)
            return
        self.written.append(resume_at)
        self._prune()

    def _prune(self) -> None:
        names = sorted(n for n in os.listdir(self.directory) if n.startswith("ckpt-") and not n.endswith(".part"))
        for n in names[:-KEEP]:
            shutil.rmtree(os.path.join(self.directory, n), ignore_errors=True)

    def close(self, comm) -> None:
        """At ``finish``: complete the checkpoint in flight, say what the checkpoints cost (rank 0), remove the
        fallback's own directory. Collective."""
        self.settle(comm, wait=True)
        self._join_commit()  # a commit settled at an earlier iteration end may still be renaming its directory
        if comm.rank == 0 and self.written:
            every = {"every": f"every {self.interval:g} iterations", "seconds": f"every {self.interval:g} s",
                     "auto": f"auto: {self.interval:g}x their cost, at least {AUTO_MIN_SECONDS:g} s apart"}[self.kind]
            print(f"[reshape] checkpoints: {len(self.written)} written ({every}), the last cost "
                  f"{self.cost or 0.0:.3f} s on the slowest rank", file=sys.stderr, flush=True)
        if self.own and comm.rank == 0:
            shutil.rmtree(self.directory, ignore_errors=True)
            with contextlib.suppress(OSError):  # reshape-checkpoints itself, if no other run uses it
                os.rmdir(os.path.dirname(self.directory))


def restore(comm, directory: str) -> Restored | None:
    """The newest complete checkpoint in ``directory``, read on rank 0 and shared (None: start afresh).
    :class:`Refused` on every rank for a directory or checkpoint that must not be read (ckptfiles)."""
    got, problem = None, None
    if comm.rank == 0:
        problem = ckptfiles.dir_problem(directory)
        path = latest(directory) if problem is None else None
        if path is not None:
            problem = ckptfiles.checkpoint_problem(path)
            if problem is None:
                try:
                    meta, values = ckptfiles.read_meta(path)
                    got = Restored(os.path.abspath(path), meta, values)
                except (OSError, ValueError) as e:
                    problem = f"checkpoint {path} cannot be read: {e}"
    got, problem = bcast_obj(comm, (got, problem))
    if problem:
        raise Refused(problem)
    return got


def from_settings(comm, cfg, job_id: int, spawned: bool = False, directory: str | None = None,
                  ) -> Checkpointer | None:
    """The job's checkpointer from its checked settings (``RESHAPE_CHECKPOINT``; with ``RESHAPE_INPLACE=1``
    and none, the ``auto`` fallback), or None. A directory that cannot be used is the same
    :class:`reshape.runtime.checks.UsageError` on every rank. Collective, but for ranks spawned by a resize
    (``directory``: the running job's, which it checked when it started)."""
    from reshape.joblink import jobenv as E

    setting, own = cfg.checkpoint, False
    if setting is None and cfg.inplace:
        setting, own = ("auto", AUTO_FACTOR), cfg.checkpoint_dir is None
    if setting is None:
        return None
    _h5py_import()
    if spawned:
        return Checkpointer(directory or os.path.abspath(cfg.checkpoint_dir or DEFAULT_DIR), *setting,
                            job=str(job_id), own=False)
    directory = os.path.abspath(cfg.checkpoint_dir or DEFAULT_DIR)
    problem = ckptfiles.make_dir(directory) if comm.rank == 0 or not own else None
    if own:  # a directory of this run's own inside it, named by rank 0
        name = f"run-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}" if comm.rank == 0 else None
        directory = os.path.join(directory, bcast_obj(comm, name))
        if comm.rank == 0 and problem is None:
            problem = ckptfiles.make_dir(directory)
    agree(comm, f"{E.CHECKPOINT_DIR}={cfg.checkpoint_dir or DEFAULT_DIR!r}: {problem}" if problem else None,
          "reshape.init()")
    return Checkpointer(directory, *setting, job=str(job_id), own=own)


def resume(rt, cfg) -> None:
    """At a job's start: resume from the newest complete checkpoint of ``RESHAPE_CHECKPOINT_DIR`` (or, with
    ``RESHAPE_CHECKPOINT`` set, the default directory), if there is one. A checkpoint or directory that must
    not be read is the same :class:`reshape.runtime.checks.UsageError` on every rank."""
    from reshape.joblink import jobenv as E

    if cfg.checkpoint_dir is None and cfg.checkpoint is None:
        return
    try:
        got = restore(rt.comm, os.path.abspath(cfg.checkpoint_dir or DEFAULT_DIR))
    except Refused as e:
        agree(rt.comm, f"{E.CHECKPOINT_DIR}={cfg.checkpoint_dir or DEFAULT_DIR!r}: {e}", "reshape.init()")
        raise  # not reached: agree raised
    if got is None:
        return
    rt._restored = got
    rt.iteration = int(got.meta["iteration"])
    rt.values.update(got.values)
    if rt.rank == 0:
        print(f"[reshape] resuming at iteration {rt.iteration} from {got.path} (written on {got.meta['size']} "
              f"processes; now {rt.size})", file=sys.stderr, flush=True)


def restored_array(got: Restored, comm, name: str, shape, dtype, rule):
    """A registered array filled from checkpoint ``got`` at the layout ``rule`` gives at this size (collective)."""
    from reshape.redistribution import nodecopy
    from reshape.runtime.darray import DistArray

    saved = got.meta["arrays"][name]
    old, new = rule(int(got.meta["size"])), rule(comm.size)
    problem = None
    if list(saved["shape"]) != [int(s) for s in shape] or np.dtype(saved["dtype"]) != np.dtype(dtype):
        problem = (f"array {name!r}: the checkpoint holds shape {tuple(saved['shape'])} {saved['dtype']}, the "
                   f"program registers {tuple(shape)} {np.dtype(dtype)}")
    elif old.describe() != saved["layout"]:
        problem = f"array {name!r}: the checkpoint's layout {saved['layout']} is not the program's {old.describe()}"
    agree(comm, problem, f"resuming from {got.path}")
    local = nodecopy.empty(new.local_shape(comm.rank), np.dtype(dtype)) if comm.rank < new.nprocs else None
    if local is not None:
        got.fill(name, old, new, comm.rank, local)
    return DistArray(new, local, comm, tuple(range(new.nprocs)))

