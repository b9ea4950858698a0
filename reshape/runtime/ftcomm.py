"""The job's communicator under in-place recovery: blocking point-to-point that a lost peer cannot crash.

Open MPI 5.0.11 with ULFM crashes a rank blocked in ``MPI_Sendrecv`` whose peer dies while a message
is under way (a segmentation fault inside ``PMPI_Sendrecv``, docs/mpi.md), while the same exchange as
``MPI_Isend``/``MPI_Irecv`` completed by ``MPI_Testall`` reports ``MPI_ERR_PROC_FAILED``. So with
``RESHAPE_INPLACE=1`` the communicator the runtime hands out (``rt.comm``, and every communicator the
program ``Dup``s or ``Split``s from it) is an :class:`FTComm`: the same communicator, whose blocking
point-to-point calls (``Send``, ``Ssend``, ``Recv``, ``Sendrecv``, ``Sendrecv_replace`` and their
pickle-based ``send``, ``ssend``, ``recv``, ``sendrecv``) run as non-blocking ones completed by
:func:`reshape.mpiutil.until`: a lost peer is an ``MPI_ERR_PROC_FAILED`` exception, and a rank waiting
for a live peer that went to recover instead learns of it from the revoked job communicator. Programs
keep writing ``comm.Sendrecv(...)``. The wait spins briefly before it sleeps, so a halo exchange
whose partner is ready costs about what the blocking call does.

The program's own non-blocking calls on it (``Isend``, ``Issend``, ``Irecv``, ``isend``, ``irecv``) return
MPI's requests, which the program completes as it likes (``MPI.Request.Waitall``). After a lost peer
such a wait raises with requests still pending, and the program drops them: mpi4py frees a request
it garbage-collects, and Open MPI 5.0.11 then aborts the job when the freed send fails ("Send error
after request freed") or reads its buffer when a live receiver acknowledges it (a segmentation
fault in the recovery's ``MPIX_Comm_shrink``). So the communicator keeps each request it posted, with
its buffer, until a step starts with it complete (:func:`settle`), and a recovery keeps the rest for
the life of the process (:func:`abandon_posted`).

While the program's step runs (:meth:`reshape.runtime.Resizer.run` sets ``record``), the
communicator notes the ranks this rank sends to and receives from (``peers``): the job's own
communication pattern, from which :mod:`reshape.runtime.inplace` places buddy copies away from a
rank's neighbours.
"""

from __future__ import annotations

import numpy as np
from mpi4py import MPI

from reshape.mpiutil import abandon, until, wait_all

__all__ = ["SPINS", "FTComm", "abandon_posted", "neighbours", "settle", "waitall", "wrap"]

SPINS = 200  # tests before the first sleep: a partner that is ready answers within these
_POSTED: list[tuple[MPI.Request, object]] = []  # the program's own requests on an FTComm, and their buffers
_PRUNE_AT = [256]  # prune completed ones once this many are held (doubling while they are pending)


def _posted(req: MPI.Request, buf) -> MPI.Request:
    _POSTED.append((req, buf))
    if len(_POSTED) >= _PRUNE_AT[0]:  # a program outside Resizer.run: keep the list to what is pending
        settle()
        _PRUNE_AT[0] = max(256, 2 * len(_POSTED))
    return req


def settle() -> None:
    """Let go of the program's requests that completed (called at each step's start, the job intact)."""
    _POSTED[:] = [(r, b) for r, b in _POSTED if r != MPI.REQUEST_NULL]


def abandon_posted() -> None:
    """A lost rank: keep the program's requests still pending, and the buffers of all those posted since
    the last :func:`settle` (an error may have completed one that Open MPI still moves), for good
    (:func:`reshape.mpiutil.abandon`)."""
    abandon([r for r, _ in _POSTED], [b for _, b in _POSTED])
    _POSTED.clear()


def wrap(comm):
    """``comm`` as an :class:`FTComm` (itself when it already is one; ``MPI_COMM_NULL`` as it is)."""
    if isinstance(comm, FTComm) or not isinstance(comm, MPI.Intracomm) or comm == MPI.COMM_NULL:
        return comm
    return FTComm(comm)


def neighbours(comm) -> set[int]:
    """The ranks ``comm``'s program steps have exchanged point-to-point messages with (empty for other
    communicators)."""
    return set(getattr(comm, "peers", ()))


def waitall(reqs: list[MPI.Request], statuses: list | None = None) -> None:
    """Complete ``reqs`` by the ULFM-aware wait (:func:`reshape.mpiutil.wait_all`): spins, then sleeps."""
    wait_all(reqs, statuses=statuses, spins=SPINS)


def _copy(buf):
    """A copy of a buffer argument (``array`` or ``[array, ...]``), to send from while ``buf`` receives."""
    if isinstance(buf, list | tuple):
        return [np.array(buf[0], copy=True), *buf[1:]]
    return np.array(buf, copy=True)


