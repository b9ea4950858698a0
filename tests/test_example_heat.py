"""The README's resizable example gives bit-identical results static and resized."""

import re

import pytest

pytestmark = pytest.mark.procs


def digest(res):
    m = re.search(r"sizes \[([\d, ]+)\] sha256 (\w+)", res.stdout)
    assert m, res.stdout + res.stderr
    return [int(x) for x in m.group(1).split(",")], m.group(2)


def test_heat_resized_equals_static(mpirun):
    args = ["examples/heat.py", "--n", "96", "--steps", "12"]
    sizes, static = digest(mpirun(2, args))
    assert sizes == [2]
    sizes, grown = digest(mpirun(2, args, env={"RESHAPE_PLAN": "2,4,3,5,1", "RESHAPE_ALLOW_NEW_SIZES": "1"}))
    assert sizes == [2, 4, 3, 5, 1]
    assert grown == static
    sizes, other = digest(mpirun(1, args, env={"RESHAPE_PLAN": "1,2,4,2"}))
    assert sizes == [1, 2, 4, 2] and other == static
