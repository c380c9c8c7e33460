"""Long reductions to few outputs become two stages; the values do not change."""

import numpy as np
import pytest

import runtime
from runtime.pipeline import optimise

ADD = """
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
"""


def module(n: int, init: str = "0", outputs: int = 0) -> str:
    shape = f"f32[{outputs},{n}]" if outputs else f"f32[{n}]"
    result = f"f32[{outputs}]" if outputs else "f32[]"
    dims = "1" if outputs else "0"
    return f"""
HloModule total
{ADD}
ENTRY e {{
  x = {shape} parameter(0)
  z = f32[] constant({init})
  ROOT r = {result} reduce(x, z), dimensions={{{dims}}}, to_apply=add
}}
"""


def reduces(text: str) -> list:
    out = optimise(runtime.parse(text))
    runtime.parse(out.to_text())
    return [i for i in out.instructions() if i.opcode == "reduce"]


def test_a_full_reduction_is_split_into_contiguous_chunks():
    stages = reduces(module(1 << 20))
    assert len(stages) == 2
    first, second = stages
    chunks = first.shape.dims[0]
    assert first.operands[0].shape.dims == (chunks, (1 << 20) // chunks)
    assert second.operands[0].shape.dims == (chunks,) and second.shape.dims == ()


@pytest.mark.parametrize("n", [1 << 20, 1_000_003])      # 1_000_003 is prime: padded
def test_split_sums_match_numpy(n):
    x = np.random.default_rng(n).standard_normal(n).astype(np.float32)
    got = runtime.compile(module(n))(x)
    assert abs(float(got) - float(x.astype(np.float64).sum())) < 1e-3 * np.abs(x).sum() / n + 1e-2


def test_padding_uses_the_init_value():
    stages = reduces(module(1_000_003))
    pads = [i for i in stages[0].parent.instructions if i.opcode == "pad"]
    assert len(pads) == 1 and pads[0].operands[1].opcode == "constant"


def test_few_outputs_each_split():
    x = np.random.default_rng(3).standard_normal((4, 200_000)).astype(np.float32)
    text = module(200_000, outputs=4)
    assert len(reduces(text)) == 2
    np.testing.assert_allclose(runtime.compile(text)(x), x.sum(1), rtol=1e-4, atol=1e-2)


def test_non_identity_init_and_short_reductions_stay_whole():
    assert len(reduces(module(1 << 20, init="5"))) == 1
    assert len(reduces(module(1000))) == 1
    x = np.ones(1 << 20, np.float32)
    assert float(runtime.compile(module(1 << 20, init="5"))(x)) == (1 << 20) + 5
