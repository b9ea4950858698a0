"""The daemon's socket: its default address, binding it (with the access rule), and who sent a frame.

Access (docs/protocol.md, "Access"): an ``ipc://`` socket identifies each local
peer by its uid (the kernel's word, ``SO_PEERCRED``, through a ZAP handler);
a daemon with keys, or one listening beyond loopback, is a CURVE server and
accepts only the clients its key directory authorizes
(``scheduler.service.gatekeeper``). A second daemon on a busy endpoint fails
before writing anything.
"""

from __future__ import annotations

import contextlib
import os
import socket

import zmq

from reshape.joblink import jobenv as E
from scheduler.service.gatekeeper import Gatekeeper

__all__ = ["DEFAULT_ENDPOINT", "bind", "job_endpoint", "user_id"]

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



def bind(endpoint: str, server_keys) -> tuple[zmq.Context, zmq.Socket, Gatekeeper | None]:
    """Bind the daemon's ROUTER socket; OSError saying why when the endpoint is taken or unusable."""
    ctx = zmq.Context()
    sock = ctx.socket(zmq.ROUTER)
    sock.setsockopt(zmq.MAXMSGSIZE, HARD_MAX_BYTES)
    sock.setsockopt(zmq.LINGER, 1000)
    sock.setsockopt(zmq.ROUTER_MANDATORY, 0)
    local = endpoint.startswith("ipc://")
    gate = None
    try:
        if local:
            claim_socket(endpoint[len("ipc://"):])
        if server_keys is not None or local:  # CURVE keys, or the kernel's word on local peers
            gate = Gatekeeper(ctx, sock, server_keys)
        sock.bind(endpoint)
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
            os.chmod(endpoint[len("ipc://"):], 0o666)
    return ctx, sock, gate
