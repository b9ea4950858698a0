"""The two baselines the circulant engine is measured against (Sudarsan & Ribbens 2007 §4.1.3).

* :func:`alltoallv`: packs per-destination buffers, one ``MPI_Alltoallv``,
  unpacks.
* :func:`checkpoint`: the paper's file-based baseline. Every block goes to one
  node, which writes the whole array to an HDF5 file, fsyncs it, reads it back
  and sends every new block out.

Both are blocking and are reached through :func:`reshape.redistribution.redistribute.redistribute`
(``method=``), which validates the arguments first.
"""

from __future__ import annotations

import os
import tempfile

import numpy as np
from mpi4py import MPI

from reshape.mpiutil import check_collectively, mpi_type, wait_all
from reshape.redistribution.runcopy import copy, packed
from reshape.redistribution.schedule import Plan, Transfer

__all__ = ["alltoallv", "checkpoint"]


def _pack(arr: np.ndarray, t: Transfer, buf: np.ndarray) -> None:
    shape = tuple(r.total for r in t.send)
    copy(arr, t.send, buf.reshape(shape), tuple(packed(r) for r in t.recv))


def _unpack(arr: np.ndarray, t: Transfer, buf: np.ndarray) -> None:
    shape = tuple(r.total for r in t.recv)
    copy(buf.reshape(shape), tuple(packed(r) for r in t.send), arr, t.recv)


def alltoallv(comm: MPI.Comm, plan: Plan, src_local, out, dtype: np.dtype) -> None:
    """Pack per destination, one ``MPI_Alltoallv``, unpack: the textbook one-shot exchange."""
    me, n = comm.rank, comm.size
    base = mpi_type(dtype)
    sends = sorted((t for t in plan.transfers if t.src == me), key=lambda t: t.dst)
    recvs = sorted((t for t in plan.transfers if t.dst == me), key=lambda t: t.src)
    scount = np.zeros(n, dtype=np.int64)
    rcount = np.zeros(n, dtype=np.int64)
    for t in sends:
        scount[t.dst] = t.count
    for t in recvs:
        rcount[t.src] = t.count
    sdisp = np.concatenate(([0], np.cumsum(scount)[:-1]))
    rdisp = np.concatenate(([0], np.cumsum(rcount)[:-1]))
    sbuf = np.empty(int(scount.sum()), dtype=dtype)
    for t in sends:
        _pack(src_local, t, sbuf[sdisp[t.dst] : sdisp[t.dst] + t.count])
    rbuf = np.empty(int(rcount.sum()), dtype=dtype)
    comm.Alltoallv([sbuf, (scount, sdisp), base], [rbuf, (rcount, rdisp), base])
    for t in recvs:
        _unpack(out, t, rbuf[rdisp[t.src] : rdisp[t.src] + t.count])


def checkpoint(comm: MPI.Comm, plan: Plan, src_local, out, dtype: np.dtype, root: int, directory, tag: int) -> None:
    """Gather to ``root``, write + fsync an HDF5 file, read it back, scatter (Sudarsan & Ribbens 2007 §4.1.3).

    ``tag``: the point-to-point tag of the gather and scatter messages (the
    engine's, ``reshape.redistribution.redistribute.TAG``).
    """
    import h5py

    me = comm.rank
    src, dst = plan.src, plan.dst
    base = mpi_type(dtype)
    problem = None
    path = None
    if me == root:
        whole = np.empty(src.shape, dtype=dtype)
        reqs = []
        pending = []
        for i, r in enumerate(plan.src_ranks):
            if r == root:
                whole[np.ix_(*src.global_indices(i))] = src_local
            else:
                buf = np.empty(src.local_shape(i), dtype=dtype)
                reqs.append(comm.Irecv([buf, base], r, tag))
                pending.append((i, buf))
        wait_all(reqs)
        for i, buf in pending:
            whole[np.ix_(*src.global_indices(i))] = buf
        del pending
        try:
            fd, path = tempfile.mkstemp(suffix=".h5", prefix="reshape-ckpt-", dir=directory)
            os.close(fd)
            with h5py.File(path, "w") as f:
                f.create_dataset("array", data=whole)
            del whole
            fd = os.open(path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            with h5py.File(path, "r") as f:
                whole = f["array"][...]
        except OSError as e:
            problem = f"checkpoint I/O on {path or directory}: {e}"
        finally:
            if path and os.path.exists(path):
                os.unlink(path)
    elif me in plan.src_ranks:
        wait_all([comm.Isend([src_local, base], root, tag)])
    check_collectively(comm, problem, "checkpoint restart")
    if me == root:
        reqs = []
        keep = []
        for j, r in enumerate(plan.dst_ranks):
            blk = dst.local_block(whole, j)
            if r == root:
                out[...] = blk
            else:
                keep.append(blk)
                reqs.append(comm.Isend([blk, base], r, tag))
        wait_all(reqs)
    elif me in plan.dst_ranks:
        wait_all([comm.Irecv([out, base], root, tag)])
