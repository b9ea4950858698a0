"""Where each layout position lives after a resize: which ranks stay, and which rank holds which position.

Sudarsan & Ribbens 2007 §3.2 fixes *who* takes part in a resize: an expansion adds the
spawned ranks, a shrink retires the most recently spawned ones (whole spawn
groups, so that they can leave at once; §3.1's rule that a job shrinks only to
sizes it has run at makes that exact). The layouts fix *what* each position
holds, not *which rank* holds it. By default the runtime gives each position
to the rank that already holds most of its bytes: a linear assignment over the
overlap matrix of every registered array together
(:func:`reshape.redistribution.relabel.relabel_many`, as COSTA does), and then renumbers the
communicator (``MPI_Comm_split`` keyed by position) so that, as before, comm
rank ``j`` holds position ``j`` of every layout. What changes for the
application is only that a rank's number may change at a resize; rank 0 (the
rank that talks to the scheduler) always stays rank 0. The relabelling is
taken only where its plan is cheaper than the fixed mapping's by more than
5% (:func:`reshape.redistribution.relabel.cheaper`; the cost counts the
copies the engine makes, the busiest rank's, then the total): keeping the
most bytes in place can pile the copying onto fewer ranks, and with 1-D row
blocks a kept byte costs one copy as a received one does (measured, 1-D
BLOCK 2->4 and 3->4 relabelled ran 1.5-1.6x slower than the fixed mapping in
one run). ``RESHAPE_RELABEL=0``
keeps the fixed mapping (position ``j`` on the ``j``-th senior rank).

Seniority is a rank's ``(expansion, rank in that expansion's spawn)``; the
ranks ``mpiexec`` started are expansion 0. Sorting by it gives the order the
ranks had before relabelling existed: the ranks that stay on a shrink to ``q``
are the ``q`` most senior ones.

The assignment is computed on rank 0 only (it alone needs scipy; the import,
0.3-0.7 s, is started in the background by :func:`prefetch` when the job may
resize) and travels with the hand-over or the shrink's decision.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence

from mpi4py import MPI

from reshape.joblink import jobenv as E
from reshape.redistribution.layout import Layout

__all__ = ["Seniority", "choose", "enabled", "grown", "prefetch", "renumber", "staying"]

Seniority = tuple[int, int]  # (the expansion that started the process, 0 for mpiexec's; its rank in that spawn)

def enabled(env: dict[str, str] | None = None) -> bool:
    """``RESHAPE_RELABEL``: relabel at resizes (default on); a value other than 0/1 is a ValueError naming it."""
    return E.flag(E.RELABEL, True, env)


def prefetch() -> threading.Thread:
    """Import the assignment solver in a daemon thread, so a resize does not wait for scipy."""
    def load() -> None:
        from reshape.redistribution import relabel

        relabel.solver()

    th = threading.Thread(target=load, name="reshape-prefetch", daemon=True)
    th.start()
    return th


def grown(keys: Sequence[Seniority], added: int) -> list[Seniority]:
    """Seniorities of a communicator after ``added`` ranks were spawned and merged in (appended)."""
    gen = 1 + max(k[0] for k in keys)
    return [*keys, *((gen, i) for i in range(added))]


def staying(keys: Sequence[Seniority], q: int) -> list[int]:
    """The comm ranks that stay on a shrink to ``q``: the ``q`` most senior, in seniority order."""
    if not 1 <= q <= len(keys):
        raise ValueError(f"cannot keep {q} of {len(keys)} ranks")
    return sorted(range(len(keys)), key=lambda r: keys[r])[:q]


def choose(
    arrays: Iterable[tuple[Layout, Layout, int]], candidates: Sequence[int], relabel: bool = True
) -> tuple[int, ...]:
    """Comm rank of every destination position: ``candidates[j]`` for position ``j``, or the relabelling.

    ``arrays`` holds ``(src, dst, itemsize)`` per registered array, the source on
    comm ranks ``0..P-1``; every ``dst`` has the same process count ``Q <=
    len(candidates)``. Position 0 stays on ``candidates[0]``. Without arrays, or
    with ``relabel`` off, the mapping is ``candidates[:Q]``; so it is when the
    relabelling is not :func:`~reshape.redistribution.relabel.cheaper`.
    """
    arrays = list(arrays)
    cands = [int(r) for r in candidates]
    if not arrays or not relabel:
        q = arrays[0][1].nprocs if arrays else len(cands)
        return tuple(cands[:q])
    from reshape.redistribution.nodecopy import allocating
    from reshape.redistribution.relabel import cheaper, cost, relabel_many

    pairs = [(s, d, None, size) for s, d, size in arrays]
    out = relabel_many(pairs, cands, fixed={0: cands[0]})
    identity = tuple(cands[: arrays[0][1].nprocs])
    direct = allocating()  # the arrays are memfd-backed: peers read moved bytes directly, nothing is packed
    return out if cheaper(cost(pairs, out, direct), cost(pairs, identity, direct)) else identity


def renumber(comm: MPI.Intracomm, ranks: Sequence[int]) -> MPI.Intracomm:
    """A communicator in which the rank holding position ``j`` (``ranks[j]`` of ``comm``) is rank ``j``.

    Collective over ``comm``; ranks not in ``ranks`` get ``MPI.COMM_NULL``.
    """
    where = {int(r): j for j, r in enumerate(ranks)}
    me = where.get(comm.rank)
    return comm.Split(0 if me is not None else MPI.UNDEFINED, me if me is not None else 0)
