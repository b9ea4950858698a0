"""Starting new ranks and handing them the running job's state: an expansion's parts (Sudarsan & Ribbens 2007 §3.2).

Rank 0 spawns the new ranks (:func:`spawn`: ``MPI_Comm_spawn_multiple``, one
command per target host, after probing remote hosts; the new ranks start under
:mod:`reshape.runtime.spawned`) or the running ranks call parked ones back
(:mod:`reshape.runtime.parking`), merge the intercommunicator (running ranks first),
and rank 0 hands the new ranks the job's state (:class:`JoinState`: iteration,
values, array layouts, the placement of the new positions) in one allreduce
and one broadcast. A new rank joins (:meth:`Joiner.join`): it merges,
receives the state and its array blocks, and the communicator is renumbered
so that rank ``j`` holds position ``j`` (:mod:`reshape.redistribution.placement`).
:class:`Joiner` holds these steps for :class:`reshape.runtime.Resizer`.
"""

from __future__ import annotations

import os
import pickle
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from mpi4py import MPI

from reshape import faults
from reshape.joblink import launchers
from reshape.joblink.launchers import is_local
from reshape.joblink.mpis import forwarded
from reshape.mpiutil import allreduce, barrier, bcast_obj, open_mpi, release, wait, wait_all
from reshape.redistribution import placement
from reshape.redistribution.layout import Layout
from reshape.redistribution.redistribute import redistribute, start
from reshape.runtime.inplace import failure
from reshape.runtime.job import Job
from reshape.runtime.parking import Reserve
from reshape.runtime.recovery import leave_expansion
from reshape.runtime.results import ResizeError
from reshape.runtime.watchdog import Deadline

__all__ = ["JoinState", "Joiner", "Standby", "SwitchState", "bridge", "check_hosts", "merge", "process_start",
           "program", "running_size", "share", "spawn", "spawn_commands", "unspawnable", "wait_politely"]


@dataclass
class JoinState:
    """What rank 0 sends to newly spawned ranks."""

    iteration: int
    values: dict
    arrays: list[tuple[str, Layout, Layout, str]]  # name, old layout, new layout, dtype
    history: list[int]
    background: tuple[str, ...] = ()  # arrays moving in the background; the rest move at the switch
    ranks: tuple[int, ...] = ()  # merged comm rank of every new layout position (reshape.redistribution.placement)
    keys: tuple[placement.Seniority, ...] = ()  # seniority of every merged comm rank
    checkpoint_dir: str | None = None  # where the job writes its checkpoints (reshape.runtime.checkpoint)


@dataclass
class Standby:
    """What rank 0 sends standby ranks instead of a :class:`JoinState`: park at once (a warm pool)."""


@dataclass
class SwitchState:
    """What rank 0 sends the new ranks when a background expansion switches over."""

    iteration: int
    values: dict
    history: list[int]


