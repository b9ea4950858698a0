"""The daemon's web dashboard and ``/metrics``: a thin HTTP edge over :mod:`scheduler.observe.dashboard_view`.

``reshape daemon --dashboard [HOST:]PORT`` serves, read-only:

* ``/``: the page (queue, running jobs and sizes, processors per job over time, iteration time
  per size, the decision log, nodes), which polls ``/api/state`` once a second;
* ``/api/state``: the latest snapshot as JSON;
* ``/metrics``: the same snapshot in the Prometheus text format.

The daemon's loop publishes a new snapshot at most every ``every`` seconds (:meth:`Dashboard.due`,
:meth:`Dashboard.publish`); requests are served by the standard library's threading HTTP server
in its own threads and only read the latest snapshot, so a slow or stuck browser never delays
the ZeroMQ loop.

Access (docs/protocol.md, "Access"; docs/daemon.md, "Dashboard"): the dashboard shows what
``status`` and ``history`` show to any authenticated peer, nothing that needs ownership (no
logs, no cancel). On a loopback address it needs nothing, as a loopback TCP endpoint does.
Where the protocol requires CURVE (a non-loopback bind, or a daemon given keys), HTTP cannot
carry it, so the dashboard requires a bearer token instead: the daemon
writes a random one to ``STATE_DIR/dashboard.token`` (mode 0600) and every request must carry
it (``Authorization: Bearer TOKEN``, or ``?token=TOKEN`` for a browser's first visit). The
token travels in clear text: beyond a trusted network put TLS in front, or keep the loopback
default and use an SSH tunnel.
"""

from __future__ import annotations

import hmac
import http.server
import ipaddress
import json
import os
import secrets
import socket
import threading
import time
import urllib.parse
from typing import Any

from scheduler.observe.dashboard_view import metrics_text, page

__all__ = ["Dashboard", "is_loopback", "parse_bind"]

TOKEN_FILE = "dashboard.token"


def parse_bind(text: str) -> tuple[str, int]:
    """``[HOST:]PORT`` (``[::1]:PORT`` for IPv6) -> ``(host, port)``; the host defaults to 127.0.0.1."""
    host, sep, port = text.rpartition(":")
    host = host.strip("[]") if sep else "127.0.0.1"
    try:
        p = int(port)
    except ValueError:
        raise ValueError(f"--dashboard {text!r}: expected [HOST:]PORT with PORT a number 0..65535") from None
    if not 0 <= p <= 65535:
        raise ValueError(f"--dashboard {text!r}: port {p} outside 0..65535")
    return host or "127.0.0.1", p


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, addr, handler, dash: Dashboard):
        self.dash = dash
        if ":" in addr[0]:
            self.address_family = socket.AF_INET6
        super().__init__(addr, handler)


class _Handler(http.server.BaseHTTPRequestHandler):
    server: _Server
    server_version = "reshape-dashboard"
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt: str, *args: Any) -> None:  # no access log on the daemon's stderr
        pass

    def _send(self, code: int, body: bytes, ctype: str) -> None:
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _allowed(self, query: dict[str, list[str]]) -> bool:
        token = self.server.dash.token
        if token is None:
            return True
        auth = self.headers.get("Authorization", "")
        given = auth[7:] if auth.startswith("Bearer ") else (query.get("token") or [""])[0]
        return hmac.compare_digest(given.encode(), token.encode())

    def do_GET(self) -> None:
        url = urllib.parse.urlsplit(self.path)
        if not self._allowed(urllib.parse.parse_qs(url.query)):
            self._send(401, b"a token is required (STATE_DIR/dashboard.token)\n", "text/plain; charset=utf-8")
            return
        dash = self.server.dash
        dash.requests += 1
        if url.path in ("/", "/index.html"):
            self._send(200, page(), "text/html; charset=utf-8")
        elif url.path == "/api/state":
            self._send(200, dash.rendered("json"), "application/json")
        elif url.path == "/metrics":
            self._send(200, dash.rendered("metrics"), "text/plain; version=0.0.4; charset=utf-8")
        else:
            self._send(404, b"not found: try /, /api/state or /metrics\n", "text/plain; charset=utf-8")

    do_HEAD = do_GET


class Dashboard:
    """The HTTP edge: started by the daemon, fed snapshots by its loop, closed when it stops."""

    def __init__(self, bind: str, require_token: bool = False, every: float = 0.5):
        """Bind ``[HOST:]PORT`` now (a taken port fails here); nothing is served or written before
        :meth:`start`. A token is required beyond loopback, or when ``require_token``."""
        self.host, port = parse_bind(bind)
        self.every = every
        self.snapshot: dict[str, Any] = {}
        self.requests = 0
        self._last = 0.0
        self.token: str | None = None
        self.token_path: str | None = None
        self._lock = threading.Lock()
        self._cache: dict[str, bytes] = {}
        self._cache_of: dict[str, Any] | None = None
        self._srv = _Server((self.host, port), _Handler, self)  # binds now: a taken port fails here
        self.port = self._srv.server_address[1]
        if require_token or not is_loopback(self.host):
            self.token = secrets.token_urlsafe(24)
        self._thread = threading.Thread(target=self._srv.serve_forever, kwargs={"poll_interval": 0.2},
                                        name="dashboard", daemon=True)

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/"

    def start(self, state_dir: str) -> None:
        """Write the token (if one is required) to ``STATE_DIR/dashboard.token``, then serve."""
        if self.token is not None:
            self.token_path = os.path.join(state_dir, TOKEN_FILE)
            fd = os.open(self.token_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
            os.fchmod(fd, 0o600)  # also when an older file had another mode
            with os.fdopen(fd, "w") as f:
                f.write(self.token + "\n")
        self._thread.start()

    def due(self, now: float) -> bool:
        return now - self._last >= self.every

    def publish(self, snap: dict[str, Any]) -> None:
        """Replace the snapshot (one reference swap: readers see the old or the new one whole)."""
        self.snapshot = snap
        self._last = time.time()

    def rendered(self, kind: str) -> bytes:
        """The latest snapshot as ``json`` or ``metrics`` text, rendered once per snapshot however
        many readers ask: rendering holds the interpreter lock, which the daemon's loop waits for."""
        snap = self.snapshot
        with self._lock:
            if self._cache_of is not snap:
                self._cache, self._cache_of = {}, snap
            if kind not in self._cache:
                self._cache[kind] = (json.dumps(snap, allow_nan=False).encode() if kind == "json"
                                     else metrics_text(snap))
            return self._cache[kind]

    def close(self) -> None:
        if self._thread.is_alive():
            self._srv.shutdown()
        self._srv.server_close()
        self._thread.join(timeout=2.0)
