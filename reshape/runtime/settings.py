"""The job's ``RESHAPE_*`` settings, parsed (pure): what :func:`reshape.runtime.checks.job_settings`
checks on every rank at ``init()``.

:func:`env_problems` reads every variable a job reads (:mod:`reshape.joblink.jobenv`) into a
frozen :class:`JobSettings` and lists what is wrong, one line per value, naming it and what is
allowed; :func:`inplace_settings` is the part for in-place recovery (``RESHAPE_INPLACE``,
``RESHAPE_BUDDY``, :mod:`reshape.runtime.inplace`). No MPI call and no other module of the runtime
but the watchdog's timeout: the modules that use the settings import this one, never the reverse.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from reshape import faults
from reshape.joblink import jobenv as E
from reshape.joblink.advice import parse_plan
from reshape.joblink.jobenv import parse_every
from reshape.joblink.launchers import LAUNCHERS
from reshape.redistribution import nodecopy, pages
from reshape.redistribution.redistribute import METHODS
from reshape.runtime.watchdog import DEFAULT_TIMEOUT, resize_timeout

__all__ = ["DEFAULT_EVERY", "WAITS", "JobSettings", "env_problems", "inplace_settings"]

WAITS = ("auto", "spin", "poll")
DEFAULT_EVERY = 10  # iterations between buddy copies (RESHAPE_BUDDY=every:N)


@dataclass(frozen=True)
class JobSettings:
    """The job's ``RESHAPE_*`` settings, parsed (defaults where unset)."""

    plan: tuple[int, ...] | None = None
    max_procs: int | None = None
    allow_new_sizes: bool = False
    method: str = "circulant"
    background: bool = False
    resize_timeout: float = DEFAULT_TIMEOUT
    job_id: int = 0
    relabel: bool = True
    reuse: bool = False
    standby: int = 0
    checkpoint: tuple[str, float] | None = None  # ("every", N) or ("seconds", T)
    checkpoint_dir: str | None = None
    inplace: bool = False  # RESHAPE_INPLACE: lost ranks recovered in place (reshape.runtime.inplace)
    buddy_every: int = DEFAULT_EVERY  # RESHAPE_BUDDY=every:N


def _int(env: Mapping[str, str], var: str, low: int, problems: list[str]) -> int | None:
    text = env.get(var, "")
    if not text:
        return None
    try:
        value = int(text)
    except ValueError:
        value = None
    if value is None or value < low:
        problems.append(f"{var}={text!r}: expected an integer >= {low}")
        return None
    return value


def _choice(env: Mapping[str, str], var: str, allowed, problems: list[str], default: str = "") -> str:
    text = env.get(var, "")
    if text and text not in allowed:
        problems.append(f"{var}={text!r}: expected one of {', '.join(allowed)}")
        return default
    return text or default


def _flag(env: Mapping[str, str], var: str, problems: list[str], default: bool = False) -> bool:
    try:
        return E.flag(var, default, env)
    except ValueError as e:
        problems.append(str(e))
        return default


