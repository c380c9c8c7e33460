"""XLA's algebraic simplifier rewrites float expressions into ones equal in real arithmetic
but not in floating point, and pre-optimisation text must give XLA's answer: ``(A/B)/C`` is
``A/(B*C)`` (0 where ``B*C`` overflows), ``A/(B/C)`` is ``(A*C)/B``, ``log(pow(A,B))`` is
``B*log(|A|)`` (finite for a negative ``A``), ``A+0`` and ``A*1`` are ``A`` (keeping -0 and a
denormal), ``pow(A,3)`` is ``A*(A*A)``, ``A/rsqrt(B)`` is ``A*sqrt(B)`` and
``A/broadcast(B)`` is ``A*broadcast(1/B)``; a sum over a broadcast's own dimensions is a
multiplication by their count, and a dot contracting nothing a product of broadcasts.
Expected values are XLA's CPU backend's (jaxlib 0.10.2 through ``benchmarks/xla_cpu.py``;
jaxlib 0.12 makes the same rewrites) on this text."""

import numpy as np
import pytest

import runtime
from runtime.pipeline import optimise

TEXT = """HloModule rewrites
ENTRY e {
  a = f32[4] parameter(0)
  b = f32[4] parameter(1)
  c = f32[4] parameter(2)
  n = f32[2] parameter(3)
  d = f64[4] parameter(4)
  ab = f32[4] divide(a, b)
  ab_c = f32[4] divide(ab, c)
  bc = f32[4] divide(b, c)
  a_bc = f32[4] divide(a, bc)
  p = f32[4] power(a, b)
  logp = f32[4] log(p)
  zero = f32[] constant(0)
  zeros = f32[4] broadcast(zero), dimensions={}
  plus0 = f32[4] add(c, zeros)
  one = f32[] constant(1)
  ones = f32[4] broadcast(one), dimensions={}
  times1 = f32[4] multiply(c, ones)
  three = f64[] constant(3)
  threes = f64[4] broadcast(three), dimensions={}
  cube = f64[4] power(d, threes)
  r = f32[4] rsqrt(b)
  a_r = f32[4] divide(a, r)
  nb = f32[2,2] broadcast(n), dimensions={1}
  a2 = f32[2,2] reshape(a)
  a_n = f32[2,2] divide(a2, nb)
  ROOT t = (f32[4], f32[4], f32[4], f32[4], f32[4], f32[4], f64[4], f32[4], f32[2,2]) tuple(ab_c, a_bc, logp, plus0, times1, a, cube, a_r, a_n)
}"""

ARGS = [np.array([1e30, 3.0, -2.0, 1.3], np.float32),
        np.array([1e30, 7.0, 0.5, 0.1], np.float32),
        np.array([1e20, 1e-40, -0.0, 3.0], np.float32),
        np.array([3.0, 0.1], np.float32),
        np.array([1.1, 0.3, 1e100, 7.7])]
XLA_BITS = [
    [0, 2139095040, 2139095040, 1082829482],               # (A/B)/C: 1e30/(1e30*1e20) is 0
    [2139095040, 0, 0, 1109131263],                        # A/(B/C): (1e30*1e20)/1e30 is inf
    [1952053351, 1089869523, 1051816472, 1020718533],      # log(pow(-2, 0.5)) is finite
    [1621981420, 71362, 2147483648, 1077936128],           # -0 + 0 is -0, a denormal kept
    [1621981420, 71362, 2147483648, 1077936128],           # denormal * 1 kept
    [1900671690, 1077936128, 3221225472, 1067869798],
    [4608673110276677044, 4583439441564520153, 9094988921128908188, 4646739029663026251],
    [2139095040, 1090387452, 3216311539, 1053981487],      # A/rsqrt(B) is A*sqrt(B)
    [1887871452, 1106247680, 3207244459, 1095761920],      # 1.3/broadcast(0.1) is 1.3*10
]


@pytest.mark.parametrize("fusion", [True, False], ids=["fused", "unfused"])
def test_rewritten_expressions_match_xla_bit_for_bit(fusion):
    outputs = runtime.compile(TEXT, fusion=fusion)(*ARGS)
    for out, bits in zip(outputs, XLA_BITS):
        unsigned = np.uint64 if out.dtype == np.float64 else np.uint32
        np.testing.assert_array_equal(out.ravel().view(unsigned), np.array(bits, unsigned))


