"""The applications' kernels on the whole communicator match their serial references."""

from __future__ import annotations

import numpy as np
import pytest

from apps import lu, master_worker, mm
from reshape.redistribution.layout import block_cyclic_2d, nearly_square_grid
from tests.mpi_ranks import assert_on_every_rank, comm

pytestmark = pytest.mark.mpi

GRID = nearly_square_grid(comm.size)


@pytest.mark.parametrize("n, nb", [(1, 1), (7, 2), (24, 4), (37, 5)])
def test_blocked_lu_matches_the_serial_one(n, nb):
    layout = block_cyclic_2d((n, n), GRID, (nb, nb))
    i = np.arange(n)
    a = lu.a_of(i[:, None], i[None, :])
    f = layout.local_block(a, comm.rank).copy()
    piv, info = lu.factor(comm, layout, f)
    fr, pr = lu.serial_lu(a)
    problems = []
    if info != 0 or not np.array_equal(piv, pr):
        problems.append(f"info {info}, pivots {piv.tolist()} (serial: {pr.tolist()})")
    if not np.allclose(f, layout.local_block(fr, comm.rank), rtol=0, atol=1e-12 * n):
        problems.append("factors differ from the serial LU")
    assert_on_every_rank(problems)


@pytest.mark.parametrize("n, nb", [(5, 2), (13, 4), (30, 7)])
def test_summa_is_the_product(n, nb):
    layout = block_cyclic_2d((n, n), GRID, (nb, nb))
    i = np.arange(n)
    a, b = mm.a_of(i[:, None], i[None, :]), mm.b_of(i[:, None], i[None, :])
    c = np.full(layout.local_shape(comm.rank), 7.0)
    mm.summa(comm, layout, layout.local_block(a, comm.rank).copy(), layout.local_block(b, comm.rank).copy(), c)
    ok = np.allclose(c, layout.local_block(a @ b, comm.rank), rtol=0, atol=1e-13 * n)
    assert_on_every_rank([] if ok else ["block of c differs from a @ b"])


def test_master_and_workers_do_every_unit_once():
    units, chunk = 103, 7
    if comm.rank == 0:
        total, done = master_worker.master(comm, units, chunk, 0.0)
        want = sum(master_worker.unit_value(u) for u in range(units))
        problems = [] if (total, done) == (want, units) else [f"checksum {total} / {done} units, want {want} / {units}"]
    else:
        master_worker.worker(comm, 0.0)
        problems = []
    assert_on_every_rank(problems)
