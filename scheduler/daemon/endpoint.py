"""The daemon's socket: its default address, binding it (with the access rule), and who sent a frame.

Access (docs/protocol.md, "Access"): an ``ipc://`` socket identifies each local
peer by its uid (the kernel's word, ``SO_PEERCRED``, through a ZAP handler);
a daemon with keys, or one listening beyond loopback, is a CURVE server and
accepts only the clients its key directory authorizes
(``scheduler.daemon.gatekeeper``); a loopback TCP socket without keys identifies each peer by
uid at its handshake (``scheduler.daemon.peers.loopback_uid``). Every socket has the connection limits
of ``scheduler.daemon.peers`` and a 5 s handshake timeout. A second daemon on a busy endpoint
fails before writing anything.
"""

from __future__ import annotations

import contextlib
import os
import socket

import zmq

from reshape.joblink import jobenv as E
from scheduler.daemon.gatekeeper import Gatekeeper
from scheduler.daemon.peers import (
    HANDSHAKE_SECONDS,
    ConnectionLimits,
    Valve,
    chmod_socket,
    fd_limit,
    raise_fd_limit,
)

__all__ = ["DEFAULT_ENDPOINT", "bind", "default_limits", "job_endpoint", "user_id"]

# a Unix socket in the state directory: local peers only, each identified by its uid (docs/cluster.md)
DEFAULT_ENDPOINT = "ipc://" + os.path.join(E.default_state_dir(), "daemon.sock")
HARD_MAX_BYTES = 1 << 20  # zmq.MAXMSGSIZE: larger frames drop the connection, smaller get an error reply


def job_endpoint(endpoint: str) -> str:
    """The address jobs connect to (a wildcard bind becomes this host's name)."""
    for wild in ("tcp://*:", "tcp://0.0.0.0:"):
        if endpoint.startswith(wild):
            return "tcp://" + socket.gethostname() + ":" + endpoint[len(wild):]
    return endpoint


def claim_socket(path: str) -> None:
    """Make ``path`` free for binding: refuse if a daemon listens there (binding would take its
    place silently), remove a stale socket left by one that died."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    if not os.path.exists(path):
        return
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(path)
    except OSError:
        os.unlink(path)  # nobody listens: left by a daemon that was killed
        return
    finally:
        probe.close()
    raise OSError(f"a daemon already listens on ipc://{path} (stop it, or choose another --endpoint)")


def user_id(frame: zmq.Frame) -> str | None:
    """The authenticated sender of a frame (the ZAP handler's User-Id), if any."""
    try:
        return frame.get("User-Id") or None
    except (zmq.ZMQError, KeyError):
        return None



SOCKET_MODE = 0o666  # every local user submits jobs: each may connect (identified by uid, held to the limits)
MAX_PEERS = 4096  # connections the daemon holds at most (--max-peers), and never over half its file limit
MAX_PEERS_PER_USER = 256  # connections one user (not an admin) holds at most (--max-peers-per-user)


def default_limits(max_peers: int | None = None, per_user: int | None = None) -> tuple[int, int]:
    """(connections in all, per user): the given ones, else the defaults; in all at most half the
    file limit (the rest is the journal's, the jobs' logs and pipes, the dashboard's)."""
    total = min(max_peers or MAX_PEERS, max(16, fd_limit() // 2))
    return total, min(per_user or MAX_PEERS_PER_USER, total)


def bind(endpoint: str, server_keys, max_peers: int | None = None, per_user: int | None = None,
         is_admin=None) -> tuple[zmq.Context, zmq.Socket, Gatekeeper]:
    """Bind the daemon's ROUTER socket; OSError saying why when the endpoint is taken or unusable.
    ``max_peers``, ``per_user``: connection limits (:func:`default_limits`); ``is_admin``: the
    identities not held to them (default root and the daemon's user)."""
    limit = raise_fd_limit()
    total, mine = default_limits(max_peers, per_user)
    ctx = zmq.Context()
    sock = ctx.socket(zmq.ROUTER)
    sock.setsockopt(zmq.MAXMSGSIZE, HARD_MAX_BYTES)
    sock.setsockopt(zmq.LINGER, 1000)
    sock.setsockopt(zmq.ROUTER_MANDATORY, 0)
    sock.setsockopt(zmq.HANDSHAKE_IVL, int(HANDSHAKE_SECONDS * 1000))
    local = endpoint.startswith("ipc://")
    gate = None
    try:
        if local:
            claim_socket(endpoint[len("ipc://"):])
        path = endpoint[len("ipc://"):] if local else ""
        # every local user may connect (and is identified), unless the daemon is running short of files
        valve = Valve(path, SOCKET_MODE, limit) if local and server_keys is None else None
        # ZAP for every peer: CURVE keys, or the kernel's word on local peers (ipc, loopback TCP)
        limits = ConnectionLimits(total, mine, is_admin) if is_admin else ConnectionLimits(total, mine)
        gate = Gatekeeper(ctx, sock, server_keys, local=local, limits=limits, valve=valve)
        sock.bind(endpoint)
        if not local:
            gate.port = int(sock.getsockopt_string(zmq.LAST_ENDPOINT).rsplit(":", 1)[1])
    except (OSError, zmq.ZMQError) as e:
        if gate is not None:
            gate.close()
        sock.close(linger=0)
        ctx.term()
        why = "address already in use (another daemon? stop it, or choose another --endpoint)" \
            if getattr(e, "errno", None) == zmq.EADDRINUSE else str(e)
        raise OSError(f"cannot listen on {endpoint}: {why}") from None
    if local and server_keys is None:  # every local user may connect, and is identified
        with contextlib.suppress(OSError):
            chmod_socket(endpoint[len("ipc://"):], SOCKET_MODE)
    return ctx, sock, gate
