"""Execute redistribution plans over MPI: the circulant engine and two baselines.

All three methods share one interface, :func:`redistribute`, and one set of
checks: the arguments are validated collectively before any byte moves, so a
bad call raises the same :class:`RedistributionError` on every rank and
leaves every buffer untouched.

* ``"circulant"`` (default, Sudarsan & Ribbens 2007 §3.2.2): between ranks of one host whose
  source blocks are memfd-backed (:mod:`reshape.redistribution.nodecopy`) the receiver reads
  the sender's block directly, one strided copy per transfer; every other
  transfer is sent in the order of the plan's contention-free steps, as one
  contiguous message when it is contiguous in the source block, else packed
  in chunks of a few MiB (:mod:`reshape.redistribution.packing`), received in
  place through derived datatypes; the data a rank
  keeps is copied locally, never sent (:class:`Exchange`). It can run in the
  background: :func:`start` returns a handle, ``wait()`` completes it.
* ``"alltoallv"`` and ``"checkpoint"``: the baselines it is measured
  against, one ``MPI_Alltoallv`` and the paper's HDF5 file checkpoint
  (:mod:`reshape.redistribution.baselines`).
"""

from __future__ import annotations

import hashlib
import itertools
import os
import time
from typing import NamedTuple

import numpy as np
from mpi4py import MPI

from reshape import faults
from reshape.joblink import jobenv as E
from reshape.mpiutil import MAX_SLEEP, CollectiveError, abandon, mpi_type, wait_all, wait_any
from reshape.redistribution import baselines, nodecopy, packing, runcopy
from reshape.redistribution.layout import Layout
from reshape.redistribution.schedule import Plan, Transfer, contiguous, make_plan, run_groups

__all__ = ["METHODS", "Exchange", "RedistributionError", "redistribute", "start"]

METHODS = ("circulant", "alltoallv", "checkpoint")
TAG = 0x5E5  # point-to-point tag used by redistribution messages
NOTE_TAG = 0x6000  # + 2 * (exchange number % 4096): a reader's note to a source; + 1: data it asked for
DONE, NEED = 1, 0  # a note: "I read your block directly" / "I could not map it: send it"
_DATA_SLEEP = 2e-5


def spins(ranks_here: int, env=None) -> bool:
    """Whether a rank waiting for its receives spins in ``MPI_Waitall`` (else ``MPI_Test`` + 20 us sleeps).

    ``RESHAPE_WAIT``: ``spin``, ``poll``, or ``auto`` (unset): spin while the
    exchange's ranks on this host (``ranks_here``) fit its cores, poll when they
    outnumber them. With CMA a receiver copies in its own progress calls, so
    spinning is fastest when it has a core to itself; on an oversubscribed node
    the spinning ranks take the cores from the ranks packing and copying
    (measured here, 2 cores, 3-9 ranks, N = 4000, every case in one run:
    polling 0-30% faster in 10 of 11 cases, 15% slower in one).
    """
    text = (os.environ if env is None else env).get(E.WAIT, "") or "auto"
    if text != "auto":
        return text != "poll"
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return ranks_here <= cores


class RedistributionError(CollectiveError):
    """A redistribution was refused (raised on every rank, before any data moved)."""


# --------------------------------------------------------------------------
# validation
# --------------------------------------------------------------------------


def _local_problem(
    comm: MPI.Comm,
    src: Layout,
    src_local: np.ndarray | None,
    dst: Layout,
    src_ranks: tuple[int, ...],
    dst_ranks: tuple[int, ...],
    out: np.ndarray | None,
    method: str,
) -> str | None:
    me = comm.rank
    if method not in METHODS:
        return f"unknown method {method!r}; choose one of {', '.join(METHODS)}"
    try:
        nodecopy.mode()
    except ValueError as e:
        return str(e)
    if src.shape != dst.shape:
        return f"global shapes differ: source {src.shape}, destination {dst.shape}"
    for name, lay, ranks in (("source", src, src_ranks), ("destination", dst, dst_ranks)):
        if len(ranks) != lay.nprocs:
            return f"{name} layout needs {lay.nprocs} ranks, {len(ranks)} given"
        if len(set(ranks)) != len(ranks) or min(ranks) < 0 or max(ranks) >= comm.size:
            return (
                f"{name} layout of {lay.nprocs} processes does not fit a communicator of "
                f"{comm.size} (ranks {list(ranks)})"
            )
    if me in src_ranks:
        want = src.local_shape(src_ranks.index(me))
        if not isinstance(src_local, np.ndarray):
            return f"holds source block {want} but passed {type(src_local).__name__}"
        if tuple(src_local.shape) != want:
            return f"source block has shape {src_local.shape}, layout says {want}"
        if not src_local.flags.c_contiguous:
            return "source block is not C-contiguous"
        try:
            mpi_type(src_local.dtype)
        except TypeError as e:
            return str(e)
    if me in dst_ranks and out is not None:
        want = dst.local_shape(dst_ranks.index(me))
        if tuple(out.shape) != want or not out.flags.c_contiguous or not out.flags.writeable:
            return f"output block must be a writeable C-contiguous array of shape {want}"
        if src_local is not None and out.dtype != src_local.dtype:
            return f"output dtype {out.dtype} differs from source dtype {src_local.dtype}"
    return None