class Joiner:
    """An expansion's steps over the job's :class:`~reshape.runtime.job.Job`: new ranks spawned or called
    back and merged in, the job's state handed to them, and (on a new rank) joining the running ones.

    ``deadline`` bounds the resize; ``reserve`` holds the pools of parked ranks to call back
    (:mod:`reshape.runtime.parking`). ``parts`` are the parts of the expansion under way
    (:data:`~reshape.runtime.results.EXPAND_PARTS`), ``called_back`` how many of its new ranks are
    parked ranks called back.
    """

    def __init__(self, job: Job, deadline: Deadline, reserve: Reserve):
        self.job = job
        self.deadline = deadline
        self.reserve = reserve
        self.parts: dict[str, float] = {}
        self.called_back = 0

    def spawn(self, comm: MPI.Intracomm, n: int, hosts) -> tuple[MPI.Intercomm, float]:
        """Start ``n`` new ranks of this program (:func:`spawn` over ``comm``, with this resize's watchdog
        phases)."""
        where = f" on {','.join(sorted(set(hosts)))}" if hosts else ""
        self.deadline.phase(f"spawning {n} ranks{where}")
        return spawn(comm, n, hosts, lambda: self.deadline.phase("merging with the spawned ranks"))

    def bring_in(self, comm: MPI.Intracomm, back, n: int, hosts, spawn_fn, owned: bool = False,
                 first: int = 0) -> tuple[MPI.Intracomm, float]:
        """An expansion's new ranks merged in (collective over ``comm``): ``back``'s parked ranks from its
        step ``first`` on, pool by pool, each step's ranks among the running ones for the next, then the
        rest spawned over the communicator they joined with ``spawn_fn(comm, count, hosts)`` (with
        ``back`` None: ``n`` ranks on ``hosts``). ``owned``: ``comm`` is one of this expansion's own, to
        disconnect once replaced (a called-back rank's). Returns the merged communicator and the spawn
        call's seconds (the call-backs' when nothing is spawned). A spawn refused after a call-back aborts
        the job: the called-back ranks have joined, and there is no way back to the old size."""
        t0 = time.perf_counter()
        rest, rest_hosts = (back.rest, back.rest_hosts) if back is not None else (n, hosts)
        cur = comm

        def replace(inter: MPI.Intercomm) -> MPI.Intracomm:
            nxt = merge(inter, high=False)
            if owned or cur is not comm:
                release(cur)
            return nxt

        for k in range(first, len(back.steps) if back is not None else 0):
            self.deadline.phase(f"calling back {len(back.steps[k].members)} parked ranks")
            cur = replace(self.reserve.call_back(cur, back, k))
        seconds = time.perf_counter() - t0
        if rest:
            try:
                inter, seconds = spawn_fn(cur, rest, rest_hosts)
            except ResizeError as e:
                if back is None:
                    raise
                raise RuntimeError(f"spawning {rest} ranks after calling back {len(back.members)} parked ones "
                                   f"failed: {e}") from e
            self.deadline.phase("merging with the spawned ranks")
            cur = replace(inter)
        return cur, seconds

    def hand_over(self, old: int, checkpoint_dir: str | None) -> JoinState:
        """Running ranks, after an expansion: send the new ranks the job's state (rank 0's); returns it.

        One allreduce and one broadcast: the allreduce carries the size of the
        pickled state from rank 0 and, from the new ranks, when they started
        (the parts of the expansion, :data:`EXPAND_PARTS`). The state carries
        the placement of the new layouts' positions, which every rank needs, and
        ``checkpoint_dir``, where the job writes its checkpoints.
        """
        t0 = time.perf_counter()
        job, state = self.job, None
        if job.rank == 0:
            state = JoinState(
                iteration=job.next_iteration, values=job.values,
                arrays=[(r.name, r.layout, r.rule(job.size), str(r.local.dtype)) for r in job.arrays.values()],
                history=job.history, ranks=job.positions(job.size, range(job.size)),
                keys=tuple(placement.grown(job.keys, job.size - old)), checkpoint_dir=checkpoint_dir,
            )
        state, head = share(job.comm, state if job.rank == 0 else None)
        spawned_at, init_age, ready_age = head[1], head[2], head[3]
        parts = self.parts
        parts["handover_seconds"] = time.perf_counter() - t0
        if "_wall" in parts and spawned_at > 0:
            parts.update(launch_seconds=max(0.0, spawned_at - parts["_wall"]), startup_seconds=init_age,
                         ready_seconds=ready_age)
        return state

    def start_standby(self, k: int) -> None:
        """Running ranks, at start: spawn ``k`` standby ranks that park at once. Collective.

        A warm pool: the first expansion calls them back like ranks a shrink
        parked (:mod:`reshape.runtime.parking`) instead of paying for a spawn, and the
        resize points report where they are so that the scheduler places the
        expansion there. They hold memory (an interpreter each), no CPU.
        """
        comm = self.job.comm
        inter, _ = spawn(comm, k, ())
        pool = merge(inter, high=False)
        share(pool, Standby() if comm.rank == 0 else None)
        hosts = pool.gather(socket.gethostname(), root=0)
        self.reserve.keep(pool, {r: hosts[r] for r in range(comm.size, pool.size)} if comm.rank == 0 else {})

    def join(self, parent: MPI.Intercomm, called_back: tuple | None = None,
             started: tuple[float, float] | None = None) -> MPI.Intracomm | None:
        """Run on a new rank: merge, take the state, receive the array blocks.

        ``parent`` is the intercommunicator to rank 0 that spawned this rank
        (:func:`spawn`), or, for a parked rank called back, to all the running
        ranks (:mod:`reshape.runtime.parking`); ``called_back``: then the expansion's
        call-back and the step that called this rank back: the later steps' parked
        ranks and the spawned rest join with this rank among the running ones.
        ``started``: a spawned rank's (process start, ``runtime.init``) epoch seconds.
        Bounded by the same deadline as the running ranks' resize. Returns the
        communicator to park on when the running ranks spawned this rank as a
        standby (:class:`Standby`; :meth:`reshape.runtime.parking.Parking.stand_by`), else None.
        """
        if called_back:
            cb, k = called_back
            old = parent.Get_remote_size() - sum(len(st.members) for st in cb.steps[:k])
            new = old + len(cb.members) + cb.rest
        else:
            old = running_size(parent)
            new = old + MPI.COMM_WORLD.size
        faults.set_spawned()
        self.deadline.arm(f"expand {old}->{new}")
        self.deadline.phase("a new rank merging with the running ranks")
        ready = time.time()
        faults.hit("join", MPI.COMM_WORLD.rank + old, new, old)
        merged = merge(parent if called_back else bridge(parent), high=True)
        if called_back:
            merged, _ = self.bring_in(merged, cb, 0, (), spawn, owned=True, first=k + 1)
        self.job.comm = merged
        began, init = started or (ready, ready)
        if self.job.inplace:  # a loss while the blocks move undoes the expansion: this rank leaves (recovery.py)
            merged.Set_errhandler(MPI.ERRORS_RETURN)
            try:
                return self._receive_state(merged, old, (began, init - began, ready - began))
            except Exception as e:
                if not failure(e):
                    raise
                self.deadline.disarm()
                leave_expansion(merged)
            return None
        return self._receive_state(merged, old, (began, init - began, ready - began))

    def _receive_state(self, merged: MPI.Intracomm, old: int, ages: tuple[float, float, float],
                       ) -> MPI.Intracomm | None:
        """A new rank's part of an expansion once merged: the job's state and its blocks (``ages``: see
        :func:`share`); the communicator to park on for a standby rank."""
        self.deadline.phase("a new rank receiving the arrays")
        state: JoinState | Standby = share(merged, None, ages)[0]
        if isinstance(state, Standby):  # spawned at the job's start to wait for an expansion
            merged.gather(socket.gethostname(), root=0)
            return merged
        job = self.job
        job.iteration, job.values, job.checkpoint_dir = state.iteration, state.values, state.checkpoint_dir
        job.history = [*state.history, merged.size]
        job.joined = True
        ranks = state.ranks or tuple(range(merged.size))
        moves = {name: (dst, start(merged, src, None, dst, src_ranks=range(src.nprocs), dst_ranks=ranks))
                 for name, src, dst, _dtype in state.arrays if name in state.background}
        if state.background:
            # The running ranks finish an iteration before they switch: wait without
            # spinning and without the resize deadline, then take the state as it is then.
            self.deadline.disarm()
            wait_politely(moves.values())
            sw: SwitchState = bcast_obj(merged, None)
            self.deadline.arm(f"expand {old}->{merged.size} (switch)")
            job.iteration, job.values, job.history = sw.iteration, sw.values, [*sw.history, merged.size]
        for name, src, dst, _dtype in state.arrays:
            if name in moves:
                new = moves[name][1].wait()
            else:
                new = redistribute(merged, src, None, dst, src_ranks=range(src.nprocs), dst_ranks=ranks,
                                   method=job.method)
            job.pending_arrays[name] = (dst, new)
        allreduce(merged, 0.0)  # matches the running ranks' timing reduction
        if job.inplace:
            merged.Agree(1)  # matches the running ranks' (Resizer.redistribute)
        job.renumber(ranks, list(state.keys), self.deadline.phase)
        self.deadline.disarm()
        return None


