"""ZeroMQ client of the scheduler daemon: ``contact_scheduler`` (Sudarsan & Ribbens 2007 §3.2.3).

:class:`Connection` sends one request and waits (bounded) for its reply.
:class:`SchedulerClient` is the :class:`reshape.joblink.advice.Advisor` a job uses
when the daemon started it (``RESHAPE_SCHEDULER`` / ``RESHAPE_JOB_ID``).

A job must never hang because the daemon is gone: every request has a
timeout; after a failure the client answers "continue" without contacting
the daemon for ``retry_after`` seconds, then tries again on a fresh socket.
A restarted daemon thus sees its running jobs reconnect at their next resize
point (the first request after a reconnect is a ``hello``; it carries the
sizes the job accepts once the runtime announced them, :meth:`SchedulerClient.announce_sizes`).

Authentication: when the daemon's endpoint is not loopback, or a key
directory is named (``keys=`` or ``$RESHAPE_KEYS``, which the daemon sets for
the jobs it starts), the socket is a CURVE client (``reshape.joblink.auth``). A
daemon that refuses the key never answers: the request times out.
"""

from __future__ import annotations

import os
import secrets
import socket
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import zmq
from zmq.utils.monitor import recv_monitor_message

from reshape.joblink import jobenv as E
from reshape.joblink.auth import ClientKeys, keys_dir_for, load_client_keys, secure_client
from reshape.joblink.protocol import (
    MAX_MESSAGE_BYTES,
    MAX_REPLY_BYTES,
    MAX_SIZES,
    REQUESTS,
    Advice,
    Error,
    Finished,
    Hello,
    Lost,
    Message,
    ProtocolError,
    Reply,
    Request,
    Resized,
    ResizePoint,
    decode,
    encode,
)

__all__ = ["Connection", "DaemonError", "RequestTooLarge", "SchedulerClient", "SchedulerUnavailable",
           "contact_scheduler", "request"]


class SchedulerUnavailable(ConnectionError):
    """The daemon did not answer in time."""


class DaemonError(RuntimeError):
    """The daemon answered with an ``error`` message."""

    def __init__(self, code: str, message: str):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


class RequestTooLarge(DaemonError):
    """A request over the protocol's size limit: refused here, before it is sent."""

    def __init__(self, size: int, at_least: bool = False):
        super().__init__("too_large", f"request too large: {'at least ' if at_least else ''}{size} bytes > "
                                      f"{MAX_MESSAGE_BYTES // 1024} KiB")


def _size_floor(x: Any, limit: int) -> int:
    """A lower bound on the JSON size of ``x`` (its strings' lengths), stopping once over ``limit``:
    a request of megabytes is refused without encoding it (which takes seconds at 100 MB)."""
    if isinstance(x, str):
        return len(x) + 2
    total = 0
    items = x.values() if isinstance(x, dict) else x if isinstance(x, list | tuple) else ()
    keys = x.keys() if isinstance(x, dict) else ()
    for k in keys:
        total += len(k) + 3
    for v in items:
        total += _size_floor(v, limit - total) + 1
        if total > limit:
            break
    return total


def _from_own_address(endpoint: str) -> str:
    """A loopback IPv4 endpoint as ZeroMQ's ``tcp://SOURCE;DEST``, from an address of its own in
    127.0.0.0/8: a daemon without keys names the uid behind each source address (docs/cluster.md,
    "Who may do what"), which it can only do while users do not share one."""
    if not endpoint.startswith("tcp://127.") or ";" in endpoint:
        return endpoint
    r = secrets.randbits(24)
    return f"tcp://127.{r >> 16 & 255}.{r >> 8 & 255}.{max(1, r & 255)}:0;{endpoint[len('tcp://'):]}"


