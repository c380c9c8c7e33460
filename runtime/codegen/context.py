"""The state one lowering shares: the assignment, the target, the program being built.

``lower_computation`` walks a computation's schedule and lowers each instruction through the
first rule of the registry (``codegen.registry``) that takes it on this target, else through
the ``ANY`` rule (the loop kernel).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..buffers.assignment import BufferAssignment
from ..errors import internal_errors
from ..hlo.dtypes import PACKED
from ..hlo.ir import HloComputation, HloInstruction
from ..hlo.opcode_enum import Opcode
from ..target import Target
from . import registry
from .kernel import BufferRef
from .plan import Step
from .program import ProgramBuilder


@dataclass
class LoweringContext:
    assignment: BufferAssignment
    target: Target
    program: ProgramBuilder
    # while a loop is tried as a device loop, nested loops are left for it to inline
    # (``device_loops``): their rule returns a ``NestedLoop`` marker instead of lowering them
    deferring_loops: bool = False
    # the JAX lowering's Python callbacks, by ``index`` (``custom_calls.jax_callbacks``)
    python_callbacks: tuple = ()
    # tier 0 (``tier0.lowering``): given an entry instruction and its specialised steps, the
    # steps to run instead (generic kernels where they compute it)
    retier: Callable[["LoweringContext", HloInstruction, list[Step]], list[Step]] | None = None

    def ref(self, inst: HloInstruction, index: tuple[int, ...] = ()) -> BufferRef:
        s = self.assignment.slice(inst, index)
        return BufferRef(s.allocation, s.offset)

    def same_bytes(self, a: HloInstruction, b: HloInstruction) -> bool:
        return self.ref(a) == self.ref(b)

    def sequence(self, comp: HloComputation) -> list[HloInstruction]:
        return self.assignment.schedule.sequences[comp.name]

    def lower_computation(self, comp: HloComputation) -> list[Step]:
        steps: list[Step] = []
        for inst in self.sequence(comp):
            steps.extend(self.lower_instruction(inst))
        return steps

    def lower_instruction(self, inst: HloInstruction) -> list[Step]:
        """``inst``'s steps; an internal exception on the way is a located
        ``InternalCompilerError`` naming it (an inner instruction's, where one is lowered
        inside it, passes through)."""
        with internal_errors("the lowering", instruction=inst.name, location=inst.location,
                             computation=inst.parent.name if inst.parent else None):
            for key in (inst.opcode, registry.ANY):
                steps = self.first_taker(key, inst)
                if steps is not None:
                    if self.retier is not None and inst.parent is self.assignment.module.entry:
                        return self.retier(self, inst, steps)
                    return steps
            raise AssertionError(f"no lowering rule took {inst.opcode} {inst.name}")

    def first_taker(self, key: str, inst: HloInstruction, *args) -> list[Step] | None:
        """The steps of the first rule for ``key`` on this target that does not decline (of
        those registered for packed arrays where ``inst`` touches one)."""
        for rule in registry.rules(key, self.target.kind, touches_packed(inst)):
            steps = rule(self, inst, *args)
            if steps is not None:
                return steps
        return None


def touches_packed(inst: HloInstruction) -> bool:
    """Whether ``inst``'s result or operands, or anything its fused computation computes, is a
    packed 2- or 4-bit array (its kernel reads or writes packed bytes)."""
    insts = [inst, *inst.operands]
    if inst.opcode == Opcode.FUSION:
        insts.extend(inst.calls.instructions)
    return any(shape.element_type.name in PACKED
               for i in insts for _, shape in i.shape.leaves())