TAG_BRIDGE = 7304  # MPI_Intercomm_create between the running ranks and the new ones, over the spawn's bridge


def spawn(comm: MPI.Intracomm, n: int, hosts, spawned: Callable[[], None] = lambda: None,
          ) -> tuple[MPI.Intercomm, float]:
    """Start ``n`` new ranks of this program; the intercommunicator to them once they are ready to merge.

    Collective over the running ranks ``comm``; returns ``(intercomm, seconds
    of the spawn call on rank 0)``. Rank 0 alone calls
    ``MPI_Comm_spawn_multiple`` (over ``MPI_COMM_SELF``, one command per host):
    MPICH spins in a spawn until the new ranks are through ``MPI_Init``, and
    the other running ranks would spin with it (on a busy node, on the cores
    the new ranks start on); they sleep instead until rank 0 tells them how
    it went (``spawned`` runs then, on every rank). Rank 0 then waits,
    sleeping, for the new ranks to be ready (:mod:`reshape.runtime.spawned`: they
    import meanwhile), and the intercommunicator to all running ranks is built
    over the spawn's one (``MPI_Intercomm_merge`` of rank 0 and the new ranks,
    then ``MPI_Intercomm_create``; the new ranks' side is :func:`bridge`). A
    spawn that fails raises :class:`ResizeError` on every rank.
    """
    if open_mpi():
        return _spawn_collective(comm, n, hosts, spawned)
    child, outcome = None, (None, 0.0)
    if comm.rank == 0:
        cmds, argvs, counts, infos = spawn_commands(n, hosts)
        t0 = time.perf_counter()
        try:
            child = MPI.COMM_SELF.Spawn_multiple(cmds, argvs, counts, infos, root=0)
            outcome = (None, time.perf_counter() - t0)
        except MPI.Exception as e:
            outcome = (f"spawn of {n} ranks failed: {e.Get_error_string()}", 0.0)
        finally:
            for i in infos:
                if i != MPI.INFO_NULL:
                    i.Free()
    problem, seconds = bcast_obj(comm, outcome)
    if problem:
        raise ResizeError(problem)
    spawned()
    if comm.rank == 0:
        size = np.array([comm.size], dtype=np.int64)
        wait_all([child.Ibcast(size, root=MPI.ROOT), child.Ibarrier()])  # the new ranks call running_size, bridge
        joint = child.Merge(high=False)
        child.Disconnect()
    barrier(comm)
    inter = comm.Create_intercomm(0, joint if comm.rank == 0 else MPI.COMM_SELF, 1, TAG_BRIDGE)
    if comm.rank == 0:
        joint.Disconnect()
    return inter, seconds