class Connection:
    """One DEALER socket to the daemon; ``request`` = send + bounded wait for the matching reply."""

    def __init__(self, endpoint: str, timeout: float = 5.0, ctx: zmq.Context | None = None,
                 keys: str | ClientKeys | None = None, fail_fast: float | None = None,
                 check_peer: Callable[[int], str | None] | None = None):
        """``keys``: a key directory or loaded keys; by default as ``reshape.joblink.auth.keys_dir_for`` says.
        ``fail_fast``: seconds after which a request fails when every connection attempt so far
        was refused (nothing listens at the endpoint: ZeroMQ's ``CONNECT_RETRIED`` and no
        ``CONNECTED``), instead of waiting out the whole timeout; a daemon just starting binds
        within that time. For the command line.
        ``check_peer``: who listens at the endpoint must pass this check (given the connected
        socket's descriptor; it returns why not, or None) before anything is sent: a socket makes
        one connection and never reconnects (a new one is made and checked after a failure), so
        nothing ever goes to a listener that was not checked. For a node monitor without CURVE.

        Raises ``reshape.joblink.auth.AuthError`` (a ValueError) when keys are needed but missing.
        """
        self.endpoint = endpoint
        self.timeout = timeout
        self.fail_fast = fail_fast
        self.check_peer = check_peer
        self._peer_fd: int | None = None  # the connection made (check_peer), once made
        self._checked = False  # and who listens there passed check_peer
        self._gone = False  # that connection ended: this socket is done
        self._mon: zmq.Socket | None = None
        self._connected = False
        self._refused_since: float | None = None
        if isinstance(keys, ClientKeys):
            self.keys: ClientKeys | None = keys
        else:
            d = keys_dir_for(endpoint, keys)
            self.keys = load_client_keys(d) if d else None
        self._ctx = ctx or zmq.Context.instance()
        self._sock: zmq.Socket | None = None
        self._seq = 0

    def _socket(self) -> zmq.Socket:
        if self._sock is None:
            s = self._ctx.socket(zmq.DEALER)
            s.setsockopt(zmq.LINGER, 0)
            if self.keys is not None:
                secure_client(s, self.keys)
            # No zmq.IMMEDIATE: with it, libzmq terminates the pipe when the peer
            # disconnects and drops a reply not yet read, so the reply to ``stop``
            # (the daemon exits right after sending it) was lost in about one of
            # four stops. A request queued for an absent daemon is discarded by
            # ``reset`` when its reply times out.
            if self.check_peer is not None:
                s.setsockopt(zmq.RECONNECT_IVL, -1)  # one connection, checked (_verify): never another
            if self.fail_fast is not None or self.check_peer is not None:
                events = zmq.EVENT_CONNECTED | (zmq.EVENT_CONNECT_RETRIED if self.fail_fast is not None else 0) \
                    | (zmq.EVENT_DISCONNECTED | zmq.EVENT_CLOSED if self.check_peer is not None else 0)
                self._mon = s.get_monitor_socket(events)
                self._connected, self._refused_since = False, None
                self._peer_fd, self._checked, self._gone = None, False, False
            s.connect(_from_own_address(self.endpoint) if self.keys is None else self.endpoint)
            self._sock = s
        return self._sock

    def _refused(self) -> bool:
        """Read the monitor's events: True once connections were refused for ``fail_fast`` seconds
        and none ever succeeded."""
        while self._mon is not None and self._mon.poll(0):
            ev = recv_monitor_message(self._mon)
            event = ev["event"]
            if event == zmq.EVENT_CONNECTED:
                self._connected = True
                self._peer_fd = ev["value"]
            elif event in (zmq.EVENT_DISCONNECTED, zmq.EVENT_CLOSED):
                self._gone = True
            elif event == zmq.EVENT_CONNECT_RETRIED and self._refused_since is None:
                self._refused_since = time.monotonic()
        return (self.fail_fast is not None and not self._connected and self._refused_since is not None
                and time.monotonic() - self._refused_since >= self.fail_fast)

    def _verify(self, deadline: float) -> None:
        """``check_peer``: wait for the connection, then check who listens there; nothing was sent yet."""
        while self._peer_fd is None and not self._gone:
            left = deadline - time.monotonic()
            if left <= 0 or not self._mon.poll(max(1, int(left * 1000))):
                break
            self._refused()
        why = "no connection" if self._peer_fd is None else self.check_peer(self._peer_fd)
        self._refused()  # the connection may have ended meanwhile (its descriptor then names nothing of ours)
        if why is None and not self._gone:
            self._checked = True
            return
        self.reset()
        raise SchedulerUnavailable(f"not sent to {self.endpoint}: {why or 'the connection ended'}")

    def reset(self) -> None:
        """Drop the socket (and any late reply); the next request reconnects."""
        if self._sock is not None:
            if self._mon is not None:
                self._sock.disable_monitor()
                self._mon.close(linger=0)
                self._mon = None
            self._sock.close(linger=0)
            self._sock = None

    def close(self) -> None:
        self.reset()

    def request(self, type_: str, body: dict[str, Any] | None = None, job_id: int | None = None,
                timeout: float | None = None) -> Reply:
        """Send one message built from a body dict and return the reply (:meth:`send`)."""
        return self.send(Message(type_, 0, job_id, body or {}), timeout)

    def send(self, msg: Request | Message, timeout: float | None = None) -> Reply:
        """Send one request (its ``seq`` is this connection's next) and return its reply, decoded into
        the request's ``reply_type`` (an ``ok`` one) or :class:`Advice`; raises SchedulerUnavailable or
        DaemonError (an ``error``, or a reply that is not the request's)."""
        self._seq += 1
        msg = replace(msg, seq=self._seq)
        floor = _size_floor(msg.body, MAX_MESSAGE_BYTES)
        if floor > MAX_MESSAGE_BYTES:
            raise RequestTooLarge(floor, at_least=True)
        frame = encode(msg)
        if len(frame) > MAX_MESSAGE_BYTES:  # the daemon would refuse it: say so now, send nothing
            raise RequestTooLarge(len(frame))
        sock = self._socket()
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        if self.check_peer is not None:
            self._refused()  # the socket's events: a connection that ended is never used again
            if self._gone:
                self.reset()
                sock = self._socket()
            if not self._checked:
                self._verify(deadline)
        left = max(1, int((deadline - time.monotonic()) * 1000))
        try:
            try:
                sock.send(frame, zmq.NOBLOCK)
            except zmq.Again:  # high-water mark: wait for room, within the timeout
                if not sock.poll(left, zmq.POLLOUT):
                    raise
                sock.send(frame, zmq.NOBLOCK)
        except zmq.Again:
            self.reset()
            raise SchedulerUnavailable(f"no scheduler daemon at {self.endpoint}") from None
        while True:
            left = deadline - time.monotonic()
            if self._mon is not None and left > 0:  # wait for the reply or a refused connection
                poller = zmq.Poller()
                poller.register(sock, zmq.POLLIN)
                poller.register(self._mon, zmq.POLLIN)
                ready = dict(poller.poll(max(1, int(min(left, 0.1 if self._refused_since else left) * 1000))))
                if self._refused():
                    self.reset()
                    raise SchedulerUnavailable(f"no scheduler daemon listens at {self.endpoint}")
                if sock not in ready:
                    continue
            if left <= 0 or not sock.poll(max(1, int(left * 1000))):
                self.reset()
                how = (f" (CURVE key {self.keys.public.decode()}: the daemon may not accept it)"
                       if self.keys is not None else "")
                raise SchedulerUnavailable(f"no reply from the scheduler daemon at {self.endpoint}{how}")
            try:
                rep = decode(sock.recv(), MAX_REPLY_BYTES, REQUESTS.get(msg.type))
            except ProtocolError as e:  # not a reply we can read: say so, do not wait it out
                self.reset()
                raise DaemonError("bad_reply", f"unreadable reply from {self.endpoint}: {e}") from None
            if rep.seq != self._seq and not (rep.seq == 0 and rep.type == "error"):
                continue  # a late reply to an earlier, timed-out request
            # seq 0: the daemon could not read the request's seq (too large, not JSON): it is ours
            if isinstance(rep, Error):
                raise DaemonError(rep.code, rep.message)
            return rep