def env_problems(env: Mapping[str, str] | None = None) -> tuple[JobSettings, list[str]]:
    """Parse every ``RESHAPE_*`` variable a job reads; the settings and what is wrong (pure).

    ``RESHAPE_KEYS`` and the tools' variables (``RESHAPE_DAEMON``, ``RESHAPE_STATE_DIR``, ...)
    are not read by a job; ``reshape.joblink.auth`` and the CLI check them where they use them.
    """
    env = os.environ if env is None else env
    problems: list[str] = []
    plan = None
    if env.get(E.PLAN):
        try:
            plan = tuple(parse_plan(env[E.PLAN]))
        except ValueError as e:
            problems.append(str(e))
    _int(env, E.PLAN_EVERY, 1, problems)
    max_procs = _int(env, E.MAX_PROCS, 1, problems)
    allow = _flag(env, E.ALLOW_NEW_SIZES, problems)
    background = _flag(env, E.BACKGROUND, problems)
    _flag(env, E.ABORT_ON_ERROR, problems, True)
    _flag(env, E.DEBUG, problems)
    method = _choice(env, E.REDIST_METHOD, METHODS, problems, "circulant")
    _choice(env, E.WAIT, WAITS, problems)
    _choice(env, E.ONECOPY, nodecopy.MODES, problems)
    _choice(env, E.PAGES, pages.MODES, problems)
    _flag(env, E.KEEP_BLOCKS, problems, True)
    _choice(env, E.LAUNCHER, sorted(LAUNCHERS), problems)
    timeout = DEFAULT_TIMEOUT
    try:
        timeout = resize_timeout(env)
    except ValueError as e:
        problems.append(str(e))
    relabel = _flag(env, E.RELABEL, problems, True)
    reuse = _flag(env, E.REUSE, problems)
    standby = _int(env, E.STANDBY, 0, problems) or 0
    if env.get(E.FAULT):
        try:
            faults.parse_all(env[E.FAULT])
        except ValueError as e:
            problems.append(str(e))
    text = env.get(E.SCHEDULER_TIMEOUT, "")
    if text:
        try:
            ok = 0 < float(text) < float("inf")
        except ValueError:
            ok = False
        if not ok:
            problems.append(f"{E.SCHEDULER_TIMEOUT}={text!r}: expected a number of seconds > 0")
    job_id = _int(env, E.JOB_ID, 0, problems) or 0
    nprocs = _int(env, E.NPROCS, 1, problems)
    hosts = env.get(E.HOSTS)
    if hosts is not None and (not hosts or any(not h.strip() for h in hosts.split(","))):
        problems.append(f"{E.HOSTS}={hosts!r}: expected host names separated by commas")
    elif hosts and nprocs is not None and len(hosts.split(",")) != nprocs:
        problems.append(f"{E.HOSTS}={hosts!r}: expected {E.NPROCS}={nprocs} host names")
    sched = env.get(E.SCHEDULER)
    if sched is not None and not sched.startswith(("tcp://", "ipc://")):
        problems.append(f"{E.SCHEDULER}={sched!r}: expected a ZeroMQ endpoint, tcp://HOST:PORT or ipc://PATH")
    checkpoint = None
    if env.get(E.CHECKPOINT):
        checkpoint = parse_every(env[E.CHECKPOINT])
        if checkpoint is None:
            problems.append(f"{E.CHECKPOINT}={env[E.CHECKPOINT]!r}: expected every:N (iterations, N >= 1), "
                            "seconds:T (T > 0) or auto (spaced by their measured cost)")
    once = env.get(E.FAULT_ONCE)
    if once is not None and (not once.strip() or "\0" in once):
        problems.append(f"{E.FAULT_ONCE}={once!r}: expected a file path")
    ckdir = env.get(E.CHECKPOINT_DIR)
    if ckdir is not None and (not ckdir.strip() or "\0" in ckdir):
        problems.append(f"{E.CHECKPOINT_DIR}={ckdir!r}: expected a directory path")
    on, every, more = inplace_settings(env)
    problems += more
    return JobSettings(plan, max_procs, allow, method, background, timeout, job_id, relabel, reuse,
                       standby, checkpoint, ckdir or None, on, every or DEFAULT_EVERY), problems




def inplace_settings(env) -> tuple[bool, int | None, list[str]]:
    """``RESHAPE_INPLACE`` and ``RESHAPE_BUDDY`` parsed (pure): (on, every, problems)."""
    problems: list[str] = []
    try:
        on = E.flag(E.INPLACE, False, env)
    except ValueError as e:
        problems.append(str(e))
        on = False
    every = None
    text = env.get(E.BUDDY, "")
    if text:
        got = parse_every(text)
        if got is None or got[0] != "every":
            problems.append(f"{E.BUDDY}={text!r}: expected every:N (iterations, N >= 1)")
        else:
            every = int(got[1])
            if not on:
                problems.append(f"{E.BUDDY}={text!r}: buddy copies serve in-place recovery; set {E.INPLACE}=1 too")
    return on, every, problems
