"""``reshape simulate TRACE --policy NAME ...``: compare policies on one trace."""

from __future__ import annotations

import argparse
import json
import sys

__all__ = ["add_commands", "format_table", "run_simulate"]

COLUMNS = [
    ("policy", "policy", "{}"),
    ("utilization", "util", "{:.3f}"),
    ("useful_utilization", "useful", "{:.3f}"),
    ("mean_turnaround", "mean TA (s)", "{:.0f}"),
    ("mean_wait", "mean wait (s)", "{:.0f}"),
    ("mean_bounded_slowdown", "bsld", "{:.2f}"),
    ("big_jobs_mean_wait", "big wait (s)", "{:.0f}"),
    ("big_jobs_worst_wait", "big worst (s)", "{:.0f}"),
    ("resizes_per_job", "resizes/job", "{:.3f}"),
    ("idle_while_waiting", "idle waiting", "{:.3f}"),
    ("walltime_kills", "killed", "{}"),
    ("limit_extensions", "longer limit", "{}"),
    ("late_starts", "late starts", "{}"),
    ("sim_seconds", "sim (s)", "{:.2f}"),
]


def format_table(rows: list[dict], title: str = "") -> str:
    head = [h for _, h, _ in COLUMNS]
    body = [[fmt.format(r[k]) if k in r else "-" for k, _, fmt in COLUMNS] for r in rows]
    w = [max(len(x) for x in col) for col in zip(head, *body, strict=True)]
    lines = [title] if title else []
    lines.append("  ".join(h.ljust(n) if i == 0 else h.rjust(n)
                           for i, (h, n) in enumerate(zip(head, w, strict=True))))
    for b in body:
        lines.append("  ".join(x.ljust(n) if i == 0 else x.rjust(n)
                               for i, (x, n) in enumerate(zip(b, w, strict=True))))
    return "\n".join(lines)


LEGEND = """\
util          slot-seconds held by jobs / (slots x makespan)
useful        the same, each job's slots weighted by its parallel efficiency at its size
TA, wait      turnaround (submit to end) and wait (submit to start), seconds
bsld          mean bounded slowdown: max(1, turnaround / max(run time, 10 s))
big           jobs of more than a quarter of the machine: mean and worst wait, seconds
resizes/job   expansions and shrinks per job
idle waiting  slot-seconds left idle while a job waited / (slots x makespan)
killed        jobs killed at their time limit
longer limit  jobs a policy started below their size with a longer time limit (charged as the
              walltime rule says; --limits stretched: every such start)
late starts   queue heads started after the reservation EASY first made for them
vs EASY, vs best non-resizing: that preset's mean turnaround / the resizing preset's (> 1: it gains)"""


def format_baselines(results: dict[str, dict]) -> str:
    """One line per resizing preset: its gain over rigid EASY and over the best non-resizing preset."""
    from scheduler.lab.runner import against_baselines

    lines = []
    for n, row in against_baselines(results).items():
        easy = f"vs EASY x{row['turnaround_easy_over']:.3f}, " if "turnaround_easy_over" in row else ""
        lines.append(f"{n}: mean turnaround {easy}vs best non-resizing ({row['best_nonresizing']}) "
                     f"x{row['turnaround_best_nonresizing_over']:.3f}")
    return "\n".join(lines)


class _Bar:
    """Progress on stderr for long traces: a bar redrawn in place on a terminal, one line per policy
    when it is done otherwise (a log file gets no carriage returns)."""

    def __init__(self, enabled: bool, tty: bool | None = None):
        self.enabled = enabled
        self.tty = sys.stderr.isatty() if tty is None else tty
        self.last: tuple[str, int] | None = None

    def __call__(self, name: str, done: int, total: int) -> None:
        if not self.enabled or self.last == (name, done):
            return
        self.last = (name, done)
        if not self.tty:
            if done >= total:
                sys.stderr.write(f"{name}: {done}/{total} jobs simulated\n")
                sys.stderr.flush()
            return
        frac = done / max(total, 1)
        n = int(30 * frac)
        end = "\n" if done >= total else ""
        sys.stderr.write(f"\r{name:>14} [{'#' * n}{'.' * (30 - n)}] {done}/{total}{end}")
        sys.stderr.flush()


