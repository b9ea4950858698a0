"""Where the daemon's loop spends its time: per-iteration phase times, per-request handling, GC pauses.

A request waits in the socket while the loop finishes the iteration it is
in, so a client's round trip is its own service time (recv -> reply, what
``status`` reports as ``p50_ms``/``p99_ms``) plus whatever the loop was doing
when it arrived, plus the client's own CPU time. :class:`LoopStats` records,
for every turn of the loop that did work, how long each phase took
(:data:`PHASES`), how long the handling of each request kind took, and every
pause of the garbage collector (``gc.callbacks``), as cumulative log-spaced
histograms: recording costs a bisection and two additions, reading costs
the buckets, never a sort; a reader subtracts two readings to get the
figures of the time between them (``benchmarks/scale.py`` does). The
slowest recent iterations are kept with their breakdown.
"""

from __future__ import annotations

import bisect
import collections
import gc
import time
from typing import Any

import numpy as np

__all__ = ["BOUNDS", "PHASES", "LoopStats", "ServiceWindow", "delta", "percentile"]

#: Bucket upper bounds in seconds: 10 us to ~10 s, 8 per decade (each 1.33x the one before).
BOUNDS = tuple(1e-5 * 10 ** (i / 8) for i in range(49))

#: The phases of one turn of the loop (``scheduler.daemon.loop.Daemon.serve``), in order:
#: ``recv`` receiving and decoding-to-reply overhead beside ``handle`` (the core's work per request,
#: decode included); ``tick`` the System Monitor and the scheduling pass (every ``tick`` seconds);
#: ``kill``; ``commit`` the journal's group commit; ``send`` the replies (the read-only requests,
#: ``status``, ``history`` and ``log``, are answered there, after the others); ``launch`` fork/exec of
#: started jobs and their commit; ``wal`` rewinding the journal's WAL; ``freeze`` ``gc.freeze``;
#: ``dashboard`` its snapshot; ``retain`` pruning the journal (``scheduler.daemon.retention``).
#: ``busy`` is the whole turn without the wait for a request; ``gc``
#: the collector's pauses inside the turn (already counted in the phase they interrupted).
PHASES = ("recv", "handle", "tick", "kill", "commit", "send", "launch", "wal", "freeze", "dashboard", "retain", "busy",
          "gc")
SLOW = 0.005  # a turn busier than this is kept, with its breakdown, among the slowest
KEEP_SLOW = 20


