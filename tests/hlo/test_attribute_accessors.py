"""The typed attribute accessors are generated from the attribute kinds and up to date."""

import subprocess
import sys
from pathlib import Path

import pytest

import runtime
from runtime.hlo.attributes import Identifier, Window

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
        insts["c"].type                  # optional and absent: attrs.get("type") reads it
