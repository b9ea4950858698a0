"""Slurm commands: ``reshape submit --slurm`` and ``reshape slurm-run`` (docs/slurm.md).

``reshape submit --slurm job.toml`` submits one resizable job to Slurm: an
``sbatch`` script asking for the nodes of the job's starting size (and the
job file's ``walltime`` as its time limit), whose body is ``reshape slurm-run``.
Inside the allocation that runs the job in one of two modes:

* **site mode** (a site controller is named: ``--controller`` or
  ``$RESHAPE_CONTROLLER``; ``scheduler.rm.slurm.site``): register with the
  controller (``register``: the Slurm job id and nodes), run the job's
  ``mpiexec`` here, report how it ended. The controller grows and shrinks it
  together with every other malleable job of the partition. A job with
  checkpoints whose ``mpiexec`` ends by a loss runs again from its last
  checkpoint on the nodes of the allocation still alive, as the controller
  agrees (``register`` with ``restart``); with too few left, or its batch host
  lost, Slurm requeues it (``--requeue``) and its next batch attempt registers
  again and resumes (docs/slurm.md, "Failures").
* **private mode** (no controller): start a daemon that grows and shrinks
  through Slurm (``--slurm-grow``, ``scheduler.rm.slurm.manager``) on the job's
  first node, submit the job to it, report each size change to the job's
  Slurm output, and end with the job.

Either way the daemon's address goes into the Slurm job's comment
(``reshape-daemon=...``), so ``reshape status --slurm-job N`` (any client
command) reaches it, its exit status is the job's, and ``scancel N`` ends the
job, its ranks and its expander jobs (which also end by themselves within 6 s).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import time

import hostlist

from reshape.joblink import jobenv as E
from reshape.joblink import protocol as P
from reshape.joblink.auth import ENV_KEYS
from reshape.joblink.client import DaemonError, SchedulerUnavailable, request
from reshape.joblink.launchers import get as launcher
from scheduler.cli.workload import free_port
from scheduler.core.jobfile import JobDesc, JobFileError, load_job_file, validate_job
from scheduler.core.policy import legal_sizes
from scheduler.core.pool import PoolError
from scheduler.daemon.startup import job_tag, kill_job, start_job
from scheduler.rm.fixed import allocation_pool
from scheduler.rm.slurm.view import SlurmError, expander_name, malleable_comment
from scheduler.rm.slurm.view import run as slurm_run

__all__ = ["CONTROLLER", "add_commands", "daemon_of", "submit_slurm"]

COMMENT = "reshape-daemon="
CONTROLLER = "RESHAPE_CONTROLLER"  # the site controller's address, for 'submit --slurm' and 'slurm-run'


def daemon_of(slurm_job: str) -> str:
    """The endpoint of the reshape daemon (or site controller) of Slurm job ``slurm_job`` (its comment)."""
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


def submit_slurm(files: list[str], nodes: int | None, sbatch_args: list[str],
                 controller: str | None = None) -> list[str]:
    """``sbatch`` each job file (``--nodes`` if given, else one task per starting rank); returns the
    Slurm ids. ``controller``: the site controller the jobs register with (None: private mode)."""
    ids = []
    for path in files:
        desc = load_job_file(path)  # a bad file fails here, before Slurm sees it
        site = ["--controller", controller] if controller else []
        timed = any(a.startswith(("--time", "-t")) for a in sbatch_args)
        script = "\n".join([
            "#!/bin/sh",
            f"#SBATCH --job-name={desc.name}",
            *([f"#SBATCH --nodes={nodes}"] if nodes else [f"#SBATCH --ntasks={desc.nprocs}"]),
            *([f"#SBATCH --time={math.ceil(desc.walltime / 60)}"] if desc.walltime and not timed else []),
            # the job travels inside the script: the file need not be on the node the script runs on
            f"exec {shlex.quote(sys.executable)} -m scheduler.cli slurm-run {shlex.join(site)} "
            f"--job {shlex.quote(json.dumps(desc.to_dict()))}",
            "",
        ])
        with tempfile.NamedTemporaryFile("w", suffix=".sh", delete=False) as f:
            f.write(script)
        try:
            out = slurm_run(["sbatch", "--parsable", *(site_flags(desc) if site else []), *sbatch_args, f.name])
        finally:
            os.unlink(f.name)
        ids.append(out.strip().split(";")[0])
    return ids


def site_flags(desc: JobDesc) -> list[str]:
    """``sbatch`` options of a job for a site controller: its legal sizes (a moldable start), ``--no-kill`` (a node
    lost takes only itself from the job, which restarts on the others) and, with checkpoints, ``--requeue`` (its
    batch host lost, or too few CPUs left: Slurm runs it again, it resumes); without, ``--no-requeue`` (run again
    it would start over). docs/slurm.md, "Failures"."""
    return [f"--comment={malleable_comment(desc)}", "--no-kill",
            "--requeue" if desc.checkpoint else "--no-requeue"]


class _Signals:
    """SIGTERM/SIGINT (``scancel``) noted rather than fatal: the job is ended in order."""

    def __init__(self):
        self.sig: int | None = None
        signal.signal(signal.SIGTERM, self._on)
        signal.signal(signal.SIGINT, self._on)

    def _on(self, signum, _frame) -> None:
        self.sig = signum


def cmd_slurm_run(args: argparse.Namespace) -> int:
    main = os.environ.get("SLURM_JOB_ID")
    if not main:
        print("reshape slurm-run: not inside a Slurm job (no SLURM_JOB_ID); use 'reshape submit --slurm'",
              file=sys.stderr)
        return 2
    try:
        desc = load_job_file(args.file) if args.file else validate_job(json.loads(args.job), None)
    except (JobFileError, ValueError) as e:
        _say(str(e))
        return 2
    state_dir = os.path.join(E.default_state_dir(), f"slurm-{main}")
    controller = args.controller or os.environ.get(CONTROLLER)
    try:
        os.makedirs(state_dir, exist_ok=True)
        if controller:
            return _run_registered(args, desc, main, controller, state_dir)
        return _run_private(args, desc, main, state_dir)
    except Exception as e:  # never a silent end: one line on the job's Slurm output
        _say(f"job {desc.name} in Slurm job {main} ended on an unexpected {type(e).__name__}: {e}")
        return 1


# ---------------------------------------------------------------------- site mode
def _slots() -> list[str]:
    """One host per CPU of this allocation, the batch host's first (it is never given back)."""
    batch = os.environ.get("SLURMD_NODENAME") or socket.gethostname()
    return sorted((n.host for n in allocation_pool().nodes for _ in range(n.slots)), key=lambda h: h != batch)