class _Peers(NamedTuple):
    """What the ranks told each other for the one-copy path (:mod:`reshape.redistribution.nodecopy`)."""

    hosts: tuple[str | None, ...]  # per comm rank: host key, None where the path is off
    descs: tuple[nodecopy.Descriptor | None, ...]  # per comm rank: where its source block is
    seq: int  # this exchange's number on the communicator (the same on every rank)

    def direct(self, t: Transfer) -> bool:
        """Whether the receiver of ``t`` reads the sender's block itself (same host, memfd-backed source)."""
        h = self.hosts[t.src]
        return h is not None and h == self.hosts[t.dst] and self.descs[t.src] is not None and not t.local


_next_seq = 0  # this rank's next exchange number; agreed as the maximum over the communicator


def _validate(comm, src, src_local, dst, src_ranks, dst_ranks, out, method) -> tuple[np.dtype, _Peers]:
    global _next_seq
    problem = _local_problem(comm, src, src_local, dst, src_ranks, dst_ranks, out, method)
    sig = hashlib.sha1(repr((src, dst, src_ranks, dst_ranks, method)).encode()).hexdigest()
    mine = (sig, src.describe(), dst.describe())
    dtype = src_local.dtype.str if isinstance(src_local, np.ndarray) and comm.rank in src_ranks else None
    share = (None, None)
    if problem is None and method == "circulant" and nodecopy.enabled():
        share = (nodecopy.host_key(), nodecopy.describe(src_local) if comm.rank in src_ranks else None)
    every = comm.allgather((problem, mine, dtype, share, _next_seq))
    bad = [(r, p) for r, (p, *_) in enumerate(every) if p]
    if not bad:
        sigs = {m[0] for _, m, *_ in every}
        if len(sigs) > 1:
            bad = [(0, "ranks passed different layouts, rank maps or methods: "
                    + " | ".join(sorted({f'{m[1]} -> {m[2]}' for _, m, *_ in every})))]
        dtypes = {e[2] for e in every if e[2] is not None}
        if len(dtypes) > 1:
            bad.append((0, f"source blocks have different dtypes {sorted(dtypes)}"))
    if bad:
        detail = "; ".join(f"rank {r}: {p}" for r, p in bad[:8])
        raise RedistributionError(f"redistribution refused: {detail}")
    (d,) = {e[2] for e in every if e[2] is not None} or {None}
    if d is None:  # no source holds data: only possible for an empty layout
        raise RedistributionError("redistribution refused: no rank holds source data")
    seq = max(e[4] for e in every)
    if method == "circulant":
        _next_seq = seq + 1
    peers = _Peers(tuple(e[3][0] for e in every), tuple(e[3][1] for e in every), seq)
    return np.dtype(d), peers


# --------------------------------------------------------------------------
# derived datatypes for run products
# --------------------------------------------------------------------------


