"""An internal exception in the compiler reaches a user as an ``InternalCompilerError`` (an
``HloError``) that names the stage, the instruction being lowered and its line, says it is
a bug, and chains the original; an ``HloError`` about the program passes through as it is."""

from __future__ import annotations

import numpy as np
import pytest

import runtime
from runtime import compiler
from runtime.codegen import registry
from runtime.errors import HloUnsupportedError, InternalCompilerError
from runtime.execution import program_cache
from runtime import pipeline

TEXT = """HloModule m
ENTRY e {
  x = f32[4] parameter(0)
  n = f32[4] negate(x)
  ROOT s = f32[4] sqrt(n)
}"""


@pytest.fixture
def sqrt_rule_raises(monkeypatch):
    """The rules for ``sqrt`` replaced by one that fails as a bug would (an IndexError)."""
    chosen = registry.rules

    def broken(ctx, inst, *args):
        return ()[inst.shape.rank]

    monkeypatch.setattr(registry, "rules", lambda key, target, *rest: [broken]
                        if key == "sqrt" else chosen(key, target, *rest))
    monkeypatch.setattr(program_cache, "load", lambda key: None)
    compiler.clear_cache()
    yield
    compiler.clear_cache()


@pytest.mark.internal_error
def test_a_lowering_crash_names_the_instruction_and_its_line(sqrt_rule_raises):
    with pytest.raises(InternalCompilerError) as caught:
        runtime.compile(TEXT, fusion=False)
    error = caught.value
    assert isinstance(error, runtime.HloError)
    assert isinstance(error.__cause__, IndexError)
    assert error.instruction == "s" and error.line == 5 and error.computation == "e"
    assert "lowering of s" in error.message and "IndexError" in error.message
    assert "bug" in str(error)


@pytest.mark.internal_error
def test_a_lazy_compile_crashes_at_the_first_run_as_an_internal_compiler_error(
        sqrt_rule_raises):
    exe = runtime.compile(TEXT, fusion=False, lazy=True)
    with pytest.raises(InternalCompilerError, match="lowering of s"):
        exe(np.ones(4, np.float32))


@pytest.mark.internal_error
@pytest.mark.parametrize("entry", ["analyze", "compile"])
def test_a_pass_crash_names_the_pass(monkeypatch, entry):
    def broken(module, target):
        raise KeyError("no such instruction")

    monkeypatch.setattr(pipeline, "OPTIMISATION",
                        [("simplify", broken, True), *pipeline.OPTIMISATION])
    compiler.clear_cache()
    with pytest.raises(InternalCompilerError, match="the simplify pass: KeyError") as caught:
        getattr(runtime, entry)(TEXT)
    assert isinstance(caught.value.__cause__, KeyError)
    compiler.clear_cache()


def test_errors_about_the_program_pass_through_unwrapped(monkeypatch):
    def unsupported(ctx, inst, *args):
        raise HloUnsupportedError("sqrt is not supported here", instruction=inst.name)

    chosen = registry.rules
    monkeypatch.setattr(registry, "rules", lambda key, target, *rest: [unsupported]
                        if key == "sqrt" else chosen(key, target, *rest))
    monkeypatch.setattr(program_cache, "load", lambda key: None)
    compiler.clear_cache()
    with pytest.raises(HloUnsupportedError) as caught:
        runtime.compile(TEXT, fusion=False)
    assert type(caught.value) is HloUnsupportedError
    assert caught.value.line == 5                 # it named no line: the lowered instruction's
    assert str(caught.value).startswith("line 5:")
    compiler.clear_cache()


def test_a_refusal_inside_a_comparator_names_its_own_line():
    """A sort comparator is computed element by element; an instruction it cannot compute so
    (here a while loop) is refused at its own line."""
    text = """HloModule m
body {
  s = (s32[], f32[]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  one = s32[] constant(1)
  j = s32[] add(i, one)
  v = f32[] get-tuple-element(s), index=1
  ROOT n = (s32[], f32[]) tuple(j, v)
}
cond {
  s = (s32[], f32[]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  two = s32[] constant(2)
  ROOT lt = pred[] compare(i, two), direction=LT
}
less {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  zero = s32[] constant(0)
  init = (s32[], f32[]) tuple(zero, a)
  loop = (s32[], f32[]) while(init), condition=cond, body=body
  la = f32[] get-tuple-element(loop), index=1
  ROOT lt = pred[] compare(la, b), direction=LT
}
ENTRY e {
  x = f32[5] parameter(0)
  ROOT s = f32[5] sort(x), dimensions={0}, to_apply=less
}"""
    with pytest.raises(HloUnsupportedError) as caught:
        runtime.compile(text)
    assert caught.value.line == 21 and "while loop" in str(caught.value)