def _say(why: str) -> None:
    """One line on the job's Slurm output: why it ends here."""
    print(f"reshape slurm-run: {why}", file=sys.stderr, flush=True)


def _register(args: argparse.Namespace, desc: JobDesc, main: str, controller: str, hosts: list[str]) -> int | None:
    """Register with the controller, retrying for ``--register-timeout`` while it is away (restarting) or
    a node of ours is still being left by a job whose Slurm job gave it up (``node_busy``)."""
    msg = P.Register(job=desc.to_dict(), allocation=main, hosts=tuple(hosts))
    end = time.monotonic() + args.register_timeout
    while True:
        try:
            return request(controller, msg, keys=args.keys, timeout=5.0).target
        except SchedulerUnavailable as e:
            if time.monotonic() > end:
                _say(f"no site controller answered at {controller} in {args.register_timeout:g} s: {e}")
                return None
        except DaemonError as e:
            if e.code != "node_busy":
                _say(f"the controller at {controller} refused the job: {e}")
                return None
            if time.monotonic() > end:
                _say(f"the controller at {controller} still refuses the job after {args.register_timeout:g} s: {e}")
                return None
        time.sleep(1.0)


def _report(args: argparse.Namespace, controller: str, job_id: int, rc: int, error: str | None = None) -> None:
    """Tell the controller how the job ended (it also sees the Slurm job end); a few tries."""
    msg = (P.Finished(job_id=job_id, status="done") if rc == 0 else
           P.Finished(job_id=job_id, status="error", error=error or f"exit code {rc}"))
    for _ in range(10):
        try:
            request(controller, msg, timeout=2.0, keys=args.keys)
            return
        except SchedulerUnavailable:
            time.sleep(1.0)
        except DaemonError:
            return  # already settled (cancelled, or ended by the controller)