class ServiceWindow:
    """The service times of the last ``size`` requests in a ring buffer; :meth:`stats` selects the
    p50/p99/max with a partial sort (numpy ``partition``): ~0.1 ms of the loop per ``status`` at
    8,192 requests, where sorting them took ~3 ms."""

    def __init__(self, size: int = 8192):
        self.buf = np.zeros(size)
        self.n = 0  # requests seen

    def append(self, seconds: float) -> None:
        self.buf[self.n % len(self.buf)] = seconds
        self.n += 1

    def __len__(self) -> int:
        return min(self.n, len(self.buf))

    def stats(self) -> tuple[float, float, float] | None:
        """``(p50, p99, max)`` in seconds (the elements of rank ``n // 2`` and ``int(0.99 n)`` of the
        window sorted), None when empty."""
        n = len(self)
        if not n:
            return None
        ks = sorted({n // 2, min(n - 1, int(0.99 * n)), n - 1})
        part = np.partition(self.buf[:n], ks)
        return float(part[n // 2]), float(part[min(n - 1, int(0.99 * n))]), float(part[n - 1])


class _Hist:
    __slots__ = ("counts", "max", "sum")

    def __init__(self):
        self.counts = [0] * (len(BOUNDS) + 1)
        self.sum = 0.0
        self.max = 0.0

    def observe(self, x: float) -> None:
        self.counts[bisect.bisect_left(BOUNDS, x)] += 1
        self.sum += x
        if x > self.max:
            self.max = x

    def to_dict(self) -> dict[str, Any]:
        return {"counts": [[i, c] for i, c in enumerate(self.counts) if c], "sum_s": self.sum,
                "max_ms": 1e3 * self.max}


class LoopStats:
    """Cumulative histograms of the loop's phases, request handling by kind, and GC pauses."""

    def __init__(self):
        self.turns = 0
        self.phases = {p: _Hist() for p in PHASES}
        self.requests: dict[str, _Hist] = collections.defaultdict(_Hist)
        self.gc_pauses = _Hist()
        self.slowest: collections.deque[dict[str, Any]] = collections.deque(maxlen=KEEP_SLOW)
        self._turn: dict[str, float] = {}
        self._gc_start = 0.0
        self._gc_in_turn = 0.0

    # ------------------------------------------------------------------ recording
    def _on_gc(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._gc_start = time.perf_counter()
        else:
            dt = time.perf_counter() - self._gc_start
            self.gc_pauses.observe(dt)
            self._gc_in_turn += dt

    def watch_gc(self) -> None:
        if self._on_gc not in gc.callbacks:
            gc.callbacks.append(self._on_gc)

    def unwatch_gc(self) -> None:
        if self._on_gc in gc.callbacks:
            gc.callbacks.remove(self._on_gc)

    def begin(self) -> None:
        """A turn of the loop starts (after its wait for a request)."""
        self._turn = {}
        self._gc_in_turn = 0.0

    def add(self, phase: str, seconds: float) -> None:
        self._turn[phase] = self._turn.get(phase, 0.0) + seconds

    def request(self, kind: str, seconds: float) -> None:
        self.requests[kind].observe(seconds)

    def end(self, busy: float, requests: int) -> None:
        """The turn ended after ``busy`` seconds of work, having answered ``requests`` requests."""
        t = self._turn
        t["busy"] = busy
        t["gc"] = self._gc_in_turn
        self.turns += 1
        for p, x in t.items():
            self.phases[p].observe(x)
        if busy > SLOW:
            self.slowest.append({"t": time.time(), "requests": requests,
                                 **{f"{p}_ms": round(1e3 * x, 3) for p, x in t.items() if x >= 5e-5}})

    # ------------------------------------------------------------------ reading
    def to_dict(self) -> dict[str, Any]:
        """Cumulative counts since the start, as ``[bucket, count]`` pairs of the non-empty buckets
        (``bounds_ms`` the buckets' upper bounds; the last bucket is above them all): subtract two
        readings with :func:`delta`."""
        return {"turns": self.turns, "bounds_ms": [1e3 * b for b in BOUNDS],
                "phases": {p: h.to_dict() for p, h in self.phases.items()},
                "requests": {k: h.to_dict() for k, h in self.requests.items()},
                "gc_pauses": self.gc_pauses.to_dict(), "slowest": list(self.slowest)}


def percentile(counts: list[int], bounds_ms: list[float], q: float) -> float | None:
    """The ``q``-quantile (0-1) of a histogram, as its bucket's upper bound (ms): an upper estimate
    within one bucket (33%)."""
    n = sum(counts)
    if not n:
        return None
    rank, acc = q * n, 0
    for i, c in enumerate(counts):
        acc += c
        if acc >= rank and c:
            return bounds_ms[i] if i < len(bounds_ms) else float("inf")
    return bounds_ms[-1]


def delta(after: dict[str, Any], before: dict[str, Any] | None) -> dict[str, Any]:
    """Per phase, request kind and GC: count, total, p50/p99 (bucket bounds) between two readings of
    :meth:`LoopStats.to_dict` (``before`` None: since the start). ``max_ms`` is since the start."""
    bounds = after["bounds_ms"]

    def dense(h: dict[str, Any] | None) -> list[int]:
        out = [0] * (len(bounds) + 1)
        for i, c in (h["counts"] if h else ()):
            out[i] = c
        return out

    def one(a: dict[str, Any], b: dict[str, Any] | None) -> dict[str, Any]:
        counts = [x - y for x, y in zip(dense(a), dense(b), strict=True)]
        total = a["sum_s"] - (b["sum_s"] if b else 0.0)
        return {"n": sum(counts), "total_s": total, "p50_ms": percentile(counts, bounds, 0.5),
                "p99_ms": percentile(counts, bounds, 0.99), "max_ms": a["max_ms"]}

    b = before or {}
    return {"turns": after["turns"] - b.get("turns", 0),
            "phases": {p: one(h, b.get("phases", {}).get(p)) for p, h in after["phases"].items()},
            "requests": {k: one(h, b.get("requests", {}).get(k)) for k, h in after["requests"].items()},
            "gc_pauses": one(after["gc_pauses"], b.get("gc_pauses"))}