class _Types:
    """Derived datatypes built for one execution; freed together."""

    def __init__(self) -> None:
        self.made: list[MPI.Datatype] = []

    def _keep(self, t: MPI.Datatype) -> MPI.Datatype:
        self.made.append(t)
        return t

    def buffer(self, arr: np.ndarray, t: Transfer, base: MPI.Datatype, side: int):
        """MPI buffer spec for one side of a transfer: a slice when contiguous, else vector types."""
        runs = t.send if side == 0 else t.recv
        cont = contiguous(runs, arr.shape)
        flat = arr.reshape(-1)
        if cont is not None:
            off, cnt = cont
            return [flat[off : off + cnt], cnt, base]
        groups = runcopy.sides([run_groups(a, b) for a, b in zip(t.send, t.recv, strict=True)], side)
        ext = base.Get_extent()[1]
        strides = [ext * int(np.prod(arr.shape[k + 1 :])) for k in range(arr.ndim)]
        types, disps = [], []
        for combo in itertools.product(*groups):
            ty = base
            for k in reversed(range(arr.ndim)):
                _, stride, length, count = combo[k]
                ty = self._keep(ty.Create_vector(count, length, stride))
                if k > 0:
                    ty = self._keep(ty.Create_resized(0, strides[k - 1]))
            types.append(ty)
            disps.append(sum(c[0] * st for c, st in zip(combo, strides, strict=True)))
        if len(types) == 1 and disps[0] == 0:
            whole = types[0]
        else:
            whole = self._keep(MPI.Datatype.Create_struct([1] * len(types), disps, types))
        whole.Commit()
        return [flat, 1, whole]

    def free(self) -> None:
        for t in reversed(self.made):
            t.Free()
        self.made.clear()


# --------------------------------------------------------------------------
# methods
# --------------------------------------------------------------------------


