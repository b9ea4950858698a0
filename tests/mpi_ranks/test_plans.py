"""Every rank builds the same redistribution plan on its own.

Each rank of a redistribution computes the plan (transfers, runs, circulant steps) by itself and
then executes its part: if two processes built different steps, a send would meet no matching
receive. The ranks run in different interpreters (each with its own hash seed), so here every
rank builds the plans of many layout pairs, of any process counts (plans are pure), and their
fingerprints must agree everywhere.
"""

from __future__ import annotations

import hashlib
import itertools

import pytest

from reshape.redistribution.layout import block, block_cyclic_1d, block_cyclic_2d, gen_block, nearly_square_grid
from reshape.redistribution.schedule import make_plan
from tests.mpi_ranks import assert_on_every_rank, comm

pytestmark = pytest.mark.mpi


def fingerprint(plan) -> str:
    def runs(rs):
        return [(r.starts.tolist(), r.lens.tolist()) for r in rs]

    def transfer(t):
        return (t.src, t.dst, runs(t.send), runs(t.recv))

    text = repr(([transfer(t) for t in plan.local], [[transfer(t) for t in step] for step in plan.steps]))
    return hashlib.sha256(text.encode()).hexdigest()


def pairs():
    shape = (37, 29)
    for p, q in itertools.product(range(1, 9), repeat=2):
        yield f"1-D {p}->{q}", block_cyclic_1d(shape, p, 3), block_cyclic_1d(shape, q, 5), None, None
        yield (f"2-D {p}->{q}", block_cyclic_2d(shape, nearly_square_grid(p), (4, 3)),
               block_cyclic_2d(shape, nearly_square_grid(q), (2, 5), src=(0, nearly_square_grid(q)[1] - 1)),
               None, None)
        counts = [(i * 7 + 3) % 11 for i in range(q)]
        counts[-1] += shape[0] - sum(counts)
        if counts[-1] >= 0:
            yield f"BLOCK {p} -> GEN_BLOCK {counts}", block(shape, p), gen_block(shape, counts), None, None
        # an arbitrary rank map: the destination set shifted and reversed inside a larger communicator
        yield (f"1-D {p}->{q} mapped", block_cyclic_1d(shape, p, 2), block_cyclic_1d(shape, q, 3),
               tuple(range(p)), tuple(reversed(range(p, p + q))))


def test_every_rank_builds_the_same_plans():
    names, prints = [], []
    for name, src, dst, src_ranks, dst_ranks in pairs():
        names.append(name)
        prints.append(fingerprint(make_plan(src, dst, src_ranks, dst_ranks)))
    first = comm.bcast(prints, root=0)
    assert_on_every_rank([f"{n}: plan differs from rank 0's" for n, a, b in zip(names, prints, first, strict=True)
                          if a != b])
