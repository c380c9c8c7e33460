"""FFTs as dots against DFT matrices (``passes/fft_lowering``): every kind and the plans
behind them (one matrix, Cooley-Tukey splits, Bluestein for long primes) against numpy's
FFT, in f32 and f64."""

from __future__ import annotations

import numpy as np
import pytest

import runtime
from runtime.hlo.shape import ArrayShape
from runtime.passes.complex_lowering import lower_complex_in_place
from runtime.passes.fft_lowering import DIRECT_MAX, PRIME_DIRECT_MAX

RNG = np.random.default_rng(7)


def _module(kind: str, in_shape: str, out_shape: str, lengths: tuple[int, ...]) -> str:
    return (f"HloModule fft\nENTRY e {{\n  x = {in_shape} parameter(0)\n"
            f"  ROOT y = {out_shape} fft(x), fft_type={kind}, "
            f"fft_length={{{','.join(map(str, lengths))}}}\n}}\n")


def _text(dims) -> str:
    return ",".join(map(str, dims))


def _complex(shape, dtype=np.complex64) -> np.ndarray:
    return (RNG.standard_normal(shape) + 1j * RNG.standard_normal(shape)).astype(dtype)


def _close(got, want, tolerance):
    got = np.asarray(got)
    assert got.shape == want.shape and got.dtype == want.dtype
    scale = float(np.max(np.abs(want)))
    assert float(np.max(np.abs(got.astype(np.complex128) - want))) <= tolerance * scale


# lengths for each plan: one matrix, one split, a split of splits (256 x 256), a prime of
# one matrix, Bluestein, and Bluestein inside a split (2 x 1031)
LENGTHS = [1, 2, 7, 12, 100, 128, 129, 1000, 4096, 257, 1031, 2062]


@pytest.mark.parametrize("n", LENGTHS)
def test_fft_and_ifft_of_one_axis(n):
    x = _complex((3, n))
    for kind, want in (("FFT", np.fft.fft(x)), ("IFFT", np.fft.ifft(x))):
        shape = f"c64[3,{n}]"
        got = runtime.compile(_module(kind, shape, shape, (n,)))(x)
        _close(got, want.astype(np.complex64), 2e-6)


# 2062: a split with a Bluestein part; 16384: two 128-point passes
@pytest.mark.parametrize("n", [1, 2, 4, 7, 8, 15, 100, 1031, 2062, 16384])
def test_rfft_and_irfft_of_one_axis(n):
    x = RNG.standard_normal((2, 3, n)).astype(np.float32)
    half = n // 2 + 1
    got = runtime.compile(_module("RFFT", f"f32[2,3,{n}]", f"c64[2,3,{half}]", (n,)))(x)
    _close(got, np.fft.rfft(x).astype(np.complex64), 2e-6)
    spectrum = _complex((2, 3, half))
    got = runtime.compile(_module("IRFFT", f"c64[2,3,{half}]", f"f32[2,3,{n}]", (n,)))(spectrum)
    _close(got, np.fft.irfft(spectrum, n).astype(np.float32), 2e-6)


def test_a_split_of_splits():
    n = 65536          # 256 x 256, each 256 split again into 16 x 16
    x = _complex((1, n))
    got = runtime.compile(_module("FFT", f"c64[1,{n}]", f"c64[1,{n}]", (n,)))(x)
    _close(got, np.fft.fft(x).astype(np.complex64), 4e-6)


@pytest.mark.parametrize("kind", ["FFT", "IFFT", "RFFT", "IRFFT"])
@pytest.mark.parametrize("lengths", [(6, 10), (4, 6, 8)])
def test_transforms_over_several_axes(kind, lengths):
    batch = (2,)
    axes = tuple(range(1, 1 + len(lengths)))
    full = batch + lengths
    half = batch + lengths[:-1] + (lengths[-1] // 2 + 1,)
    if kind == "FFT":
        x, ins, outs = _complex(full), full, full
        want = np.fft.fftn(x, axes=axes)
    elif kind == "IFFT":
        x, ins, outs = _complex(full), full, full
        want = np.fft.ifftn(x, axes=axes)
    elif kind == "RFFT":
        x, ins, outs = RNG.standard_normal(full).astype(np.float32), full, half
        want = np.fft.rfftn(x, axes=axes)
    else:
        x, ins, outs = _complex(half), half, full
        want = np.fft.irfftn(x, lengths, axes=axes)
    in_type = "f32" if kind == "RFFT" else "c64"
    out_type = "f32" if kind == "IRFFT" else "c64"
    text = _module(kind, f"{in_type}[{_text(ins)}]", f"{out_type}[{_text(outs)}]", lengths)
    got = runtime.compile(text)(x)
    _close(got, want.astype(np.float32 if kind == "IRFFT" else np.complex64), 3e-6)


@pytest.mark.parametrize("n", [12, 1000, 1031])
def test_double_precision(n):
    x = _complex((2, n), np.complex128)
    got = runtime.compile(_module("FFT", f"c128[2,{n}]", f"c128[2,{n}]", (n,)))(x)
    _close(got, np.fft.fft(x), 1e-12)


def test_a_transposed_operand_layout():
    x = _complex((4, 12))
    text = (f"HloModule fft\nENTRY e {{\n  x = c64[4,12]{{0,1}} parameter(0)\n"
            f"  ROOT y = c64[4,12] fft(x), fft_type=FFT, fft_length={{12}}\n}}\n")
    _close(runtime.compile(text)(x), np.fft.fft(x).astype(np.complex64), 2e-6)


def _largest_constant(n: int) -> int:
    module = runtime.parse(_module("FFT", f"c64[2,{n}]", f"c64[2,{n}]", (n,)))
    lower_complex_in_place(module)
    return max(i.shape.element_count for i in module.instructions()
               if i.opcode == "constant" and isinstance(i.shape, ArrayShape))


def test_long_transforms_never_build_their_square_matrix():
    assert _largest_constant(DIRECT_MAX) == DIRECT_MAX ** 2
    assert _largest_constant(16384) == 128 * 128                 # a 128 x 128 split
    assert _largest_constant(PRIME_DIRECT_MAX - 3) == 509 ** 2   # a prime: one matrix
    # a longer prime (Bluestein): its convolution of 8192 points split into 64 x 128
    assert _largest_constant(2053) == 128 * 128


def test_no_fft_or_complex_value_is_left_for_the_kernels():
    module = runtime.parse(_module("RFFT", "f32[3,1000]", "c64[3,501]", (1000,)))
    lower_complex_in_place(module)
    kinds = {(i.opcode, i.shape.element_type.is_complex) for i in module.instructions()
             if isinstance(i.shape, ArrayShape)}
    assert ("fft", True) not in kinds and ("fft", False) not in kinds
    assert {op for op, is_complex in kinds if is_complex} == {"bitcast"}
