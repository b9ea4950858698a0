"""Who is at the other end of a connection, and how many connections each user may hold.

Identity. On an ``ipc://`` socket the kernel names each peer's uid
(``SO_PEERCRED``; libzmq hands it to the ZAP handler). On a loopback TCP
socket without CURVE the kernel knows it too: the peer's end of the
connection is a socket of this machine, listed in ``/proc/net/tcp`` with the
uid that created it. The ZAP handler gets the peer's address without its
port, so :func:`loopback_uid` takes every established connection from that
address to the daemon's port: one uid among them is the peer's (its own
connection is one of them, waiting for the handler's answer); several uids
make it :data:`UNIDENTIFIED`. Clients connect from an address of their own
in ``127.0.0.0/8`` (``reshape.joblink.client``), so connections of different
users do not share one. The answer is bound to the connection at its
handshake (ZAP's User-Id), never looked up again from a descriptor that
may since belong to another connection.

Connection limits. libzmq accepts every connection its listener sees, before
any handshake, and asserts (aborting the daemon) when ``accept`` fails with
``EMFILE`` on an ``ipc://`` listener (``src/ipc_listener.cpp``: the TCP
listener tolerates it). So the number of open descriptors must never reach
the process's limit: :func:`raise_fd_limit` raises the soft limit to the
hard one, and :class:`ConnectionLimits` (fed by the gatekeeper's socket
monitor: ``EVENT_ACCEPTED`` / ``EVENT_HANDSHAKE_SUCCEEDED`` /
``EVENT_DISCONNECTED`` carry the descriptor) counts connections per
identity and shuts down at once every connection beyond ``per_user`` for one
identity (admins exempt) or beyond ``total`` for all. A connection whose
peer the kernel names (``ipc://``, loopback TCP) is counted under that uid
from the start; any other (a CURVE peer on the network) is *pending* under
its address until its handshake names its key, then counted under the key.
Pending connections are the first to go: beyond ``per_user`` from one
address, or at the total, the oldest pending one is shut to make room, so
peers that never complete a handshake (no key) cannot keep out one that
does. A shut-down descriptor is closed by libzmq's own I/O thread (it reads
end of file), so nothing here closes a descriptor libzmq owns. Peers that
connect and never complete the handshake are closed by libzmq after
``ZMQ_HANDSHAKE_IVL`` (:data:`HANDSHAKE_SECONDS`).
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import resource
import socket
import stat
import struct
import threading
import time
from collections.abc import Callable

__all__ = ["HANDSHAKE_SECONDS", "UNIDENTIFIED", "ConnectionLimits", "Valve", "fd_limit", "ipc_peer_uid",
           "loopback_uid", "raise_fd_limit", "tcp_peer_uid"]

UNIDENTIFIED = "peer:unidentified"  # a sender the daemon cannot name (who may do what: handlers.check_access)
HANDSHAKE_SECONDS = 5.0  # a connection that has not completed the ZMTP handshake by then is closed


def raise_fd_limit() -> int:
    """Raise the limit on open descriptors: the soft one to the hard one, and as root both to the
    kernel's most (``fs.nr_open``, at most 2**20); the limit now in force. The daemon's file
    descriptors are then far more than a flood can open before :class:`ConnectionLimits` closes
    what is over the limits."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    inf = resource.RLIM_INFINITY
    if os.geteuid() == 0:
        try:
            with open("/proc/sys/fs/nr_open") as f:
                top = min(int(f.read()), 1 << 20)
        except (OSError, ValueError):
            top = 1 << 16
        if hard != inf and hard < top:
            with contextlib.suppress(ValueError, OSError):
                resource.setrlimit(resource.RLIMIT_NOFILE, (soft, top))
                hard = top
    want = hard if hard != inf else 1 << 16
    if soft != inf and soft < want:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    return fd_limit()


def fd_limit() -> int:
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return soft if soft != resource.RLIM_INFINITY else 1 << 20


def _on(fd: int) -> socket.socket:
    """A socket object on ``fd`` (not owned: :meth:`socket.socket.detach` before it is dropped)."""
    return socket.socket(fileno=fd)


