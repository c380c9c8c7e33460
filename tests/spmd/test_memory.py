"""The per-device memory plan of multi-device modules: a collective's result takes the bytes
of an operand that dies at it (its host step copies the operands out first, and XLA's CPU
backend runs collectives in place too), and every sharded program analyses at no more than
1.1x XLA's per-device bytes (``memory_analysis()``: argument + output + temp - alias)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import runtime
from runtime.pipeline import run
from tests.spmd.spmd_data import GENERATED, SHARED, names
from tests.spmd.test_collectives import REDUCERS

PERMUTE = """HloModule m, num_partitions=2
ENTRY main {
  x = f32[4,6] parameter(0)
  e = f32[4,6] exponential(x)
  p = f32[4,6] collective-permute(e), channel_id=1, source_target_pairs={{0,1},{1,0}}
  ROOT r = f32[4,6] ROOT_BODY
}
"""


def _operands_and_results(text: str) -> tuple[list, list]:
    """(allocation, offset) of each operand of the module's one collective, and of each of
    its results."""
    ba = run(runtime.parse(text))
    call = next(i for i in ba.module.entry.instructions if "collective" in i.attrs)
    count = len(call.shape.elements) if call.shape.is_tuple else 1
    results = [ba.slice(call, (k,) if call.shape.is_tuple else ()) for k in range(count)]
    operands = [ba.slice(op) for op in call.operands]
    return ([(s.allocation, s.offset) for s in operands],
            [(s.allocation, s.offset) for s in results])


def _xs() -> list[np.ndarray]:
    return [np.linspace(-1, 1, 24, dtype=np.float32).reshape(4, 6) * (p + 1) for p in range(2)]


def test_a_collective_permute_writes_over_its_dying_operand():
    text = PERMUTE.replace("ROOT_BODY", "negate(p)")
    operands, results = _operands_and_results(text)
    assert operands == results
    outs = runtime.compile(text).run_spmd([[x] for x in _xs()])
    for device, out in enumerate(outs):
        np.testing.assert_allclose(np.asarray(out), -np.exp(_xs()[1 - device]), rtol=1e-6)


def test_a_collective_keeps_an_operand_read_later_apart():
    text = PERMUTE.replace("ROOT_BODY", "add(p, e)")
    operands, results = _operands_and_results(text)
    assert operands != results
    outs = runtime.compile(text).run_spmd([[x] for x in _xs()])
    for device, out in enumerate(outs):
        want = np.exp(_xs()[1 - device]) + np.exp(_xs()[device])
        np.testing.assert_allclose(np.asarray(out), want, rtol=1e-6)


def test_each_result_of_a_tuple_all_reduce_takes_its_own_operands_bytes():
    text = f"""HloModule m, num_partitions=2
{REDUCERS}ENTRY main {{
  x = f32[4,6] parameter(0)
  e = f32[4,6] exponential(x)
  z = f32[] constant(0)
  s = f32[6] reduce(x, z), dimensions={{0}}, to_apply=add
  a = (f32[4,6], f32[6]) all-reduce(e, s), channel_id=1, replica_groups={{}}, to_apply=add
  a0 = f32[4,6] get-tuple-element(a), index=0
  a1 = f32[6] get-tuple-element(a), index=1
  b = f32[4,6] broadcast(a1), dimensions={{1}}
  ROOT r = f32[4,6] multiply(a0, b)
}}
"""
    operands, results = _operands_and_results(text)
    assert operands == results and len(set(results)) == 2
    outs = runtime.compile(text).run_spmd([[x] for x in _xs()])
    want = sum(np.exp(x) for x in _xs()) * sum(x.sum(axis=0) for x in _xs())
    for out in outs:
        np.testing.assert_allclose(np.asarray(out), want, rtol=1e-5)


def test_small_collective_results_pack_at_their_own_size():
    """A collective's host step maps its allocations rather than binding sub-buffers, so its
    f32[4] results pack 16 bytes apart, as XLA's do, not the base-address alignment (128)
    apart: 48 temp bytes, not 272 (1.7x XLA's bytes on 8 devices)."""
    text = f"""HloModule m, num_partitions=2
{REDUCERS}ENTRY main {{
  x = f32[4] parameter(0)
  m = f32[4] all-reduce(x), channel_id=1, replica_groups={{}}, to_apply=max
  s = f32[4] all-reduce(x), channel_id=2, replica_groups={{}}, to_apply=add
  p = f32[4] collective-permute(x), channel_id=3, source_target_pairs={{{{0,1}},{{1,0}}}}
  q = f32[4] collective-permute(x), channel_id=4, source_target_pairs={{{{0,1}}}}
  a = f32[4] add(m, s)
  b = f32[4] add(p, q)
  ROOT r = f32[4] multiply(a, b)
}}
"""
    assert run(runtime.parse(text)).memory_stats.temp == 48
    x = [np.array([1, -2, 3, 0.5], np.float32) * (p + 1) for p in range(2)]
    outs = runtime.compile(text).run_spmd([[v] for v in x])
    both = (np.maximum(x[0], x[1]) + x[0] + x[1])
    np.testing.assert_allclose(np.asarray(outs[0]), both * x[1], rtol=1e-6)
    np.testing.assert_allclose(np.asarray(outs[1]), both * 2 * x[0], rtol=1e-6)


def _programs() -> list[tuple[Path, str]]:
    """The shared examples by name (a missing folder fails the test, not the collection) and
    every generated program."""
    shared = ["dp2_mlp_sgd", "tp2_mlp_forward", "shardmap2_swap_ppermute"]
    return [(SHARED, name) for name in shared] + [(GENERATED, name) for name in names(GENERATED)]


@pytest.mark.parametrize("root,name", _programs(), ids=[name for _, name in _programs()])
def test_every_sharded_program_analyses_within_a_tenth_of_xlas_bytes(root, name):
    """XLA's per-device figures (``NAME.json``, ``memory_analysis()`` of the compiled jit)
    against our plan of its partitioned module: bytes are deterministic, not a timing."""
    xla = json.loads((root / f"{name}.json").read_text())["xla_per_device_bytes"]
    total = (xla["argument_size_in_bytes"] + xla["output_size_in_bytes"]
             + xla["temp_size_in_bytes"] - xla["alias_size_in_bytes"])
    ours = run(runtime.parse((root / f"{name}.opt.hlo").read_text())).memory_stats
    assert (ours.argument, ours.output, ours.alias) == (
        xla["argument_size_in_bytes"], xla["output_size_in_bytes"], xla["alias_size_in_bytes"])
    assert ours.total <= 1.1 * total, (ours, xla)
