"""docs/resizable-programs.md's worked example: a 5-point stencil on a 2-D block-cyclic array, with
halo exchange between the layout's neighbours, gives the same bits static, along a scripted resize
plan, and as a plain numpy computation on one array."""

import hashlib
import re

import numpy as np
import pytest

pytestmark = pytest.mark.procs

N, BLOCK, STEPS = 44, 4, 6  # 11 blocks per side: uneven block counts on 2, 3 and 4 grid rows/columns
ARGS = ["examples/stencil2d.py", "--n", str(N), "--block", str(BLOCK), "--steps", str(STEPS)]


def digest(res):
    m = re.search(r"sizes \[([\d, ]+)\] sha256 (\w+)", res.stdout)
    assert m, res.stdout + res.stderr
    return [int(x) for x in m.group(1).split(",")], m.group(2)


def reference() -> str:
    """The same steps on the whole array in one process (zero boundary)."""
    i, j = np.meshgrid(np.arange(N), np.arange(N), indexing="ij")
    u = 100.0 * ((i - N // 3) ** 2 + (j - N // 2) ** 2 < N)
    for _ in range(STEPS):
        p = np.pad(u, 1)
        u = u + 0.2 * (p[:-2, 1:-1] + p[2:, 1:-1] + p[1:-1, :-2] + p[1:-1, 2:] - 4 * u)
    return hashlib.sha256(u.tobytes()).hexdigest()[:16]


def test_stencil_2d_block_cyclic_static_resized_and_serial_agree(mpirun):
    want = reference()
    sizes, static = digest(mpirun(2, ARGS))  # a 1x2 grid: halos along the columns only
    assert sizes == [2] and static == want
    # 2 (1x2) -> 4 (2x2: halos along both axes) -> 3 (1x3) -> 1
    sizes, resized = digest(mpirun(2, ARGS, env={"RESHAPE_PLAN": "2,4,3,1", "RESHAPE_ALLOW_NEW_SIZES": "1"}))
    assert sizes == [2, 4, 3, 1] and resized == want
