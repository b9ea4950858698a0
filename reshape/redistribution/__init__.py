"""Redistribution: move a global array between two layouts over process sets that may differ.

Pure layout and plan code, importable without MPI: ``layout`` (1-D/2-D
block-cyclic and GEN_BLOCK layouts, ScaLAPACK semantics), ``schedule`` (which
index sets move where, and the contention-free circulant schedule),
``relabel`` (which rank takes which new position so the fewest bytes move)
and ``runcopy`` (copying run products through strided views).

MPI execution: ``redistribute`` (the circulant engine, :func:`redistribute`),
``baselines`` (one ``MPI_Alltoallv``, the paper's HDF5 checkpoint),
``nodecopy`` (memfd-backed blocks that ranks of one host read directly) and
``placement`` (seniority of ranks, the communicator renumbered to a relabelling).
"""
