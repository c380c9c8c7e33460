"""Two-stage top-k: few long rows split into chunks; the results are the one-stage ones."""

import numpy as np
import pytest

import runtime
from runtime.passes.split_topk import MIN_CHUNK, TARGET_ITEMS, split_topk


def topk_text(dims: tuple[int, ...], k: int, largest: bool = True) -> str:
    shape = ",".join(map(str, dims))
    out = ",".join(map(str, dims[:-1] + (k,)))
    return f"""HloModule t
ENTRY e {{
  x = f32[{shape}] parameter(0)
  ROOT t = (f32[{out}], s32[{out}]) topk(x), k={k}, largest={str(largest).lower()}
}}"""


def topks(text: str) -> list[int]:
    """The row lengths of the module's topk instructions after the pass."""
    module = split_topk(runtime.parse(text))
    runtime.parse(module.to_text())           # still valid HLO
    return [i.operands[0].shape.dims[-1] for i in module.entry.instructions
            if i.opcode == "topk"]


def test_few_long_rows_split_into_chunks_and_a_merge():
    assert topks(topk_text((4, 32768), 8)) == [2048, 16 * 8]     # 16 chunks of 2048, then 128
    assert topks(topk_text((1, 50257), 40)) == [1733, 29 * 40]   # 50257 = 29 x 1733


@pytest.mark.parametrize("dims, k", [
    ((TARGET_ITEMS, 32768), 8),       # enough rows already
    ((2, 2 * MIN_CHUNK - 2), 4),      # no chunk of MIN_CHUNK divides the row
    ((2, 4099), 4),                   # a prime length: no chunks at all
    ((1, 16384), 1500),               # chunks must hold 8 k
])
def test_rows_enough_short_or_prime_stay_one_stage(dims, k):
    assert topks(topk_text(dims, k)) == [dims[-1]]


@pytest.mark.parametrize("dims, k, largest", [((4, 32768), 8, True), ((1, 50257), 40, False),
                                              ((2, 3, 8192), 5, True), ((2, 8192), 1, True)])
def test_the_values_and_indices_are_the_one_stage_ones(dims, k, largest):
    """Ties across chunks go to the lower index; NaNs and -NaNs rank by total order."""
    rng = np.random.default_rng(k)
    x = rng.standard_normal(dims).astype(np.float32)
    row = x.reshape(-1, dims[-1])
    row[0, 100:3000] = 3.5 if largest else -3.5
    row[0, dims[-1] // 3] = np.nan
    row[-1, -1] = -np.nan
    text = topk_text(dims, k, largest)
    assert "chunk" in runtime.analyze(text).module.to_text()
    got = runtime.compile(text)(x)
    want = runtime.compile(text, fusion=False)(x)       # no passes: one stage
    for g, w in zip(got, want):
        np.testing.assert_array_equal(np.asarray(g).view(np.uint32), np.asarray(w).view(np.uint32))
    finite = np.nan_to_num(x)
    order = np.argsort(-finite if largest else finite, axis=-1, kind="stable")[..., :k]
    np.testing.assert_array_equal(np.asarray(runtime.compile(text)(finite)[1]), order)
