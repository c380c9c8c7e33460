"""FFTs as dots against constant DFT matrices (how XLA's TPU backend computes them too).

The OpenCL backend has no FFT library, but it has fast dots: a length-``n`` DFT of a batch of
rows is a product with the ``n x n`` matrix ``W[j, k] = exp(-2 pi i jk / n)``, four real dots
of the parts. Long transforms are split Cooley-Tukey style (``n = n1 n2``: DFTs of length
``n1`` down the columns of the ``n1 x n2`` view, twiddle factors, DFTs of length ``n2`` along
the rows, a transpose) until each piece is at most ``DIRECT_MAX`` long, so a 16,384-point
transform is two passes of 128-point dots: ``n (n1 + n2)`` multiply-adds a point instead of
``n^2``. A prime length above ``PRIME_DIRECT_MAX`` goes through Bluestein's chirp-z
transform: a convolution of power-of-two length, done by the same transforms. Every
constant (matrices, twiddles, chirps) is computed in float64 from exactly reduced angles.

``lower_fft`` handles HLO's four kinds over the trailing ``fft_length`` dimensions: FFT and
IFFT axis by axis (IFFT divides by each length), RFFT as the full transform of a real input
cut to ``n/2 + 1`` points then FFTs along the other axes, IRFFT as inverse FFTs along the
leading axes then the inverse of the Hermitian-completed last axis, keeping its real part
(the imaginary parts of the zero and Nyquist terms drop out, as in XLA's and numpy's).
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

from ..hlo.dtypes import ElementType
from ..hlo.ir import HloInstruction
from ..hlo.opcode_enum import Opcode
from .part_builder import PartBuilder, dims_of, type_of

DIRECT_MAX = 128            # lengths transformed by one dot against the DFT matrix
PRIME_DIRECT_MAX = 512      # a prime length up to this is one dot too (else Bluestein)

Value = tuple[HloInstruction, HloInstruction | None]     # real part, imaginary part (None: 0)
Pair = tuple[HloInstruction, HloInstruction]             # real part, imaginary part


def _each(f: Callable[[HloInstruction], HloInstruction], pair: Pair) -> Pair:
    return f(pair[0]), f(pair[1])


def lower_fft(b: PartBuilder, kind: str, lengths: tuple[int, ...], x: Value) -> Value:
    """The parts of ``kind`` (FFT, IFFT, RFFT, IRFFT) over the trailing ``len(lengths)``
    dimensions of ``x``; IRFFT's imaginary part is None."""
    rank = len(dims_of(x[0]))
    axes = list(range(rank - len(lengths), rank))
    if kind in ("FFT", "IFFT"):
        for axis in reversed(axes):
            x = _along(b, x, axis, lambda v, n: _full(b, v, n, kind == "IFFT"))
        return x
    if kind == "RFFT":
        x = _along(b, x, axes[-1], lambda v, n: _cut(b, _full(b, v, n, False), n // 2 + 1))
        for axis in reversed(axes[:-1]):
            x = _along(b, x, axis, lambda v, n: _full(b, v, n, False))
        return x
    for axis in axes[:-1]:
        x = _along(b, x, axis, lambda v, n: _full(b, v, n, True))
    n = lengths[-1]
    return _along(b, x, axes[-1], lambda v, _: (_full(b, _hermitian(b, v, n), n, True)[0], None))


def _along(b: PartBuilder, x: Value, axis: int,
           transform: Callable[[Value, int], Value]) -> Value:
    """``transform`` applied to ``x``'s rows along ``axis``: the axis moved last, the others
    flattened into one batch dimension, and both undone afterwards."""
    dims = dims_of(x[0])
    rank = len(dims)
    perm = [d for d in range(rank) if d != axis] + [axis]
    inverse = [perm.index(d) for d in range(rank)]
    batch = math.prod(dims[d] for d in perm[:-1])

    def rows(v: HloInstruction) -> HloInstruction:
        return b.reshape(b.transpose(v, perm), (batch, dims[axis]))
    re, im = transform((rows(x[0]), None if x[1] is None else rows(x[1])), dims[axis])
    moved = [dims[d] for d in perm[:-1]]

    def back(v: HloInstruction) -> HloInstruction:
        return b.transpose(b.reshape(v, moved + [dims_of(v)[-1]]), inverse)
    return back(re), None if im is None else back(im)


def _cut(b: PartBuilder, x: Pair, n: int) -> Pair:
    return b.slice(x[0], 1, 0, n), b.slice(x[1], 1, 0, n)


def _hermitian(b: PartBuilder, x: Value, n: int) -> Value:
    """The full ``n`` points of a real signal's spectrum from its first ``n/2 + 1``:
    ``X[n - k] = conj(X[k])``."""
    re, im = x
    assert im is not None
    tail = (n + 1) // 2
    if tail <= 1:
        return b.slice(re, 1, 0, n), b.slice(im, 1, 0, n)
    mirror_re = b.reverse(b.slice(re, 1, 1, tail), 1)
    mirror_im = b.unary(Opcode.NEGATE, b.reverse(b.slice(im, 1, 1, tail), 1))
    head = n // 2 + 1
    return (b.concatenate([b.slice(re, 1, 0, head), mirror_re], 1),
            b.concatenate([b.slice(im, 1, 0, head), mirror_im], 1))


def _full(b: PartBuilder, x: Value, n: int, inverse: bool) -> Pair:
    """The DFT of each row of ``x`` ([rows, n]); the inverse is divided by ``n``."""
    re, im = _dft(b, x, n, inverse)
    if inverse:
        re, im = b.scaled(re, 1.0 / n), b.scaled(im, 1.0 / n)
    return re, im


def _dft(b: PartBuilder, x: Value, n: int, inverse: bool) -> tuple[HloInstruction, HloInstruction]:
    """The unscaled DFT (``exp(+2 pi i jk/n)`` for the inverse) of each row of ``x``."""
    if n <= DIRECT_MAX:
        return _direct(b, x, n, inverse)
    n1 = _divisor_near_root(n)
    if n1 > 1:
        return _four_step(b, x, n1, n // n1, inverse)
    if n <= PRIME_DIRECT_MAX:
        return _direct(b, x, n, inverse)
    return _bluestein(b, x, n, inverse)


def _divisor_near_root(n: int) -> int:
    for d in range(math.isqrt(n), 1, -1):
        if n % d == 0:
            return d
    return 1


def _roots(n: int, rows: np.ndarray, cols: np.ndarray, inverse: bool) -> np.ndarray:
    """``exp(-+2 pi i rc/n)`` for the outer product of ``rows`` and ``cols``, the exponent
    reduced modulo ``n`` in integers first."""
    turns = np.outer(rows.astype(np.int64), cols.astype(np.int64)) % n
    angle = 2.0 * np.pi * turns / n
    return np.cos(angle) + (1j if inverse else -1j) * np.sin(angle)


def _complex_constant(b: PartBuilder, w: np.ndarray, et: ElementType) -> tuple[HloInstruction, HloInstruction]:
    return b.constant(w.real, et), b.constant(w.imag, et)


def _times_matrix(b: PartBuilder, x: Value, w: tuple[HloInstruction, HloInstruction]
                  ) -> tuple[HloInstruction, HloInstruction]:
    """``x @ w`` for complex ``x`` ([rows, n], imaginary part possibly 0) and ``w`` ([n, m])."""
    (xr, xi), (wr, wi) = x, w
    re, im = b.dot(xr, wr, 1, 0), b.dot(xr, wi, 1, 0)
    if xi is None:
        return re, im
    return (b.binary(Opcode.SUBTRACT, re, b.dot(xi, wi, 1, 0)),
            b.binary(Opcode.ADD, im, b.dot(xi, wr, 1, 0)))


def _direct(b: PartBuilder, x: Value, n: int, inverse: bool) -> tuple[HloInstruction, HloInstruction]:
    index = np.arange(n)
    return _times_matrix(b, x, _complex_constant(b, _roots(n, index, index, inverse),
                                                 type_of(x[0])))


def _four_step(b: PartBuilder, x: Value, n1: int, n2: int,
               inverse: bool) -> tuple[HloInstruction, HloInstruction]:
    """Input index ``j = j1 n2 + j2``, output index ``k = k1 + n1 k2``: length-``n1`` DFTs
    over ``j1``, twiddles ``w_n^(j2 k1)``, length-``n2`` DFTs over ``j2``. Each DFT reads
    rows it contracts along their minor axis (transposed into place first: dots contracting
    a strided axis ran at half the speed)."""
    rows = dims_of(x[0])[0]
    et = type_of(x[0])

    def columns(v: HloInstruction) -> HloInstruction:     # [rows * n2, n1]
        return b.reshape(b.transpose(b.reshape(v, (rows, n1, n2)), (0, 2, 1)), (rows * n2, n1))
    y = _dft(b, (columns(x[0]), None if x[1] is None else columns(x[1])), n1,
             inverse)                                                     # [rows * n2, k1]
    twiddle = _complex_constant(b, _roots(n1 * n2, np.arange(n2), np.arange(n1), inverse), et)
    spread = _each(lambda t: b.broadcast(t, (rows, n2, n1), (1, 2)), twiddle)
    y = b.complex_multiply(_each(lambda v: b.reshape(v, (rows, n2, n1)), y), spread)
    y = _each(lambda v: b.reshape(b.transpose(v, (0, 2, 1)), (rows * n1, n2)), y)
    z = _dft(b, y, n2, inverse)                                           # [rows * n1, k2]
    return _each(lambda v: b.reshape(b.transpose(b.reshape(v, (rows, n1, n2)), (0, 2, 1)),
                                     (rows, n1 * n2)), z)


def _bluestein(b: PartBuilder, x: Value, n: int, inverse: bool) -> tuple[HloInstruction, HloInstruction]:
    """``X[k] = c[k] sum_j (x[j] c[j]) conj(c[k - j])`` with the chirp ``c[j] =
    exp(-+pi i j^2 / n)``: a convolution, done as power-of-two transforms."""
    rows = dims_of(x[0])[0]
    et = type_of(x[0])
    m = 1 << (2 * n - 2).bit_length()
    j = np.arange(n, dtype=np.int64)
    chirp = np.exp((1j if inverse else -1j) * np.pi * ((j * j) % (2 * n)) / n)
    kernel = np.zeros(m, np.complex128)
    kernel[:n] = np.conj(chirp)
    kernel[m - n + 1:] = np.conj(chirp[1:])[::-1]
    spectrum = np.fft.fft(kernel)
    c = _complex_constant(b, chirp, et)
    c_rows = _each(lambda v: b.broadcast(v, (rows, n), (1,)), c)
    xr, xi = x
    if xi is None:
        a = _each(lambda v: b.binary(Opcode.MULTIPLY, xr, v), c_rows)
    else:
        a = b.complex_multiply((xr, xi), c_rows)
    zero = b.full(0.0, et, ())
    padded = _each(lambda v: b.pad(v, zero, 1, m - n), a)
    f = _dft(b, padded, m, False)
    s = _each(lambda v: b.broadcast(v, (rows, m), (1,)), _complex_constant(b, spectrum, et))
    conv = _dft(b, b.complex_multiply(f, s), m, True)
    conv = _each(lambda v: b.scaled(b.slice(v, 1, 0, n), 1.0 / m), conv)
    return b.complex_multiply(conv, c_rows)