class Exchange:
    """A circulant redistribution in flight (nonblocking); :meth:`wait` completes it.

    Built by :func:`start`. Between ranks of one host whose source block is
    in a memfd mapping (:mod:`reshape.redistribution.nodecopy` says which arrays are) the
    receiver reads the sender's block itself,
    one strided numpy copy per transfer straight into its destination block,
    and then sends the sender a one-integer note; the sender's :meth:`wait`
    returns once every such reader has noted. A reader that cannot map the
    block notes so instead, and the sender sends that transfer over MPI
    (per transfer, transparently). Every other transfer goes over MPI:

    Every receive is posted first, straight into the destination block
    through a derived datatype (no unpacking). Sends go out in the plan's
    step order as contiguous messages: a transfer that is contiguous in the
    source block is sent in place as one, any other one is packed with
    strided numpy copies, chunk by chunk, into a few buffers kept warm
    between exchanges (:mod:`reshape.redistribution.packing`; the receiver
    posts one datatype per chunk). Measured on shared memory (MPICH 5,
    N = 4000, 64 x 64 blocks): a non-contiguous *send* travels through
    MPICH's shared-memory cells at 1-2 GB/s, while a packed contiguous one is
    copied once by the receiver (CMA) at 5-9 GB/s, and receiving into a
    datatype is no slower than receiving into a buffer and unpacking; hence
    pack on the sending side only. The data a rank keeps is copied locally
    while its first messages are in flight, then the direct reads follow.

    All steps are posted at once by default: the step order decides which
    message each receiver is offered first (distinct senders in every step),
    and waiting between steps only serialises ranks that share cores.
    ``window=k`` keeps at most ``k`` steps of sends outstanding instead.

    Between :func:`start` and :meth:`wait` the application must not write
    its source block (peers may be reading it, and transfers contiguous in it
    are sent in place), nor read or write the destination block. ``stats``
    counts this rank's incoming transfers by path: ``direct`` (read from the
    sender's block), ``fallback`` (mapping failed, sent over MPI) and ``mpi``.
    """

    def __init__(self, comm: MPI.Comm, plan: Plan, src_local, out, dtype: np.dtype, window: int | None,
                 peers: _Peers | None = None) -> None:
        self.comm, self.plan, self.out = comm, plan, out
        self._src = src_local  # referenced until the in-place sends are done and every reader has noted
        self._types = _Types()
        self._recvs: list[MPI.Request] = []
        self._sends: list[MPI.Request] = []
        self._bufs: list[np.ndarray] = []
        self._queued: list[list[tuple[Transfer, Transfer | None]]] = []  # steps of (transfer, chunk to pack)
        self._pack = packing.Buffers()
        self._notes: list[tuple[Transfer, MPI.Request, np.ndarray]] = []  # as a source: one per direct reader
        self._window = window
        self._done = False
        host = None if peers is None else peers.hosts[comm.rank]
        self._spin = spins(comm.size if host is None else peers.hosts.count(host))
        self.stats = {"direct": 0, "fallback": 0, "mpi": 0}
        me = comm.rank
        base = mpi_type(dtype)
        self._base = base
        seq = 0 if peers is None else peers.seq % 4096
        self._note_tag, self._back_tag = NOTE_TAG + 2 * seq, NOTE_TAG + 2 * seq + 1

        def direct(t: Transfer) -> bool:
            return peers is not None and peers.direct(t)

        try:
            if peers is not None and peers.hosts[me] is not None:
                nodecopy.sweep()  # unmap peers' files freed since the last exchange
            reads = []
            for _, t in plan.recvs_of(me):
                if direct(t):
                    reads.append(t)
                else:
                    for c in self._chunks(t, self._src_shape(t), dtype.itemsize):
                        self._recvs.append(comm.Irecv(self._types.buffer(out, c or t, base, 1), t.src, TAG))
                    self.stats["mpi"] += 1
            steps: dict[int, list[tuple[Transfer, Transfer | None]]] = {}
            for k, t in plan.sends_of(me):
                if direct(t):
                    note = np.empty(1, dtype=np.int32)
                    self._notes.append((t, comm.Irecv([note, MPI.INT], t.dst, self._note_tag), note))
                else:
                    steps.setdefault(k, []).extend((t, c) for c in self._chunks(t, src_local.shape, dtype.itemsize))
            self._queued = [steps[k] for k in sorted(steps)]
            self._post(first=True)
            local = plan.local_of(me)
            pieces = self._pieces(src_local, local, reads, peers, dtype)
            if pieces is not None:  # this rank fills its whole block itself: band by band (runcopy.fill)
                faults.hit("transfer", me, comm.size)
                runcopy.fill(out, pieces)
                del pieces  # the peers' views: mappings are kept in nodecopy, views must not be
                for t in reads:
                    self._note(t, DONE)
                self.stats["direct"] += len(reads)
            else:
                if local is not None:
                    runcopy.copy(src_local, local.send, out, local.recv)
                faults.hit("transfer", me, comm.size)
                for t in reads:  # in step order: distinct sources at each step
                    self._read(t, peers.descs[t.src], dtype)
        except BaseException:
            self._free(failed=True)
            raise

    def _pieces(self, src_local, local: Transfer | None, reads: list[Transfer], peers: _Peers | None,
                dtype: np.dtype) -> list[runcopy.Piece] | None:
        """Every piece of this rank's block when it reads all of them itself and :func:`runcopy.worth`
        says banding pays; ``None`` (piece by piece) otherwise, or if any peer's block cannot be mapped."""
        if self._recvs or not reads or self.out is None:
            return None  # messages write part of the block: they may land at any time
        pieces = [] if local is None else [(src_local, local.send, local.recv)]
        try:
            for t in reads:
                pieces.append((nodecopy.view(peers.descs[t.src], self._src_shape(t), dtype), t.send, t.recv))
        except nodecopy.MapError:
            return None  # _read maps each again and asks for what fails over MPI
        return pieces if runcopy.worth(self.out, pieces) else None

    @staticmethod
    def _chunks(t: Transfer, src_shape: tuple[int, ...], itemsize: int) -> list[Transfer | None]:
        """The messages of ``t``: ``[None]`` (one, sent in place) when it is contiguous in the source block,
        else the chunks it is packed in (:func:`reshape.redistribution.packing.split`); both sides agree."""
        if contiguous(t.send, src_shape) is not None:
            return [None]
        return packing.split(t, itemsize)

    def _src_shape(self, t: Transfer) -> tuple[int, ...]:
        """The shape of the source block of ``t`` (its sender's whole block)."""
        return self.plan.src.local_shape(self.plan.src_ranks.index(t.src))

    def _read(self, t: Transfer, desc: nodecopy.Descriptor, dtype: np.dtype) -> None:
        """Copy transfer ``t`` out of the sender's block; on a mapping failure ask for it over MPI."""
        try:
            nodecopy.read(desc, self._src_shape(t), dtype, lambda block: runcopy.copy(block, t.send, self.out, t.recv))
            note = DONE
            self.stats["direct"] += 1
        except nodecopy.MapError:
            self._recvs.append(self.comm.Irecv(self._types.buffer(self.out, t, self._base, 1), t.src,
                                               self._back_tag))
            note = NEED
            self.stats["fallback"] += 1
        self._note(t, note)

    def _note(self, t: Transfer, note: int) -> None:
        """Tell the source of ``t`` whether it was read directly (DONE) or must send it (NEED)."""
        buf = np.array([note], dtype=np.int32)
        self._bufs.append(buf)
        self._sends.append(self.comm.Isend([buf, MPI.INT], t.src, self._note_tag))

    def _message(self, t: Transfer) -> np.ndarray:
        """The send side of ``t`` as one contiguous buffer: in place when it is contiguous, else packed."""
        cont = contiguous(t.send, self._src.shape)
        if cont is not None:
            off, cnt = cont
            return self._src.reshape(-1)[off : off + cnt]
        buf = nodecopy.empty(t.count, self._src.dtype, shared=False)  # large: fresh pages as pages.py chooses
        packing.pack(self._src, t, buf)
        self._bufs.append(buf)
        return buf

    def _post(self, first: bool = False) -> None:
        """Post queued steps of sends while the window allows and a pack buffer is free."""
        while self._queued:
            if self._window and not first and len(self._sends) and not MPI.Request.Testall(self._sends):
                return
            step = self._queued[0]
            while step:
                t, chunk = step[0]
                if chunk is None:
                    self._sends.append(self.comm.Isend([self._message(t), self._base], t.dst, TAG))
                else:
                    nbytes = chunk.count * self._src.itemsize
                    buf = self._pack.take(nbytes)
                    if buf is None:
                        return  # every buffer is being sent from: wait() or test() posts the rest
                    msg = buf[:nbytes].view(self._src.dtype)
                    packing.pack(self._src, chunk, msg)
                    req = self.comm.Isend([msg, self._base], t.dst, TAG)
                    self._pack.sending(req, buf)
                    self._sends.append(req)
                step.pop(0)
            self._queued.pop(0)
            first = False
            if self._window:
                return

    def _await_send(self) -> None:
        """Block until some send completes (a pack buffer or, windowed, a step frees up)."""
        if self._window:
            MPI.Request.Waitall(self._sends)
        elif self._spin:
            MPI.Request.Waitany(self._sends)
        else:
            wait_any(self._sends, max_sleep=_DATA_SLEEP)

    def _serve(self, block: bool) -> bool:
        """As a source read directly: take the readers' notes, sending what they could not map.

        ``True`` once every reader has noted. Blocking, it waits with growing
        sleeps: the readers are copying and need the cores.
        """
        delay = 1e-6
        while self._notes:
            idx = MPI.Request.Testsome([r for _, r, _ in self._notes])
            if not idx:
                if not block:
                    return False
                time.sleep(delay)
                delay = min(2 * delay, MAX_SLEEP)
                continue
            for i in idx:
                t, _, note = self._notes[i]
                if note[0] == NEED:
                    self._sends.append(self.comm.Isend([self._message(t), self._base], t.dst, self._back_tag))
            done = set(idx)
            self._notes = [n for i, n in enumerate(self._notes) if i not in done]
        return True

    def test(self) -> bool:
        """Progress the exchange without blocking; ``True`` once it is complete."""
        if self._done:
            return True
        self._post()
        if (not self._serve(block=False) or self._queued or not MPI.Request.Testall(self._recvs)
                or not MPI.Request.Testall(self._sends)):
            return False
        self._free()
        return True

    def wait(self) -> np.ndarray | None:
        """Complete the exchange; returns this rank's destination block (``None`` outside it)."""
        if self._done:
            return self.out
        try:
            while self._queued:  # post the rest as pack buffers (windowed: steps) free up
                self._await_send()
                self._post()
            # Notes first: every reader sends its notes before waiting for anything, so a rank
            # both waiting for data it asked for and owing data never blocks the other way round.
            self._serve(block=True)
            # Receiving ranks spin where they have cores of their own (spins()): with CMA the
            # receiver copies the data in its own progress calls. Ranks left with sends only
            # sleep between tests so as not to take the core from the ranks copying.
            if self._spin:
                MPI.Request.Waitall(self._recvs)
            else:
                wait_all(self._recvs, max_sleep=_DATA_SLEEP)
            wait_all(self._sends, max_sleep=_DATA_SLEEP)
        except BaseException:
            self._free(failed=True)
            raise
        self._free()
        return self.out

    def _free(self, failed: bool = False) -> None:
        """Let go of the exchange's requests and buffers; ``failed`` (an error ended it): every buffer,
        the source and destination blocks too, is kept for good (:func:`reshape.mpiutil.abandon`)."""
        if not self._done:
            self._done = True
            kept = [self._src, self.out, *self._bufs, *(n for _, _, n in self._notes), *self._pack.forsake()] \
                if failed else []
            abandon([*self._sends, *self._recvs, *(r for _, r, _ in self._notes)], kept)  # (mpiutil)
            if not failed:  # a derived datatype of a request an error completed may still be in use
                self._types.free()
            self._pack.release()
            self._bufs.clear()
            self._notes.clear()
            self._src = None


