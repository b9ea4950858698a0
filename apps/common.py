"""What the five resizable applications share: options, the timed resize loop, checks, the table.

Every application is an ordinary ``mpiexec -n K python -m apps.<name>``
program built on :mod:`reshape.runtime`. One job iteration is one whole
operation (Sudarsan & Ribbens 2007 §4, Table 1: "a single job consisted of ten iterations of
the task"); after each iteration the job logs its time (slowest rank) and
calls ``resize()``. After every resize each rank checks its own blocks of the
distributed data (a local check, no gather) and the ranks agree on the
verdict, so a wrong block is caught at the resize that produced it.

Rank 0 keeps one row per iteration (size, iteration time, action, new size,
redistribution and spawn seconds) and prints them as a table; ``--json``
writes them for the benchmark, ``--out`` saves the final result array (for
the tests that compare a static run with a resized one).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

import numpy as np
from mpi4py import MPI

from reshape.mpiutil import allreduce
from reshape.runtime import EXPAND_PARTS, Resizer

__all__ = ["Row", "add_options", "allreduce", "finish", "rand", "run", "want_check"]

CHECK_LIMIT = 512  # --check is on by default up to this problem size


@dataclass
class Row:
    """One job iteration as rank 0 saw it."""

    iteration: int
    procs: int
    iter_time: float
    action: str
    new_procs: int
    redist_seconds: float
    spawn_seconds: float
    check: str
    error: str | None = None
    resize_seconds: float = 0.0  # the whole resize() call (rank 0): what the iteration paid for resizing
    # the parts of an expansion (reshape.runtime.EXPAND_PARTS); 0.0 otherwise
    spawn_call_seconds: float = 0.0
    merge_seconds: float = 0.0
    handover_seconds: float = 0.0
    launch_seconds: float = 0.0
    startup_seconds: float = 0.0
    ready_seconds: float = 0.0
    called_back: int = 0  # of an expansion's new ranks, how many were parked ranks called back


def add_options(ap: argparse.ArgumentParser, n: int, iters: int = 10, size_help: str = "problem size") -> None:
    """The options every application has."""
    ap.add_argument("--n", type=int, default=n, help=f"{size_help} (default {n})")
    ap.add_argument("--iters", type=int, default=iters, help=f"job iterations (default {iters})")
    ap.add_argument("--check", dest="check", action="store_true", default=None,
                    help=f"verify against a serial numpy reference (default: on when n <= {CHECK_LIMIT})")
    ap.add_argument("--no-check", dest="check", action="store_false", help="do not verify")
    ap.add_argument("--json", default=None, metavar="PATH", help="write the per-iteration rows as JSON (rank 0)")
    ap.add_argument("--out", default=None, metavar="PATH", help="save the final result array as .npy (rank 0)")
    ap.add_argument("--pidlog", default=None, metavar="PATH", help="append 'pid size rank tag' lines (tests)")
    ap.add_argument("--quiet", action="store_true", help="print only the final line")


def want_check(args: argparse.Namespace) -> bool:
    return bool(args.check) if args.check is not None else args.n <= CHECK_LIMIT


def positive(ap: argparse.ArgumentParser, **values: int) -> None:
    """Exit with a clear message when an option that must be >= 1 is not."""
    for name, v in values.items():
        if v < 1:
            ap.error(f"--{name.replace('_', '-')} must be >= 1, got {v}")


def rand(*idx: np.ndarray, seed: int = 0) -> np.ndarray:
    """Deterministic pseudo-random values in [-0.5, 0.5) from global indices (same on any layout)."""
    m = 2**64
    h = np.full(np.broadcast_shapes(*(np.shape(i) for i in idx)), (seed * 0x9E3779B97F4A7C15 + 0x632BE59BD9B4E019) % m,
                dtype=np.uint64)
    for k, i in enumerate(idx):
        h ^= np.asarray(i).astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15 * (k + 1) % m)
        h *= np.uint64(0xBF58476D1CE4E5B9)
        h ^= h >> np.uint64(29)
        h *= np.uint64(0x94D049BB133111EB)
        h ^= h >> np.uint64(32)
    return (h >> np.uint64(11)).astype(np.float64) / float(2**53) - 0.5


def run(rt: Resizer, iters: int, step: Callable[[int], None], verify: Callable[[int], str | None] | None,
        args: argparse.Namespace) -> tuple[bool, list[Row]]:
    """The job loop: ``step(it)``, log the slowest rank's time, ``resize()``, verify. Collective.

    ``verify(done)`` checks this rank's blocks after ``done`` whole iterations
    and returns a problem description or ``None``. Ranks spawned mid-run check
    the state they received at the same point where the running ranks check
    after the resize, so the collective verdicts line up.
    """
    rows: list[Row] = []
    ok = _verdict(rt, verify, rt.iteration, "after joining" if rt.joined else "at start")
    _pidlog(args, rt, "join" if rt.joined else "start")
    last: dict[str, float] = {}

    def body(it: int) -> None:
        t0 = time.perf_counter()
        step(it)
        last["dt"] = dt = allreduce(rt.comm, time.perf_counter() - t0)
        last["old"] = rt.size
        rt.log(dt)
        last["t1"] = time.perf_counter()

    def after(it: int, res) -> None:
        nonlocal ok
        t_resize = time.perf_counter() - last["t1"]
        good = _verdict(rt, verify, it + 1, f"after iteration {it} and resize {res.old}->{res.new}")
        ok &= good
        if res.action != "continue":
            _pidlog(args, rt, res.action)
        if rt.rank == 0:
            rows[:] = [r for r in rows if r.iteration < it]  # iterations run again after a lost rank
            rows.append(Row(it, int(last["old"]), last["dt"], res.action, res.new, res.seconds, res.spawn_seconds,
                            "-" if verify is None else ("ok" if good else "WRONG"), res.error, t_resize,
                            **{k: getattr(res, k) for k in EXPAND_PARTS}, called_back=res.called_back))

    rt.run(body, iters, after)  # rt.run: a lost rank is recovered in place with RESHAPE_INPLACE=1
    return ok, rows


def _verdict(rt: Resizer, verify, done: int, where: str) -> bool:
    if verify is None:
        return True
    problem = verify(done)
    if problem:
        print(f"rank {rt.rank}/{rt.size}: data WRONG {where}: {problem}", file=sys.stderr, flush=True)
    return bool(allreduce(rt.comm, 0.0 if problem else 1.0, MPI.MIN))


def _pidlog(args, rt, tag: str) -> None:
    if args.pidlog:
        with open(args.pidlog, "a") as fh:
            fh.write(f"{os.getpid()} {rt.size} {rt.rank} {tag}\n")


def table(rows: list[Row]) -> str:
    """The per-iteration table rank 0 prints."""
    head = f"{'iter':>4} {'procs':>5} {'iter s':>9} {'action':>8} {'->':>3} {'redist s':>9} {'spawn s':>8} {'check':>5}"
    out = [head, "-" * len(head)]
    for r in rows:
        out.append(f"{r.iteration:>4} {r.procs:>5} {r.iter_time:>9.4f} {r.action:>8} {r.new_procs:>3} "
                   f"{r.redist_seconds:>9.4f} {r.spawn_seconds:>8.4f} {r.check:>5}")
        if r.error:
            out.append(f"     refused: {r.error}")
        if r.action == "expand" and r.spawn_call_seconds:
            out.append(f"     spawn {r.spawn_call_seconds:.4f} (launch {r.launch_seconds:.4f}, new ranks start "
                       f"{r.startup_seconds:.4f}, ready {r.ready_seconds:.4f}) merge {r.merge_seconds:.4f} "
                       f"hand-over {r.handover_seconds:.4f}")
    return "\n".join(out)


def finish(rt: Resizer, app: str, args: argparse.Namespace, ok: bool, rows: list[Row], result=None,
           extra: dict | None = None) -> int:
    """Print the table and the final line, write ``--json`` / ``--out``, tell the scheduler. Returns the exit code.

    ``result`` is a registered array (gathered to rank 0 for ``--out``) or a
    plain array/value known on rank 0.
    """
    whole = None
    if args.out is not None and result is not None:
        whole = result.gather(0) if hasattr(result, "gather") else result
    checked = want_check(args)
    if rt.rank == 0:
        if args.out is not None and whole is not None:
            np.save(args.out, np.asarray(whole))
        if not args.quiet:
            print(table(rows), flush=True)
        redist = sum(r.redist_seconds for r in rows)
        sizes = [rows[0].procs, *[r.new_procs for r in rows]] if rows else [rt.size]
        verdict = ("OK" if ok else "WRONG") if checked else "unchecked"
        print(f"{app}: n {args.n} iterations {len(rows)} sizes {sizes} final size {rt.size} "
              f"redistribution {redist:.4f} s result {verdict}", flush=True)
        for r in rows:
            if r.error:
                print(f"refused: {r.error}", flush=True)
        if args.json:
            payload = {"app": app, "n": args.n, "iters": args.iters, "method": rt.method, "checked": checked,
                       "ok": ok, "sizes": sizes, "redist_total": redist, "rows": [asdict(r) for r in rows],
                       **(extra or {})}
            with open(args.json, "w") as fh:
                json.dump(payload, fh, indent=1)
    rt.finish("done" if ok else "failed")
    return 0 if ok else 1
