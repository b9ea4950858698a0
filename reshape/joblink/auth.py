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
    DIR/authorized/NAME.key   public keys the daemon accepts (read at daemon start): the peer is ``key:NAME``
    DIR/accounts.toml         the local account of each key: ``NAME = "ACCOUNT"`` (read at daemon start)

A client uses ``DIR/client.key_secret`` unless ``$RESHAPE_CLIENT_KEY`` names
another secret key file. The daemon's side is ``scheduler.daemon.gatekeeper``;
what a key's account may do, ``scheduler.daemon.accounts``.

Accounts. A key has the rights of its account: jobs it submits run as that
account (on a daemon running as root), and a key whose account is root or
the daemon's user is an admin. A key with no account (``node-HOST`` keys:
they speak for their node only) runs nothing. The admin keeps the table;
``reshape keys`` adds an entry for each key it makes: ``user-NAME`` keys map
to the account ``NAME`` when it exists, ``node-*`` keys to none, any other
key to the account that made it (``--account`` names another). The daemon
refuses a table that others may write.
"""

from __future__ import annotations

import json
import os
import pwd
import re
import shutil
import stat
import tomllib
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import zmq
import zmq.auth

from reshape.joblink import jobenv as E

__all__ = ["ACCOUNTS_FILE", "ENV_CLIENT_KEY", "ENV_KEYS", "AuthError", "ClientKeys", "ServerKeys", "check_pinned",
           "default_keys_dir", "describe", "is_loopback", "keys_dir_for", "load_accounts", "load_client_keys",
           "load_server_keys", "make_keys", "secure_client"]

ENV_KEYS = E.KEYS
ENV_CLIENT_KEY = E.CLIENT_KEY
_LOOPBACK_HOSTS = {"localhost", "::1", "ip6-localhost"}
ACCOUNTS_FILE = "accounts.toml"  # in the key directory: key name -> local account
_ACCOUNT = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,31}\$?$")  # a POSIX user name


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


def _default_account(name: str) -> str | None:
    """The account ``reshape keys`` gives key ``name`` (module docstring)."""
    if name.startswith("node-"):
        return None
    if name.startswith("user-"):
        try:
            return pwd.getpwnam(name[5:]).pw_name
        except KeyError:
            return None
    return pwd.getpwuid(os.geteuid()).pw_name


def make_keys(directory: str, clients: tuple[str, ...] = ("client",), force: bool = False,
              accounts: dict[str, str] | None = None) -> list[str]:
    """Create the server pair (unless present) and the ``clients`` pairs, authorizing each client, and
    give each client key without one an account in ``accounts.toml`` (``accounts[name]``, else the
    default: module docstring; an account named in ``accounts`` replaces an entry, as ``force`` does).

    An existing key is kept (``force`` replaces it); returns the files written.
    """
    accounts = accounts or {}
    for a in accounts.values():
        if not _ACCOUNT.match(a):
            raise AuthError(f"bad account name {a!r} (a user name of this system)")
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
    table = load_accounts(directory)
    new = {n: a for n in clients if (force or n in accounts or n not in table)
           and (a := accounts.get(n) or _default_account(n))}
    if new:
        _write_accounts(directory, {**table, **new})
        written.append(os.path.join(directory, ACCOUNTS_FILE))
    return written


def _write_accounts(directory: str, table: dict[str, str]) -> None:
    path = os.path.join(directory, ACCOUNTS_FILE)
    lines = ["# CURVE key name (authorized/NAME.key) = the local account its jobs run as (reshape keys; see",
             "# docs/cluster.md, \"Who may do what\"). A key not listed runs no job.",
             *(f"{json.dumps(k)} = {json.dumps(v)}" for k, v in sorted(table.items()))]
    tmp = f"{path}.{os.getpid()}"
    with open(tmp, "w") as f:
        f.write("\n".join(lines) + "\n")
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)


def load_accounts(directory: str) -> dict[str, str]:
    """``DIR/accounts.toml`` as {key name: account}; {} when absent. AuthError (naming the file) when
    it is not TOML of names, or when someone other than root and this user may change it."""
    path = os.path.join(directory, ACCOUNTS_FILE)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return {}
    except OSError as e:
        raise AuthError(f"cannot read {path}: {e.strerror or e}") from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if st.st_uid not in (0, os.geteuid()) or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            raise AuthError(f"{path} may be changed by others (owner uid {st.st_uid}, mode "
                            f"{stat.S_IMODE(st.st_mode):04o}): make it root's or this user's, mode 644")
        try:
            table = tomllib.load(f)
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
            raise AuthError(f"{path}: not TOML: {e}") from None
    bad = [f"{k} = {v!r}" for k, v in table.items() if not isinstance(v, str) or not _ACCOUNT.match(v)]
    if bad:
        raise AuthError(f"{path}: each entry must be KEY = \"ACCOUNT\" (a user name), not {bad[0][:100]}")
    return table


@dataclass(frozen=True)
class ServerKeys:
    public: bytes
    secret: bytes
    authorized: dict[bytes, str]  # public key (Z85) -> its name (authorized/NAME.key): the peer is key:NAME
    directory: str
    accounts: dict[str, str] = field(default_factory=dict)  # key name -> local account (accounts.toml)


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
    authorized = {_public(os.path.join(auth_dir, f), "client key"): f[:-len(".key")] for f in names}
    if not authorized:
        raise AuthError(f"no authorized client keys in {auth_dir}: nobody could connect")
    return ServerKeys(public, secret, authorized, directory, load_accounts(directory))


def load_client_keys(directory: str, key: str | None = None) -> ClientKeys:
    """The client pair (``key``, else ``$RESHAPE_CLIENT_KEY``, else ``client.key_secret``) and the daemon's
    public key."""
    path = key or os.environ.get(ENV_CLIENT_KEY) or os.path.join(directory, "client.key_secret")
    public, secret = _secret(path, "client key")
    return ClientKeys(public, secret, _public(os.path.join(directory, "server.key"), "daemon's public key"),
                      directory)


def check_pinned(directory: str) -> None:
    """The daemon's public key a client pins (``DIR/server.key``) is what the admin put there: the file
    and its directory belong to root or this user and nobody else may write them (AuthError otherwise)."""
    for path in (directory, os.path.join(directory, "server.key")):
        try:
            st = os.stat(path)
        except OSError as e:
            raise AuthError(f"cannot read {path}: {e.strerror or e}") from None
        if st.st_uid not in (0, os.geteuid()) or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            raise AuthError(f"{path} may be changed by others (owner uid {st.st_uid}, mode "
                            f"{stat.S_IMODE(st.st_mode):04o}): the daemon's key it holds cannot be trusted")


def secure_client(sock: zmq.Socket, keys: ClientKeys) -> None:
    """Make ``sock`` (before ``connect``) a CURVE client of the daemon."""
    sock.curve_secretkey = keys.secret
    sock.curve_publickey = keys.public
    sock.curve_serverkey = keys.server


def describe(directory: str) -> str:
    """One line about a key directory, for ``reshape keys``."""
    keys = load_server_keys(directory)
    mapped = ", ".join(f"{k} -> {v}" for k, v in sorted(keys.accounts.items()))
    return (f"{directory}: daemon key {keys.public.decode()}, {len(keys.authorized)} authorized client key(s); "
            f"accounts ({ACCOUNTS_FILE}): {mapped or 'none'}")
