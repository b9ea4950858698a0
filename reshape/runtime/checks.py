"""What a user gives a resizable job, checked on every rank and decided together.

Two kinds of input reach :mod:`reshape.runtime`: the ``RESHAPE_*`` environment
variables a job reads (:mod:`reshape.joblink.jobenv`, read by :func:`job_settings` at
``init()``) and the arguments of ``register_array`` (:func:`array_rule`,
:func:`collectively`). Each rank checks what it was given; then the ranks
agree (one ``allgather``), so that a problem found on any rank raises the
same :class:`UsageError` on every rank, naming the value and what is
allowed. No rank is left waiting in a collective the others never reach.

Sizes are checked against the data too (:func:`data_limit`): the size the job
starts on, a plan, or an expansion the scheduler offers, that asks for more
processes than an array has blocks along its distributed axis is refused
naming both numbers, the first two at ``register_array`` before anything is
built or spawned.

An agreed error that nobody catches ends the job with exit status 1: rank 0
prints it on one line (``UsageError: ...``; the traceback too with
``RESHAPE_DEBUG=1``), the other ranks stay quiet, and every rank leaves through ``MPI_Finalize`` together (no
``MPI_Abort`` is needed, since no rank is waiting for another).
"""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Callable, Mapping

import numpy as np

from reshape.joblink import jobenv as E
from reshape.mpiutil import mpi_type, open_mpi
from reshape.redistribution.layout import Layout, LayoutError, nearly_square_grid
from reshape.runtime.darray import layout_rule
from reshape.runtime.settings import JobSettings, env_problems

__all__ = ["LAYOUTS", "UsageError", "agree", "array_rule", "collectively", "data_limit", "init_function",
           "job_settings", "oversubscribed_warning", "plan_data_problem", "plan_problems", "start_data_problem",
           "ulfm_problem"]

LAYOUTS = ("rows", "cols", "rows-cyclic", "cols-cyclic", "2d")


class UsageError(ValueError):
    """Bad input to a resizable job, raised identically on every rank (see the module docstring)."""

    def __init__(self, message: str, rank: int = 0, agreed: bool = True):
        super().__init__(message)
        self.rank = rank
        self.agreed = agreed  # False: found on this rank alone (a spawned rank), which must abort the job


def plan_problems(plan: tuple[int, ...] | None, size: int) -> list[str]:
    """A plan must start at the size ``mpiexec -n`` started the job with."""
    if plan and plan[0] != size:
        return [f"{E.PLAN}={','.join(map(str, plan))}: the plan starts at {plan[0]} processes but the job "
                f"runs on {size} (use mpiexec -n {plan[0]}, or a plan starting with {size})"]
    return []


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


# ---------------------------------------------------------------------- agreement (MPI)
def _debug() -> bool:
    try:
        return E.flag(E.DEBUG, False, os.environ)
    except ValueError:  # refused with the other variables at init()
        return True


def _quiet_hook(previous) -> Callable:
    def hook(kind, value, tb):
        if isinstance(value, UsageError) and value.agreed:  # raised on every rank: no abort, rank 0 speaks
            if value.rank == 0:
                if _debug():
                    traceback.print_exception(kind, value, tb, file=sys.stderr)
                else:
                    print(f"{kind.__name__}: {value} ({E.DEBUG}=1 shows the traceback)", file=sys.stderr,
                          flush=True)
            return
        previous(kind, value, tb)

    hook.reshape_checks = True
    return hook


def agree(comm, problem: str | None, what: str) -> None:
    """Raise the same :class:`UsageError` on every rank of ``comm`` if any rank has a ``problem``. Collective."""
    problems = comm.allgather(problem)
    bad = [(r, p) for r, p in enumerate(problems) if p]
    if not bad:
        return
    if len({p for _, p in bad}) == 1:
        detail = bad[0][1] + ("" if len(bad) == len(problems) else f" (on rank{'s' if len(bad) > 1 else ''} "
                                                                    f"{', '.join(str(r) for r, _ in bad)})")
    else:
        detail = "; ".join(f"rank {r}: {p}" for r, p in bad[:4]) + (" ..." if len(bad) > 4 else "")
    if not getattr(sys.excepthook, "reshape_checks", False):
        sys.excepthook = _quiet_hook(sys.excepthook)
    raise UsageError(f"{what}: {detail}", comm.rank)


