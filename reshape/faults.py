"""Fault injection for testing what a failed resize does: ``RESHAPE_FAULT=WHERE:WHO:HOW``.

Real processes fail for real (killed, exiting, hanging, raising) at a chosen
point of a resize, so that the runtime's and the scheduler's handling of it
can be tested on one machine and across nodes. Unset, nothing happens (one
dictionary lookup per point).

``WHERE`` (the points the runtime passes):

* ``join``: a spawned rank after ``MPI_Init``, before it merges with the job
  (a new rank that crashes at start, or never joins);
* ``transfer``: inside a redistribution (expansion or shrink) once the first
  message step is posted (mid-transfer);
* ``retire``: a rank leaving in a shrink, after its data moved;
* ``recover``: a survivor in an in-place recovery (:mod:`reshape.runtime.inplace`), once the
  communicator is shrunk, before the data moves (a second loss during a recovery);
* ``recovered``: a survivor of an in-place recovery once every survivor agreed on the rebuilt state,
  before the recovery is recorded (a loss the agreement cannot see);
* ``iterationN``: ``ITERATION_DELAY`` seconds into iteration N's step (a job looping with
  ``rt.run``, :mod:`reshape.runtime.inplace`), from a helper thread, while the ranks compute and
  communicate (``raise`` is not available there); a step that ends sooner waits for it at its end
  (:func:`settle`), so that the fault lands in iteration N, never in a later one or after the loop.

``WHO``: ``spawned`` (the highest-ranked spawned process at that point),
``old`` (rank 1 of the ranks started by ``mpiexec``, rank 0 when alone),
``rankN`` (rank N of the communicator at that point) or ``rankN+M+...`` (each of them; with
``RESHAPE_FAULT_ONCE=FILE``, once per rank number: ``FILE.rankN``).

``HOW``: ``kill`` (SIGKILL itself), ``exit`` (``os._exit(3)``), ``hang``
(sleep without calling MPI) or ``raise`` (a ``RuntimeError``, as an MPI error
would).

Several faults: ``WHERE:WHO:HOW,WHERE:WHO:HOW`` (e.g. a kill mid-iteration and another during the
recovery it starts). Each process injects each at most once; with ``RESHAPE_FAULT_ONCE=FILE`` only the
first process of all (of the job and of the attempts a restart makes) that gets there does, and makes
``FILE`` (``FILE.2``, ... for the second fault and on). When it does, it prints
``[reshape] fault injected: WHERE:WHO:HOW at T`` (``T``: epoch seconds) on
stderr, so tests can time what follows.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from typing import NamedTuple

from reshape.joblink import jobenv as E

__all__ = ["ENV_FAULT", "FaultSpec", "check", "hit", "iteration", "parse", "parse_all", "set_spawned",
           "settle"]

ENV_FAULT = E.FAULT
WHERE = ("join", "transfer", "retire", "recover", "recovered")
HOW = ("kill", "exit", "hang", "raise")
ITERATION_DELAY = 0.05  # seconds into the step an iterationN fault fires

_spawned = False
_fired: set[int] = set()  # the faults this process injected (their index in RESHAPE_FAULT)
_armed: list[threading.Thread] = []  # iterationN faults started and not yet waited for (settle)
_cache: tuple[str, list[FaultSpec]] | None = None


class FaultSpec(NamedTuple):
    """What ``RESHAPE_FAULT`` asks for."""

    where: str
    who: str
    how: str


def parse(text: str) -> FaultSpec:
    """``"transfer:spawned:kill"`` -> FaultSpec; ValueError naming what is allowed."""
    parts = text.strip().split(":")
    if len(parts) != 3:
        raise ValueError(f"{ENV_FAULT}={text!r}: expected WHERE:WHO:HOW, e.g. transfer:spawned:kill")
    where, who, how = parts
    numbered = where.startswith("iteration") and where[9:].isdigit()
    if where not in WHERE and not numbered:
        raise ValueError(f"{ENV_FAULT}={text!r}: WHERE {where!r} is not one of {', '.join(WHERE)} or iterationN")
    if who not in ("spawned", "old") and not (who.startswith("rank") and
                                              all(n.isdigit() for n in who[4:].split("+"))):
        raise ValueError(f"{ENV_FAULT}={text!r}: WHO {who!r} is not spawned, old, rankN or rankN+M")
    if how not in HOW:
        raise ValueError(f"{ENV_FAULT}={text!r}: HOW {how!r} is not one of {', '.join(HOW)}")
    if numbered and how == "raise":
        raise ValueError(f"{ENV_FAULT}={text!r}: an iterationN fault fires in a helper thread: use kill, exit or "
                         "hang")
    return FaultSpec(where, who, how)


def parse_all(text: str) -> list[FaultSpec]:
    """``"iteration5:rank2:kill,recover:rank1:kill"`` -> one FaultSpec each (:func:`parse`)."""
    return [parse(part) for part in text.split(",")]


def set_spawned() -> None:
    """This process was started by a resize (called by the runtime when it joins)."""
    global _spawned
    _spawned = True


def _specs() -> list[FaultSpec]:
    global _cache
    text = os.environ.get(ENV_FAULT, "")
    if _cache is None or _cache[0] != text:
        _cache = (text, parse_all(text) if text else [])
    return _cache[1]


def check() -> list[FaultSpec]:
    """The faults ``RESHAPE_FAULT`` asks for (none if unset); ValueError if it is malformed."""
    return _specs()


def _matches(who: str, rank: int, size: int, spawned_from: int | None) -> bool:
    if who == "spawned":
        return _spawned and rank == size - 1
    if who == "old":
        return not _spawned and rank == (1 if (spawned_from or size) > 1 else 0)
    return rank in {int(n) for n in who[4:].split("+")}


def _due(where: str, rank: int, size: int, spawned_from: int | None) -> tuple[int, FaultSpec] | None:
    for i, spec in enumerate(_specs()):
        if i not in _fired and spec.where == where and _matches(spec.who, rank, size, spawned_from):
            return i, spec
    return None


def hit(where: str, rank: int, size: int, spawned_from: int | None = None) -> None:
    """Fail here if ``RESHAPE_FAULT`` names this point and this process.

    ``spawned_from``: the number of ranks that existed before the spawned
    ones (so ``old`` can pick an original rank), when known.
    """
    due = _due(where, rank, size, spawned_from)
    if due is None:
        return
    i, spec = due
    _fired.add(i)
    once = os.environ.get(E.FAULT_ONCE)
    if once and i:
        once = f"{once}.{i + 1}"
    if once and "+" in spec.who:  # several ranks: once per rank number
        once = f"{once}.rank{rank}"
    if once:
        try:
            os.close(os.open(once, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except OSError:
            return  # another process (an earlier attempt) injected it already
    print(f"[reshape] fault injected: {':'.join(spec)} at {time.time():.3f} (rank {rank} of {size}, "
          f"pid {os.getpid()})", file=sys.stderr, flush=True)
    if spec.how == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    if spec.how == "exit":
        os._exit(3)
    if spec.how == "hang":
        while True:
            time.sleep(3600)
    raise RuntimeError(f"injected fault {':'.join(spec)}")


def iteration(it: int, rank: int, size: int) -> None:
    """At the start of iteration ``it``'s step: arm the ``iterationN`` fault for this process, if named."""
    if _due(f"iteration{it}", rank, size, None) is None:
        return
    timer = threading.Timer(ITERATION_DELAY, hit, args=(f"iteration{it}", rank, size))
    timer.daemon = True
    timer.start()
    _armed.append(timer)


def settle() -> None:
    """At the end of an iteration's step: wait for the ``iterationN`` fault armed in it to fire (a ``kill``
    or an ``exit`` ends the process here, a ``hang`` hangs it). The helper thread fires it
    ``ITERATION_DELAY`` seconds into the step, or later on a loaded host; without this wait a short step
    (a few milliseconds) let it land iterations later, or after the job's loop, where the other ranks
    are in the program's own code and nothing recovers them."""
    while _armed:
        _armed.pop().join()
