"""Generated programs are reused by later compiles of the same analysed module, in any process;
anything that changes the analysed module or the compiler makes a new key."""

from __future__ import annotations

import numpy as np
import pytest

import runtime
from runtime.execution import program_cache
from runtime.codegen import lower as lower_module

MODULE = """HloModule twice

ENTRY main {
  x = f32[8] parameter(0)
  ROOT y = f32[8] add(x, x)
}
"""


@pytest.fixture
def lowered(tmp_path, monkeypatch) -> list[str]:
    monkeypatch.setenv("HLO_MAGIC_CACHE", str(tmp_path))
    calls: list[str] = []
    original = lower_module.lower

    def counting(assignment, *args):
        calls.append(assignment.module.name)
        return original(assignment, *args)
    monkeypatch.setattr(lower_module, "lower", counting)
    return calls


def test_a_second_compile_loads_the_program(lowered):
    x = np.arange(8, dtype=np.float32)
    first = runtime.compile(MODULE, force=True)
    again = runtime.compile(MODULE, force=True)
    assert lowered == ["twice"]
    assert again.program.source == first.program.source
    np.testing.assert_array_equal(again(x), 2 * x)


def test_the_key_follows_the_analysed_module_and_the_alignment(lowered):
    runtime.compile(MODULE, force=True)
    runtime.compile(MODULE.replace("add(x, x)", "multiply(x, x)"), force=True)
    runtime.compile(MODULE, force=True, alignment=256)
    assert len(lowered) == 3


def test_a_corrupt_file_is_deleted_and_the_program_generated(lowered):
    exe = runtime.compile(MODULE, force=True)
    path = program_cache.program_path(program_cache.program_key(exe.analysis, exe.device))
    path.write_bytes(b"not a pickle")
    runtime.compile(MODULE, force=True)
    assert len(lowered) == 2 and path.is_file() and path.read_bytes() != b"not a pickle"
