"""reshape: resizable MPI jobs (ReSHAPE) with block-cyclic redistribution.

Pure layout and schedule code lives in :mod:`reshape.layout` and
:mod:`reshape.schedule`; MPI execution in :mod:`reshape.redistribute` and
:mod:`reshape.darray`.
"""

__version__ = "0.1.0"
