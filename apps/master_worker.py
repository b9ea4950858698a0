"""Resizable synthetic master-worker job (Sudarsan & Ribbens 2007 Table 1, "Master-worker").

One job iteration processes ``--units`` fixed-time work units (20,000 in the
paper; 2,000 by default here). Rank 0 is the master: it hands out chunks of
``--chunk`` unit numbers to the workers on demand and adds up their results;
a worker spends ``--unit-us`` microseconds of CPU on each unit (a busy loop,
so the unit has a fixed cost) and returns an integer per unit. On one rank
the master does the work itself. There is no distributed data: the running
checksum is a registered value, so a resize moves nothing but that value.

Legal sizes: any ``p``.

Verification: the checksum after ``k`` iterations must equal ``k`` times the
sum of the unit values computed serially, exactly (integers), and every unit
of every iteration must have been processed once.

Run: ``mpiexec -n 4 python -m apps.master_worker --units 2000 --iters 10``.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
from mpi4py import MPI

import reshape.runtime as runtime
from apps.common import add_options, finish, positive, run, want_check
from reshape.mpiutil import wait

__all__ = ["unit_value", "work"]

TAG_WORK, TAG_DONE = 11, 12


def unit_value(u: int) -> int:
    """The result of work unit ``u`` (a deterministic integer)."""
    return (u * 2654435761 + 12345) % 1000003


def work(first: int, count: int, unit_seconds: float) -> int:
    """Process units ``first .. first + count - 1``, each a busy loop of ``unit_seconds`` CPU time."""
    total = 0
    for u in range(first, first + count):
        t_end = time.thread_time() + unit_seconds
        while time.thread_time() < t_end:
            pass
        total += unit_value(u)
    return total


def master(comm: MPI.Intracomm, units: int, chunk: int, unit_seconds: float) -> tuple[int, int]:
    """Hand out chunks to workers until all ``units`` are done; returns (checksum, units done).

    The master keeps one receive posted per busy worker (a specific source,
    not ``MPI_ANY_SOURCE``: with MPICH, any-source receives on a communicator
    merged from spawned ranks were seen to miss messages) and polls them.
    """
    if comm.size == 1:
        return work(0, units, unit_seconds), units
    nxt, done, total = 0, 0, 0
    bufs = {w: np.zeros(2, dtype=np.int64) for w in range(1, comm.size)}
    reqs: dict[int, MPI.Request] = {}

    def give(w: int) -> None:
        nonlocal nxt
        if nxt < units:
            count = min(chunk, units - nxt)
            comm.Send(np.array([nxt, count], dtype=np.int64), w, TAG_WORK)
            nxt += count
            reqs[w] = comm.Irecv(bufs[w], w, TAG_DONE)
        else:
            comm.Send(np.array([-1, 0], dtype=np.int64), w, TAG_WORK)

    for w in range(1, comm.size):
        give(w)
    delay = 1e-6
    while reqs:
        ready = [w for w, r in reqs.items() if r.Test()]
        if not ready:
            time.sleep(delay)
            delay = min(2 * delay, 1e-3)
            continue
        delay = 1e-6
        for w in ready:
            del reqs[w]
            total += int(bufs[w][0])
            done += int(bufs[w][1])
            give(w)
    return total, done


def worker(comm: MPI.Intracomm, unit_seconds: float) -> None:
    """Process chunks from rank 0 until it says stop."""
    msg = np.zeros(2, dtype=np.int64)
    while True:
        wait(comm.Irecv(msg, 0, TAG_WORK))
        if msg[0] < 0:
            return
        s = work(int(msg[0]), int(msg[1]), unit_seconds)
        comm.Send(np.array([s, msg[1]], dtype=np.int64), 0, TAG_DONE)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m apps.master_worker", description=__doc__.split("\n\n")[0])
    add_options(ap, n=2000, size_help="work units per iteration (alias of --units)")
    ap.add_argument("--units", dest="n", type=int, help="work units per iteration (paper: 20000; default 2000)")
    ap.add_argument("--unit-us", type=float, default=50.0, help="CPU microseconds per work unit (default 50)")
    ap.add_argument("--chunk", type=int, default=50, help="units per message (default 50)")
    args = ap.parse_args(argv)
    positive(ap, units=args.n, iters=args.iters, chunk=args.chunk)
    if args.unit_us < 0:
        ap.error(f"--unit-us must be >= 0, got {args.unit_us}")
    if args.check is None:
        args.check = True  # the check is cheap at any size
    units, unit_s = args.n, args.unit_us * 1e-6

    rt = runtime.init()
    if not rt.joined:
        rt["checksum"] = 0
        rt["units_done"] = 0
    per_iter = sum(unit_value(u) for u in range(units))

    def step(it: int) -> None:
        if rt.rank == 0:
            total, done = master(rt.comm, units, args.chunk, unit_s)
            rt["checksum"] += total
            rt["units_done"] += done
        else:
            worker(rt.comm, unit_s)

    def verify(done: int) -> str | None:
        if rt.rank != 0:
            return None
        if rt["checksum"] != done * per_iter or rt["units_done"] != done * units:
            return f"checksum {rt['checksum']} / {rt['units_done']} units, want {done * per_iter} / {done * units}"
        return None

    ok, rows = run(rt, args.iters, step, verify if want_check(args) else None, args)
    result = np.array([rt["checksum"], rt["units_done"]], dtype=np.int64) if rt.rank == 0 else None
    return finish(rt, "master_worker", args, ok, rows, result, {"unit_us": args.unit_us})


if __name__ == "__main__":
    sys.exit(main())