def _spawn_collective(comm: MPI.Intracomm, n: int, hosts, spawned: Callable[[], None]) -> tuple[MPI.Intercomm, float]:
    """:func:`spawn` on Open MPI: every running rank calls ``MPI_Comm_spawn_multiple`` (root 0), and
    its intercommunicator is the one to return. Open MPI 5.0 hangs in the ``MPI_Intercomm_create``
    that :func:`spawn` builds over a spawn from ``MPI_COMM_SELF``; its waiting ranks yield
    (``mpi_yield_when_idle``, :mod:`reshape.joblink.mpis`), so the spin that spawn avoids on MPICH
    costs little here."""
    cmds, argvs, counts, infos = spawn_commands(n, hosts) if comm.rank == 0 else (None, None, None, None)
    t0 = time.perf_counter()
    try:
        child = comm.Spawn_multiple(cmds, argvs, counts, infos, root=0)
        problem = None
    except MPI.Exception as e:
        child, problem = None, f"spawn of {n} ranks failed: {e.Get_error_string()}"
    finally:
        for i in infos or ():
            if i != MPI.INFO_NULL:
                i.Free()
    problem, seconds = bcast_obj(comm, (problem, time.perf_counter() - t0))
    if problem:
        raise ResizeError(problem)
    spawned()
    # the new ranks know the running size from the intercommunicator (running_size); no Ibcast with
    # MPI_PROC_NULL roots: on Open MPI 5.0 the barrier after one hung on three ranks of four
    wait(child.Ibarrier())
    return child, seconds


