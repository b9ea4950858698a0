"""SHARED: out-of-core arrays on heterogeneous nodes, the MHETA model and GBS (seed 004).

Modules: ``cluster`` (node descriptions and their emulation), ``ooc`` (HDF5
out-of-core local arrays streamed in ICLA pieces), ``structure`` (application
structure and its file format), ``instrument`` (the instrumented BLOCK
iteration), ``mheta`` (the execution-time model), ``search`` (GBS, GS, GA, SA)
and ``distribute`` (one call returning the GEN_BLOCK split).
"""
