"""The applications' kernels and serial references on one process (no mpiexec)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mpi4py import MPI

from apps import fft2d, jacobi, lu, master_worker, mm
from apps.common import rand
from reshape.redistribution.layout import block_cyclic_2d


@given(st.integers(1, 30), st.integers(0, 1000))
@settings(max_examples=40, deadline=None)
def test_serial_lu_reconstructs_with_bounded_multipliers(n, seed):
    a = np.random.default_rng(seed).standard_normal((n, n))
    f, piv = lu.serial_lu(a)
    perm, lo, up = lu.unpack(f, piv)
    assert sorted(perm) == list(range(n))
    assert np.allclose(a[perm], lo @ up, atol=1e-12 * n * np.abs(a).max())
    assert np.all(np.abs(np.tril(f, -1)) <= 1.0)  # partial pivoting


@given(st.integers(1, 40), st.integers(1, 9))
@settings(max_examples=25, deadline=None)
def test_blocked_lu_on_one_process_matches_the_serial_one(n, nb):
    i = np.arange(n)
    a = lu.a_of(i[:, None], i[None, :])
    f = a.copy()
    piv, info = lu.factor(MPI.COMM_SELF, block_cyclic_2d((n, n), (1, 1), (nb, nb)), f)
    fr, pr = lu.serial_lu(a)
    assert info == 0 and np.array_equal(piv, pr)
    assert np.allclose(f, fr, rtol=0, atol=1e-12 * n)


def test_lu_reports_the_first_zero_pivot():
    f = np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 1.0, 1.0]])
    _, info = lu.factor(MPI.COMM_SELF, block_cyclic_2d((3, 3), (1, 1), (2, 2)), f)
    assert info == 3


def test_summa_on_one_process_is_a_product():
    n, nb = 13, 4
    i = np.arange(n)
    a, b = mm.a_of(i[:, None], i[None, :]), mm.b_of(i[:, None], i[None, :])
    c = np.full((n, n), 7.0)
    mm.summa(MPI.COMM_SELF, block_cyclic_2d((n, n), (1, 1), (nb, nb)), a, b, c)
    assert np.allclose(c, a @ b, rtol=0, atol=1e-13 * n)


def test_jacobi_reference_converges_to_the_solution():
    n = 30
    i = np.arange(n)
    x = jacobi.serial(n, 60)
    assert np.allclose(x, np.linalg.solve(jacobi.matrix(i[:, None], i[None, :], n), jacobi.rhs(i)), atol=1e-12)


def test_fft_reference_is_a_gaussian_filter():
    n = 16
    i = np.arange(n)
    x = fft2d.image(i[:, None], i[None, :], n)
    hr, hc = fft2d.lowpass(n, 0.2)
    want = np.fft.ifft2(np.fft.fft2(x) * (hr[:, None] * hc[None, :]))
    assert np.allclose(fft2d.serial(x, 1, 0.2), want, atol=1e-13)
    assert np.allclose(fft2d.serial(x, 3, 1e9), x, atol=1e-13)  # an all-pass filter changes nothing


def test_master_alone_does_every_unit():
    total, done = master_worker.master(MPI.COMM_SELF, 37, 5, 0.0)
    assert done == 37 and total == sum(master_worker.unit_value(u) for u in range(37))


@given(st.lists(st.integers(0, 10**6), min_size=1, max_size=20), st.integers(0, 9))
def test_rand_depends_only_on_the_global_index(idx, seed):
    i = np.array(idx)
    whole = rand(i[:, None], i[None, :], seed=seed)
    assert all(whole[a, b] == rand(np.array(i[a]), np.array(i[b]), seed=seed) for a in range(len(i)) for b in (0, -1))
    assert np.all((whole >= -0.5) & (whole < 0.5))


def test_bad_options_are_refused_with_a_message(capsys):
    with pytest.raises(SystemExit) as e:
        mm.main(["--n", "8", "--nb", "0"])
    assert e.value.code == 2 and "--nb must be >= 1, got 0" in capsys.readouterr().err