def start(
    comm: MPI.Comm,
    src: Layout,
    src_local: np.ndarray | None,
    dst: Layout,
    *,
    src_ranks: tuple[int, ...] | list[int] | range | None = None,
    dst_ranks: tuple[int, ...] | list[int] | range | None = None,
    out: np.ndarray | None = None,
    method: str = "circulant",
    window: int | None = None,
    root: int = 0,
    checkpoint_dir: str | None = None,
) -> Exchange | _Done:
    """Start moving an array from layout ``src`` to ``dst``; returns a handle to ``wait()`` on. Collective.

    The arguments are those of :func:`redistribute`. With the circulant method
    the data moves in the background (see :class:`Exchange` for what the
    application may touch meanwhile; any MPI call progresses it, and
    ``handle.test()`` does so explicitly); the baselines complete before
    returning.
    """
    src_ranks = tuple(range(src.nprocs)) if src_ranks is None else tuple(int(r) for r in src_ranks)
    dst_ranks = tuple(range(dst.nprocs)) if dst_ranks is None else tuple(int(r) for r in dst_ranks)
    if window is not None and (not isinstance(window, int) or window < 1):
        raise RedistributionError(f"window must be None (all steps) or an int >= 1, got {window!r}")
    dtype, peers = _validate(comm, src, src_local, dst, src_ranks, dst_ranks, out, method)
    plan = make_plan(src, dst, src_ranks, dst_ranks)
    me = comm.rank
    if me in dst_ranks and out is None:
        out = nodecopy.empty(dst.local_shape(dst_ranks.index(me)), dtype)
    if me not in src_ranks:
        src_local = None
    if me not in dst_ranks:
        out = None
    if method == "circulant":
        return Exchange(comm, plan, src_local, out, dtype, window, peers)
    if method == "alltoallv":
        baselines.alltoallv(comm, plan, src_local, out, dtype)
    else:
        baselines.checkpoint(comm, plan, src_local, out, dtype, root, checkpoint_dir, TAG)
    return _Done(out)


