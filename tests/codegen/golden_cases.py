"""The cases behind ``data/xla_golden.npz``: which ops and types, and their inputs.

Shared by ``make_xla_golden.py`` (which runs them through XLA, needs jax) and the tests (which
read inputs and XLA's results back from the file and never import jax).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

INT_TYPES = ("s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64")
FLOAT_TYPES = ("f16", "bf16", "f32", "f64")
CONVERT_TYPES = ("pred",) + INT_TYPES + FLOAT_TYPES
INT_BINARY = ("add", "subtract", "multiply", "divide", "remainder", "power", "maximum",
              "minimum", "and", "or", "xor")
SHIFTS = ("shift-left", "shift-right-logical", "shift-right-arithmetic")
INT_UNARY = ("abs", "negate", "sign", "not", "popcnt", "count-leading-zeros")
FLOAT_BINARY = ("add", "subtract", "multiply", "divide", "remainder", "maximum", "minimum")
FLOAT_UNARY = ("abs", "negate", "sign", "floor", "ceil", "round-nearest-afz",
               "round-nearest-even", "sqrt")
COMPARE_DIRECTIONS = ("EQ", "NE", "LT", "LE", "GT", "GE")
REDUCE_PRECISION = ((5, 10), (8, 7), (8, 23), (11, 52), (4, 3), (5, 2), (2, 1), (8, 0),
                    (1, 0), (3, 20), (10, 3))
BITCAST_PAIRS = (("f32", "s32"), ("u32", "f32"), ("f64", "u64"), ("s64", "f64"),
                 ("f16", "u16"), ("s16", "f16"), ("bf16", "u16"), ("u16", "bf16"),
                 ("f16", "bf16"), ("bf16", "f16"), ("s8", "u8"), ("u32", "s32"))
# name, algorithm, bits type, shape, key (u32[4], as jax passes it)
RNG_CASES = tuple(
    (f"{alg}-{et}-{'x'.join(map(str, shape)) or 'scalar'}-{k}", alg, et, shape, key)
    for k, key in enumerate(((1, 2, 3, 4), (0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFE, 0xFFFFFFFF)))
    for alg in ("rng_default", "rng_three_fry", "rng_philox")
    for et in ("u8", "u16", "u32", "u64")
    for shape in ((), (5,), (7, 3), (3, 5), (2, 3, 4), (1, 7, 1))
)


def numpy_type(et: str) -> np.dtype:
    names = {"pred": np.bool_, "s8": np.int8, "s16": np.int16, "s32": np.int32,
             "s64": np.int64, "u8": np.uint8, "u16": np.uint16, "u32": np.uint32,
             "u64": np.uint64, "f16": np.float16, "bf16": ml_dtypes.bfloat16,
             "f32": np.float32, "f64": np.float64}
    return np.dtype(names[et])


def raw_bits(values) -> np.ndarray:
    """Floats as unsigned integers of the same width (so bf16 needs no pickling)."""
    values = np.asarray(values)
    if values.dtype.kind in "biu":
        return values
    return values.view({2: np.uint16, 4: np.uint32, 8: np.uint64}[values.itemsize])


def _int_values(et: str, rng: np.random.Generator) -> np.ndarray:
    dtype = numpy_type(et)
    info = np.iinfo(dtype)
    edge = [0, 1, 2, 3, 5, 7, -1, -2, -3, -7, info.min, info.max, info.min + 1, info.max - 1,
            info.bits - 1, info.bits, info.bits + 1, 31, 32, 63, 64, 100, -100]
    edge = [v for v in edge if info.min <= v <= info.max]
    return np.concatenate([np.array(edge, dtype),
                           rng.integers(info.min, info.max, 20, dtype=dtype, endpoint=True)])


def int_inputs(et: str) -> tuple[np.ndarray, np.ndarray]:
    """Every pair of edge-case and random values."""
    values = _int_values(et, np.random.default_rng(10))
    return np.repeat(values, len(values)), np.tile(values, len(values))


def shift_inputs(et: str) -> tuple[np.ndarray, np.ndarray]:
    """Every value with every shift amount from -2 to 70 (negative ones as the type's bits)."""
    values = _int_values(et, np.random.default_rng(11))
    amounts = np.arange(-2, 71).astype(np.int64).astype(numpy_type(et))
    return np.repeat(values, len(amounts)), np.tile(amounts, len(values))


def _float_values(et: str, rng: np.random.Generator) -> np.ndarray:
    dtype = numpy_type(et)
    info = ml_dtypes.finfo(dtype)
    special = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, 2.5, -2.5, 3.0, 0.1, 7.0, -7.5, 100.0,
               np.inf, -np.inf, np.nan, -np.nan, float(info.max), -float(info.max),
               float(info.tiny), -float(info.tiny), float(info.smallest_subnormal),
               -float(info.smallest_subnormal) * 3]
    random = np.exp(rng.uniform(-20, 20, 26)) * rng.choice([-1.0, 1.0], 26)
    with np.errstate(all="ignore"):
        return np.concatenate([np.array(special), random]).astype(dtype)


def float_inputs(et: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every pair of special and random values, and a third operand (clamp's lower bound)."""
    values = _float_values(et, np.random.default_rng(12))
    a, b = np.repeat(values, len(values)), np.tile(values, len(values))
    c = np.resize(values[::-1], len(a))
    return a, b, c


def convert_inputs(et: str) -> np.ndarray:
    rng = np.random.default_rng(13)
    if et == "pred":
        return np.array([False, True, True, False])
    dtype = numpy_type(et)
    if et in FLOAT_TYPES:
        special = [0.0, -0.0, 0.5, -0.5, 1.5, 2.5, -2.5, 2.7, -2.7, 127.5, 128, 255.5, 256,
                   -129, 300, 65504, 65520, 1e5, 3e9, -3e9, 5e9, 1e19, 2e19, -1e19, 1e30,
                   np.inf, -np.inf, np.nan, -np.nan, 1e-39, -1e-39, 1e-45, 6e-8, 1.01171875,
                   16777217, 2 ** 24 + 2 ** 16 + 1, 0.1, 1 + 2 ** -8 + 2 ** -30]
        random = np.exp(rng.uniform(-30, 50, 60)) * rng.choice([-1.0, 1.0], 60)
        with np.errstate(all="ignore"):
            return np.concatenate([np.array(special), random]).astype(dtype)
    info = np.iinfo(dtype)
    edge = [0, 1, -1, 2, 127, 128, 255, 256, -128, -129, info.min, info.max,
            2 ** 24 + 2 ** 16 + 1, 2 ** 40 + 2 ** 32 + 1, 16777217, 65504, 65520]
    edge = [v for v in edge if info.min <= v <= info.max]
    return np.concatenate([np.array(edge, dtype),
                           rng.integers(info.min, info.max, 40, dtype=dtype, endpoint=True)])


def bit_patterns(et: str, count: int = 600) -> np.ndarray:
    """Uniformly random bit patterns of ``et`` (NaN payloads, denormals and all)."""
    width = numpy_type(et).itemsize
    unsigned = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[width]
    rng = np.random.default_rng(14)
    return rng.integers(0, np.iinfo(unsigned).max, count, dtype=unsigned,
                        endpoint=True).view(numpy_type(et))
