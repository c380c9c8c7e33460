"""The typed attribute accessors are generated from the attribute kinds and up to date; the
optional ones give their defaults, and the shape accessors refuse the other kind of shape."""

import subprocess
import sys
from pathlib import Path

import pytest

import runtime
from runtime.errors import InternalCompilerError
from runtime.hlo.attributes import Identifier, Window
from runtime.hlo.shape import ArrayShape, TupleShape, leaf_shape

REPO = Path(__file__).resolve().parents[2]


def test_generated_module_is_up_to_date():
    done = subprocess.run([sys.executable, "scripts/gen_attribute_accessors.py", "--check"],
                          cwd=REPO, env={"PYTHONPATH": str(REPO)}, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_accessors_read_the_attribute_dict_with_its_type():
    m = runtime.parse("""HloModule m
add { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT s = f32[] add(a, b) }
ENTRY e {
  x = f32[4,6] parameter(0)
  z = f32[] constant(0)
  w = f32[2,3] reduce-window(x, z), window={size=2x2 stride=2x2}, to_apply=add
  c = pred[2,3] compare(w, w), direction=LT
  ROOT r = f32[2] reduce(w, z), dimensions={1}, to_apply=add
}""")
    insts = {i.name: i for i in m.entry.instructions}
    assert insts["r"].dimensions == (1,) and insts["r"].to_apply.name == "add"
    assert isinstance(insts["w"].window, Window)
    assert insts["c"].direction == Identifier("LT")
    with pytest.raises(KeyError):
        insts["c"].type                  # optional and absent: optional_attr reads it


_OPTIONAL = """HloModule m
ENTRY e {
  p = f32[4,6] parameter(0)
  i = s32[3,1] parameter(1)
  g = f32[3,1,6] gather(p, i), offset_dims={1,2}, collapsed_slice_dims={}, start_index_map={0}, index_vector_dim=1, slice_sizes={1,6}
  s = f32[4,6] sort(p), dimensions={1}, is_stable=true, to_apply=%lt
  ROOT t = (f32[3,1,6], f32[4,6]) tuple(g, s)
}
lt { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT c = pred[] compare(a, b), direction=LT }
"""


def test_optional_accessors_give_the_written_value_or_the_default():
    m = runtime.parse(_OPTIONAL)
    insts = {i.name: i for c in m.computations for i in c.instructions}
    g, s = insts["g"], insts["s"]
    assert g.int_attr("index_vector_dim", 7) == 1
    assert g.ints_attr("operand_batching_dims") == ()             # left out: the default
    assert g.ints_attr("offset_dims") == (1, 2)
    assert s.bool_attr("is_stable", False) is True
    assert g.bool_attr("indices_are_sorted", False) is False
    assert s.optional_attr("window", Window) is None
    assert s.optional_attr("to_apply", runtime.hlo.ir.HloComputation).name == "lt"


@pytest.mark.internal_error
def test_accessors_refuse_a_value_of_another_type_as_an_internal_error():
    m = runtime.parse(_OPTIONAL)
    g = next(i for i in m.entry.instructions if i.name == "g")
    g.attrs["index_vector_dim"] = (1,)               # what a faulty pass might store
    with pytest.raises(InternalCompilerError, match="index_vector_dim of g is tuple, not int"):
        g.int_attr("index_vector_dim", 0)
    g.attrs["slice_sizes"] = (1.5,)
    with pytest.raises(InternalCompilerError, match="not list of ints"):
        g.ints_attr("slice_sizes")
    with pytest.raises(InternalCompilerError, match="not Window"):
        g.optional_attr("offset_dims", Window)


@pytest.mark.internal_error
def test_shape_accessors_narrow_or_report_a_located_internal_error():
    m = runtime.parse(_OPTIONAL)
    insts = {i.name: i for i in m.entry.instructions}
    assert isinstance(insts["g"].array_shape, ArrayShape)
    assert isinstance(insts["t"].tuple_shape, TupleShape)
    assert m.entry.root_instruction is insts["t"] and insts["p"].param_number == 0
    assert leaf_shape(insts["t"].shape, (1,)).dims == (4, 6)
    with pytest.raises(InternalCompilerError, match="t has shape .* not an array") as error:
        insts["t"].array_shape
    assert error.value.line == 7 and error.value.instruction == "t"
    with pytest.raises(InternalCompilerError, match="not a tuple"):
        insts["g"].tuple_shape
    with pytest.raises(InternalCompilerError, match="not a parameter"):
        insts["g"].param_number
    with pytest.raises(ValueError, match="is a tuple, not an array"):
        leaf_shape(insts["t"].shape, ())
