"""Slurm commands: ``reshape submit --slurm`` and ``reshape slurm-run`` (docs/slurm.md).

``reshape submit --slurm job.toml`` submits one resizable job to Slurm: an
``sbatch`` script asking for the nodes of the job's starting size, whose body
is ``reshape slurm-run job.toml``. That runs, inside the allocation, a
reshape daemon that grows and shrinks through Slurm (``--slurm-grow``,
``scheduler.service.slurm``), submits the job to it, reports each size change to the
job's Slurm output, and ends with the job: its exit status is the job's. The
daemon's address goes into the Slurm job's comment (``reshape-daemon=...``),
so ``reshape status --slurm-job N`` (any client command) reaches it.
``scancel N`` ends the job: the batch script stops the daemon, which kills
every rank and cancels every expander job (which also end by themselves within
6 s of the job's end).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import time

from reshape.joblink import jobenv as E
from reshape.joblink.client import DaemonError, SchedulerUnavailable
from scheduler.core.jobfile import JobFileError, load_job_file, validate_job
from scheduler.service.slurm import SlurmError
from scheduler.service.slurm import run as slurm_run
from scheduler.service.workload import free_port

__all__ = ["add_commands", "daemon_of", "submit_slurm"]

COMMENT = "reshape-daemon="
FINAL = ("done", "failed", "cancelled", "lost")


def daemon_of(slurm_job: str) -> str:
    """The endpoint of the reshape daemon running in Slurm job ``slurm_job`` (from its comment)."""
    out = slurm_run(["scontrol", "show", "job", str(slurm_job)])
    m = re.search(r"Comment=" + re.escape(COMMENT) + r"(\S+)", out)
    state = re.search(r"JobState=(\S+)", out)
    state = state.group(1) if state else "?"
    if state != "RUNNING":
        raise SlurmError(f"Slurm job {slurm_job} is {state}: its reshape daemon runs only while it runs")
    if not m:
        raise SlurmError(f"Slurm job {slurm_job} has no reshape daemon (not submitted with "
                         f"'reshape submit --slurm', or its daemon is still starting)")
    return m.group(1)


def submit_slurm(files: list[str], nodes: int | None, sbatch_args: list[str]) -> list[str]:
    """``sbatch`` each job file (``--nodes`` if given, else one task per starting rank); returns the Slurm ids."""
    ids = []
    for path in files:
        desc = load_job_file(path)  # a bad file fails here, before Slurm sees it
        n = nodes
        script = "\n".join([
            "#!/bin/sh",
            f"#SBATCH --job-name={desc['name']}",
            *([f"#SBATCH --nodes={n}"] if n else [f"#SBATCH --ntasks={desc['nprocs']}"]),
            # the job travels inside the script: the file need not be on the node the script runs on
            f"exec {shlex.quote(sys.executable)} -m scheduler.cli slurm-run --job {shlex.quote(json.dumps(desc))}",
            "",
        ])
        with tempfile.NamedTemporaryFile("w", suffix=".sh", delete=False) as f:
            f.write(script)
        try:
            out = slurm_run(["sbatch", "--parsable", *sbatch_args, f.name])
        finally:
            os.unlink(f.name)
        ids.append(out.strip().split(";")[0])
    return ids


def cmd_slurm_run(args: argparse.Namespace) -> int:
    from scheduler.service.commands import request

    main = os.environ.get("SLURM_JOB_ID")
    if not main:
        print("reshape slurm-run: not inside a Slurm job (no SLURM_JOB_ID); use 'reshape submit --slurm'",
              file=sys.stderr)
        return 2
    try:
        desc = load_job_file(args.file) if args.file else validate_job(json.loads(args.job), None)
    except (JobFileError, ValueError) as e:
        print(f"reshape slurm-run: {e}", file=sys.stderr)
        return 2
    host = os.environ.get("SLURMD_NODENAME") or socket.gethostname()
    state_dir = os.path.join(E.default_state_dir(), f"slurm-{main}")
    os.makedirs(state_dir, exist_ok=True)
    port = free_port("")
    endpoint = f"tcp://{host}:{port}"
    argv = [sys.executable, "-m", "scheduler.cli", "daemon", "--slurm-grow", "--endpoint", f"tcp://0.0.0.0:{port}",
            "--state-dir", state_dir, "--workdir", os.getcwd(), "--grant-timeout", str(args.grant_timeout),
            "--idle-release", str(args.idle_release), *(["--keys", args.keys] if args.keys else [])]
    with open(os.path.join(state_dir, "daemon.log"), "ab") as log:
        daemon = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    stopping = {"sig": None}

    def on_term(signum, _frame):
        stopping["sig"] = signum

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)

    def stop(kill: bool) -> None:
        try:
            if daemon.poll() is None:  # scancel signals the daemon too: it may be ending already
                request(endpoint, "stop", {"kill_jobs": kill}, keys=args.keys, timeout=2.0)
            daemon.wait(20)
        except (SchedulerUnavailable, DaemonError, subprocess.TimeoutExpired):
            daemon.kill()
        with contextlib.suppress(SlurmError):
            slurm_run(["scancel", "--name", f"reshape-expand-{main}"])

    t0 = time.monotonic()
    while True:
        if daemon.poll() is not None:
            print(f"reshape slurm-run: the daemon exited ({daemon.returncode}); see {state_dir}/daemon.log",
                  file=sys.stderr)
            return 1
        try:
            request(endpoint, "ping", keys=args.keys, timeout=1.0)
            break
        except SchedulerUnavailable:
            if time.monotonic() - t0 > 60:
                stop(True)
                print("reshape slurm-run: the daemon did not answer in 60 s", file=sys.stderr)
                return 1
            time.sleep(0.2)
    slurm_run(["scontrol", "update", f"JobId={main}", f"Comment={COMMENT}{endpoint}"])
    job_id = request(endpoint, "submit", {"job": desc}, keys=args.keys)["job_id"]
    print(f"reshape: daemon {endpoint}, job {desc['name']} (reshape job {job_id}) in Slurm job {main}", flush=True)
    last = None
    state = "queued"
    while stopping["sig"] is None:
        try:
            st = request(endpoint, "status", keys=args.keys)
        except SchedulerUnavailable:
            if stopping["sig"] is not None or daemon.poll() is not None:
                break
            raise
        row = next((j for j in st["running"] if j["job_id"] == job_id), None)
        if row is not None:
            now = (row["nprocs"], tuple(row["hosts"]))
            if now != last:
                hosts = ",".join(dict.fromkeys(row["hosts"]))
                print(f"reshape: {time.strftime('%H:%M:%S')} {row['nprocs']} ranks on {hosts}", flush=True)
                last = now
        else:
            ended = next((j for j in st.get("ended", []) if j["job_id"] == job_id), None)
            if ended is not None:
                state = ended["state"]
                print(f"reshape: job {state}, sizes {'->'.join(map(str, ended['sizes']))}"
                      + (f": {ended['error']}" if ended.get("error") else ""), flush=True)
                break
        time.sleep(0.5)
    if stopping["sig"] is not None:
        print(f"reshape: signal {stopping['sig']}: ending the job, its ranks and its expander jobs", flush=True)
    text = ""
    if stopping["sig"] is None:
        text = request(endpoint, "log", {"job_id": job_id, "tail": 0}, keys=args.keys)["text"]
    stop(True)
    sys.stdout.write(text + ("\n" if text and not text.endswith("\n") else ""))
    return 0 if state == "done" else 1


def add_commands(sub) -> None:
    p = sub.add_parser("slurm-run", help="(inside sbatch) run one job with a daemon that grows through Slurm",
                       description="The body of the script 'reshape submit --slurm' submits: start a daemon "
                                   "that grows and shrinks through Slurm, run the job, end with it.")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("file", nargs="?", help="job file (TOML)")
    src.add_argument("--job", metavar="JSON", help="the job description as JSON (what 'submit --slurm' writes)")
    p.add_argument("--grant-timeout", type=float, default=10.0, metavar="SECONDS",
                   help="cancel an expander job Slurm has not started after this long (default 10)")
    p.add_argument("--idle-release", type=float, default=30.0, metavar="SECONDS",
                   help="give back a granted node no job used for this long (default 30)")
    p.add_argument("--keys", help="CURVE key directory (default $RESHAPE_KEYS or ~/.reshape/keys)")
    p.set_defaults(func=cmd_slurm_run)
