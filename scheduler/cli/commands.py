"""``reshape daemon|submit|status|cancel|history|log|wait|stop|demo|keys``: the daemon's command line
(the commands; their argument parsers are in :mod:`scheduler.cli.parser`)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import replace
from typing import Any

import zmq

from reshape.joblink import jobenv as E
from reshape.joblink import protocol as P
from reshape.joblink.client import DaemonError, RequestTooLarge, SchedulerUnavailable, request
from reshape.joblink.protocol import printable
from scheduler.core.jobtable import FINAL
from scheduler.daemon.endpoint import DEFAULT_ENDPOINT
from scheduler.observe.report import read_history
from scheduler.rm.slurm.view import SlurmError

__all__ = ["cmd_cancel", "cmd_daemon", "cmd_demo", "cmd_history", "cmd_keys", "cmd_log", "cmd_status", "cmd_stop",
           "cmd_submit", "cmd_wait", "read_history", "request"]

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
                from scheduler.cli.slurm import daemon_of

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
    from scheduler.daemon.loop import Daemon, Settings
    from scheduler.rm import from_args

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
        from scheduler.cli.slurm import CONTROLLER, submit_slurm

        sids = submit_slurm(args.files, args.nodes, args.sbatch, args.controller or os.environ.get(CONTROLLER))
        print(json.dumps({"slurm_job_ids": sids}) if args.json else
              "\n".join(f"submitted Slurm job {i} (reshape status --slurm-job {i})" for i in sids))
        return 0
    ids = []
    for path in args.files:
        desc = load_job_file(path)
        if args.delay is not None:
            desc = replace(desc, arrival_delay=args.delay)
        ids.append(request(args.endpoint, P.Submit(job=desc.to_dict()), keys=args.keys).target)
    print(json.dumps({"job_ids": ids}) if args.json else "\n".join(f"submitted job {i}" for i in ids))
    return 0


@_client
def cmd_status(args: argparse.Namespace) -> int:
    st = request(args.endpoint, P.Status(limit=args.limit), keys=args.keys)
    if args.all:  # every ended job, newest first: the journal's, through the history request
        hist = read_history(args.endpoint, keys=args.keys)
        st = replace(st, ended=tuple(sorted(({"job_id": j["job_id"], "name": j["name"], "state": j["state"],
                                              "end_time": j["end_time"], "sizes": j["profile"]["history"],
                                              "error": j["error"]} for j in hist.jobs if j["state"] in FINAL),
                                            key=lambda j: j["end_time"] or 0, reverse=True)))
    if args.json:
        print(json.dumps(st.body, indent=1))
        return 0
    print(f"{st.free_slots} of {st.total_slots} slots free")
    sv = st.daemon
    if sv.get("p99_ms") is not None:
        print(f"daemon: {sv['served']} requests served; service time p50 {sv['p50_ms']:.2f} ms, "
              f"p99 {sv['p99_ms']:.2f} ms (last {sv['window']})")
    site = any(j.get("allocation") for j in st.running)  # a site controller: each job's Slurm job
    again = any(j.get("restarts") for j in st.running + st.queue)  # jobs restarted after a loss

    def restarted(j: dict) -> list:
        if not again:
            return []
        return [f"{j['restarts']} (at {j['resumed_at']}, lost {j['iterations_lost']})" if j.get("resumed_at")
                is not None else j.get("restarts") or ""]

    rows = [[j["job_id"], *([j.get("allocation") or ""] if site else []), j["name"], j["state"], j["nprocs"],
             j["requested"], j["iterations"], *restarted(j), j["pending"], ",".join(j["hosts"]),
             ",".join(f"{h}:{k}" for h, k in j.get("parked", {}).items())] for j in st.running]
    rows += [[j["job_id"], *([""] if site else []), j["name"], j["state"], "", j["requested"], "", *restarted(j),
              "", "", ""] for j in st.queue + st.waiting]
    print(_table(rows, ["JOB", *(["SLURM"] if site else []), "NAME", "STATE", "PROCS", "REQ", "ITER",
                        *(["RESTARTS"] if again else []), "PENDING", "HOSTS", "PARKED"]))
    hidden = st.queued_total + st.waiting_total - len(st.queue) - len(st.waiting)
    more_running = st.running_total - len(st.running)
    if more_running > 0:
        print(f"... and {more_running} more running (--limit)")
    if hidden > 0:
        print(f"... and {hidden} more queued or waiting (--limit)")
    ended = st.ended
    if ended:
        print("\nended:" if args.all else "\nrecently ended (--all: every ended job):")
        print(_table([[j["job_id"], j["name"], j["state"], _ago(st.now, j["end_time"]),
                       "->".join(map(str, j["sizes"])), _clip(j["error"] or "")] for j in ended],
                     ["JOB", "NAME", "STATE", "ENDED", "SIZES", "REASON"]))
        _point_to_logs((j["job_id"], j["end_time"]) for j in ended if j["state"] in ("failed", "lost"))
    nodes = st.nodes
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
        rep = request(args.endpoint, P.Cancel(target=jid), keys=args.keys)
        if rep.state == "cancelling":
            print(f"cancelling job {jid}: kill ordered to the monitor of {rep.runner}, not yet "
                  "confirmed (reshape status shows it cancelled once its processes are gone)")
        else:
            print(f"cancelled job {jid}")
    return 0


@_client
def cmd_history(args: argparse.Namespace) -> int:
    from scheduler.observe.report import plot_history, summarize

    ask = P.History(limit=args.limit, since=time.time() - args.since if args.since is not None else None)
    # a ping first: a dead daemon is reported as fast as by the other commands; the history
    # itself (a long journal) may take longer to assemble
    request(args.endpoint, P.Ping(), keys=args.keys)
    hist = read_history(args.endpoint, ask, args.keys)
    summ = summarize(hist)
    if args.plot:
        plot_history(hist, args.plot)
    if args.json:
        print(json.dumps({"summary": summ, "events": list(hist.events)}, indent=1))
        return 0
    rows = [[r["job_id"], r["name"], r["state"], r["initial"], "->".join(map(str, r["sizes"])),
             _f(r["wait"]), _f(r["turnaround"]), _clip(r["error"] or "") if r["state"] != "done" else ""]
            for r in summ["jobs"]]
    print(_table(rows, ["JOB", "NAME", "STATE", "INIT", "SIZES", "WAIT(s)", "TURNAROUND(s)", "REASON"]))
    ends = {j["job_id"]: j["end_time"] for j in hist.jobs}
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
        text = request(args.endpoint, P.Log(target=args.job_id, tail=args.tail), keys=args.keys).text
    except SchedulerUnavailable as e:  # no daemon: the log on disk, where one is
        path = os.path.join(args.state_dir, "logs", f"job-{args.job_id}.log")
        if not os.path.isfile(path):
            raise
        from scheduler.daemon.supervisor import log_tail

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
            got = request(args.endpoint, P.History(after=jid - 1, limit=1), keys=args.keys).jobs
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
    request(args.endpoint, P.Stop(kill_jobs=args.kill_jobs), keys=args.keys)
    print("daemon stopping" + (" (running jobs killed; jobs run by node monitors once those confirm the kills: "
                               "the daemon names on its standard error any it could not confirm)"
                               if args.kill_jobs else ""))
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from scheduler.cli.demo import run_demo

    if args.dashboard is not None:
        from scheduler.observe.dashboard import parse_bind

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