class FTComm(MPI.Intracomm):
    """An intracommunicator whose blocking point-to-point calls a lost peer turns into an exception
    (module docstring). Collectives are Open MPI's own (ULFM reports a lost member in them)."""

    record = False  # note the peers of point-to-point calls (set while the program's step runs)

    def _note(self, *ranks: int) -> None:
        if self.record:
            peers = self.__dict__.setdefault("peers", set())
            peers.update(r for r in ranks if r >= 0)  # not MPI.PROC_NULL, MPI.ANY_SOURCE

    def Split(self, color: int = 0, key: int = 0) -> MPI.Intracomm:
        return wrap(super().Split(color, key))

    def Split_type(self, split_type: int, key: int = 0, info: MPI.Info = MPI.INFO_NULL) -> MPI.Intracomm:
        return wrap(super().Split_type(split_type, key, info))

    def Create(self, group: MPI.Group) -> MPI.Intracomm:
        return wrap(super().Create(group))

    # ------------------------------------------------ non-blocking: noted and kept, else MPI's own
    def Isend(self, buf, dest: int, tag: int = 0) -> MPI.Request:
        self._note(dest)
        return _posted(super().Isend(buf, dest, tag), buf)

    def Issend(self, buf, dest: int, tag: int = 0) -> MPI.Request:
        self._note(dest)
        return _posted(super().Issend(buf, dest, tag), buf)

    def Irecv(self, buf, source: int = MPI.ANY_SOURCE, tag: int = MPI.ANY_TAG) -> MPI.Request:
        self._note(source)
        return _posted(super().Irecv(buf, source, tag), buf)

    def isend(self, obj, dest: int, tag: int = 0) -> MPI.Request:
        self._note(dest)
        return _posted(super().isend(obj, dest, tag), None)  # the request holds the pickled message

    def irecv(self, buf=None, source: int = MPI.ANY_SOURCE, tag: int = MPI.ANY_TAG) -> MPI.Request:
        self._note(source)
        return _posted(super().irecv(buf, source, tag), buf)

    # ------------------------------------------------ blocking, as non-blocking + an ULFM-aware wait
    def Send(self, buf, dest: int, tag: int = 0) -> None:
        self._note(dest)
        waitall([super().Isend(buf, dest, tag)])

    def Ssend(self, buf, dest: int, tag: int = 0) -> None:
        self._note(dest)
        waitall([super().Issend(buf, dest, tag)])

    def Recv(self, buf, source: int = MPI.ANY_SOURCE, tag: int = MPI.ANY_TAG,
             status: MPI.Status | None = None) -> None:
        self._note(source)
        waitall([super().Irecv(buf, source, tag)], [status])

    def Sendrecv(self, sendbuf, dest: int, sendtag: int = 0, recvbuf=None,
                 source: int = MPI.ANY_SOURCE, recvtag: int = MPI.ANY_TAG, status: MPI.Status | None = None) -> None:
        self._note(dest, source)
        waitall([super().Irecv(recvbuf, source, recvtag), super().Isend(sendbuf, dest, sendtag)], [status, None])

    def Sendrecv_replace(self, buf, dest: int, sendtag: int = 0, source: int = MPI.ANY_SOURCE,
                         recvtag: int = MPI.ANY_TAG, status: MPI.Status | None = None) -> None:
        self._note(dest, source)
        out = _copy(buf)
        waitall([super().Irecv(buf, source, recvtag), super().Isend(out, dest, sendtag)], [status, None])

    def send(self, obj, dest: int, tag: int = 0) -> None:
        self._note(dest)
        waitall([super().isend(obj, dest, tag)])

    def ssend(self, obj, dest: int, tag: int = 0) -> None:
        self._note(dest)
        waitall([super().issend(obj, dest, tag)])

    def recv(self, buf=None, source: int = MPI.ANY_SOURCE, tag: int = MPI.ANY_TAG,
             status: MPI.Status | None = None):
        """The pickled object sent: matched first (``MPI_Improbe``, polled), then received non-blocking."""
        self._note(source)
        got: list[MPI.Message] = []

        def matched() -> bool:
            msg = self.improbe(source, tag, status)
            if msg is not None:
                got.append(msg)
            return bool(got)

        until(matched, spins=SPINS)
        req = got[0].irecv()
        out: list = []

        def arrived() -> bool:
            flag, obj = req.test()
            if flag:
                out.append(obj)
            return bool(flag)

        until(arrived, spins=SPINS)
        return out[0]

    def sendrecv(self, sendobj, dest: int, sendtag: int = 0, recvbuf=None, source: int = MPI.ANY_SOURCE,
                 recvtag: int = MPI.ANY_TAG, status: MPI.Status | None = None):
        self._note(dest)
        req = super().isend(sendobj, dest, sendtag)
        obj = self.recv(recvbuf, source, recvtag, status)
        waitall([req])
        return obj