def _run_registered(args: argparse.Namespace, desc: JobDesc, main: str, controller: str, state_dir: str) -> int:
    sigs = _Signals()
    try:
        slots = _slots()
    except PoolError as e:
        _say(f"cannot read this Slurm allocation: {e}")
        return 2
    # the controller may have started it on fewer nodes than it asked for (a moldable start): its largest
    # legal size that fits
    fits = legal_sizes(desc.spec(0, 0.0), len(slots), range(1, min(len(slots), desc.nprocs) + 1))
    hosts = slots[:fits[-1] if fits else len(slots)]
    job_id = _register(args, desc, main, controller, hosts)
    if job_id is None:
        return 1
    if not fits:  # registered, so that the controller records why it failed
        why = (f"the allocation has {len(slots)} CPUs, the job's smallest size is "
               f"{max(1, desc.min_procs or 1)}")
        _say(why)
        _report(args, controller, job_id, 2, why)
        return 2
    if len(hosts) < desc.nprocs:
        print(f"reshape: started at {len(hosts)} of the {desc.nprocs} processes asked for (a moldable start)",
              flush=True)
    with contextlib.suppress(SlurmError):
        slurm_run(["scontrol", "update", f"JobId={main}", f"Comment={COMMENT}{controller}"])
    keys = args.keys or os.environ.get(ENV_KEYS)
    if keys:
        desc = desc.with_env({ENV_KEYS: os.path.abspath(keys)})
    print(f"reshape: job {desc.name} is reshape job {job_id} of the site controller {controller}, "
          f"in Slurm job {main} on {','.join(dict.fromkeys(hosts))}", flush=True)
    if os.environ.get("SLURM_RESTART_COUNT", "0") not in ("", "0"):
        print(f"reshape: Slurm requeued this job ({os.environ['SLURM_RESTART_COUNT']} time(s)): it resumes from "
              f"its last checkpoint at {len(hosts)} CPUs", flush=True)
    attempt = 0
    while True:
        tag = job_tag(state_dir, job_id, attempt)
        rc = _attempt(args, desc, job_id, hosts, controller, tag, sigs, main)
        if rc is None:
            return 1
        again = _restart(args, desc, main, controller, rc, slots) if rc and desc.checkpoint else None
        if isinstance(again, Requeue):
            print(f"reshape: {again.why}", flush=True)
            return _await_requeue(args, controller, job_id, main, sigs)
        if isinstance(again, str):
            _report(args, controller, job_id, rc, again)
            _say(f"job {desc.name} (reshape job {job_id}) not restarted: {again}")
            return rc
        if again is None or sigs.sig is not None:
            break
        kill_job(tag, grace=1.0)  # what is left of the lost attempt here (its ranks elsewhere went with their steps)
        hosts, attempt = again, attempt + 1
        print(f"reshape: restarting job {desc.name} from its last checkpoint on "
              f"{','.join(dict.fromkeys(hosts))} ({len(hosts)} CPUs; attempt {attempt + 1})", flush=True)
    _report(args, controller, job_id, rc)
    if rc:
        _say(f"job {desc.name} (reshape job {job_id}): its mpiexec exited with status {rc}")
    print(f"reshape: job {desc.name} exited with status {rc}", flush=True)
    return rc


def _attempt(args: argparse.Namespace, desc: JobDesc, job_id: int, hosts: list[str], controller: str, tag: str,
             sigs: _Signals, main: str) -> int | None:
    """Run one attempt of the job's ``mpiexec`` on ``hosts``: its exit status, or None when a signal ended it
    (or it could not start: said and reported)."""
    # the job's output is the Slurm job's own (no log file: ours would be a link, which start_job refuses)
    try:
        p = start_job(job_id, desc, hosts, controller, launcher("slurm"), None, tag, cwd=os.getcwd())
    except (OSError, ValueError) as e:
        why = f"cannot start the job's mpiexec: {e}"
        _say(why)
        _report(args, controller, job_id, 1, why)
        return None
    watch = LossWatch(main, hosts)
    while p.poll() is None and sigs.sig is None:
        time.sleep(0.2)
        lost = watch.lost()
        if lost:
            print(f"reshape: Slurm declares node(s) {', '.join(sorted(lost))} of this job down: ending this "
                  f"attempt", flush=True)
            kill_job(tag, grace=1.0)
            rc = p.wait()
            return 128 - rc if rc < 0 else rc or 1  # killed by a signal: as a shell reports it
    if sigs.sig is not None:
        print(f"reshape: signal {sigs.sig}: ending the job and its ranks", flush=True)
        kill_job(tag, grace=1.0)
        p.wait()
        return None
    return p.returncode


