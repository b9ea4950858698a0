"""Resizable 5-point stencil on a 2-D block-cyclic array: ``mpiexec -n 2 python examples/stencil2d.py``.

The worked example of docs/resizable-programs.md. The field is distributed ScaLAPACK style
(``layout="2d"``: blocks of ``--block`` x ``--block`` dealt cyclically over the nearly-square
process grid of the current size); every step exchanges halos with the layout's neighbours,
computes, and offers a resize point. Try ``RESHAPE_PLAN=2,4,3,1 RESHAPE_ALLOW_NEW_SIZES=1``:
the printed digest is the same at every size.
"""
import argparse
import hashlib
import time

import numpy as np

import reshape


def neighbours(comm, lay, u, axis):
    """``(lo, hi)``: every local element's neighbour at global index -1 / +1 along ``axis``
    (0 beyond the array's edge), exchanging only block edges with the layout's neighbours.

    Along a block-cyclic axis over ``p`` grid coordinates, the element before the first one of
    each local block belongs to the previous coordinate ``(c - 1) % p``, the one after the last
    to the next ``(c + 1) % p``; inside a block the neighbour is the adjacent local element.
    Both sides derive the same index lists from the layout, so no index travels.
    """
    d, coords = lay.dists[axis], list(lay.coords(comm.rank))
    c = coords[axis]
    g = d.global_indices(c)  # global indices of the local rows along this axis, increasing
    v = np.moveaxis(u, axis, 0)  # this axis first: rows of the view are what we exchange
    lo, hi = np.zeros_like(v), np.zeros_like(v)
    lo[1:], hi[:-1] = v[:-1], v[1:]

    def firsts(gi):  # local positions starting a block (their -1 neighbour is elsewhere)
        return np.flatnonzero(np.r_[True, np.diff(gi) != 1]) if len(gi) else np.zeros(0, int)

    def lasts(gi):  # local positions ending a block
        return np.flatnonzero(np.r_[np.diff(gi) != 1, True]) if len(gi) else np.zeros(0, int)

    lo[firsts(g)] = 0
    hi[lasts(g)] = 0
    if d.p == 1:
        return np.moveaxis(lo, 0, axis), np.moveaxis(hi, 0, axis)
    prev_c, next_c = (c - 1) % d.p, (c + 1) % d.p
    prev = lay.rank((*coords[:axis], prev_c, *coords[axis + 1:]))
    nxt = lay.rank((*coords[:axis], next_c, *coords[axis + 1:]))
    g_next, g_prev = d.global_indices(next_c), d.global_indices(prev_c)
    # to the next coordinate: the elements just before its blocks (all mine); the same from the previous
    want = g_next[firsts(g_next)] - 1
    send = np.ascontiguousarray(v[np.searchsorted(g, want[want >= 0])])
    at = firsts(g)[g[firsts(g)] > 0]
    buf = np.empty((len(at), *v.shape[1:]), v.dtype)
    comm.Sendrecv(send, dest=nxt, sendtag=2 * axis, recvbuf=buf, source=prev, recvtag=2 * axis)
    lo[at] = buf
    # and the other way: the elements just after the previous coordinate's blocks
    want = g_prev[lasts(g_prev)] + 1
    send = np.ascontiguousarray(v[np.searchsorted(g, want[want < d.n])])
    at = lasts(g)[g[lasts(g)] < d.n - 1]
    buf = np.empty((len(at), *v.shape[1:]), v.dtype)
    comm.Sendrecv(send, dest=prev, sendtag=2 * axis + 1, recvbuf=buf, source=nxt, recvtag=2 * axis + 1)
    hi[at] = buf
    return np.moveaxis(lo, 0, axis), np.moveaxis(hi, 0, axis)


def step(u, up, down, left, right):
    """One explicit heat step; elementwise, so any distribution gives the same bits."""
    return u + 0.2 * (up + down + left + right - 4 * u)


def hot(i, j, n):
    return 100.0 * ((i - n // 3) ** 2 + (j - n // 2) ** 2 < n)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=96, help="grid points per side")
    ap.add_argument("--block", type=int, default=8, help="block side of the block-cyclic layout")
    ap.add_argument("--steps", type=int, default=20, help="time steps (one resize point each)")
    args = ap.parse_args()

    rt = reshape.init()  # on ranks spawned by a resize this joins the running job
    T = rt.register_array("T", (args.n, args.n), layout="2d", block=(args.block, args.block),
                          init=lambda i, j: hot(i, j, args.n))
    for _ in rt.iterations(args.steps):
        t0 = time.perf_counter()
        comm, lay = rt.comm, T.layout  # both change at a resize: read them every step
        up, down = neighbours(comm, lay, T.local, 0)
        left, right = neighbours(comm, lay, T.local, 1)
        T.local[...] = step(T.local, up, down, left, right)
        rt.log(time.perf_counter() - t0)
        rt.resize()  # expand, shrink or continue: T.local and T.layout are the new ones after it
    whole = T.gather()
    if rt.rank == 0:
        sizes = [rt.history[0]] + [r.new for r in rt.results if r.action in ("expand", "shrink")]
        print(f"sizes {sizes} sha256 {hashlib.sha256(whole.tobytes()).hexdigest()[:16]}")
    rt.finish()


if __name__ == "__main__":
    main()
