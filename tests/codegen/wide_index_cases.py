"""The cases behind ``data/wide_index_golden.npz``: runtime start indices of every integer
type, with values near and beyond 2^31, 2^32, -2^31 and -1e12, through dynamic-slice,
dynamic-update-slice (copied and in place, scalar and row kernels, a loop fusion's window
outputs, a counted loop's counters), gather and scatter.

Shared by ``make_wide_index_golden.py`` (which runs them through XLA's CPU backend, needs jax)
and ``test_wide_indices.py`` (which reads XLA's results back and never imports jax). Each
module takes one index parameter per type and returns one result per type, so a compile
covers every type; a scalar start runs once per value, a gather's or scatter's index vector
holds them all.
"""

from __future__ import annotations

import numpy as np

TYPES = ("s8", "u8", "s16", "s32", "u32", "s64", "u64")
_NP = {"s8": np.int8, "u8": np.uint8, "s16": np.int16, "s32": np.int32, "u32": np.uint32,
       "s64": np.int64, "u64": np.uint64}
# ten values a type; operands have 10 rows and windows 3 (1 for scatter), so valid starts are
# 0..7 (0..9); the in-range values are distinct, so a scatter may promise unique indices
VALUES = {
    "s8": [-128, 127, -1, 0, 5, 100, -100, 7, 8, 3],
    "u8": [255, 128, 200, 0, 5, 7, 8, 129, 3, 1],
    "s16": [-32768, 32767, -1, 0, 5, 7, 8, -300, 3, 300],
    "s32": [-2 ** 31, 2 ** 31 - 1, -1, 0, 5, 7, 8, 2 ** 30, 3, -2 ** 31 + 1],
    "u32": [2 ** 31, 2 ** 31 + 2, 2 ** 32 - 1, 0, 5, 2 ** 31 - 1, 2 ** 31 + 1, 7, 3, 2 ** 32 - 8],
    "s64": [-10 ** 12, 2 ** 31, 2 ** 32 + 1, -2 ** 31, -2 ** 31 - 1, 2 ** 32 + 3, -2 ** 32 + 2,
            10 ** 12, 2 ** 63 - 1, 4],
    "u64": [2 ** 31, 2 ** 32 + 1, 2 ** 63 + 1, 2 ** 64 - 1, 2 ** 32, 2 ** 32 + 3, 5, 10 ** 12,
            2 ** 63, 1],
}
RUNS = len(VALUES["s8"])


def index_array(et: str, values: list[int]) -> np.ndarray:
    return np.array(values, dtype=_NP[et])


def _params(first: int, shape: str) -> str:
    return "\n".join(f"  i_{t} = {t}{shape} parameter({first + k})" for k, t in enumerate(TYPES))


def _tuple(shape: str) -> str:
    names = ", ".join(f"r_{t}" for t in TYPES)
    return f"  ROOT out = ({', '.join([shape] * len(TYPES))}) tuple({names})"


def _dynamic_slice() -> str:
    body = "\n".join(
        f"  d_{t} = f32[3,5] dynamic-slice(x, i_{t}, i_{t}), dynamic_slice_sizes={{3,5}}\n"
        f"  r_{t} = f32[3,5] multiply(d_{t}, d_{t})" for t in TYPES)
    return f"""HloModule wide_dynamic_slice
ENTRY e {{
  x = f32[10,8] parameter(0)
{_params(1, "[]")}
{body}
{_tuple("f32[3,5]")}
}}"""


def _dynamic_update_slice() -> str:
    body = "\n".join(
        f"  d_{t} = f32[10,8] dynamic-update-slice(x, u, i_{t}, i_{t})\n"
        f"  r_{t} = f32[10,8] add(d_{t}, x)" for t in TYPES)
    return f"""HloModule wide_dynamic_update_slice
ENTRY e {{
  x = f32[10,8] parameter(0)
  u = f32[3,5] parameter(1)
{_params(2, "[]")}
{body}
{_tuple("f32[10,8]")}
}}"""


