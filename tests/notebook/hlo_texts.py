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


def model_step(layers: int = 83) -> str:
    """A whole model's shape at a test's cost: an optimiser step where each layer has a
    weight, a moment and a gradient (3 parameters; weight and moment may alias outputs) and a
    chain of dots (five temporaries), so 83 layers give 249 parameters and 831 buffers (665
    with every weight and moment donated)."""
    lines, outputs, aliases = [], [], []
    dims = "lhs_contracting_dims={1}, rhs_contracting_dims={0}"
    for i in range(layers):
        w = 3 * i
        lines += [f"  w{i} = f32[32,32] parameter({w})",
                  f"  m{i} = f32[32,32] parameter({w + 1})",
                  f"  g{i} = f32[32,32] parameter({w + 2})",
                  f"  d{i} = f32[32,32] dot(w{i}, g{i}), {dims}",
                  f"  e{i} = f32[32,32] dot(d{i}, m{i}), {dims}",
                  f"  f{i} = f32[32,32] dot(e{i}, d{i}), {dims}",
                  f"  h{i} = f32[32,32] dot(f{i}, e{i}), {dims}",
                  f"  j{i} = f32[32,32] dot(h{i}, f{i}), {dims}",
                  f"  k{i} = f32[32,32] dot(j{i}, h{i}), {dims}",
                  f"  nm{i} = f32[32,32] add(m{i}, k{i})",
                  f"  nw{i} = f32[32,32] subtract(w{i}, nm{i})"]
        k = len(outputs)
        outputs += [f"nw{i}", f"nm{i}"]
        aliases += [f"{{{k}}}: ({w}, {{}}, may-alias)", f"{{{k + 1}}}: ({w + 1}, {{}}, may-alias)"]
    types = ", ".join(["f32[32,32]"] * len(outputs))
    return (f"HloModule model_step, input_output_alias={{ {', '.join(aliases)} }}\n\n"
            "ENTRY main {\n" + "\n".join(lines)
            + f"\n  ROOT out = ({types}) tuple({', '.join(outputs)})\n}}\n")
