"""Bad register_array arguments on 2+ ranks: every rank must raise the same UsageError, and carry on.

Each case is caught on every rank and printed as ``rank R CASE: MESSAGE``; then
a good array is registered and a resize point passed, to show that no rank
was left behind in a collective. ``--uncaught CASE`` lets one case end the job.
"""

import sys

import numpy as np

import reshape
from reshape.redistribution.layout import block

rt = reshape.init()
r = rt.rank
CASES = {
    "shape-int": dict(shape=100),
    "shape-zero": dict(shape=(0, 10)),
    "block-3": dict(shape=(8, 8), layout="2d", block=(2, 2, 2)),
    "init-array": dict(shape=(8, 8), init=np.ones((4, 4))),
    "shape-differs": dict(shape=(8, 8) if r == 0 else (8, 6)),
    "layout-unknown": dict(shape=(8, 8), layout="diagonal"),
    "init-raises": dict(shape=(8, 8), init=lambda i, j: i + j if r == 0 else np.linalg.inv(np.zeros((2, 2)))),
    "name-taken": dict(shape=(4,)),
    "layout-function": dict(shape=(8, 8), layout=lambda p: block((8, 4), p)),
}

if len(sys.argv) > 2 and sys.argv[1] == "--uncaught":
    rt.register_array(sys.argv[2], **CASES[sys.argv[2]])
    raise SystemExit("not reached")

rt.register_array("name-taken", (4,))
for case, kw in CASES.items():
    try:
        rt.register_array(case, **kw)
    except reshape.UsageError as e:
        print(f"rank {r} {case}: {e}", flush=True)
    else:
        print(f"rank {r} {case}: accepted", flush=True)
whole = np.arange(64.0).reshape(8, 8)
A = rt.register_array("A", (8, 8), layout="2d", block=2, init=whole)
for _ in rt.iterations(1):
    rt.resize()
got = A.gather()
if r == 0:
    print(f"after: registered {sorted(rt.arrays)} equal {np.array_equal(got, whole)}", flush=True)
rt.finish()
