"""reshape: resizable MPI jobs (ReSHAPE) with block-cyclic redistribution.

``import reshape; rt = reshape.init()`` starts (or, on a rank spawned by a
resize, joins) a resizable job: the runtime API (:mod:`reshape.runtime`) is
available at the top level. It is imported on first use, so that
``import reshape.redistribution.layout`` and the other pure modules do not load MPI.

Pure layout and schedule code lives in :mod:`reshape.redistribution.layout` and
:mod:`reshape.redistribution.schedule`; MPI execution in :mod:`reshape.redistribution.redistribute` and
:mod:`reshape.darray`; the checks of user input in :mod:`reshape.checks`.
"""

__version__ = "0.1.0"

# name -> module holding it; resolved on first access (PEP 562)
_LAZY = {
    "init": "reshape.runtime", "Resizer": "reshape.runtime", "Registered": "reshape.runtime",
    "ResizeError": "reshape.runtime", "ResizeResult": "reshape.runtime", "layout_rule": "reshape.runtime",
    "UsageError": "reshape.checks",
}
__all__ = ["__version__", *_LAZY]


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'reshape' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
