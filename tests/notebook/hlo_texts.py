"""HLO modules the notebook-layer tests share (XLA text, small enough to check by hand)."""

INCREMENT = """HloModule increment, input_output_alias={ {}: 0 }

ENTRY entry {
  %p = f32[] parameter(0)
  %c = f32[] constant(1)
  ROOT %out = f32[] add(%p, %c)
}
"""

# Parameter 0 may hold output {0}; parameter 1 cannot alias anything.
# Schedule 0:x 1:y 2:s 3:m 4:t. Donating x: allocations x(+m) 128, y 128, t 16, s 128;
# peak 400 B at step 4. Keeping x: m gets its own 128 B output allocation; peak 528 B.
ADD_MUL = """HloModule add_mul, input_output_alias={ {0}: (0, {}, may-alias) }

ENTRY main {
  x = f32[4,8] parameter(0)
  y = f32[4,8] parameter(1)
  s = f32[4,8] add(x, y)
  m = f32[4,8] multiply(s, y)
  ROOT t = (f32[4,8], f32[4,8]) tuple(m, s)
}
"""

# A buffer_donor whose byte size no output has: donating it cannot save anything.
UNMATCHED_DONOR = """HloModule donor, buffer_donor={ (0, {}) }

ENTRY main {
  a = f32[8] parameter(0)
  ROOT r = f32[4] slice(a), slice={[0:4]}
}
"""

MUST_ALIAS = """HloModule must, input_output_alias={ {}: (0, {}, must-alias) }

ENTRY main {
  a = f32[4] parameter(0)
  ROOT n = f32[4] negate(a)
}
"""

JAX_NAMED = """HloModule jit_f.1

ENTRY main.3 {
  Arg_0.1 = f32[2] parameter(0)
  ROOT negate.2 = f32[2] negate(Arg_0.1)
}
"""