def running_size(parent: MPI.Intercomm) -> int:
    """A new rank, first: the number of running ranks, from rank 0 that spawned it (:func:`spawn`)."""
    if open_mpi():  # spawned by every running rank (_spawn_collective)
        return parent.Get_remote_size()
    size = np.zeros(1, dtype=np.int64)
    wait(parent.Ibcast(size, root=0))
    return int(size[0])


def bridge(parent: MPI.Intercomm) -> MPI.Intercomm:
    """A new rank, ready to merge: the intercommunicator to all running ranks (the other side of :func:`spawn`)."""
    wait(parent.Ibarrier())
    if open_mpi():  # spawned by every running rank (_spawn_collective): the parent is the bridge
        return parent
    joint = parent.Merge(high=True)
    parent.Disconnect()
    inter = MPI.COMM_WORLD.Create_intercomm(0, joint, 0, TAG_BRIDGE)
    joint.Disconnect()
    return inter


def merge(inter: MPI.Intercomm, high: bool) -> MPI.Intracomm:
    """``MPI_Intercomm_merge`` of an expansion's intercommunicator, then disconnect it; both sides call it.

    A non-blocking barrier over the intercommunicator comes first, waited for
    with sleeps: whichever side arrives first sleeps instead of spinning in
    the merge (after :func:`spawn` both sides are ready; parked ranks called
    back arrive at once, the running ranks when they reach the resize).
    """
    wait(inter.Ibarrier())
    merged = inter.Merge(high=high)
    inter.Disconnect()  # the merged communicator carries everything from now on
    return merged


def wait_politely(moves, max_sleep: float = 1e-3) -> None:
    """Progress background redistributions until done, sleeping between tests (a spawned rank idles here)."""
    delay = 1e-5
    while not all([ex.test() for _, ex in moves]):
        time.sleep(delay)
        delay = min(2 * delay, max_sleep)


def share(comm: MPI.Intracomm, obj, ages: tuple[float, float, float] = (0.0, 0.0, 0.0)) -> tuple[object, np.ndarray]:
    """Rank 0's ``obj`` (a hand-over's state) to every rank of a merged communicator, waiting politely.

    One allreduce and one broadcast: the allreduce carries the pickled size
    from rank 0 and, as maxima, each new rank's ``ages`` (its start epoch,
    start -> ``init()``, start -> merge; zeros on the running ranks). Returns
    ``(obj, [size, start, init age, ready age])``.
    """
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL) if comm.rank == 0 else b""
    head = np.zeros(4)
    wait(comm.Iallreduce(np.array([len(data), *ages], dtype=np.float64), head, MPI.MAX))
    buf = np.frombuffer(data, dtype=np.uint8) if comm.rank == 0 else np.empty(int(head[0]), dtype=np.uint8)
    wait(comm.Ibcast(buf, 0))
    return (obj if comm.rank == 0 else pickle.loads(buf.tobytes())), head


def process_start() -> float:
    """When this process started, epoch seconds (Linux: /proc, 10 ms resolution; else now)."""
    now = time.time()
    try:
        with open("/proc/self/stat") as fh:
            ticks = int(fh.read().rsplit(")", 1)[1].split()[19])
        return now - (time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError, AttributeError):
        return now


