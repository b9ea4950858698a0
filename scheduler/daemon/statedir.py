"""The daemon's state directory: checked before use, private, and written without following links.

Layout and modes (docs/cluster.md, "Who may do what"):

* ``STATE_DIR`` 0711: others may reach what is inside by name (the ``ipc://``
  socket, a job's checkpoint directory) but not list it;
* ``STATE_DIR/logs`` 0711, each ``job-N.log`` 0600 owned by the job's owner
  (who may read it, as may root; ``reshape log`` reads it through the
  daemon), ``job-N.exit`` 0600 the daemon's;
* ``STATE_DIR/checkpoints`` 0711, one directory per job owned by its owner;
* ``journal.sqlite`` (and SQLite's ``-wal``, ``-shm``, which take its mode)
  0600, ``daemon.pid`` 0644.

Before anything is written, :func:`check` refuses (one line, naming the path
and what is wrong) a state directory or subdirectory that is a symbolic
link, not owned by the daemon's user, or writable by group or others, and a
file the daemon writes there that is a link or someone else's. So a
directory another user prepared (in ``/tmp``, say) is never used, and every
file the daemon opens afterwards (:func:`open_private`, ``O_NOFOLLOW``) is
its own.
"""

from __future__ import annotations

import os
import stat

__all__ = ["DIRS", "FILES", "StateDirError", "check", "open_private", "prepare"]

DIRS = {"": 0o711, "logs": 0o711, "checkpoints": 0o711}  # relative path -> mode
FILES = ("journal.sqlite", "journal.sqlite-wal", "journal.sqlite-shm", "daemon.pid", "dashboard.token")


class StateDirError(ValueError):
    """A state directory the daemon will not use (the message says why, in one line)."""


def _check_node(path: str, want_dir: bool) -> os.stat_result | None:
    """lstat ``path`` and refuse a link, the wrong kind, a foreign owner, a group/world-writable one."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    me = os.geteuid()
    what = "state directory" if want_dir else "state file"
    if stat.S_ISLNK(st.st_mode):
        raise StateDirError(f"{what} {path} is a symbolic link: refusing to use it (remove it, or choose "
                            "another --state-dir)")
    if want_dir != stat.S_ISDIR(st.st_mode) or not (want_dir or stat.S_ISREG(st.st_mode)):
        raise StateDirError(f"{what} {path} is not a {'directory' if want_dir else 'regular file'}: refusing "
                            "to use it")
    if st.st_uid != me:
        raise StateDirError(f"{what} {path} is owned by uid {st.st_uid}, not by the daemon's user (uid {me}): "
                            "refusing to use it (choose another --state-dir)")
    if st.st_mode & 0o022:
        raise StateDirError(f"{what} {path} is writable by group or others (mode {stat.S_IMODE(st.st_mode):04o}): "
                            f"refusing to use it (chmod go-w {path}, or choose another --state-dir)")
    return st


def check(state_dir: str) -> None:
    """Refuse a state directory the daemon should not use (:class:`StateDirError`); creates nothing."""
    for rel in DIRS:
        _check_node(os.path.join(state_dir, rel) if rel else state_dir, True)
    for name in FILES:
        _check_node(os.path.join(state_dir, name), False)


def prepare(state_dir: str) -> None:
    """:func:`check`, then create what is missing and set the modes of the layout above."""
    check(state_dir)
    parent = os.path.dirname(state_dir)
    if parent:
        os.makedirs(parent, exist_ok=True)
    for rel, mode in DIRS.items():
        path = os.path.join(state_dir, rel) if rel else state_dir
        if not os.path.lexists(path):
            os.mkdir(path, mode)
        st = _check_node(path, True)  # made by someone else meanwhile
        if st is not None and stat.S_IMODE(st.st_mode) != mode:
            os.chmod(path, mode)
            if rel == "logs":  # written by an earlier version (0644): private now
                _tighten(path)
    for name in ("journal.sqlite", "journal.sqlite-wal", "journal.sqlite-shm"):
        path = os.path.join(state_dir, name)
        if name == "journal.sqlite" and not os.path.lexists(path):
            os.close(open_private(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL))  # SQLite's files take its mode
        if os.path.lexists(path):
            os.chmod(path, 0o600)


def _tighten(logs: str) -> None:
    """Every job log and exit file in ``logs`` readable by its owner only (links left alone)."""
    with os.scandir(logs) as entries:
        for e in entries:
            if e.is_file(follow_symlinks=False) and e.stat(follow_symlinks=False).st_mode & 0o077:
                fd = os.open(e.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
                try:
                    os.fchmod(fd, 0o600)
                finally:
                    os.close(fd)


def open_private(path: str, flags: int, mode: int = 0o600, owner: int | None = None) -> int:
    """``os.open`` that never follows a symbolic link (``O_NOFOLLOW``) nor leaks into children;
    ``owner``: a uid to give a file created here (a job's log, as its owner)."""
    fd = os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(f"{path} is not a regular file")
        if owner is not None and st.st_uid != owner:
            os.fchown(fd, owner, -1)
        if stat.S_IMODE(st.st_mode) & ~mode:
            os.fchmod(fd, mode)
    except BaseException:
        os.close(fd)
        raise
    return fd
