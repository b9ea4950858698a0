"""The resize runtime: grow and shrink a running MPI job at iteration boundaries (Sudarsan & Ribbens 2007 §3.2).

``from reshape.runtime import init, Resizer`` (or ``import reshape.runtime as
runtime; runtime.init()``): the names below are imported on first use, so that
``python -m reshape.runtime.spawned`` initialises MPI before anything heavy.

* ``start``: :func:`init`, which makes the job's handle; ``resizer``: :class:`Resizer`,
  the handle (register arrays, ``resize()``, expand, shrink, ``finish()``), a façade over the
  collaborators below; ``job``: the state they share; ``sizing``: the sizes a job accepts and a
  resize's checks; ``ending``: what the scheduler is told at the end;
* ``spawning``: an expansion's steps (host probes, ``MPI_Comm_spawn_multiple``,
  merging, handing new ranks the job's state); ``spawned``: the entry point of a
  spawned rank (``MPI_Init`` before the imports);
* ``background``: expansions and shrinks behind the job's next iteration;
* ``parking``: retired ranks parked for reuse and called back;
* ``darray``: distributed arrays, the registered arrays and their layout rules;
* ``results``: what a resize returns; ``checks``: the checks of user input,
  agreed on every rank; ``watchdog``: the bound on a resize, and aborting the job.
"""

from reshape import lazy_exports

_LAZY = {
    "init": "reshape.runtime.start", "Resizer": "reshape.runtime.resizer",
    "Registered": "reshape.runtime.darray", "layout_rule": "reshape.runtime.darray",
    "ResizeError": "reshape.runtime.results", "ResizeResult": "reshape.runtime.results",
    "EXPAND_PARTS": "reshape.runtime.results",
}
__all__ = list(_LAZY)

__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
