"""The daemon's gatekeeper: CURVE on its socket, a ZAP handler for client keys, a log of refused peers.

A CURVE client whose public key is not in ``KEYS/authorized`` is refused by
the ZAP handler (logged with its address and key); a client without CURVE,
or with the wrong daemon key, fails the handshake before ZAP (logged from the
socket's monitor events, with the errno). A plain client and a client that
hung up mid-handshake (e.g. a node monitor whose request timed out while the
daemon was starting) both show as a reset or a broken pipe, so both count.
A refused peer never reaches the request loop, so nobody else notices. Keys
and the rule for when they are needed: ``reshape.joblink.auth``.

Without keys the ZAP handler names local peers: on ``ipc://`` by the uid
libzmq reads from the kernel, on loopback TCP by the uid owning the peer's
connections (``scheduler.daemon.peers.loopback_uid``). The same thread
counts connections per identity from the socket's monitor events and shuts
those over the limits (``scheduler.daemon.peers``): a connection the kernel
cannot name (a CURVE peer on the network) is counted under the key its
handshake authenticated, which the ZAP handler learns first; the
handshake's success (``EVENT_HANDSHAKE_SUCCEEDED``, with the descriptor)
then pairs the two by the peer's address.
"""

from __future__ import annotations

import collections
import contextlib
import itertools
import socket
import struct
import sys
import threading
import time

import zmq
from zmq.utils import z85
from zmq.utils.monitor import parse_monitor_message

from reshape.joblink.auth import ServerKeys
from reshape.joblink.protocol import printable
from scheduler.daemon.peers import UNIDENTIFIED, ConnectionLimits, Valve, ipc_peer_uid, loopback_uid, tcp_peer_uid

__all__ = ["Gatekeeper"]

ZAP_ENDPOINT = "inproc://zeromq.zap.01"
_HANDSHAKE_FAILED = {
    zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL: "handshake failed",
    zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL: "handshake failed (no CURVE, or the wrong daemon key)",
    zmq.EVENT_HANDSHAKE_FAILED_AUTH: "authentication failed",
}