def _restart(args: argparse.Namespace, desc: JobDesc, main: str, controller: str, rc: int,
             slots: list[str]) -> list[str] | str | None:  # (Requeue: a str)
    """After an attempt that exited with ``rc``: the hosts of the next one (one per CPU, the nodes of the
    allocation still alive), or why there is none (the controller's one line), or None when the
    controller cannot be reached (the job then ends as it did). The job's nodes, its own and its
    expanders', are probed with the launcher its ranks start with; the dead ones are reported lost."""
    held = slurm_nodes(main) or [(h, main) for h in dict.fromkeys(slots)]  # squeue failed: the allocation's
    # a node that hung is found by Slurm first, which takes it out of the job (--no-kill): lost as well
    dead = unreachable([h for h, _ in held]) | slurm_down([h for h in slots if h not in {g for g, _ in held}])
    hosts = restart_hosts(slots, [h for h, j in held if j == main], dead)
    if not hosts:
        return f"no node of Slurm job {main} is left (lost: {', '.join(sorted(dead)) or 'none'})"
    fits = legal_sizes(desc.spec(0, 0.0), len(slots), range(1, min(len(hosts), desc.nprocs) + 1))
    hosts = hosts[:fits[-1]] if fits else hosts  # none: the controller says why (too few left)
    if dead:
        print(f"reshape: node(s) {', '.join(sorted(dead))} lost", flush=True)
    msg = P.Register(job=desc.to_dict(), allocation=main, hosts=tuple(hosts), restart=True, code=rc,
                     lost=tuple(sorted(dead)))
    end = time.monotonic() + args.register_timeout
    while True:
        try:
            request(controller, msg, keys=args.keys, timeout=10.0)
            return hosts
        except SchedulerUnavailable as e:
            if time.monotonic() > end:
                _say(f"no site controller answered at {controller} in {args.register_timeout:g} s: {e}")
                return None
        except DaemonError as e:
            return Requeue(e.message) if e.code == "requeued" else e.message if e.code == "not_restartable" \
                else str(e)
        time.sleep(1.0)


class Requeue(str):
    """The controller's answer to a restart with too few CPUs left: Slurm requeues the job (why: the text)."""

    @property
    def why(self) -> str:
        return str(self)


REQUEUE_WAIT = 120.0  # seconds this batch attempt waits for Slurm to requeue (and so end) it


def _await_requeue(args: argparse.Namespace, controller: str, job_id: int, main: str, sigs: _Signals) -> int:
    """Wait for Slurm to requeue this job, which ends this batch attempt (a signal): the next one resumes it.
    Not requeued in time: the job fails, with why."""
    end = time.monotonic() + REQUEUE_WAIT
    while sigs.sig is None and time.monotonic() < end:
        time.sleep(0.2)
    if sigs.sig is not None:
        return 0
    why = f"Slurm did not requeue job {main} in {REQUEUE_WAIT:g} s"
    _say(why)
    _report(args, controller, job_id, 1, why)
    return 1


def restart_hosts(slots: list[str], held: list[str], dead: set[str]) -> list[str]:
    """The hosts of a restart in the allocation: its slots (one per CPU, the batch host's first) on the nodes
    Slurm still gives it (``held``) that are not ``dead``, in the same order."""
    keep = set(held) - dead
    return [h for h in slots if h in keep]


def slurm_nodes(main: str) -> list[tuple[str, str]]:
    """(host, Slurm job) for every node of Slurm job ``main`` and its running expander jobs, as Slurm says now."""
    out: list[tuple[str, str]] = []
    try:
        text = slurm_run(["squeue", "-h", "-t", "R", "-u", str(os.getuid()), "-o", "%A|%j|%N"])
    except SlurmError:
        return out
    for line in text.splitlines():
        jid, name, nodes = [*line.split("|"), "", ""][:3]
        if (jid == main or name == expander_name(main)) and nodes:
            out += [(h, jid) for h in hostlist.expand_hostlist(nodes)]
    return out


