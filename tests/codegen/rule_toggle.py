"""Compile with one lowering rule enabled or removed, recording whether it took anything: the
kernel families' tests compare a specialised form with the general one it replaces."""

import runtime
from runtime import compiler
from runtime.codegen import registry
from runtime.execution import program_cache


def compile_with(text: str, rule, enabled: bool, monkeypatch) -> tuple[runtime.Executable, list]:
    """The executable, and the instructions ``rule`` lowered (none when not ``enabled``)."""
    took: list[str] = []

    def recording(ctx, inst, *rest):
        steps = rule(ctx, inst, *rest)
        if steps is not None:
            took.append(inst.name)
        return steps
    rules = registry.rules
    monkeypatch.setattr(program_cache, "load", lambda key: None)    # lower it here and now
    monkeypatch.setattr(registry, "rules", lambda key, target, packed=False: [
        recording if r is rule else r for r in rules(key, target, packed)
        if enabled or r is not rule])
    compiler.clear_cache()
    try:
        return runtime.compile(text), took
    finally:
        monkeypatch.undo()
        compiler.clear_cache()
