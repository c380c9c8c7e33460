"""The recipes of docs/architecture.md, followed: each test does what its recipe says and
checks that the rest of the compiler picks the addition up from there."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import scipy.special

import runtime
from runtime.codegen.lower import lower
from runtime.codegen.plan import iter_launches
from runtime.hlo.ir import HloInstruction, HloModule
from runtime.hlo.opcode_enum import Opcode
from runtime import pipeline
from runtime.target import CPU, Target, TargetKind

DOUBLE_NEGATION = """HloModule m
ENTRY e {
  p = f32[64] parameter(0)
  a = f32[64] negate(p)
  b = f32[64] negate(a)
  ROOT r = f32[64] exponential(b)
}
"""


def _skip_double_negations_in_place(module: HloModule, target: Target) -> None:
    """A pass as the recipe has it: ``(module, target) -> None``, rewriting in place."""
    def undone(inst: HloInstruction) -> HloInstruction:
        if inst.opcode == Opcode.NEGATE and inst.operands[0].opcode == Opcode.NEGATE:
            return inst.operands[0].operands[0]
        return inst
    for comp in module.computations:
        for inst in comp.instructions:
            inst.operands = [undone(o) for o in inst.operands]
        comp.root = undone(comp.root)


def test_adding_a_pass(monkeypatch):
    """One function, one entry in ``pipeline.OPTIMISATION`` at its place (here before fusion,
    as a fusion-time pass): it runs in order, only with fusion on, and the result is right."""
    order = [name for name, _, _ in pipeline.OPTIMISATION]
    entry = ("skip-double-negations", _skip_double_negations_in_place, True)
    passes = list(pipeline.OPTIMISATION)
    passes.insert(order.index("fusion"), entry)
    monkeypatch.setattr(pipeline, "OPTIMISATION", passes)
    module = runtime.parse(DOUBLE_NEGATION)
    kept = [i.opcode for i in pipeline.optimise(module, fusion=False).entry.instructions]
    assert kept.count("negate") == 2
    optimised = pipeline.optimise(module).entry
    assert "negate" not in str(optimised)
    x = np.linspace(-1, 1, 64, dtype=np.float32)
    np.testing.assert_allclose(np.asarray(runtime.compile(DOUBLE_NEGATION)(x)), np.exp(x),
                               rtol=1e-6)


def test_adding_a_target_variant():
    """A variant of a kind that needs other settings only: a ``dataclasses.replace`` of that
    kind's target with its own name. It keeps its kind's rules, and the settings reach the
    kernels (and the program cache's key). Chaining is off in both, so launches keep their
    own work-group sizes."""
    base = replace(CPU, chain_max_work=0)
    narrow = replace(base, name="cpu-narrow-loops", loop_local_size=16)
    assert narrow.kind is TargetKind.CPU and narrow.codegen_key() != base.codegen_key()
    module = runtime.parse(DOUBLE_NEGATION)

    def local_sizes(target: Target) -> set[tuple[int, ...]]:
        plan = lower(pipeline.run(module, target, fusion=False), target).plan
        return {launch.local_size for launch in iter_launches(plan)}
    assert local_sizes(narrow) == {(16,)} and local_sizes(base) == {(64,)}


REPO = Path(__file__).resolve().parent.parent
RECIPE_FILES = {"runtime/hlo/opcode_enum.py", "runtime/hlo/opcodes.py",
                "runtime/codegen/templates.py"}


@pytest.mark.parametrize("opcode, reference", [
    (Opcode.CBRT, np.cbrt), (Opcode.ATANH, np.arctanh), (Opcode.ERF, scipy.special.erf)])
def test_adding_an_elementwise_opcode(opcode, reference):
    """Opcodes that came in by the recipe (a member, a row, a template) are named nowhere
    else in ``runtime``, and run alone, fused into a chain and on the vector loop kernels."""
    pattern = re.compile(rf'Opcode\.{opcode.name}\b|["\']{re.escape(opcode.value)}["\']')
    named_in = {str(p.relative_to(REPO)) for p in (REPO / "runtime").rglob("*.py")
                if pattern.search(p.read_text())}
    assert named_in == RECIPE_FILES
    text = f"""HloModule m
ENTRY e {{
  x = f32[1024] parameter(0)
  y = f32[1024] {opcode}(x)
  ROOT z = f32[1024] multiply(y, x)
}}
"""
    x = np.linspace(-0.9, 0.9, 1024, dtype=np.float32)
    want = reference(x.astype(np.float64)) * x
    for fusion in (True, False):
        got = np.asarray(runtime.compile(text, fusion=fusion)(x))
        np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-7)
