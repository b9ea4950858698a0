"""SHARED's model (Nakazawa 2005): out-of-core arrays on heterogeneous nodes, the MHETA model and GBS search.

Modules: ``cluster`` (node descriptions and their emulation), ``ooc`` (HDF5
out-of-core local arrays streamed in ICLA pieces), ``structure`` (application
structure and its file format), ``instrument`` (the instrumented BLOCK
iteration), ``model`` (MHETA, the execution-time model), ``search`` (GBS, GS,
GA, SA), ``distribute`` (one call returning the GEN_BLOCK split) and ``app``
(the base of the out-of-core applications in ``apps/``).
"""
