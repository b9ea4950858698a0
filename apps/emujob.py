"""An emulated resizable job: one process that stands for ``p`` ranks of an iterative code.

``python -m apps.emujob --work 4 --serial 0.05 --overhead 0.02 --iterations 10``

Iteration time at ``p`` processes is the Amdahl-plus-overhead model
``work * (serial + (1 - serial) / p) + overhead * p`` (it has a sweet spot
at ``p* = sqrt(work * (1 - serial) / overhead)``), or, with ``--times
P:T,P:T,...``, a measured or modelled curve: ``T`` seconds at ``P``
processes, linear in ``p`` between the listed sizes and the nearest end's
time outside them (``benchmarks.calibrate_apps`` derives such curves from the
real applications). A resize costs ``redist * (1 + min(old, new) / max(old,
new))`` seconds. These times come from :mod:`reshape.joblink.emulated`, as do
the scheduler's models of this job. The job sleeps instead of computing, so
time-scaled workloads of many "processors" (Sudarsan & Ribbens 2007 §4.2, 36 processors)
can run against the real daemon on a small machine; the job file says
``launch = "single"`` so Job Startup runs one process. It talks to the
scheduler exactly as the resize runtime does: a
:class:`reshape.joblink.advice.Advisor` from the environment.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time

from reshape.joblink import jobenv as E
from reshape.joblink.advice import advisor_from_env
from reshape.joblink.emulated import iteration_time, parse_times, resize_time, table_time
from reshape.joblink.protocol import ResizePoint
from reshape.redistribution.layout import nearly_square_grid

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m apps.emujob", description=__doc__.split("\n")[0])
    ap.add_argument("--work", type=float, default=None, help="one iteration's seconds on 1 process")
    ap.add_argument("--times", default=None, metavar="P:T,...",
                    help="iteration seconds per size instead of --work/--serial/--overhead")
    ap.add_argument("--serial", type=float, default=0.0, help="serial fraction")
    ap.add_argument("--overhead", type=float, default=0.0, help="seconds per process per iteration")
    ap.add_argument("--iterations", type=int, default=10)
    ap.add_argument("--redist", type=float, default=0.0, help="seconds per resize (scale)")
    ap.add_argument("--nprocs", type=int, default=None, help="initial size (default RESHAPE_NPROCS)")
    ap.add_argument("--fail-at", type=int, default=None, help="exit with an error at this iteration")
    ap.add_argument("--noise", type=float, default=0.0,
                    help="each iteration is slowed by a random fraction in [0, NOISE) (interference)")
    ap.add_argument("--seed", type=int, default=None, help="seed of the noise")
    ap.add_argument("--hang-in-resize", action="store_true",
                    help="never finish the first resize (a job stuck without a watchdog: the daemon's "
                         "resize deadline must end it)")
    a = ap.parse_args(argv)
    if (a.work is None) == (a.times is None):
        ap.error("give either --work (with --serial/--overhead) or --times")
    if a.times is not None and (a.serial or a.overhead):
        ap.error("--serial and --overhead belong to --work; --times gives every size's time itself")
    try:
        times = parse_times(a.times) if a.times is not None else None
    except ValueError as e:
        ap.error(str(e))
    p = a.nprocs or int(os.environ.get(E.NPROCS, "1"))
    job_id = int(os.environ.get(E.JOB_ID, "0"))
    advisor = advisor_from_env()
    redist_t: float | None = None
    redist_from: int | None = None
    rng = random.Random(a.seed)
    print(f"started at {time.time():.3f} on {p} processes", flush=True)  # when it runs (benchmarks.slurm_workload)
    for it in range(1, a.iterations + 1):
        base = table_time(p, times) if times else iteration_time(p, a.work, a.serial, a.overhead)
        t = base * (1 + a.noise * rng.random())
        time.sleep(t)
        print(f"iteration {it} at {p} processes: {t:.3f}s", flush=True)
        if a.fail_at == it:
            advisor.finished("error", f"failed at iteration {it}")
            print("failing on purpose", file=sys.stderr)
            return 3
        if it == a.iterations:
            break
        adv = advisor.advise(ResizePoint(job_id=job_id, iteration=it, nprocs=p, grid=tuple(nearly_square_grid(p)),
                                         iter_time=t, redist_time=redist_t, redist_from=redist_from,
                                         total=a.iterations))
        redist_t = redist_from = None
        if adv.action in ("expand", "shrink") and adv.nprocs != p:
            cost = resize_time(a.redist, p, adv.nprocs)
            while a.hang_in_resize:
                time.sleep(3600)
            time.sleep(cost)
            print(f"resize {p} -> {adv.nprocs} ({adv.reason}) in {cost:.3f}s", flush=True)
            advisor.resized(p, adv.nprocs, cost)
            redist_t, redist_from, p = cost, p, adv.nprocs
    advisor.finished("done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