REFUSED_PATIENCE = 2.0  # seconds a command waits for a daemon that refuses connections (one may be starting)


def request(endpoint: str, msg: Request, timeout: float = 5.0, keys: str | None = None) -> Reply:
    """One typed request (:mod:`reshape.joblink.protocol`, e.g. ``History(limit=5)``) on a connection of its
    own (the command line's way): its typed reply."""
    conn = Connection(endpoint, timeout, keys=keys, fail_fast=min(timeout, REFUSED_PATIENCE))
    try:
        return conn.send(msg)
    finally:
        conn.close()


class SchedulerClient:
    """The Advisor a daemon-started job uses on rank 0 (Sudarsan & Ribbens 2007 §3.2.3 ``contact_scheduler``)."""

    def __init__(self, endpoint: str, job_id: int, timeout: float = 2.0, retry_after: float = 2.0):
        self.endpoint = endpoint
        self.job_id = job_id
        self.retry_after = retry_after
        self.errors: list[str] = []
        self.conn: Connection | None = None
        try:
            self.conn = Connection(endpoint, timeout)
        except ValueError as e:  # keys needed but unreadable: the job still runs, at its size
            self.errors.append(str(e))
        self._down_until = 0.0
        self._greeted = False
        self.host = socket.gethostname()
        self.sizes: list[int] | None = None  # announced in hello (see announce_sizes)

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> SchedulerClient:
        env = os.environ if env is None else env
        endpoint = env.get(E.SCHEDULER, "")
        try:
            job_id = int(env.get(E.JOB_ID, ""))
        except ValueError:
            raise ValueError(f"{E.SCHEDULER} is set but {E.JOB_ID} is not a job id") from None
        if not endpoint:
            raise ValueError(f"{E.SCHEDULER} is empty")
        return cls(endpoint, job_id, timeout=float(env.get(E.SCHEDULER_TIMEOUT, "2.0")))

    def _send(self, req: Request, nprocs: int | None = None) -> Reply | None:
        if self.conn is None or time.monotonic() < self._down_until:
            return None
        try:
            if not self._greeted and nprocs is not None:
                self.conn.send(Hello(job_id=self.job_id, nprocs=nprocs, host=self.host, pid=os.getpid(),
                                     sizes=tuple(self.sizes) if self.sizes else None))
                self._greeted = True
            return self.conn.send(replace(req, job_id=self.job_id))
        except SchedulerUnavailable as e:
            self.errors.append(str(e))
            self._down_until = time.monotonic() + self.retry_after
            self._greeted = False  # say hello again to whoever answers next
            return None
        except DaemonError as e:
            self.errors.append(str(e))
            return None

    def announce_sizes(self, sizes) -> None:
        """The sizes this job accepts (``Resizer.legal_sizes``): sent in ``hello``'s ``sizes``.

        Those above ``MAX_SIZES`` are not sent. A list that differs from the
        last one is sent with a new ``hello`` before the next request.
        """
        new = sorted({int(q) for q in sizes if 1 <= q <= MAX_SIZES}) or None
        if new != self.sizes:
            self.sizes = new
            self._greeted = False

    def advise(self, report: ResizePoint) -> Advice:
        """Send the resize point (from this host when it names none) and return the daemon's advice."""
        rep = self._send(report if report.host else replace(report, host=self.host), nprocs=report.nprocs)
        if not isinstance(rep, Advice):
            return Advice("continue", report.nprocs, reason="scheduler unavailable")
        return rep.decision()

    def resized(self, old: int, new: int, seconds: float, error: str | None = None) -> None:
        self._send(Resized(old=old, new=new, seconds=float(seconds), error=error))

    def lost(self, old: int, new: int, ranks: list[int], reason: str, seconds: float | None = None) -> None:
        """The job lost ``ranks`` of its ``old`` and carries on on ``new`` (reshape.runtime.inplace)."""
        self._send(Lost(old=old, new=new, ranks=tuple(ranks), reason=reason,
                        seconds=None if seconds is None else float(seconds)))

    def finished(self, status: str = "done", error: str | None = None) -> None:
        self._send(Finished(status=status, error=error))
        if self.conn is not None:
            self.conn.close()


def contact_scheduler(node_name: str, job_id: int, num_nodes: int, processor_row_count: int,
                      processor_column_count: int, iteration_time: float,
                      redistribution_time: float | None = None, *, endpoint: str | None = None,
                      iteration: int = 0) -> Advice:
    """The paper's ``contact_scheduler`` call as a one-shot function (Sudarsan & Ribbens 2007 §3.2.3)."""
    endpoint = endpoint or os.environ.get(E.SCHEDULER, "")
    client = SchedulerClient(endpoint, job_id)
    try:
        return client.advise(ResizePoint(
            job_id=job_id, iteration=iteration, nprocs=num_nodes, grid=(processor_row_count, processor_column_count),
            iter_time=float(iteration_time), redist_time=redistribution_time, host=node_name))
    finally:
        if client.conn is not None:
            client.conn.close()