DOWN_STATES = ("down", "fail")  # sinfo %T words of a node Slurm has declared lost (not: drained, not responding)


def slurm_down(hosts: list[str] | set[str]) -> set[str]:
    """Those of ``hosts`` Slurm declares down or failed (``sinfo -N -o '%N|%T'``, after ``SlurmdTimeout``
    without an answer). Nodes Slurm did not list, or an ``sinfo`` that failed: none."""
    if not hosts:
        return set()
    try:
        text = slurm_run(["sinfo", "-h", "-N", "-n", ",".join(sorted(hosts)), "-o", "%N|%T"])
    except SlurmError:
        return set()
    return {h for h, st in (line.split("|", 1) for line in text.splitlines() if "|" in line)
            if h in hosts and any(w in st.lower() for w in DOWN_STATES)}


class LossWatch:
    """While an attempt runs: the nodes of its Slurm jobs (its own and its expanders') that Slurm declares
    down. A node that hangs closes no connection, so ``mpiexec`` and the ranks left wait on it for ever;
    Slurm takes it out of the job (``--no-kill``) and the attempt must be ended here. A node Slurm took
    out is watched until the next look (it leaves the job and goes down at once); one the controller
    gave back is not down then and is forgotten."""

    EVERY = 5.0  # seconds between looks (two Slurm queries each)

    def __init__(self, main: str, hosts: list[str]):
        self.main, self.prev, self.next = main, set(hosts), time.monotonic() + self.EVERY

    def lost(self) -> set[str]:
        if time.monotonic() < self.next:
            return set()
        self.next = time.monotonic() + self.EVERY
        held = {h for h, _ in slurm_nodes(self.main)}
        down = slurm_down(self.prev | held)
        self.prev = held or self.prev
        return down


PROBE_TIMEOUT = 20.0  # seconds a step on a live node takes at most to run 'true' (a dead one never answers)


def unreachable(hosts: list[str], timeout: float = PROBE_TIMEOUT) -> set[str]:
    """The hosts where Hydra could start no proxy now (the ``slurm`` launcher's probe, all at once): dead nodes."""
    probes = {h: argv for h in dict.fromkeys(hosts) if (argv := launcher("slurm").probe(h, timeout))}
    procs = {h: subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                 start_new_session=True) for h, argv in probes.items()}
    end, dead = time.monotonic() + timeout, set()
    for h, p in procs.items():
        try:
            if p.wait(max(0.1, end - time.monotonic())) != 0:
                dead.add(h)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)
            p.wait()
            dead.add(h)
    return dead


# ---------------------------------------------------------------------- private mode
def _start_private_daemon(args: argparse.Namespace, state_dir: str) -> tuple[subprocess.Popen, str]:
    host = os.environ.get("SLURMD_NODENAME") or socket.gethostname()
    port = free_port("")
    argv = [sys.executable, "-m", "scheduler.cli", "daemon", "--slurm-grow", "--endpoint", f"tcp://0.0.0.0:{port}",
            "--state-dir", state_dir, "--workdir", os.getcwd(), "--grant-timeout", str(args.grant_timeout),
            "--idle-release", str(args.idle_release), *(["--keys", args.keys] if args.keys else [])]
    with open(os.path.join(state_dir, "daemon.log"), "ab") as log:
        daemon = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    return daemon, f"tcp://{host}:{port}"


def _wait_for_daemon(args: argparse.Namespace, daemon: subprocess.Popen, endpoint: str, state_dir: str) -> bool:
    t0 = time.monotonic()
    while True:
        if daemon.poll() is not None:
            print(f"reshape slurm-run: the daemon exited ({daemon.returncode}); see {state_dir}/daemon.log",
                  file=sys.stderr)
            return False
        try:
            request(endpoint, P.Ping(), keys=args.keys, timeout=1.0)
            return True
        except SchedulerUnavailable:
            if time.monotonic() - t0 > 60:
                print("reshape slurm-run: the daemon did not answer in 60 s", file=sys.stderr)
                return False
            time.sleep(0.2)


