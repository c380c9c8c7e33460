"""Dead tuple elements: a value only a tuple holds, at an index nobody reads, is dead (XLA's
test of an rng-bit-generator whose f32 result nobody reads runs, and matches XLA's CPU
backend); root tuples, tuples passed to a loop and tuples of live values stay."""

from __future__ import annotations

import numpy as np
import pytest

import runtime
from runtime.hlo.opcode_enum import Opcode
from runtime.hlo.parser import parse
from runtime.passes.dead_tuple_elements import remove_dead_tuple_elements

# XLA's extractor_rng_tuple test module
RNG_TUPLE = """HloModule test

ENTRY %entry {
  param.0 = f32[4]{0} parameter(0)
  tuple.0 = (f32[4]{0}, f32[4]{0}) rng-bit-generator(f32[4]{0} param.0), algorithm=rng_default
  negate = f32[4]{0} negate(f32[4]{0} param.0)
  tuple.1 = ((f32[4]{0}, f32[4]{0}), f32[4]{0}) tuple(tuple.0, negate)
  element = f32[4]{0} get-tuple-element(((f32[4]{0}, f32[4]{0}), f32[4]{0}) tuple.1), index=1
  ROOT add = f32[4]{0} add(element, param.0)
}
"""


@pytest.mark.parametrize("fusion", [True, False])
def test_a_dead_rng_in_a_tuple_runs_as_xla(fusion):
    jax = pytest.importorskip("jax")
    xla_cpu = pytest.importorskip("benchmarks.xla_cpu")
    x = np.array([1.5, -2.0, 0.0, 3.25], np.float32)
    (want,) = xla_cpu.compile_hlo(RNG_TUPLE).executable.execute([jax.device_put(x)])
    got = runtime.compile(RNG_TUPLE, fusion=fusion)(x)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_the_tuple_and_the_generator_are_gone():
    module = remove_dead_tuple_elements(parse(RNG_TUPLE))
    opcodes = {i.opcode for i in module.entry.instructions}
    assert Opcode.RNG_BIT_GENERATOR not in opcodes and Opcode.TUPLE not in opcodes


def test_root_loop_and_live_tuples_stay():
    text = """HloModule t
cond {
  p = (s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(3)
  ROOT c = pred[] compare(i, n), direction=LT
}
body {
  p = (s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  x = f32[4] get-tuple-element(p), index=1
  one = s32[] constant(1)
  j = s32[] add(i, one)
  y = f32[4] add(x, x)
  ROOT t = (s32[], f32[4]) tuple(j, y)
}
ENTRY e {
  x = f32[4] parameter(0)
  z = s32[] constant(0)
  t = (s32[], f32[4]) tuple(z, x)
  w = (s32[], f32[4]) while(t), condition=cond, body=body
  r = f32[4] get-tuple-element(w), index=1
  n = f32[4] negate(x)
  kept = (f32[4], f32[4]) tuple(x, n)
  k = f32[4] get-tuple-element(kept), index=1
  ROOT o = (f32[4], f32[4], f32[4]) tuple(r, x, k)
}
"""
    module = remove_dead_tuple_elements(parse(text))
    counts = sum(i.opcode == Opcode.TUPLE for c in module.computations for i in c.instructions)
    assert counts == 4
