"""A checkpointed program whose registered values are of every kind a checkpoint holds.

``python -m tests.mpi.ckpt_values --steps S [--bad KIND]``: ``S`` steps over a small array; the values
change every step. Rank 0 prints ``values REPR`` at the end, with each value's type, so that a run
resumed from a checkpoint can be compared with one that never stopped. ``--bad set`` (or ``object``,
``bytes``, ``intkey``, ``strarray``) also stores a value no checkpoint may hold.
"""

import argparse

import numpy as np

import reshape


class Opaque:
    pass


BAD = {"set": lambda: {1, 2}, "object": Opaque, "bytes": lambda: b"raw", "intkey": lambda: {"a": {3: "x"}},
       "strarray": lambda: np.array(["a", "b"])}

ap = argparse.ArgumentParser()
ap.add_argument("--steps", type=int, default=6)
ap.add_argument("--bad", choices=sorted(BAD), default=None)
args = ap.parse_args()

rt = reshape.init()
x = rt.register_array("x", (24,), init=lambda i: i * 1.0)
if "count" not in rt.values:  # a fresh start (a resumed run has them from its checkpoint)
    rt["count"] = 0
    rt["label"] = "start"
    rt["nothing"] = None
    rt["flag"] = False
    rt["sum"] = 0.0
    rt["big"] = 2 ** 70
    rt["history"] = []
    rt["pair"] = (0, "zero")
    rt["table"] = {"nested": [1, (2.5, None)], "nan": float("nan")}
    rt["piv"] = np.arange(4, dtype=np.int32)
    rt["info"] = np.int64(0)
    rt["norm"] = np.float32(0.0)
    rt["z"] = np.complex128(0)
if args.bad:
    rt["bad"] = BAD[args.bad]()


def step(it):
    x.local[...] += 1.0
    rt["count"] += 1
    rt["label"] = f"step {it}"
    rt["flag"] = not rt["flag"]
    rt["sum"] += it / 3
    rt["big"] += 1
    rt["history"] = [*rt["history"], it]
    rt["pair"] = (it, str(it))
    rt["piv"] = np.roll(rt["piv"], 1)
    rt["info"] = np.int64(it)
    rt["norm"] = np.float32(it) / np.float32(7)
    rt["z"] = np.complex128(complex(it, -it))


rt.run(step, args.steps)
total = rt.comm.allreduce(float(x.local.sum()))
if rt.rank == 0:
    shown = {k: (type(v).__name__, repr(v)) for k, v in sorted(rt.values.items())}
    print(f"values {shown} total {total}", flush=True)
rt.finish()