def ipc_peer_uid(fd: int) -> int | None:
    """The uid of the process at the other end of a Unix socket (the kernel's word)."""
    s = None
    try:
        s = _on(fd)
        if s.family != socket.AF_UNIX:
            return None
        _pid, uid, _gid = struct.unpack("3i", s.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
        return uid
    except OSError:
        return None
    finally:
        if s is not None:
            s.detach()


def _proc_hex(ip: str, port: int) -> str:
    """An address as ``/proc/net/tcp{,6}`` writes it: each 32-bit word in host (little-endian) order."""
    raw = ipaddress.ip_address(ip).packed
    words = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
    return f"{words.hex().upper()}:{port:04X}"


def tcp_peer_uid(fd: int) -> int | None:
    """The uid owning the other end of a loopback TCP connection (``/proc/net/tcp``), else None."""
    s = None
    try:
        s = _on(fd)
        family = s.family
        if family not in (socket.AF_INET, socket.AF_INET6):
            return None
        peer, mine = s.getpeername(), s.getsockname()
    except OSError:
        return None
    finally:
        if s is not None:
            s.detach()
    addr = ipaddress.ip_address(peer[0].split("%")[0])
    mapped = getattr(addr, "ipv4_mapped", None)
    if not (addr.is_loopback or (mapped is not None and mapped.is_loopback)):
        return None
    # the peer's socket: local address = its end, remote address = ours
    key = f"{_proc_hex(peer[0].split('%')[0], peer[1])} {_proc_hex(mine[0].split('%')[0], mine[1])}"
    return _SOCKETS.uid(key, "/proc/net/tcp6" if family == socket.AF_INET6 else "/proc/net/tcp")


class _SocketTable:
    """``/proc/net/tcp{,6}`` as {"LOCAL REMOTE": uid}, read again on a miss, at most once every
    ``every`` seconds: a flood of connections costs a few readings a second, not one per connection."""

    def __init__(self, every: float = 0.02):
        self.every = every
        self._tables: dict[str, tuple[float, dict[str, int]]] = {}

    def uid(self, key: str, table: str) -> int | None:
        when, rows = self._tables.get(table, (-1e9, {}))
        if key not in rows:  # a connection newer than the reading: read again (waiting out ``every``)
            time.sleep(max(0.0, when + self.every - time.monotonic()))
            rows = {}
            try:
                with open(table) as f:
                    for line in f.readlines()[1:]:
                        fields = line.split()  # sl local rem st tx:rx tr:when retrnsmt uid ...
                        if len(fields) > 7:
                            rows[f"{fields[1]} {fields[2]}"] = int(fields[7])
            except (OSError, ValueError):
                return None
            self._tables[table] = (time.monotonic(), rows)
        return rows.get(key)


_SOCKETS = _SocketTable()


def loopback_uid(address: str, port: int | None) -> int | None:
    """The one uid owning every established connection from ``address`` (a loopback address) to
    local port ``port`` (``/proc/net/tcp{,6}``); None when there is none, or several uids."""
    try:
        addr = ipaddress.ip_address(address.strip("[]").split("%")[0])
    except ValueError:
        return None
    mapped = getattr(addr, "ipv4_mapped", None)
    if port is None or not (addr.is_loopback or (mapped is not None and mapped.is_loopback)):
        return None
    uids: set[int] = set()
    for table, ip in (("/proc/net/tcp", mapped or addr), ("/proc/net/tcp6", addr)):
        if (table == "/proc/net/tcp") != (ip.version == 4):
            continue
        mine = _proc_hex(str(ip), 0)[:-4]  # its address, any port
        try:
            with open(table) as f:
                lines = f.readlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 7 and fields[3] == "01" and fields[1].startswith(mine) \
                    and int(fields[2].rsplit(":", 1)[1], 16) == port:
                uids.add(int(fields[7]))
    return uids.pop() if len(uids) == 1 else None


def _default_admin(who: str | None) -> bool:
    return who in ("uid:0", f"uid:{os.geteuid()}")


class ConnectionLimits:
    """Open connections per identity, with a cap per identity (admins exempt) and one for everybody
    (module docstring). ``is_admin``: the identities never held to ``per_user`` (``uid:N``, ``key:NAME``;
    default root and the daemon's user)."""

    def __init__(self, total: int, per_user: int, is_admin: Callable[[str | None], bool] = _default_admin):
        self.total, self.per_user, self.is_admin = total, per_user, is_admin
        self.open: dict[int, str | None] = {}  # fd -> identity (None: one the kernel could not name)
        self.by_who: dict[str | None, int] = {}
        self.pending: dict[int, str] = {}  # fd -> peer address, oldest first: no identity before its handshake
        self.pending_at: dict[str, int] = {}  # address -> pending connections
        self.shut = 0  # connections shut down over a limit
        self.peak = 0
        self._lock = threading.RLock()

    def accepted(self, fd: int, uid: int | None, address: str | None = None) -> str | None:
        """Count a new connection: under ``uid`` (the kernel's word), else pending under its peer's
        ``address`` until :meth:`identified`. The limit broken (a connection is then shut: this one, or
        the oldest pending one that makes room), or None."""
        with self._lock:
            self.closed(fd)
            if uid is None and address is not None:
                return self._pending(fd, address)
            who = f"uid:{uid}" if uid is not None else None
            why = None
            if len(self.open) + len(self.pending) >= self.total and self.pending:
                why = self._evict(next(iter(self.pending)), f"{self.total} connections open (--max-peers): the "
                                                             "oldest one still in its handshake closed")
            return self._count(fd, who) or why

    def identified(self, fd: int, who: str | None) -> str | None:
        """A pending connection's handshake named its peer ``who``: counted under it from now on."""
        with self._lock:
            address = self.pending.pop(fd, None)
            if address is None:
                return None  # not pending (closed, shut, or counted from the start)
            self._unpend(address)
            return self._count(fd, who)

    def _count(self, fd: int, who: str | None) -> str | None:
        n = self.by_who.get(who, 0)
        over = None
        if not self.is_admin(who):
            if len(self.open) + len(self.pending) >= self.total:
                over = f"{len(self.open)} connections open >= the daemon's limit {self.total} (--max-peers)"
            elif n >= self.per_user:
                over = (f"{who or 'unidentified peers'}: {n} connections open >= the limit {self.per_user} per "
                        "user (--max-peers-per-user)")
        if over is None:
            self.open[fd] = who
            self.by_who[who] = n + 1
            self.peak = max(self.peak, len(self.open) + len(self.pending))
            return None
        self.shut += 1
        _shut(fd)
        return over

    def _pending(self, fd: int, address: str) -> str | None:
        """A connection with no identity yet: the oldest pending one of its address, or of all, makes room."""
        over = None
        if self.pending_at.get(address, 0) >= self.per_user:
            oldest = next(f for f, a in self.pending.items() if a == address)
            over = self._evict(oldest, f"{address}: {self.per_user} connections in their handshake "
                                       "(--max-peers-per-user): the oldest closed")
        elif len(self.open) + len(self.pending) >= self.total:
            if not self.pending:
                self.shut += 1
                _shut(fd)
                return f"{len(self.open)} connections open >= the daemon's limit {self.total} (--max-peers)"
            over = self._evict(next(iter(self.pending)), f"{self.total} connections open (--max-peers): the "
                                                          "oldest one still in its handshake closed")
        self.pending[fd] = address
        self.pending_at[address] = self.pending_at.get(address, 0) + 1
        self.peak = max(self.peak, len(self.open) + len(self.pending))
        return over

    def _evict(self, fd: int, why: str) -> str:
        address = self.pending.pop(fd)
        self._unpend(address)
        self.shut += 1
        _shut(fd)
        return why

    def _unpend(self, address: str) -> None:
        left = self.pending_at.get(address, 1) - 1
        if left > 0:
            self.pending_at[address] = left
        else:
            self.pending_at.pop(address, None)

    def closed(self, fd: int) -> None:
        with self._lock:
            if fd in self.pending:
                self._unpend(self.pending.pop(fd))
            elif fd in self.open:
                who = self.open.pop(fd)
                left = self.by_who.get(who, 1) - 1
                if left > 0:
                    self.by_who[who] = left
                else:
                    self.by_who.pop(who, None)

    def info(self) -> dict:
        return {"open": len(self.open) + len(self.pending), "pending": len(self.pending), "peak": self.peak,
                "shut": self.shut, "total": self.total, "per_user": self.per_user}


def _shut(fd: int) -> None:
    """Shut a connection down: libzmq's I/O thread reads end of file and closes it."""
    with contextlib.suppress(OSError):
        s = _on(fd)
        try:
            s.shutdown(socket.SHUT_RDWR)
        finally:
            s.detach()


def open_files() -> int:
    """Descriptors this process has open."""
    try:
        return len(os.listdir("/proc/self/fd")) - 1  # the listing's own
    except OSError:
        return 0


def chmod_socket(path: str, mode: int) -> None:
    """chmod the daemon's own Unix socket ``path``, never through a link or onto another file (its
    directory may be one others write to): OSError otherwise."""
    fd = os.open(path, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if not stat.S_ISSOCK(st.st_mode) or st.st_uid != os.geteuid():
            raise OSError(f"{path} is not the daemon's socket")
        os.chmod(f"/proc/self/fd/{fd}", mode)
    finally:
        os.close(fd)


class Valve:
    """An ``ipc://`` socket closed to everyone but its owner and root while the daemon's open files
    near its limit: new connections of other users are then refused by the kernel (``EACCES`` at
    ``connect``), so a flood faster than :class:`ConnectionLimits` can close connections never
    brings libzmq's listener to ``EMFILE``. Reopened once the count is down by half."""

    def __init__(self, path: str, mode: int, limit: int, every: float = 0.01):
        self.path, self.mode, self.every = path, mode, every
        self.high, self.low = limit // 2, limit // 4
        self.closed = False
        self.closings = 0
        self._next = 0.0

    def check(self, now: float) -> str | None:
        """Count the open files (at most every ``every`` seconds); close or reopen; what it did, if anything."""
        if now < self._next:
            return None
        self._next = now + self.every
        n = open_files()
        try:
            if not self.closed and n >= self.high:
                chmod_socket(self.path, 0o600)
                self.closed, self.closings = True, self.closings + 1
                return f"{n} files open >= {self.high} (half the limit): {self.path} closed to other users"
            if self.closed and n <= self.low:
                chmod_socket(self.path, self.mode)
                self.closed = False
                return f"{n} files open: {self.path} open again"
        except OSError:
            pass
        return None