def _in_place_chain(rows: int, cols: int) -> str:
    """A chain of updates of one donated buffer, each in its predecessor's bytes; each update
    is scaled (by a fusion rooted at the dynamic-update-slice where fusing)."""
    lines, prev = [], "x"
    for k, t in enumerate(TYPES):
        lines.append(f"  c_{t} = f32[] constant({k + 2})\n"
                     f"  b_{t} = f32[3,{cols}] broadcast(c_{t}), dimensions={{}}\n"
                     f"  v_{t} = f32[3,{cols}] multiply(u, b_{t})\n"
                     f"  d_{t} = f32[{rows},{cols}] dynamic-update-slice({prev}, v_{t}, i_{t}, i_{t})")
        prev = f"d_{t}"
    body = "\n".join(lines).replace(f"  {prev} = ", f"  ROOT {prev} = ")
    return f"""HloModule wide_in_place_{cols}, input_output_alias={{ {{}}: (0, {{}}, may-alias) }}
ENTRY e {{
  x = f32[{rows},{cols}] parameter(0)
  u = f32[3,{cols}] parameter(1)
{_params(2, "[]")}
{body}
}}"""


def _window_outputs(cols: int) -> str:
    """A loop fusion computing ``g`` and storing it, as a scan step does, into a stacked
    buffer per type in place (``analysis.loop_outputs``' window outputs)."""
    n = len(TYPES)
    alias = ", ".join(f"{{{k + 1}}}: ({k + 1}, {{}}, may-alias)" for k in range(n))
    stacks = "\n".join(f"  s_{t} = f32[10,4,{cols}] parameter({k + 1})"
                        for k, t in enumerate(TYPES))
    body = "\n".join(
        f"  z_{t} = {t}[] constant(0)\n"
        f"  r_{t} = f32[10,4,{cols}] dynamic-update-slice(s_{t}, g1, i_{t}, z_{t}, z_{t})"
        for t in TYPES)
    names = ", ".join(f"r_{t}" for t in TYPES)
    shapes = ", ".join([f"f32[10,4,{cols}]"] * n)
    return f"""HloModule wide_windows_{cols}, input_output_alias={{ {alias} }}
ENTRY e {{
  h = f32[4,{cols}] parameter(0)
{stacks}
{_params(1 + n, "[]")}
  m = f32[4,{cols}] negate(h)
  g = f32[4,{cols}] multiply(m, h)
  g1 = f32[1,4,{cols}] reshape(g)
{body}
  ROOT out = (f32[4,{cols}], {shapes}) tuple(g, {names})
}}"""


def _gather(cols: int, size: int) -> str:
    collapsed = "0" if size == 1 else ""
    offset = "1" if size == 1 else "1,2"
    shape = f"f32[10,{cols}]" if size == 1 else f"f32[10,{size},{cols}]"
    body = "\n".join(
        f"  g_{t} = {shape} gather(x, i_{t}), offset_dims={{{offset}}}, "
        f"collapsed_slice_dims={{{collapsed}}}, start_index_map={{0}}, index_vector_dim=1, "
        f"slice_sizes={{{size},{cols}}}\n"
        f"  r_{t} = {shape} add(g_{t}, g_{t})" for t in TYPES)
    return f"""HloModule wide_gather_{size}_{cols}
ENTRY e {{
  x = f32[10,{cols}] parameter(0)
{_params(1, "[10,1]")}
{body}
{_tuple(shape)}
}}"""


def _scatter(combiner: str, unique: bool) -> str:
    body = "\n".join(
        f"  s_{t} = f32[10,4] scatter(x, i_{t}, v), update_window_dims={{1}}, "
        f"inserted_window_dims={{0}}, scatter_dims_to_operand_dims={{0}}, index_vector_dim=1, "
        f"unique_indices={'true' if unique else 'false'}, to_apply=combine\n"
        f"  r_{t} = f32[10,4] multiply(s_{t}, x)" for t in TYPES)
    root = "add(a, b)" if combiner == "add" else "copy(b)"
    return f"""HloModule wide_scatter_{combiner}
combine {{
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] {root}
}}

ENTRY e {{
  x = f32[10,4] parameter(0)
  u = f32[10,4] parameter(1)
  two = f32[] constant(2)
  t = f32[10,4] broadcast(two), dimensions={{}}
  v = f32[10,4] multiply(u, t)
{_params(2, "[10,1]")}
{body}
{_tuple("f32[10,4]")}
}}"""