class _Done:
    """A completed redistribution (the baselines are blocking)."""

    def __init__(self, out: np.ndarray | None) -> None:
        self.out = out

    def test(self) -> bool:
        return True

    def wait(self) -> np.ndarray | None:
        return self.out


def redistribute(
    comm: MPI.Comm,
    src: Layout,
    src_local: np.ndarray | None,
    dst: Layout,
    *,
    src_ranks: tuple[int, ...] | list[int] | range | None = None,
    dst_ranks: tuple[int, ...] | list[int] | range | None = None,
    out: np.ndarray | None = None,
    method: str = "circulant",
    window: int | None = None,
    root: int = 0,
    checkpoint_dir: str | None = None,
) -> np.ndarray | None:
    """Move an array from layout ``src`` to layout ``dst`` inside ``comm``. Collective.

    Args:
        comm: a communicator holding both process sets.
        src, dst: the layouts; their global shapes must match.
        src_local: this rank's block in ``src`` (``None`` on ranks outside the source set).
        src_ranks, dst_ranks: comm ranks of the layouts' processes (default ``0..P-1``).
        out: optional preallocated destination block (else allocated).
        method: ``"circulant"``, ``"alltoallv"`` or ``"checkpoint"``.
        window: circulant only: steps of sends outstanding at once (default all).
        root, checkpoint_dir: the node and directory of the checkpoint baseline.

    Returns:
        This rank's block in ``dst``, or ``None`` on ranks outside the destination set.

    Raises:
        RedistributionError: on every rank, before any data moved, when any rank's
            arguments are inconsistent (shapes, dtypes, layouts, rank maps).
    """
    return start(comm, src, src_local, dst, src_ranks=src_ranks, dst_ranks=dst_ranks, out=out, method=method,
                 window=window, root=root, checkpoint_dir=checkpoint_dir).wait()