def job_settings(comm, spawned: bool = False, env: Mapping[str, str] | None = None,
                 max_procs: int | None = None, reuse: bool | None = None, standby: int | None = None,
                 ) -> JobSettings:
    """The job's settings from the environment, checked on every rank of ``comm``. Collective.

    ``max_procs``, ``reuse``, ``standby``: ``init``'s arguments, checked too
    (standby ranks are parked ranks: they need reuse on). On the ranks ``mpiexec``
    started, also: the plan starts at ``comm.size``.
    """
    settings, problems = env_problems(env)
    if max_procs is not None and not (isinstance(max_procs, int | np.integer) and max_procs >= 1):
        problems.append(f"init(max_procs={max_procs!r}): expected an integer >= 1")
    if standby is not None and (isinstance(standby, bool) or not isinstance(standby, int | np.integer)
                                or standby < 0):
        problems.append(f"init(standby={standby!r}): expected an integer >= 0")
    elif (settings.standby if standby is None else standby) and not (settings.reuse if reuse is None else reuse):
        what = f"{E.STANDBY}={settings.standby}" if standby is None else f"init(standby={standby})"
        problems.append(f"{what}: standby ranks are parked ranks; turn reuse on too ({E.REUSE}=1 or "
                        "init(reuse=True))")
    if not spawned:
        problems += plan_problems(settings.plan, comm.size)
    if settings.inplace:
        problems += [p for p in [ulfm_problem()] if p]
    agree(comm, "; ".join(problems) or None, "reshape.init()")
    return settings


def ulfm_problem(env=None) -> str | None:
    """Why in-place recovery cannot work in this process (MPI, launcher), or None."""
    env = os.environ if env is None else env
    if not open_mpi():
        return (f"{E.INPLACE}=1 needs Open MPI's ULFM ({E.MPI}=openmpi); MPICH cannot shrink a communicator "
                f"around a lost rank: use {E.CHECKPOINT} instead (the daemon restarts the job from its last "
                "checkpoint)")
    if env.get("OMPI_MCA_mpi_ft_enable", "").strip().lower() not in ("1", "true", "yes", "on"):
        return (f"{E.INPLACE}=1: the job was not started with Open MPI's fault tolerance (mpirun --with-ft ulfm;"
                " reshape mpiexec, reshape.joblink.launch and the daemon add it)")
    return None


def oversubscribed_warning(plan: tuple[int, ...] | None) -> str | None:
    """The warning rank 0 prints at the first resize point when a plan asks for more processes than this
    machine's CPUs (oversubscribed ranks are slower, README "Notes for running on real clusters"); it waits
    until then so that a plan refused against the data (:func:`plan_data_problem`) is one line alone."""
    if plan and max(plan) > _cpus():
        return (f"[reshape] warning: {E.PLAN}={','.join(map(str, plan))} asks for up to {max(plan)} processes "
                f"on a machine with {_cpus()} CPUs: ranks will share cores (slower, but correct)")
    return None


# ---------------------------------------------------------------------- register_array
def _shape_problem(shape) -> str | None:
    if isinstance(shape, tuple | list) and shape and all(
            isinstance(s, int | np.integer) and not isinstance(s, bool) and s >= 1 for s in shape):
        return None
    return f"shape={shape!r}: expected a tuple of positive integers, e.g. (100,) or (100, 100)"


def _block_problem(layout, block) -> str | None:
    if block is None or callable(layout):
        return None
    want = {"rows-cyclic": 1, "cols-cyclic": 1, "2d": 2}.get(layout)
    if want is None:
        return f"block={block!r}: layout {layout!r} takes no block size (rows-cyclic, cols-cyclic and 2d do)"
    parts = (block,) * want if isinstance(block, int | np.integer) else block
    if not (isinstance(parts, tuple | list) and len(parts) == want
            and all(isinstance(b, int | np.integer) and not isinstance(b, bool) and b >= 1 for b in parts)):
        example = "64 or (64,)" if want == 1 else "64 or (64, 64)"
        return f"block={block!r}: layout {layout!r} needs {want} positive block size{'s' * (want > 1)}, e.g. {example}"
    return None