class Gatekeeper:
    """CURVE on the daemon's socket: a ZAP handler for client keys and a log of refused peers.

    Runs in its own thread (ZAP requests come during handshakes, which must
    not wait for the request loop). ``refused`` counts refusals; each one is
    written to ``log`` (the daemon's stderr) with the peer's address or key.
    """

    def __init__(self, ctx: zmq.Context, sock: zmq.Socket, keys: ServerKeys | None, log=None,
                 local: bool = True, limits: ConnectionLimits | None = None,
                 valve: Valve | None = None):
        """``keys``: CURVE with these server keys; None: a local (``ipc://``) socket, whose peers are
        identified by the kernel (``SO_PEERCRED``, which libzmq gives ZAP as ``localhost:UID:GID:PID``).
        ``local``: an ``ipc://`` socket (else TCP: without keys, a loopback socket whose peers are
        identified by ``scheduler.daemon.peers.loopback_uid``, on :attr:`port`).
        ``limits``: connections per user and in all; ``valve``: closes an ipc socket to other users
        while the open files near the limit (both ``scheduler.daemon.peers``)."""
        self.keys = keys
        self.local = local
        self.limits = limits
        self.valve = valve
        self.port: int | None = None  # the TCP port bound (set once bound): loopback peers' identity
        self._busy_until = 0.0  # connections arrived lately: the valve is checked often
        self.log = log or sys.stderr
        self.refused = 0
        self.accepted = 0
        self.quiet = 10.0
        self._logged: dict[str, tuple[float, int]] = {}
        # identities the ZAP handler authenticated, per peer address, for their handshakes' success to claim
        self._authed: dict[str, collections.deque[str]] = {}
        self._lock = threading.Lock()
        self._ctx = ctx
        self._stop = threading.Event()
        self._zap = ctx.socket(zmq.REP)
        self._zap.linger = 0
        self._zap.bind(ZAP_ENDPOINT)
        self._mon_addr = f"inproc://reshape-gate-{id(self)}"
        sock.monitor(self._mon_addr, zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
                     | zmq.EVENT_HANDSHAKE_FAILED_AUTH | zmq.EVENT_ACCEPTED | zmq.EVENT_DISCONNECTED
                     | zmq.EVENT_HANDSHAKE_SUCCEEDED)
        self._mon = ctx.socket(zmq.PAIR)
        self._mon.linger = 0
        self._mon.rcvhwm = 0  # no connection event may be dropped: the counts depend on every one
        self._mon.connect(self._mon_addr)
        self._sock = sock
        if keys is not None:
            sock.curve_server = True
            sock.curve_secretkey = keys.secret
            sock.curve_publickey = keys.public
        sock.zap_domain = b"reshape"
        self._thread = threading.Thread(target=self._run, name="gatekeeper", daemon=True)
        self._thread.start()

    def _note(self, text: str) -> None:
        """Count a refusal and log it; a peer that keeps retrying is logged once per ``quiet`` seconds."""
        with self._lock:
            self.refused += 1
        now = time.monotonic()
        last, hidden = self._logged.get(text, (-1e9, 0))
        if now - last < self.quiet:
            self._logged[text] = (last, hidden + 1)
            return
        more = f" (and {hidden} more like it)" if hidden else ""
        self._logged[text] = (now, 0)
        print(printable(f"reshape daemon: {time.strftime('%H:%M:%S')} refused {text}{more}"), file=self.log,
              flush=True)

    def _run(self) -> None:
        poller = zmq.Poller()
        poller.register(self._zap, zmq.POLLIN)
        poller.register(self._mon, zmq.POLLIN)
        while not self._stop.is_set():
            with contextlib.suppress(zmq.ZMQError):
                busy = self.valve is not None and (self.valve.closed or time.monotonic() < self._busy_until)
                ready = dict(poller.poll(10 if busy else 200))
                self._check_valve()
                if self._zap in ready:
                    self._serve_zap()
                for i in itertools.count():  # every connection event queued (a flood brings thousands)
                    try:
                        frames = self._mon.recv_multipart(zmq.NOBLOCK)
                    except zmq.Again:
                        break
                    if i % 64 == 63:  # and, meanwhile, the others' handshakes and the file count
                        self._check_valve()
                        self._serve_zap()
                    event, value = struct.unpack("=HI", frames[0][:6])
                    if event in (zmq.EVENT_ACCEPTED, zmq.EVENT_DISCONNECTED, zmq.EVENT_HANDSHAKE_SUCCEEDED):
                        self._count(event, value)
                        continue
                    ev = parse_monitor_message(frames)
                    what = _HANDSHAKE_FAILED.get(ev["event"])
                    # AUTH failures were logged with the key by the ZAP handler already
                    if what and ev["event"] != zmq.EVENT_HANDSHAKE_FAILED_AUTH:
                        self._note(f"a peer on {ev['endpoint'].decode(errors='replace')}: {what} "
                                   f"(errno {ev['value']})")
        for s in (self._zap, self._mon):
            s.close(linger=0)

    def _serve_zap(self) -> None:
        """Answer every ZAP request waiting (a handshake waits for its answer)."""
        while True:
            try:
                frames = self._zap.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return
            self._answer(frames)

    def _check_valve(self) -> None:
        if self.valve is not None:
            did = self.valve.check(time.monotonic())
            if did:
                print(f"reshape daemon: {time.strftime('%H:%M:%S')} {did}", file=self.log, flush=True)

    def _count(self, event: int, fd: int) -> None:
        """A connection opened or closed: count it per user; one over a limit is shut down at once."""
        if self.limits is None:
            return
        if event == zmq.EVENT_DISCONNECTED:
            self.limits.closed(fd)
            return
        if event == zmq.EVENT_HANDSHAKE_SUCCEEDED:  # who it is, from the ZAP answer for its address
            queue = self._authed.get(_address(fd) or "")
            who = queue.popleft() if queue else None
            over = self.limits.identified(fd, who) if who is not None else None
        else:
            self._busy_until = time.monotonic() + 1.0
            uid = ipc_peer_uid(fd) if self.local else tcp_peer_uid(fd)
            over = self.limits.accepted(fd, uid, None if self.local or uid is not None else _address(fd) or "?")
        if over:
            self._note(f"a connection: {over}")

    def _answer(self, frames: list[bytes]) -> None:
        """One ZAP request (RFC 27): version, id, domain, address, identity, mechanism, credentials."""
        if len(frames) < 6:
            return
        version, rid, _domain, address, _identity, mechanism = frames[:6]
        ok, text, user = False, b"unknown client key", b""
        uid = address.split(b":")[1] if address.startswith(b"localhost:") and address.count(b":") == 3 else b""
        if self.keys is None and mechanism == b"NULL" and uid.isdigit():
            ok, text, user = True, b"OK", b"uid:" + uid  # the peer's uid, from the kernel
        elif self.keys is None and not self.local and mechanism == b"NULL":  # loopback TCP: the kernel's table
            found = loopback_uid(address.decode(errors="replace"), self.port)
            ok, text, user = True, b"OK", (f"uid:{found}" if found is not None else UNIDENTIFIED).encode()
        elif self.keys is None:
            self._note(f"client {address.decode(errors='replace')}: no peer credentials")
        elif mechanism == b"CURVE" and len(frames) >= 7:
            key = z85.encode(frames[6])
            name = self.keys.authorized.get(key)
            if name:
                ok, text, user = True, b"OK", b"key:" + name.encode()
                if self.limits is not None:  # for its handshake's success to claim (:meth:`_count`)
                    self._authed.setdefault(address.decode(errors="replace"),
                                            collections.deque(maxlen=64)).append(user.decode())
                with self._lock:
                    self.accepted += 1
            else:
                self._note(f"client {address.decode(errors='replace')}: key {key.decode()} is not authorized")
        else:
            self._note(f"client {address.decode(errors='replace')}: mechanism {mechanism.decode(errors='replace')}")
        self._zap.send_multipart([version, rid, b"200" if ok else b"400", text, user, b""])

    def close(self) -> None:
        """Stop the socket's monitor while the thread still reads its events, then the thread. libzmq
        sends each event blocking, under the lock ``disable_monitor`` takes (with the GIL held): an
        event sent after the reader had gone blocked the sender, and the daemon's stop for good."""
        with contextlib.suppress(zmq.ZMQError):
            self._sock.disable_monitor()
        self._stop.set()
        self._thread.join(timeout=2.0)


def _address(fd: int) -> str | None:
    """The peer's address of a TCP connection (as ZAP names it: no port), or None."""
    s = None
    try:
        s = socket.socket(fileno=fd)
        return s.getpeername()[0].split("%")[0]
    except (OSError, IndexError, TypeError):
        return None
    finally:
        if s is not None:
            s.detach()
