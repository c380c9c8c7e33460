"""Regenerate ``data/xla_golden.npz``: XLA CPU's own results for the numerics tests.

Needs jax, which the tests never import: they read inputs and XLA's results from the file.
Each op is compiled alone from StableHLO (so XLA cannot constant-fold it) and run on
arguments. Floats are stored as raw bits, bf16 too, so the file needs no pickling.
Run from the repository root: ``python tests/codegen/make_xla_golden.py``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import jax
import numpy as np
from jax import lax
from jax._src.lib import _jax

sys.path.insert(0, str(Path(__file__).parent))

from golden_cases import (BITCAST_PAIRS, COMPARE_DIRECTIONS, CONVERT_TYPES,  # noqa: E402
                          FLOAT_BINARY, FLOAT_TYPES, FLOAT_UNARY, INT_BINARY, INT_TYPES,
                          INT_UNARY, REDUCE_PRECISION, RNG_CASES, SHIFTS, bit_patterns,
                          convert_inputs, float_inputs, int_inputs, numpy_type, raw_bits,
                          shift_inputs)

jax.config.update("jax_enable_x64", True)

_MLIR_TYPES = {"pred": "i1", "s8": "i8", "s16": "i16", "s32": "i32", "s64": "i64",
               "u8": "ui8", "u16": "ui16", "u32": "ui32", "u64": "ui64", "f16": "f16",
               "bf16": "bf16", "f32": "f32", "f64": "f64"}


def _tensor(et: str, n: int) -> str:
    return f"tensor<{n}x{_MLIR_TYPES[et]}>"


def xla(opcode: str, in_type: str, out_type: str, args: list[np.ndarray],
        attrs: str = "") -> np.ndarray:
    """Compile one StableHLO op for XLA's CPU backend and run it on ``args``."""
    n = len(args[0])
    params = ", ".join(f"%a{i}: {_tensor(in_type, n)}" for i in range(len(args)))
    operands = ", ".join(f"%a{i}" for i in range(len(args)))
    signature = f"({', '.join([_tensor(in_type, n)] * len(args))}) -> {_tensor(out_type, n)}"
    text = (f"module @m {{ func.func public @main({params}) -> {_tensor(out_type, n)} {{\n"
            f'  %r = "stablehlo.{opcode.replace("-", "_")}"({operands}) {attrs} : {signature}\n'
            f"  return %r : {_tensor(out_type, n)} }} }}")
    client = jax.devices()[0].client
    executable = client.compile_and_load(text, _jax.DeviceList(tuple(jax.devices()[:1])),
                                         _jax.CompileOptions())
    return np.asarray(executable.execute([jax.device_put(a) for a in args])[0])


def _compare_attrs(direction: str, kind: str) -> str:
    return (f"{{comparison_direction = #stablehlo<comparison_direction {direction}>, "
            f"compare_type = #stablehlo<comparison_type {kind}>}}")


def integer_cases(out: dict[str, np.ndarray]) -> None:
    for et in INT_TYPES:
        a, b = int_inputs(et)
        out[f"in/int/{et}/a"], out[f"in/int/{et}/b"] = a, b
        for op in INT_BINARY:
            out[f"int/{et}/{op}"] = xla(op, et, et, [a, b])
        for op in INT_UNARY:
            if not (et.startswith("u") and op in ("abs", "sign")):
                out[f"int/{et}/{op}"] = xla(op, et, et, [a])
        kind = "SIGNED" if et.startswith("s") else "UNSIGNED"
        for d in COMPARE_DIRECTIONS:
            out[f"int/{et}/compare-{d}"] = xla("compare", et, "pred", [a, b],
                                               _compare_attrs(d, kind))
        sa, sb = shift_inputs(et)
        out[f"in/shift/{et}/a"], out[f"in/shift/{et}/b"] = sa, sb
        for op in SHIFTS:
            out[f"shift/{et}/{op}"] = xla(op, et, et, [sa, sb])


def float_cases(out: dict[str, np.ndarray]) -> None:
    for et in FLOAT_TYPES:
        a, b, c = float_inputs(et)
        for name, values in (("a", a), ("b", b), ("c", c)):
            out[f"in/float/{et}/{name}"] = raw_bits(values)
        for op in FLOAT_BINARY:
            out[f"float/{et}/{op}"] = raw_bits(xla(op, et, et, [a, b]))
        for op in FLOAT_UNARY:
            out[f"float/{et}/{op}"] = raw_bits(xla(op, et, et, [a]))
        for d in COMPARE_DIRECTIONS:
            for kind in ("FLOAT", "TOTALORDER"):
                out[f"float/{et}/compare-{d}-{kind}"] = xla("compare", et, "pred", [a, b],
                                                            _compare_attrs(d, kind))
        out[f"float/{et}/clamp"] = raw_bits(xla("clamp", et, et, [c, a, b]))
        patterns = np.concatenate([a[:: len(a) // 50], bit_patterns(et)])
        out[f"in/reduce-precision/{et}"] = raw_bits(patterns)
        for e, m in REDUCE_PRECISION:
            out[f"reduce-precision/{et}/{e}-{m}"] = raw_bits(
                lax.reduce_precision(patterns, exponent_bits=e, mantissa_bits=m))


def conversion_cases(out: dict[str, np.ndarray]) -> None:
    for src in CONVERT_TYPES:
        values = convert_inputs(src)
        out[f"in/convert/{src}"] = raw_bits(values)
        for dst in CONVERT_TYPES:
            out[f"convert/{src}/{dst}"] = raw_bits(lax.convert_element_type(values,
                                                                            numpy_type(dst)))
    for src, dst in BITCAST_PAIRS:
        values = bit_patterns(src)
        out[f"in/bitcast/{src}"] = raw_bits(values)
        out[f"bitcast/{src}/{dst}"] = raw_bits(lax.bitcast_convert_type(values,
                                                                        numpy_type(dst)))


def rng_cases(out: dict[str, np.ndarray]) -> None:
    for name, algorithm, et, shape, key in RNG_CASES:
        state, bits = lax.rng_bit_generator(np.array(key, np.uint32), shape, numpy_type(et),
                                            algorithm=getattr(lax.RandomAlgorithm,
                                                              algorithm.upper()))
        out[f"rng/{name}/bits"] = np.asarray(bits).reshape(-1)
        out[f"rng/{name}/state"] = np.asarray(state).view(np.uint64)


def main() -> None:
    out: dict[str, np.ndarray] = {}
    for cases in (integer_cases, float_cases, conversion_cases, rng_cases):
        cases(out)
    path = Path(__file__).parent / "data" / "xla_golden.npz"
    np.savez_compressed(path, **out)
    print(f"wrote {len(out)} arrays ({path.stat().st_size} bytes) to {path}")


if __name__ == "__main__":
    main()
