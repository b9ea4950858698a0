"""Resizable 2-D FFT image filter (Sudarsan & Ribbens 2007 Table 1, "FFT ... used for image transformation").

The image ``X`` (``n x n`` complex) is a registered array in contiguous row
blocks. One job iteration is one whole filtering pass ``X <- ifft2(H * fft2(X))``
with a Gaussian low-pass ``H``:

1. FFT of every local row;
2. transpose by redistribution: rows layout -> columns layout (the circulant
   engine of :mod:`reshape.redistribution.redistribute`, always, whatever method resizes use);
3. FFT of every local column, multiply by ``H``, inverse FFT of every column;
4. redistribution back to rows, inverse FFT of every row.

Legal sizes: ``p`` must divide ``n`` (the paper's rule, §4).

Verification: the serial numpy reference applies the same 1-D transforms in
the same order (rows, columns, filter, columns, rows) to the whole image.
Each 1-D transform is pocketfft's computation on the same values wherever the
row or column lives, and redistribution only moves bits, so a distributed run
on any number of ranks, resized or not, is expected to match it bit for bit
(``--exact``, the default); ``--no-exact`` compares within ``--rtol``.

Run: ``mpiexec -n 4 python -m apps.fft2d --n 256 --iters 10 --check``.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

import reshape.runtime as runtime
from apps.common import add_options, finish, positive, rand, run, want_check
from reshape.redistribution.layout import block
from reshape.redistribution.redistribute import redistribute

__all__ = ["image", "lowpass", "serial"]


def image(i: np.ndarray, j: np.ndarray, n: int) -> np.ndarray:
    """A test image of size ``n``: a bright square plus deterministic noise."""
    square = ((i * 4 // n) == 1) & ((j * 4 // n) == 2)
    return square * 1.0 + 0.2 * rand(i, j, seed=3)


def lowpass(n: int, sigma: float) -> tuple[np.ndarray, np.ndarray]:
    """Separable Gaussian low-pass factors: ``H[k, l] = h[k] * h[l]``."""
    f = np.fft.fftfreq(n)
    h = np.exp(-0.5 * (f / sigma) ** 2)
    return h, h


def serial(x: np.ndarray, iters: int, sigma: float) -> np.ndarray:
    """The serial numpy reference: the same transforms, in the same order, on the whole image."""
    n = x.shape[0]
    hr, hc = lowpass(n, sigma)
    h = hr[:, None] * hc[None, :]
    x = x.astype(np.complex128)
    for _ in range(iters):
        y = np.fft.fft(x, axis=1)
        y = np.fft.fft(y, axis=0)
        y *= h
        y = np.fft.ifft(y, axis=0)
        x = np.fft.ifft(y, axis=1)
    return x


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m apps.fft2d", description=__doc__.split("\n\n")[0])
    add_options(ap, n=256, size_help="image size n (n x n)")
    ap.add_argument("--sigma", type=float, default=0.2, help="low-pass width in cycles/sample (default 0.2)")
    ap.add_argument("--exact", action=argparse.BooleanOptionalAction, default=True,
                    help="require a bit-identical match with the serial reference (default on)")
    ap.add_argument("--rtol", type=float, default=1e-12, help="tolerance with --no-exact (default 1e-12)")
    args = ap.parse_args(argv)
    positive(ap, n=args.n, iters=args.iters)
    n = args.n

    rt = runtime.init(sizes=lambda p: n % p == 0)
    if not rt.joined and n % rt.size:
        if rt.rank == 0:
            print(f"fft2d: {rt.size} processes do not divide n = {n}", file=sys.stderr)
        return 2
    X = rt.register_array("X", (n, n), dtype=np.complex128, layout="rows", init=lambda i, j: image(i, j, n))
    hr, hc = lowpass(n, args.sigma)
    ref: dict[int, np.ndarray] = {}

    def step(it: int) -> None:
        comm, p = rt.comm, rt.size
        rows, cols = block((n, n), p, 0), block((n, n), p, 1)
        y = np.fft.fft(X.local, axis=1)
        y = redistribute(comm, rows, y, cols)
        y = np.fft.fft(y, axis=0)
        (gj,) = cols.global_indices(rt.rank)[1:]
        y *= hr[:, None] * hc[gj][None, :]
        y = np.fft.ifft(y, axis=0)
        y = redistribute(comm, cols, y, rows)
        X.local[...] = np.fft.ifft(y, axis=1)

    def verify(done: int) -> str | None:
        if done not in ref:
            ref.clear()
            i = np.arange(n)
            ref[done] = serial(image(i[:, None], i[None, :], n), done, args.sigma)
        gi, gj = X.layout.global_indices(rt.rank)
        want = ref[done][np.ix_(gi, gj)]
        if args.exact:
            return None if np.array_equal(X.local, want) else (
                f"not bit-identical to the serial reference (max diff {np.max(np.abs(X.local - want)):.3g})")
        err = float(np.max(np.abs(X.local - want), initial=0.0))
        return f"off by {err:.3g} (rtol {args.rtol:g})" if err > args.rtol * max(1.0, np.abs(want).max()) else None

    ok, rows = run(rt, args.iters, step, verify if want_check(args) else None, args)
    return finish(rt, "fft2d", args, ok, rows, X)


if __name__ == "__main__":
    sys.exit(main())