# a counted loop whose counters (s64 around 2^32, u32 around 2^31) are the starts of the
# updates it makes: the trip count and the loop's kernels see the wide values
_LOOP = """HloModule wide_loop
cond {
  p = (s64[], u32[], s32[], f32[10], f32[10]) parameter(0)
  i = s64[] get-tuple-element(p), index=0
  limit = s64[] constant(4294967299)
  ROOT c = pred[] compare(i, limit), direction=LT
}

body {
  p = (s64[], u32[], s32[], f32[10], f32[10]) parameter(0)
  i = s64[] get-tuple-element(p), index=0
  j = u32[] get-tuple-element(p), index=1
  k = s32[] get-tuple-element(p), index=2
  x = f32[10] get-tuple-element(p), index=3
  y = f32[10] get-tuple-element(p), index=4
  kf = f32[] convert(k)
  v = f32[1] broadcast(kf), dimensions={}
  x2 = f32[10] dynamic-update-slice(x, v, i)
  y2 = f32[10] dynamic-update-slice(y, v, j)
  one = s64[] constant(1)
  i2 = s64[] add(i, one)
  uone = u32[] constant(1)
  j2 = u32[] add(j, uone)
  sone = s32[] constant(1)
  k2 = s32[] add(k, sone)
  ROOT t = (s64[], u32[], s32[], f32[10], f32[10]) tuple(i2, j2, k2, x2, y2)
}

ENTRY e {
  x = f32[10] parameter(0)
  i0 = s64[] constant(4294967293)
  j0 = u32[] constant(2147483645)
  k0 = s32[] constant(1)
  init = (s64[], u32[], s32[], f32[10], f32[10]) tuple(i0, j0, k0, x, x)
  w = (s64[], u32[], s32[], f32[10], f32[10]) while(init), condition=cond, body=body
  a = f32[10] get-tuple-element(w), index=3
  b = f32[10] get-tuple-element(w), index=4
  ROOT out = (f32[10], f32[10]) tuple(a, b)
}"""


def _operands(*shapes: tuple[int, ...]) -> list[np.ndarray]:
    rng = np.random.default_rng(7)
    return [rng.standard_normal(s).astype(np.float32) for s in shapes]


def _scalar_runs(*shapes: tuple[int, ...]) -> list[list[np.ndarray]]:
    """One argument list per value: the operands, then each type's start as a scalar."""
    ops = _operands(*shapes)
    return [ops + [index_array(t, [VALUES[t][r]]).reshape(()) for t in TYPES]
            for r in range(RUNS)]


def _vector_run(*shapes: tuple[int, ...]) -> list[list[np.ndarray]]:
    """One argument list: the operands, then each type's values as a [10,1] index vector."""
    return [_operands(*shapes) + [index_array(t, VALUES[t]).reshape(RUNS, 1) for t in TYPES]]


# name -> (HLO text, argument lists)
CASES: dict[str, tuple[str, list[list[np.ndarray]]]] = {
    "dynamic_slice": (_dynamic_slice(), _scalar_runs((10, 8))),
    "dynamic_update_slice": (_dynamic_update_slice(), _scalar_runs((10, 8), (3, 5))),
    "in_place": (_in_place_chain(10, 3), _scalar_runs((10, 3), (3, 3))),
    "in_place_rows": (_in_place_chain(10, 64), _scalar_runs((10, 64), (3, 64))),
    "window_outputs": (_window_outputs(3), _scalar_runs((4, 3), *[(10, 4, 3)] * len(TYPES))),
    "window_output_rows": (_window_outputs(64),
                           _scalar_runs((4, 64), *[(10, 4, 64)] * len(TYPES))),
    "loop": (_LOOP, [_operands((10,))]),
    "gather_rows": (_gather(64, 1), _vector_run((10, 64))),
    "gather_windows": (_gather(4, 3), _vector_run((10, 4))),
    "scatter_add": (_scatter("add", False), _vector_run((10, 4), (10, 4))),
    "scatter_assign_unique": (_scatter("assign", True), _vector_run((10, 4), (10, 4))),
}
