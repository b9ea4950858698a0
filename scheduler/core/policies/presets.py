"""The named policy presets: what ``--policy NAME`` means, in the daemon and in the simulator.

Each is an (Application Scheduler, Remap Scheduler) pair from the registry
(``scheduler.core.policy``), with parameters:

===================  ======================================  =================================
name                 application policy                      remap policy
===================  ======================================  =================================
``fcfs``             ``fcfs``                                ``static`` (never resizes)
``easy``             ``easy``                                ``static``
``moldable-easy``    ``easy-squeeze``                        ``static`` (squeezed starts, never resizes)
``reshape``          ``easy``                                ``reshape`` (Sudarsan & Ribbens 2007 §3.1, 5% noise guard)
``reshape-paper``    ``easy``                                ``reshape-paper`` (Sudarsan & Ribbens 2007, as published)
``reshape-squeeze``  ``easy-squeeze``                        ``reshape``
``reshape-fcfs``     ``fcfs``                                ``reshape``
``reshape-plus``     ``easy-plus``                           ``reshape-plus``
``dep``              ``dep``                                 ``dep`` (Islam, Prodromidis & Squillante)
``dep-smooth``       ``dep``                                 ``dep`` (``min_interval=600`` s)
``fold``             ``fold``                                ``fold`` (Islam, Prodromidis & Squillante §2.6, folding)
``sp:K``             ``sp`` (``k=K``)                        ``static``
===================  ======================================  =================================

``reshape`` is Sudarsan & Ribbens' (2007) Remap Scheduler behind EASY backfilling (Sudarsan & Ribbens 2007
§3.1 leaves the Application Scheduler open; FCFS is ``reshape-fcfs``), with
the noise guard ``min_gain=0.05``: an expansion must gain more than 5% to
count. ``reshape-paper`` is the same with the paper's rule as published (any
gain counts, ``min_gain=0``): it reproduces Fig. 3(a)'s 2->4->6->9->12->16->12
where ``reshape`` stops at 6 (:mod:`scheduler.core.policies.reshape_remap`).
``easy-squeeze`` is EASY plus Sudarsan & Ribbens' (2007) "squeeze a resizable job into the
available processors, add more later"; ``moldable-easy`` squeezes the same
way and never adds: the baseline that tells what resizing adds to moldable
starts (a resource manager that starts a job at any size in ``--nodes=MIN-MAX``
does as much); ``easy-plus`` is EASY with
``squeeze=True, give_back=True`` and ``reshape-plus`` the Remap Scheduler
with ``borrow=True, announced=True, prior=True`` (:mod:`scheduler.core.policies.easy`,
:mod:`scheduler.core.policies.reshape_remap`).
"""

from __future__ import annotations

from scheduler.core.policy import register_preset

register_preset("fcfs", "fcfs", "static", "first come, first served; jobs keep their size")
register_preset("easy", "easy", "static", "EASY backfilling; jobs keep their size")
register_preset("moldable-easy", "easy-squeeze", "static",
                "EASY that squeezes resizable jobs into free slots, never resizing them (the moldable baseline)")
register_preset("reshape", "easy", "reshape", "EASY + Sudarsan & Ribbens' (2007) Remap Scheduler")
register_preset("reshape-paper", "easy", "reshape-paper",
                "EASY + Sudarsan & Ribbens' (2007) Remap Scheduler as published (any gain counts, no noise guard)")
register_preset("reshape-squeeze", "easy-squeeze", "reshape",
                "EASY that squeezes resizable jobs into free slots + the Remap Scheduler")
register_preset("reshape-fcfs", "fcfs", "reshape", "FCFS + the Remap Scheduler")
register_preset("reshape-plus", "easy-plus", "reshape-plus",
                "EASY with squeeze and give-back + the Remap Scheduler with borrowing (recommended)")
register_preset("dep", "dep", "dep", "Islam, Prodromidis & Squillante's dynamic equipartitioning")
register_preset("dep-smooth", "dep", "dep", "DEP resizing a job at most every 600 s",
                remap_params={"min_interval": 600.0})
register_preset("fold", "fold", "fold",
                "Islam, Prodromidis & Squillante's folding: halve the largest job for an arrival")