CONDITIONS = """HloModule conditions
ENTRY e {
  a = f32[4] parameter(0)
  b = f32[4] parameter(1)
  v = f32[2] parameter(2)
  h = bf16[4] parameter(3)
  s = f32[4] sqrt(b)
  kept = f32[4] divide(a, s)
  t = f32[4] sqrt(a)
  once = f32[4] divide(b, t)
  vb = f32[2,2] broadcast(v), dimensions={0}
  a2 = f32[2,2] reshape(a)
  shared = f32[2,2] divide(a2, vb)
  nv = f32[2] negate(v)
  p = f32[4] power(a, b)
  q = f32[4] divide(a, p)
  u = f32[4] sqrt(b)
  ls = f32[4] log(u)
  hp = bf16[4] divide(h, h)
  hq = bf16[4] divide(hp, h)
  ROOT r = (f32[4], f32[4], f32[4], f32[2,2], f32[2], f32[4], f32[4], bf16[4]) tuple(kept, s, once, shared, nv, q, ls, hq)
}"""


def test_rewrites_apply_only_where_xla_applies_them():
    """A sqrt or a broadcast operand with another user keeps its division (XLA asks for one
    use); A/pow(B,C) is A*pow(B,-C) and log(sqrt(A)) log(A)*0.5; bf16 is left to f32."""
    module = optimise(runtime.parse(CONDITIONS), fusion=False)
    by_name = {i.name: i for i in module.instructions()}
    assert by_name["kept"].opcode == "divide" and by_name["shared"].opcode == "divide"
    once = by_name["once"]
    assert once.opcode == "multiply" and once.operands[1].opcode == "rsqrt"
    q = by_name["q"]
    assert q.opcode == "multiply" and q.operands[1].opcode == "power"
    assert q.operands[1].operands[1].opcode == "negate"
    ls = by_name["ls"]
    assert ls.opcode == "multiply" and ls.operands[0].opcode == "log"
    assert by_name["hq"].opcode == "divide"


OPTIMISED = """HloModule optimised, is_scheduled=true
fused {
  p0 = f32[2,2] parameter(0)
  p1 = f32[2] parameter(1)
  b = f32[2,2] broadcast(p1), dimensions={0}
  ROOT d = f32[2,2] divide(p0, b)
}
ENTRY e {
  x = f32[2,2] parameter(0)
  v = f32[2] parameter(1)
  f = f32[2,2] fusion(x, v), kind=kLoop, calls=fused
  n = f32[2] negate(v)
  ROOT t = (f32[2,2], f32[2]) tuple(f, n)
}"""


def test_fusion_bodies_of_optimised_text_are_left_as_xla_wrote_them():
    """XLA's optimised text kept this division (``v`` has another user); inside the fusion
    its broadcast's operand is used once, which must not make it a multiplication."""
    module = optimise(runtime.parse(OPTIMISED), fusion=False)
    assert [i.opcode for i in module.instructions() if i.name == "d"] == ["divide"]
    x = np.array([[1.3, 2.0], [3.0, 4.0]], np.float32)
    v = np.array([0.1, 3.0], np.float32)
    f, _ = runtime.compile(OPTIMISED)(x, v)
    np.testing.assert_array_equal(f, x / v[:, None])


REDUCE_OF_BROADCAST = """HloModule sums
add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
ENTRY e {
  x = f32[3] parameter(0)
  b = f32[3,7,2] broadcast(x), dimensions={0}
  zero = f32[] constant(0)
  ROOT r = f32[3,2] reduce(b, zero), dimensions={1}, to_apply=add
}"""
XLA_SUM_BITS = [[1019356779, 1019356779], [3248395205, 3248395205], [1091672473, 1091672473]]


@pytest.mark.parametrize("fusion", [True, False], ids=["fused", "unfused"])
def test_a_sum_of_a_broadcast_is_xla_multiplication_by_the_count(fusion):
    """XLA sums 7 copies of x as x*7 (broadcast over the added dimension kept): 7 additions
    round differently."""
    x = np.array([0.0033857084, -2.831736, 1.3], np.float32)
    out = runtime.compile(REDUCE_OF_BROADCAST, fusion=fusion)(x)
    np.testing.assert_array_equal(out.view(np.uint32), np.array(XLA_SUM_BITS, np.uint32))


OUTER = """HloModule outer
ENTRY e {
  a = f32[3] parameter(0)
  b = f32[2] parameter(1)
  ROOT r = f32[3,2] dot(a, b), lhs_contracting_dims={}, rhs_contracting_dims={}
}"""


@pytest.mark.parametrize("fusion", [True, False], ids=["fused", "unfused"])
def test_a_dot_contracting_nothing_is_a_product_keeping_negative_zero(fusion):
    """XLA computes it as a multiply of broadcasts: -0 * 3 is -0 (no accumulator from +0);
    XLA's bits here are numpy's outer product's."""
    a = np.array([-0.0, 2.5, -1.0], np.float32)
    b = np.array([3.0, 0.0], np.float32)
    out = runtime.compile(OUTER, fusion=fusion)(a, b)
    np.testing.assert_array_equal(out.view(np.uint32), np.outer(a, b).view(np.uint32))