def _positive(s: str) -> float:
    try:
        v = float(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {s!r}") from None
    if not v > 0 or v != v or v == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number, got {s}")
    return v


def _fraction(s: str) -> float:
    try:
        v = float(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {s!r}") from None
    if not 0.0 <= v <= 1.0:
        raise argparse.ArgumentTypeError(f"must be in [0, 1], got {s}")
    return v


def plot_comparison(results: dict[str, dict], path: str, title: str) -> None:
    """Bar charts of utilization, mean turnaround and bounded slowdown per policy."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(results)
    fig, axes = plt.subplots(1, 3, figsize=(11, 3.4))
    for ax, (key, label) in zip(
        axes,
        [("utilization", "utilization"), ("mean_turnaround", "mean turnaround (s)"),
         ("mean_bounded_slowdown", "mean bounded slowdown")],
        strict=True,
    ):
        ax.bar(names, [results[n][key] for n in names], color="tab:blue")
        ax.set_title(label)
        ax.tick_params(axis="x", rotation=30)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def run_simulate(args: argparse.Namespace) -> int:
    from scheduler.core.actions import PolicyError
    from scheduler.core.policy import preset
    from scheduler.lab.jobmodel import from_trace
    from scheduler.lab.runner import against_baselines, run_policies, with_baselines
    from scheduler.lab.swf import SwfError, read_swf

    asked = args.policy or ["fcfs", "easy", "reshape"]
    try:
        for n in asked:
            preset(n)
        names = asked if args.no_baselines else with_baselines(asked)
        trace = read_swf(args.trace, max_jobs=args.max_jobs)
        for w in trace.warnings:
            print(f"reshape simulate: warning: {w}", file=sys.stderr)
        jobs, total = from_trace(
            trace, load=args.load, malleable_fraction=args.malleable_fraction, seed=args.seed,
            unit=args.unit, iterations=args.iterations, parallelism=args.parallelism,
            estimates=args.estimates, step=args.step,
        )
        bar = _Bar(enabled=not args.json and not args.quiet and len(jobs) >= 2000)
        results = run_policies(jobs, total, names, progress=bar, limits=args.limits)
    except (SwfError, ValueError, PolicyError) as e:
        print(f"reshape simulate: error: {e}", file=sys.stderr)
        return 2
    rows = list(results.values())
    if args.json:
        print(json.dumps({"trace": args.trace, "jobs": len(jobs), "slots": total,
                          "load": args.load, "malleable_fraction": args.malleable_fraction,
                          "limits": args.limits, "results": results,
                          "against_baselines": against_baselines(results)}, indent=1))
    else:
        title = (f"{args.trace}: {len(jobs)} jobs on {total} slots, load x{args.load:g}, "
                 f"{args.malleable_fraction:.0%} malleable, {args.limits} limits")
        added = [n for n in names if n not in asked]
        if added:
            title += f" (baselines added: {', '.join(added)})"
        print(format_table(rows, title))
        vs = format_baselines(results)
        if vs:
            print(vs)
        if not args.quiet:
            print("\n" + LEGEND)
    if args.plot:
        plot_comparison(results, args.plot, args.trace)
    return 0


def add_commands(subparsers) -> None:
    from scheduler.core.policy import presets
    from scheduler.core.walltime import LIMITS

    listing = "\n".join(f"  {p.name:<16} {p.describe()}: {p.doc}" for p in presets().values())
    p = subparsers.add_parser(
        "simulate",
        help="simulate scheduling policies on an SWF workload trace",
        description="Run the daemon's own scheduler core and policies on a trace in virtual time; "
        "several --policy options give one comparison table, with every resizing preset compared with "
        "rigid EASY and the best non-resizing preset (easy and moldable-easy are added when a resizing "
        "preset is asked for).\n\npolicies (application + remap):\n"
        f"{listing}\n  {'sp:K':<16} sp(k=K) + static: static partitioning into K partitions",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="columns of the table:\n" + LEGEND,
    )
    p.add_argument("trace", help="SWF trace file (space or tab separated)")
    p.add_argument("--policy", action="append", metavar="NAME",
                   help="policy to simulate (repeatable; default: fcfs, easy, reshape)")
    p.add_argument("--malleable-fraction", type=_fraction, default=0.5,
                   help="fraction of jobs that are resizable (default 0.5)")
    p.add_argument("--load", type=_positive, default=1.0,
                   help="scale offered load by compressing inter-arrival times (default 1)")
    p.add_argument("--seed", type=int, default=0,
                   help="seed for malleability, speedup curves and user estimates (default 0)")
    p.add_argument("--iterations", type=int, default=10, help="iterations (resize points) per job")
    p.add_argument("--unit", type=int, default=None,
                   help="processors per slot (default: the trace's allocation unit)")
    p.add_argument("--parallelism", default="size-linked", metavar="MODEL",
                   help="how each job's average parallelism A (Downey's speedup model) is drawn: "
                   "'size-linked': the literature's model, A tied to the job's trace size "
                   "(A = size * 2**U(-1, 1)) and sigma normal, truncated at 0, after Cirne and Berman; "
                   "'independent': log-uniform on [1, slots], unrelated to the job's trace size; "
                   "'relative:LO:HI': A = size * 2**U(LO, HI), every job scaling past its size "
                   "for LO >= 0 (the model before 'independent' is relative:0:2) (default: size-linked)")
    p.add_argument("--estimates", choices=("model", "exact"), default="model",
                   help="walltime of jobs without a requested time in the trace: 'model': a user's "
                   "estimate, overestimated by a broad factor and rounded up to a usual limit; "
                   "'exact': the run time (default: model)")
    p.add_argument("--step", type=int, default=None, metavar="SLOTS",
                   help="resizable jobs' legal sizes are multiples of SLOTS (and their own size) "
                   "(default: 1 slot, or a whole node when the header's MaxProcs/MaxNodes says a "
                   "node holds several slots)")
    p.add_argument("--limits", choices=LIMITS, default="wall-clock",
                   help="'wall-clock': a job is killed at the walltime it asked for, counted from its start, "
                   "unless the policy that started it below its size set a longer limit (as a manager's "
                   "scontrol update TimeLimit does, charged by the walltime rule); 'stretched': every start "
                   "below the requested size gets that longer limit (default: wall-clock)")
    p.add_argument("--no-baselines", action="store_true",
                   help="do not add the baselines easy and moldable-easy when a resizing preset is simulated")
    p.add_argument("--max-jobs", type=int, default=None, help="only the first N jobs by submit time")
    p.add_argument("--plot", metavar="FILE.png", help="write a comparison plot")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.add_argument("--quiet", action="store_true", help="no progress bar and no legend under the table")
    p.set_defaults(func=run_simulate)

    # Lynch's (1999) networks of multiprocessor nodes and Nakazawa's (2005) gang scheduler do not fit the
    # slot-count trace model: they get their own commands
    from scheduler.lab import gang, hetero

    hetero.add_command(subparsers)
    gang.add_command(subparsers)
