"""FlattenCallGraph: give every sequentially called computation exactly one call site.

JAX's pre-optimisation text calls a private function from several places, and a computation may
be both a loop body and a reduction's combiner. Buffer assignment places each instruction of a
sequential computation at one step of the program timeline and gives its values one address,
which is only possible when the computation runs from one place. So each extra call site gets
its own copy (named ``NAME.clone``, ``NAME.clone.1``...; its instructions get the same suffix
so reports stay unambiguous). Thread-local callees (reducers, fused computations) are shared
freely: their values have no buffers.
"""

from __future__ import annotations

from ..analysis.call_graph import thread_local_callees
from ..hlo.clone import clone_computation, clone_module
from ..hlo.ir import HloComputation, HloModule
from ..hlo.opcodes import OPCODES


def flatten_call_graph(module: HloModule) -> HloModule:
    new, _ = clone_module(module)
    flatten_in_place(new)
    return new


def flatten_in_place(module: HloModule) -> None:
    """The pass itself, for pipelines that already work on a clone they own."""
    assert module.entry is not None
    thread_local = _thread_local_computations(module)
    names = {c.name for c in module.computations}
    claimed: set[HloComputation] = set()
    stack = [module.entry]
    while stack:
        comp = stack.pop()
        for inst in comp.instructions:
            for attr in OPCODES[inst.opcode].sequential_calls:
                value = inst.attrs.get(attr)
                if value is None:
                    continue
                callees = [c for c in (value if isinstance(value, tuple) else (value,))
                           if isinstance(c, HloComputation)]
                owned = []
                for callee in callees:
                    if callee in claimed or callee in thread_local:
                        callee = _clone_before(module, callee, comp, names)
                    claimed.add(callee)
                    stack.append(callee)
                    owned.append(callee)
                inst.attrs[attr] = tuple(owned) if isinstance(value, tuple) else owned[0]


def _thread_local_computations(module: HloModule) -> set[HloComputation]:
    found: set[HloComputation] = set()
    stack = [c for comp in module.computations for inst in comp.instructions
             for c in thread_local_callees(inst)]
    while stack:
        comp = stack.pop()
        if comp not in found:
            found.add(comp)
            stack.extend(c for inst in comp.instructions for c in inst.called_computations)
    return found


def _clone_before(module: HloModule, comp: HloComputation, caller: HloComputation,
                  names: set[str]) -> HloComputation:
    """Clone ``comp`` and place it right before its caller, which keeps callees first."""
    suffix = ".clone"
    counter = 0
    while comp.name + suffix in names:
        counter += 1
        suffix = f".clone.{counter}"
    names.add(comp.name + suffix)
    copy = clone_computation(comp, comp.name + suffix, instruction_suffix=suffix)
    copy.is_entry = False
    module.computations.insert(module.computations.index(caller), copy)
    return copy