def _init_problem(init, shape: tuple[int, ...]) -> str | None:
    if init is None or callable(init) or np.isscalar(init):
        return None
    if isinstance(init, np.ndarray):
        if init.shape != shape:
            return (f"init: an array of shape {init.shape}, expected the whole array, shape {shape} "
                    "(or a scalar, or a function of the global indices)")
        return None
    return (f"init={type(init).__name__}: expected a function of the global indices, a scalar "
            f"or an array of shape {shape}")


def array_rule(comm, size: int, name: str, shape, dtype, layout, block, init, taken) -> Callable:
    """Check ``register_array``'s arguments and return the array's layout rule.

    With ``comm`` (the ranks registering together) the ranks agree on the
    verdict and on passing the same name, shape, dtype, layout and block;
    without (a rank spawned into a running job) the check is local and a
    problem is a ``UsageError`` on that rank alone (not ``agreed``: uncaught,
    it aborts the job through :func:`reshape.runtime.watchdog.install_excepthook`).
    """
    what = f"register_array({name!r})"
    problem = None
    rule = None
    if not isinstance(name, str) or not name:
        problem = f"name={name!r}: expected a non-empty string"
    elif name in taken:
        problem = f"an array named {name!r} is already registered"
    else:
        problem = _shape_problem(shape)
    if problem is None:
        shape = tuple(int(s) for s in shape)
        try:
            mpi_type(np.dtype(dtype))
        except TypeError as e:
            problem = f"dtype={dtype!r}: {e}"
        if problem is None and not callable(layout) and layout not in LAYOUTS:
            problem = f"layout={layout!r}: expected one of {', '.join(LAYOUTS)} or a function p -> Layout"
        problem = problem or _block_problem(layout, block) or _init_problem(init, shape)
    if problem is None:
        try:
            rule = layout_rule(shape, layout, block)
            lay = rule(size)
        except (LayoutError, ValueError, TypeError) as e:
            problem = f"layout={layout!r} with shape={shape} on {size} processes: {e}"
        else:
            if not isinstance(lay, Layout) or tuple(lay.shape) != shape or lay.nprocs > size:
                problem = (f"layout: the function returned {lay!r} for {size} processes; expected a "
                           f"reshape.redistribution.layout.Layout of shape {shape} over at most {size} processes")
    if comm is None:
        if problem:
            raise UsageError(f"{what}: {problem}", agreed=False)
        return rule
    agree(comm, problem, what)
    sig = (tuple(shape), np.dtype(dtype).str, "a function" if callable(layout) else layout,
           None if block is None else np.asarray(block).tolist())
    sigs = comm.allgather(sig)
    for label, k in (("shape", 0), ("dtype", 1), ("layout", 2), ("block", 3)):
        values = [s[k] for s in sigs]
        if len({repr(v) for v in values}) > 1:
            odd = next(r for r, v in enumerate(values) if v != values[0])
            agree(comm, f"every rank must pass the same {label}: rank 0 passed {values[0]!r}, "
                        f"rank {odd} {values[odd]!r}", what)
    return rule


