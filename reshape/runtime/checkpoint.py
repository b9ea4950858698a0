"""Checkpoints of a job's registered arrays and values, written while it iterates, and a restart at any size.

``RESHAPE_CHECKPOINT=every:N`` (after every N iterations) or ``seconds:T``
(at the first iteration end T seconds after the last one), and
``RESHAPE_CHECKPOINT_DIR`` (default ``reshape-checkpoints``), or a job file's
``checkpoint`` and ``checkpoint_dir``. At an iteration's end (``rt.resize()``)
a due checkpoint copies every registered array's local block and every
value, and a helper thread of each rank writes its copy with h5py to
``DIR/ckpt-ITER.part/rank-R.h5`` while the job goes on. A checkpoint counts
only when every rank has written it: at a later iteration end the ranks
agree (one reduction) that their writes are complete, and rank 0 writes
``meta.json`` (the iteration to resume at, the size, each array's shape, dtype
and layout) and renames the directory to ``DIR/ckpt-ITER`` (one atomic
rename, in a helper thread of rank 0), then removes all but the last two complete ones. A checkpoint cut
off mid-write stays a ``.part`` directory and is never read. A write that
fails (disk full, permissions) is reported once and skipped; the job goes
on. Before a resize and at ``finish`` the pending checkpoint is completed
first, on the communicator that wrote it.

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

import importlib
import json
import os
import pickle
import shutil
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from reshape.joblink.jobenv import parse_every
from reshape.mpiutil import allreduce, bcast_obj
from reshape.redistribution.layout import Layout
from reshape.redistribution.schedule import make_plan

__all__ = ["Checkpointer", "Restored", "from_settings", "latest", "parse_every", "restore", "restored_array",
           "resume"]

KEEP = 2  # complete checkpoints kept
DEFAULT_DIR = "reshape-checkpoints"


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


@dataclass
class Checkpointer:
    """Periodic asynchronous checkpoints of one job (module docstring); every method is collective."""

    directory: str
    kind: str  # "every" | "seconds"
    interval: float
    job: str = ""
    _thread: threading.Thread | None = None
    _committer: threading.Thread | None = None  # rank 0's commit of the last checkpoint every rank wrote
    _pending: tuple[int, str, dict[str, Any]] | None = None  # (iteration to resume at, .part path, meta)
    _error: list[str] = field(default_factory=list)
    _last: float = field(default_factory=time.monotonic)
    written: list[int] = field(default_factory=list)  # iterations of the checkpoints committed here

    def at_iteration_end(self, rt) -> None:
        """``rt.resize()``'s first step: commit what every rank has written; start a due checkpoint."""
        self.settle(rt.comm)
        done = rt.iteration + 1  # iterations completed (rt.iterations counts on after resize())
        if self.due(rt.comm, done):
            self.start(rt.comm, done, rt.arrays, rt.values, done)

    def due(self, comm, done: int) -> bool:
        """Whether a checkpoint is due after ``done`` iterations (rank 0's clock decides ``seconds``)."""
        if self.kind == "every":
            return done > 0 and done % int(self.interval) == 0
        return bool(bcast_obj(comm, time.monotonic() - self._last >= self.interval if comm.rank == 0 else None))

    def start(self, comm, done: int, arrays: dict, values: dict, resume_at: int) -> None:
        """Copy every local block and value now; write them in a helper thread (one checkpoint in flight)."""
        self.settle(comm, wait=True)
        part = os.path.join(self.directory, _name(resume_at) + ".part")
        # every rank makes the directory (no barrier); a stale one of an attempt cut off at the same
        # iteration is written over, rank file by rank file, and is never read (no meta.json before commit)
        blocks = {n: np.array(a.local, copy=True) for n, a in arrays.items() if a.local is not None}
        meta = {"iteration": resume_at, "size": comm.size, "job": self.job, "time": time.time(),
                "arrays": {n: {"shape": list(a.layout.shape), "dtype": str(a.dist.dtype or a.local.dtype),
                               "layout": a.layout.describe()} for n, a in arrays.items()}}
        payload = pickle.dumps(values) if comm.rank == 0 else None
        self._error.clear()
        self._thread = threading.Thread(target=self._write, args=(part, comm.rank, blocks, payload),
                                        name="reshape-checkpoint", daemon=True)
        self._thread.start()
        self._pending = (resume_at, part, meta)
        self._last = time.monotonic()

    def forget(self) -> None:
        """Drop the checkpoint in flight (its ranks' communicator is gone: a rank was lost). Local."""
        if self._thread is not None:
            self._thread.join()
        self._pending = self._thread = None

    def _write(self, part: str, rank: int, blocks: dict[str, np.ndarray], payload: bytes | None) -> None:
        try:
            import h5py

            os.makedirs(part, exist_ok=True)
            with h5py.File(os.path.join(part, f"rank-{rank:05d}.h5"), "w") as f:
                for n, b in blocks.items():
                    f.create_dataset(n, data=b)
            if payload is not None:
                with open(os.path.join(part, "values.pkl"), "wb") as f:
                    f.write(payload)
        except Exception as e:  # reported at the next agreement; the job goes on
            self._error.append(f"{type(e).__name__}: {e}")

    def settle(self, comm, wait: bool = False) -> None:
        """Commit the checkpoint in flight once every rank has written it (``wait``: wait for that)."""
        if self._pending is None:
            return
        if wait and self._thread is not None:
            self._thread.join()
        # one reduction: 3 someone still writing, else 2 someone failed, else 1 every rank has written
        mine = 3.0 if self._thread is not None and self._thread.is_alive() else 2.0 if self._error else 1.0
        most = allreduce(comm, mine)
        if most == 3.0:
            return  # someone is still writing: ask again at the next iteration's end
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


