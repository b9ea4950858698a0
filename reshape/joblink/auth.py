"""Access to the daemon: ZeroMQ CURVE keys, who must use them, and the daemon's gatekeeper.

Rule (both sides apply it, so they agree): authentication is on when a key
directory is given explicitly (``--keys`` or ``$RESHAPE_KEYS``) or when the
daemon's endpoint is not loopback (``tcp://127.*``, ``localhost``, ``[::1]``,
``ipc://``, ``inproc://`` are loopback); the key directory then defaults to
``~/.reshape/keys`` (``$RESHAPE_STATE_DIR/keys`` when that is set). A client
that reaches a daemon bound to ``0.0.0.0`` through ``127.0.0.1`` must
therefore name the keys explicitly (``RESHAPE_KEYS``).

Key directory (``reshape keys --dir DIR`` makes it; ZeroMQ's certificate
files, ``zmq.auth.create_certificates``)::

    DIR/server.key            the daemon's public key (every client needs it)
    DIR/server.key_secret     the daemon's secret key (the daemon only; mode 600)
    DIR/client.key_secret     a client key pair (CLI, jobs, node monitors; mode 600)
    DIR/authorized/NAME.key   public keys the daemon accepts (read at daemon start)

A client uses ``DIR/client.key_secret`` unless ``$RESHAPE_CLIENT_KEY`` names
another secret key file. The daemon's side is ``scheduler.service.gatekeeper``.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from urllib.parse import urlsplit

import zmq
import zmq.auth

from reshape.joblink import jobenv as E

__all__ = ["ENV_CLIENT_KEY", "ENV_KEYS", "AuthError", "ClientKeys", "ServerKeys", "default_keys_dir", "describe",
           "is_loopback", "keys_dir_for", "load_client_keys", "load_server_keys", "make_keys", "secure_client"]

ENV_KEYS = E.KEYS
ENV_CLIENT_KEY = E.CLIENT_KEY
_LOOPBACK_HOSTS = {"localhost", "::1", "ip6-localhost"}


class AuthError(ValueError):
    """Missing or unreadable keys, or a key directory that is not one."""


def default_keys_dir() -> str:
    """``$RESHAPE_KEYS``, else ``keys`` in the default state directory."""
    if os.environ.get(ENV_KEYS):
        return os.environ[ENV_KEYS]
    return os.path.join(E.default_state_dir(), "keys")


def is_loopback(endpoint: str) -> bool:
    """Does ``endpoint`` only reach this machine (so no key is needed)?"""
    if endpoint.startswith(("ipc://", "inproc://")):
        return True
    host = (urlsplit(endpoint).hostname or "").lower()
    return host in _LOOPBACK_HOSTS or host.startswith("127.")


def keys_dir_for(endpoint: str, explicit: str | None = None) -> str | None:
    """The key directory to use for ``endpoint`` (``None``: no authentication), by the rule above."""
    if explicit:
        return explicit
    if os.environ.get(ENV_KEYS):
        return os.environ[ENV_KEYS]
    return None if is_loopback(endpoint) else default_keys_dir()


# ---------------------------------------------------------------- key files
def _secret(path: str, what: str) -> tuple[bytes, bytes]:
    try:
        public, secret = zmq.auth.load_certificate(path)
    except (OSError, ValueError) as e:
        raise AuthError(f"cannot read the {what} {path}: {e} (make keys with 'reshape keys --dir DIR')") from None
    if not secret:
        raise AuthError(f"{path} holds no secret key")
    return public, secret


def _public(path: str, what: str) -> bytes:
    try:
        return zmq.auth.load_certificate(path)[0]
    except (OSError, ValueError) as e:
        raise AuthError(f"cannot read the {what} {path}: {e} (make keys with 'reshape keys --dir DIR')") from None


def _new_pair(directory: str, name: str) -> str:
    """``name.key`` + ``name.key_secret`` in ``directory`` (secret mode 600); returns the public path."""
    old = os.umask(0o077)
    try:
        public, secret = zmq.auth.create_certificates(directory, name)
    finally:
        os.umask(old)
    os.chmod(secret, 0o600)
    os.chmod(public, 0o644)
    return public


def make_keys(directory: str, clients: tuple[str, ...] = ("client",), force: bool = False) -> list[str]:
    """Create the server pair (unless present) and the ``clients`` pairs, authorizing each client.

    An existing key is kept (``force`` replaces it); returns the files written.
    """
    for name in clients:
        if not name or not name.replace("-", "").replace("_", "").isalnum() or name == "server":
            raise AuthError(f"bad client key name {name!r} (letters, digits, '-', '_'; not 'server')")
    auth_dir = os.path.join(directory, "authorized")
    os.makedirs(auth_dir, mode=0o755, exist_ok=True)
    os.chmod(directory, 0o755)
    written = []
    for name in ("server", *clients):
        if force or not os.path.exists(os.path.join(directory, f"{name}.key_secret")):
            public = _new_pair(directory, name)
            written += [public, public + "_secret"]
        if name != "server":
            dst = os.path.join(auth_dir, f"{name}.key")
            shutil.copyfile(os.path.join(directory, f"{name}.key"), dst)
            written.append(dst)
    return written


@dataclass(frozen=True)
class ServerKeys:
    public: bytes
    secret: bytes
    authorized: dict[bytes, str]  # public key (Z85) -> file name
    directory: str


@dataclass(frozen=True)
class ClientKeys:
    public: bytes
    secret: bytes
    server: bytes
    directory: str


def load_server_keys(directory: str) -> ServerKeys:
    """The daemon's pair and the authorized public keys; raises AuthError with what is missing."""
    public, secret = _secret(os.path.join(directory, "server.key_secret"), "daemon's secret key")
    auth_dir = os.path.join(directory, "authorized")
    try:
        names = sorted(f for f in os.listdir(auth_dir) if f.endswith(".key"))
    except OSError:
        raise AuthError(f"no directory of authorized client keys {auth_dir} "
                        f"(make keys with 'reshape keys --dir {directory}')") from None
    authorized = {_public(os.path.join(auth_dir, f), "client key"): f for f in names}
    if not authorized:
        raise AuthError(f"no authorized client keys in {auth_dir}: nobody could connect")
    return ServerKeys(public, secret, authorized, directory)


def load_client_keys(directory: str) -> ClientKeys:
    """The client pair (``$RESHAPE_CLIENT_KEY`` or ``client.key_secret``) and the daemon's public key."""
    path = os.environ.get(ENV_CLIENT_KEY) or os.path.join(directory, "client.key_secret")
    public, secret = _secret(path, "client key")
    return ClientKeys(public, secret, _public(os.path.join(directory, "server.key"), "daemon's public key"),
                      directory)


def secure_client(sock: zmq.Socket, keys: ClientKeys) -> None:
    """Make ``sock`` (before ``connect``) a CURVE client of the daemon."""
    sock.curve_secretkey = keys.secret
    sock.curve_publickey = keys.public
    sock.curve_serverkey = keys.server


def describe(directory: str) -> str:
    """One line about a key directory, for ``reshape keys``."""
    keys = load_server_keys(directory)
    return f"{directory}: daemon key {keys.public.decode()}, {len(keys.authorized)} authorized client key(s)"
