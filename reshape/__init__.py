"""reshape: resizable MPI jobs (ReSHAPE) with block-cyclic redistribution.

``import reshape; rt = reshape.init()`` starts (or, on a rank spawned by a
resize, joins) a resizable job: the runtime API (:mod:`reshape.runtime`) is
available at the top level. It is imported on first use, so that
``import reshape.redistribution.layout`` and the other pure modules do not load MPI.

The parts, each a subpackage, from the bottom up:

* :mod:`reshape.joblink`: the job's link to the scheduler (environment
  variables, wire protocol, daemon client, advisors, keys, launching); no MPI;
* :mod:`reshape.mpiutil` (MPI helpers: polite waiting, datatypes, collective
  error checks) and :mod:`reshape.faults` (fault injection points of a
  resize), used by the parts above them;
* :mod:`reshape.redistribution`: layouts, plans and the MPI redistribution engine;
* :mod:`reshape.runtime`: the resize runtime (``init``, ``Resizer``, spawning,
  parking, background resizes, the watchdog, the checks of user input);
* :mod:`reshape.mheta`: SHARED's out-of-core arrays, the MHETA model and GBS.
"""

__version__ = "0.1.0"

# name -> module holding it; resolved on first access (PEP 562)
_LAZY = {
    "init": "reshape.runtime.start", "Resizer": "reshape.runtime.resizer", "Registered": "reshape.runtime.darray",
    "ResizeError": "reshape.runtime.results", "ResizeResult": "reshape.runtime.results",
    "layout_rule": "reshape.runtime.darray", "UsageError": "reshape.runtime.checks",
}
__all__ = ["__version__", *_LAZY]


def lazy_exports(module: str, table: dict[str, str]):
    """PEP 562 ``__getattr__`` and ``__dir__`` for package ``module``: each name of ``table``
    (name -> the module defining it) is imported on first access, then kept as an attribute."""

    def __getattr__(name: str):
        if name in table:
            import importlib
            import sys

            value = getattr(importlib.import_module(table[name]), name)
            setattr(sys.modules[module], name, value)
            return value
        raise AttributeError(f"module {module!r} has no attribute {name!r}")

    def __dir__() -> list[str]:
        import sys

        return sorted({*vars(sys.modules[module]), *table})

    return __getattr__, __dir__


__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
