"""``runtime.random_arguments`` / ``zeros_arguments`` and ``hlo run --random``: inputs made
from the entry's parameter shapes, for every element type the runtime takes."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import runtime
from runtime.cli import main
from runtime.hlo.dtypes import ELEMENT_TYPES

ARRAY_TYPES = [et for et in ELEMENT_TYPES.values() if et.is_array_type]

EVERY_TYPE = "HloModule every_type\n\nENTRY e {\n" + "".join(
    f"  p{k} = {et.name}[3,5] parameter({k})\n" for k, et in enumerate(ARRAY_TYPES)) + (
    f"  t = (f32[2], (s32[4], pred[])) parameter({len(ARRAY_TYPES)})\n"
    "  ROOT r = f32[3,5] negate(p{f32})\n}\n").replace(
        "{f32}", str(ARRAY_TYPES.index(ELEMENT_TYPES["f32"])))

NEGATE = """HloModule negate

ENTRY e {
  ids = s32[6] parameter(0)
  x = bf16[2,3] parameter(1)
  ROOT n = bf16[2,3] negate(x)
}
"""


def test_every_element_type_gets_its_dtype_and_a_sensible_range():
    args = runtime.random_arguments(EVERY_TYPE, seed=7)
    assert len(args) == len(ARRAY_TYPES) + 1
    for et, a in zip(ARRAY_TYPES, args):
        assert a.dtype == et.numpy and a.shape == (3, 5), et.name
        values = a.astype(np.complex128 if et.is_complex else np.float64)
        if et.is_integer:
            assert values.min() >= 0 and values.max() < 16, et.name
        elif et.is_float or et.is_complex:
            assert np.all(np.isfinite(values)) and np.abs(values).max() < 1, et.name
    floats = args[ARRAY_TYPES.index(ELEMENT_TYPES["f32"])]
    assert 0.03 < floats.std() < 0.3 and floats.min() < 0 < floats.max()
    assert set(np.unique(args[0])) == {False, True}           # pred: a fair coin
    assert args[ARRAY_TYPES.index(ELEMENT_TYPES["s4"])].dtype == ml_dtypes.int4
    f2, (s4, p) = args[-1]
    assert (f2.dtype, f2.shape, s4.dtype, s4.shape, p.dtype, p.shape) == \
        (np.float32, (2,), np.int32, (4,), np.bool_, ())


def test_the_seed_decides_the_values_and_zeros_are_zeros():
    one, again, other = (runtime.random_arguments(NEGATE, seed=s) for s in (1, 1, 2))
    for a, b in zip(one, again):
        np.testing.assert_array_equal(a, b)
    assert not np.array_equal(one[1], other[1])
    ids, x = runtime.zeros_arguments(NEGATE)
    assert ids.dtype == np.int32 and not ids.any() and x.dtype == ml_dtypes.bfloat16
    assert not x.astype(np.float32).any()
    with pytest.raises(runtime.HloArgumentError, match=r"seed=-1: expected a non-negative"):
        runtime.random_arguments(NEGATE, seed=-1)


def test_an_executable_an_analysis_and_a_module_give_the_same_arguments():
    exe = runtime.compile(NEGATE)
    made = [exe.random_arguments(3), runtime.random_arguments(exe, seed=3),
            runtime.random_arguments(runtime.analyze(NEGATE), seed=3),
            runtime.random_arguments(runtime.parse(NEGATE), seed=3)]
    for args in made[1:]:
        for a, b in zip(made[0], args):
            np.testing.assert_array_equal(a, b)
    ids, x = made[0]
    np.testing.assert_array_equal(np.asarray(exe(ids, x)).astype(np.float32),
                                  -x.astype(np.float32))
    assert [a.dtype for a in exe.zeros_arguments()] == [np.int32, ml_dtypes.bfloat16]
    with pytest.raises(TypeError, match="expected an Executable, an Analysis, an HloModule"):
        runtime.random_arguments(3)


def test_a_token_parameter_has_no_values_to_make_up():
    text = NEGATE.replace("ids = s32[6] parameter(0)", "ids = token[] parameter(0)")
    with pytest.raises(runtime.HloArgumentError,
                       match=r"parameter 0 \(ids\) has element type token"):
        runtime.zeros_arguments(text)


def test_hlo_run_random_and_zeros(tmp_path, capsys):
    path = tmp_path / "negate.hlo"
    path.write_text(NEGATE)
    assert main(["run", str(path), "--random", "--seed", "5"]) == 0
    out = capsys.readouterr().out
    x = runtime.random_arguments(NEGATE, seed=5)[1]
    expected = np.array2string(-x, threshold=64, edgeitems=3)
    assert out.startswith(f"output = bfloat16[2, 3]\n{expected}\n")
    assert main(["run", str(path), "--zeros"]) == 0
    assert capsys.readouterr().out.startswith("output = bfloat16[2, 3]\n[[-0 -0 -0]")
    assert main(["run", str(path), "1", "2", "--random"]) == 1
    assert "--random makes every argument; got 2 argument(s) as well" in capsys.readouterr().err
    assert main(["run", str(path), "1", "2", "--seed", "1"]) == 1
    assert "--seed is the seed of --random inputs" in capsys.readouterr().err