def _follow(args: argparse.Namespace, endpoint: str, job_id: int, daemon: subprocess.Popen,
            sigs: _Signals) -> str:
    """Print each size change of the job until it ends (its final state) or a signal comes ("")."""
    last, state = None, ""
    while sigs.sig is None:
        try:
            st = request(endpoint, P.Status(), keys=args.keys)
        except SchedulerUnavailable:
            if sigs.sig is not None or daemon.poll() is not None:
                break
            raise
        row = next((j for j in st.running if j["job_id"] == job_id), None)
        if row is not None:
            now = (row["nprocs"], tuple(row["hosts"]))
            if now != last:
                hosts = ",".join(dict.fromkeys(row["hosts"]))
                print(f"reshape: {time.strftime('%H:%M:%S')} {row['nprocs']} ranks on {hosts}", flush=True)
                last = now
        else:
            ended = next((j for j in st.ended if j["job_id"] == job_id), None)
            if ended is not None:
                print(f"reshape: job {ended['state']}, sizes {'->'.join(map(str, ended['sizes']))}"
                      + (f": {ended['error']}" if ended.get("error") else ""), flush=True)
                return ended["state"]
        time.sleep(0.5)
    return state


def _run_private(args: argparse.Namespace, desc: JobDesc, main: str, state_dir: str) -> int:
    daemon, endpoint = _start_private_daemon(args, state_dir)
    sigs = _Signals()

    def stop(kill: bool) -> None:
        try:
            if daemon.poll() is None:  # scancel signals the daemon too: it may be ending already
                request(endpoint, P.Stop(kill_jobs=kill), keys=args.keys, timeout=2.0)
            daemon.wait(20)
        except (SchedulerUnavailable, DaemonError, subprocess.TimeoutExpired):
            daemon.kill()
        with contextlib.suppress(SlurmError):
            slurm_run(["scancel", "--name", expander_name(main)])

    if not _wait_for_daemon(args, daemon, endpoint, state_dir):
        stop(True)
        return 1
    slurm_run(["scontrol", "update", f"JobId={main}", f"Comment={COMMENT}{endpoint}"])
    job_id = request(endpoint, P.Submit(job=desc.to_dict()), keys=args.keys).target
    print(f"reshape: daemon {endpoint}, job {desc.name} (reshape job {job_id}) in Slurm job {main}", flush=True)
    state = _follow(args, endpoint, job_id, daemon, sigs)
    if sigs.sig is not None:
        print(f"reshape: signal {sigs.sig}: ending the job, its ranks and its expander jobs", flush=True)
    text = ""
    if sigs.sig is None:
        text = request(endpoint, P.Log(target=job_id, tail=0), keys=args.keys).text
    stop(True)
    sys.stdout.write(text + ("\n" if text and not text.endswith("\n") else ""))
    return 0 if state == "done" else 1


def add_commands(sub) -> None:
    p = sub.add_parser("slurm-run", help="(inside sbatch) run one job under a site controller, or with a daemon "
                                         "of its own that grows through Slurm",
                       description="The body of the script 'reshape submit --slurm' submits. With a site "
                                   "controller (--controller or $RESHAPE_CONTROLLER): register the job with it "
                                   "and run it in this allocation. Without: start a daemon that grows and "
                                   "shrinks through Slurm, run the job, end with it.")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("file", nargs="?", help="job file (TOML)")
    src.add_argument("--job", metavar="JSON", help="the job description as JSON (what 'submit --slurm' writes)")
    p.add_argument("--controller", metavar="ENDPOINT",
                   help=f"the site controller to register with (default ${CONTROLLER}; none: private mode)")
    p.add_argument("--register-timeout", type=float, default=120.0, metavar="SECONDS",
                   help="site mode: how long to retry registering while the controller is away (default 120)")
    p.add_argument("--grant-timeout", type=float, default=10.0, metavar="SECONDS",
                   help="private mode: cancel an expander job Slurm has not started after this long (default 10)")
    p.add_argument("--idle-release", type=float, default=30.0, metavar="SECONDS",
                   help="private mode: give back a granted node no job used for this long (default 30)")
    p.add_argument("--keys", help="CURVE key directory (default $RESHAPE_KEYS or ~/.reshape/keys)")
    p.set_defaults(func=cmd_slurm_run)