def restore(comm, directory: str) -> Restored | None:
    """The newest complete checkpoint in ``directory``, read on rank 0 and shared (None: start afresh)."""
    got = None
    if comm.rank == 0:
        path = latest(directory)
        if path is not None:
            with open(os.path.join(path, "meta.json")) as f:
                meta = json.load(f)
            values = {}
            if os.path.exists(os.path.join(path, "values.pkl")):
                with open(os.path.join(path, "values.pkl"), "rb") as f:
                    values = pickle.load(f)  # written by this job's own rank 0 (the checkpoint directory is the job's)
            got = Restored(os.path.abspath(path), meta, values)
    return bcast_obj(comm, got)


def from_settings(comm, cfg, job_id: int, spawned: bool = False) -> Checkpointer | None:
    """The job's checkpointer from its checked settings (``RESHAPE_CHECKPOINT``), or None. A directory that
    cannot be made is the same :class:`reshape.runtime.checks.UsageError` on every rank. Collective, but
    for ranks spawned by a resize (the job checked the directory when it started)."""
    from reshape.joblink import jobenv as E
    from reshape.runtime.checks import agree

    if cfg.checkpoint is None:
        return None
    # h5py's import (40-200 ms) in the background, during the first iterations, not in the first write
    threading.Thread(target=importlib.import_module, args=("h5py",), name="reshape-h5py", daemon=True).start()
    directory = os.path.abspath(cfg.checkpoint_dir or DEFAULT_DIR)
    if spawned:
        return Checkpointer(directory, *cfg.checkpoint, job=str(job_id))
    problem = None
    try:
        os.makedirs(directory, exist_ok=True)
        if not os.access(directory, os.W_OK):
            problem = f"{E.CHECKPOINT_DIR}={directory!r}: not writable"
    except OSError as e:
        problem = f"{E.CHECKPOINT_DIR}={directory!r}: {e.strerror or e}"
    agree(comm, problem, "reshape.init()")
    return Checkpointer(directory, *cfg.checkpoint, job=str(job_id))


def resume(rt, cfg) -> None:
    """At a job's start: resume from the newest complete checkpoint of ``RESHAPE_CHECKPOINT_DIR`` (or, with
    ``RESHAPE_CHECKPOINT`` set, the default directory), if there is one."""
    if cfg.checkpoint_dir is None and cfg.checkpoint is None:
        return
    got = restore(rt.comm, os.path.abspath(cfg.checkpoint_dir or DEFAULT_DIR))
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
    from reshape.runtime.checks import agree
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