def check_hosts(hosts, n: int, timeout: float = 5.0) -> str | None:
    """Refuse hosts Hydra could not launch on, before spawning.

    A host that resolves but cannot be reached makes Hydra abort the whole job
    (MPICH 5: "Launch proxy failed"), so each remote host is probed first with
    the launcher Hydra will use (:meth:`reshape.joblink.launchers.Launcher.probe`). The
    probe must succeed within ``timeout`` seconds.
    """
    if not hosts:
        return None
    import subprocess  # here: rank 0 alone probes hosts, and new ranks start faster without it

    launcher = launchers.from_env()
    if len(hosts) != n:
        return f"{len(hosts)} hosts given for {n} new ranks"
    for h in sorted(set(hosts)):
        try:
            socket.getaddrinfo(h, None)
        except OSError:
            return f"unknown host {h!r}: cannot resolve it"
        cmd = launcher.probe(h, timeout)
        if cmd is None:
            continue
        try:
            r = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout)
        except FileNotFoundError:
            return f"host {h!r} is not reachable: launcher {cmd[0]!r} not found"
        except subprocess.TimeoutExpired:
            return f"host {h!r} is not reachable: {' '.join(cmd[:1])} probe timed out after {timeout:.0f}s"
        if r.returncode != 0:
            why = (r.stderr or r.stdout).decode(errors="replace").strip().splitlines()
            return f"host {h!r} is not reachable by the launcher ({why[-1] if why else f'exit {r.returncode}'})"
    return None


def unspawnable() -> str | None:
    """Why new ranks could not run this program (None: they can). A spawned rank runs the program again
    (:func:`program`), from its module (``python -m``) or its file; code given as ``python -c CODE``, on
    standard input or typed into an interpreter has neither, and a spawned rank would fail at its start while
    the running ranks wait for it until the resize timeout."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    if spec is not None and spec.name and spec.name != "__main__":
        return None
    path = getattr(main, "__file__", None)  # absolute for a script (Python 3.9 on): a chdir since does not matter
    if path and os.path.isfile(path):
        return None
    how = {"-c": "'python -c'", "-": "standard input", "": "an interactive interpreter"}.get(
        sys.argv[0] if sys.argv else "", f"{path or sys.argv[0]!r}, which is not a file")
    return (f"new ranks cannot start this program: it runs from {how}, and a spawned rank runs the program "
            "again from its file or module (python prog.py, python -m pkg.prog)")


def program() -> list[str]:
    """argv that restarts this program: ``python -m module args`` or ``python script args``."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    if spec is not None and spec.name and spec.name != "__main__":
        name = spec.name[: -len(".__main__")] if spec.name.endswith(".__main__") else spec.name
        return ["-m", name, *sys.argv[1:]]
    return [os.path.abspath(sys.argv[0]), *sys.argv[1:]]


def spawn_commands(n: int, hosts) -> tuple[list[str], list[list[str]], list[int], list[MPI.Info]]:
    """``MPI_Comm_spawn_multiple``'s arguments: this program under ``reshape.runtime.spawned``, one command per host."""
    argv = ["-m", "reshape.runtime.spawned", *program()]
    if not hosts:
        info = MPI.Info.Create()
        info.Set("wdir", os.getcwd())
        return [sys.executable], [argv], [n], [info]
    order: list[str] = []
    count: dict[str, int] = {}
    for h in hosts:
        if h not in count:
            order.append(h)
            count[h] = 0
        count[h] += 1
    infos, cmds, argvs = [], [], []
    ompi = open_mpi()
    for h in order:
        info = MPI.Info.Create()
        info.Set("host", h)
        info.Set("wdir", os.getcwd())
        if ompi and not is_local(h):
            # Open MPI spawns only onto hosts of the job's allocation, and a rank there gets the environment
            # of PRRTE's daemon on that host: the host is added (with the slots asked for), and the job's
            # variables go on env's command line (an info value holds 255 characters; env execs Python, so
            # the rank is the process PRRTE started)
            info.Set("PMIX_ADD_HOST", f"{h}:{count[h]}")
            cmds.append(ENV)
            argvs.append([*remote_env(), sys.executable, *argv])
        else:
            cmds.append(sys.executable)
            argvs.append(argv)
        infos.append(info)
    return cmds, argvs, [count[h] for h in order], infos


ENV = "/usr/bin/env"


def remote_env() -> list[str]:
    """``NAME=value`` for each variable a rank spawned on another host needs on Open MPI
    (:func:`reshape.joblink.mpis.forwarded`)."""
    return [f"{k}={os.environ[k]}" for k in forwarded(os.environ)]
