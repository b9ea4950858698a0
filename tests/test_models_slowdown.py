"""Figueira & Berman: every table's aggregate slowdown reproduced by the model."""

from __future__ import annotations

import pytest

from scheduler.lab.models.slowdown import (
    aggregate_slowdown,
    busy_from_cpu_share,
    local_slowdown,
    predict_time,
    weights,
)

LD, CB, U = "load-dependent", "constraint", "uniform"

# (case, sd per node, weights, partitioning, f (shared), f (dedicated), paper value, tol)
CASES = [
    ("Fig. 1", [2, 2, 3, 1], [2, 2, 2, 1], LD, None, None, 1.9, 0.01),
    ("Table 1 exp 1", [2, 2, 1, 1], None, LD, None, None, 1.33, 0.005),
    ("Table 1 exp 2", [2, 2, 3, 1], None, LD, None, None, 1.72, 0.01),
    ("Fig. 2 homogeneous", [3, 2, 2, 1], None, CB, [1 / 12, 3 / 12, 3 / 12, 5 / 12],
     [0.25] * 4, 2.0, 1e-9),
    ("Fig. 2 heterogeneous", [3, 2, 2, 1], [2, 2, 2, 1], CB, [1 / 12, 3 / 12, 3 / 12, 5 / 12],
     [0.25] * 4, 1.67, 0.005),
    ("Table 2", [3, 2, 2, 1], None, CB, [1 / 4, 1 / 6, 1 / 4, 1 / 3], [0.25] * 4, 3.0, 1e-9),
    ("Table 3", [2, 2, 1, 1], None, U, None, None, 2.0, 1e-9),
    ("Table 4", [3, 2, 1, 1], None, U, None, None, 3.0, 1e-9),
    ("Table 6", [local_slowdown([]), local_slowdown([2 / 8]), local_slowdown([1]),
                 local_slowdown([1, 3 / 8])], None, U, None, None, 2.375, 1e-9),
    ("Table 7", [2, 2, 1, 1], [3.07, 3.07, 1, 1], LD, None, None, 1.6, 0.01),
    ("Table 8", [1, 1, 2, 2], [2.3, 2.3, 1, 1], LD, None, None, 1.18, 0.005),
    ("Tables 9+10", [1, 1, 2, 2], [3.07, 3.07, 1, 1], CB, [1 / 6, 1 / 3, 1 / 3, 1 / 6],
     [1 / 6, 1 / 3, 1 / 6, 1 / 3], 2.01, 0.015),
    ("Tables 9+12", [local_slowdown(3), local_slowdown([1 / 3]), local_slowdown(2),
                     local_slowdown(1)], [3.07, 3.07, 1, 1], CB, [3 / 11, 3 / 11, 3 / 11, 2 / 11],
     [1 / 6, 1 / 3, 1 / 6, 1 / 3], 2.46, 0.01),
    ("Table 13", [1, 2, 2, 1], [1, 1, 1.84, 1.84], U, None, None, 2.0, 1e-9),
    ("Table 15", [2, 3, 3, 2], [1, 1, 1.84, 1.84], U, None, None, 3.0, 1e-9),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_every_table(case):
    _, sd, w, part, f, f_ded, paper, tol = case
    got = aggregate_slowdown(sd, w, partitioning=part, f=f, f_ded=f_ded)
    assert got == pytest.approx(paper, abs=tol)


def test_local_slowdown_equations():
    assert local_slowdown(2) == 3.0  # Eq. 8
    assert local_slowdown([1.0, 1.0]) == local_slowdown(2)  # Eq. 9 reduces to Eq. 8
    assert busy_from_cpu_share(0.5, 1) == 1.0  # share >= 1/(p+1) -> busy
    assert busy_from_cpu_share(1 / 8, 1) == 0.25  # Eq. 10


def test_weights_and_prediction():
    assert weights([1.0, 2.0]) == [2.0, 1.0]
    assert predict_time(10.0, [2, 1], partitioning=U) == 20.0


@pytest.mark.parametrize(
    "args",
    [([], None, U), ([0.5], None, U), ([1, 2], [1], U), ([1, 2], None, "nonsense")],
)
def test_bad_input(args):
    with pytest.raises(ValueError):
        aggregate_slowdown(args[0], args[1], partitioning=args[2])