def data_limit(name: str, shape: tuple[int, ...], layout, block) -> Callable[[int], str | None]:
    """``q -> why array ``name`` cannot be spread over q processes``, or None: more processes than the
    array has blocks along a distributed axis (rows for "rows", blocks of ``block`` for the
    cyclic and 2d layouts) would leave some with no data. A layout function is not checked."""
    if callable(layout):
        return lambda q: None
    shape = tuple(int(s) for s in shape)
    unit = {0: "rows", 1: "columns"}

    def axis_limit(axis: int, nb: int) -> tuple[int, str]:
        n = shape[axis] if axis < len(shape) else 1
        blocks = -(-n // nb)
        what = unit[axis] if nb == 1 else f"blocks of {nb} {unit[axis]}"
        return blocks, f"{n} {unit[axis]}" if nb == 1 else f"{blocks} {what} ({n} {unit[axis]})"

    if layout in ("rows", "cols"):
        limits = [(None, *axis_limit(0 if layout == "rows" else 1, 1))]
    elif layout in ("rows-cyclic", "cols-cyclic"):
        nb = int(block if isinstance(block, int | np.integer) else (block or (1,))[0])
        limits = [(None, *axis_limit(0 if layout == "rows-cyclic" else 1, nb))]
    elif layout == "2d":
        mb, nb = (block, block) if isinstance(block, int | np.integer) else (block or (64, 64))
        limits = [(0, *axis_limit(0, int(mb))), (1, *axis_limit(1, int(nb)))]
    else:
        return lambda q: None

    def problem(q: int) -> str | None:
        grid = nearly_square_grid(q) if layout == "2d" else None
        for axis, blocks, text in limits:
            along = q if grid is None else grid[axis]
            if along > blocks:
                procs = (f"{q} processes" if grid is None else
                         f"{q} processes (a {grid[0]}x{grid[1]} grid: {along} along the {unit[axis]})")
                return (f"{procs} > {text} of array {name!r} (layout {layout!r}): some processes would "
                        f"hold no data")
        return None

    return problem


def init_function(init) -> Callable[..., np.ndarray]:
    """``register_array``'s ``init`` as a function of the global index grids."""
    if init is None:
        return lambda *idx: 0
    if callable(init):
        return init
    if isinstance(init, np.ndarray):
        return lambda *idx: init[idx]
    return lambda *idx: init


def collectively(comm, what: str, make: Callable):
    """``make()`` on every rank; if it raises on any, the same :class:`UsageError` everywhere. Collective."""
    try:
        out, problem = make(), None
    except Exception as e:  # an init function that fails on some rank's block
        out, problem = None, f"{type(e).__name__}: {e}"
    agree(comm, problem, what)
    return out


# ---------------------------------------------------------------------- resize targets
def resize_problem(rt, q: int, action: str) -> str | None:
    """Why job ``rt`` cannot ``action`` (expand or shrink) to ``q`` processes now, or None."""
    p = rt.size
    if not isinstance(q, int | np.integer) or q < 1:
        return f"invalid target size {q!r}"
    if action == "expand" and q <= p:
        return f"expand to {q} is not larger than the current {p}"
    if action == "shrink" and q >= p:
        return f"shrink to {q} is not smaller than the current {p}"
    if action == "shrink" and not rt.allow_new_sizes and q not in rt.history:
        return (f"shrink to {q}: the job has only run on {sorted(set(rt.history))} processes "
                f"(a job shrinks only to sizes it has run at; {E.ALLOW_NEW_SIZES}=1 or "
                f"init(allow_new_sizes=True) lifts this)")
    return size_problem(rt, q)


def size_problem(rt, q: int) -> str | None:
    """Why job ``rt`` can never run on ``q`` processes (max_procs, the sizes test, an array's layout), or None."""
    if rt.max_procs and q > rt.max_procs:
        return f"{q} exceeds the job's maximum of {rt.max_procs} processes"
    if rt.sizes and not rt.sizes(q):
        return f"{q} processes is not a legal size for this job"
    for reg in rt.arrays.values():
        try:
            reg.rule(q)
        except LayoutError as e:
            return f"array {reg.name!r} has no layout on {q} processes: {e}"
        problem = reg.limit(q) if reg.limit is not None else None
        if problem:
            return problem
    return None


def start_data_problem(size: int, limit: Callable[[int], str | None]) -> str | None:
    """The job's own size is more than the array can be spread over (see :func:`data_limit`), or None."""
    problem = limit(size)
    return f"the job runs on {problem}; start it on fewer (mpiexec -n)" if problem else None


def plan_data_problem(plan: tuple[int, ...] | None, limit: Callable[[int], str | None]) -> str | None:
    """The first size of a scripted plan the array cannot be spread over (see :func:`data_limit`), or None."""
    for q in plan or ():
        problem = limit(q)
        if problem:
            return f"{E.PLAN}={','.join(map(str, plan))}: {problem}"
    return None

