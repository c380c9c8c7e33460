"""Which computations run as steps of the program and which run inside a kernel.

``call``, ``while`` and ``conditional`` run their computations *sequentially*: those
computations' values are real buffers with addresses, exactly like the entry's. Everything else
that names a computation (fusion, reduce, map, sort, scatter, custom-call...) runs it
*thread-locally*, element by element inside one kernel, so its values get no buffers at all.
Buffer assignment needs each sequential computation to have exactly one call site (so each of
its instructions has one place in the timeline); ``flatten_call_graph`` establishes that.
"""

from __future__ import annotations

from functools import cached_property

from ..errors import HloVerifyError
from ..hlo.ir import HloComputation, HloInstruction, HloModule
from ..hlo.opcodes import OPCODES

def sequential_callees(inst: HloInstruction) -> list[HloComputation]:
    """The computations ``inst`` runs as program steps, in execution-relevant order.

    For a conditional this is the branch list (operand k+1 feeds branch k; a pred-conditional
    has branches [true, false]); for a while, [condition, body].
    """
    out: list[HloComputation] = []
    for attr in OPCODES[inst.opcode].sequential_calls:
        value = inst.attrs.get(attr)
        if isinstance(value, HloComputation):
            out.append(value)
        elif isinstance(value, tuple):
            out.extend(value)
    return out


def sequential_computations(module: HloModule) -> list[HloComputation]:
    """The entry and every computation it runs as program steps, breadth first from the
    entry in instruction order (the order passes that rewrite each of them visit them)."""
    assert module.entry is not None
    found = [module.entry]
    seen = {module.entry}
    for comp in found:
        for inst in comp.instructions:
            for callee in sequential_callees(inst):
                if callee not in seen:
                    seen.add(callee)
                    found.append(callee)
    return found


def thread_local_callees(inst: HloInstruction) -> list[HloComputation]:
    sequential = sequential_callees(inst)
    return [c for c in inst.called_computations if all(c is not s for s in sequential)]


class CallGraph:
    """Sequential computations reachable from the entry, each with its single call site.

    ``check_kernels=False`` skips walking every kernel body (``thread_local``, found when
    first asked for) for a sequential computation also run inside a kernel: for a module whose
    kernels a call graph of the same module already checked, before edits that call nothing
    new (``pipeline.prepare``: ViT-tiny's 8,500 fused instructions, walked three times per
    donation set otherwise)."""

    def __init__(self, module: HloModule, *, check_kernels: bool = True) -> None:
        assert module.entry is not None
        self.module = module
        self.call_site: dict[HloComputation, HloInstruction] = {}   # callee -> its caller
        self.sequential: list[HloComputation] = []
        self._walk_sequential(module.entry)
        if check_kernels:
            _ = self.thread_local

    def _walk_sequential(self, entry: HloComputation) -> None:
        stack = [entry]
        seen = {entry}
        while stack:
            comp = stack.pop()
            self.sequential.append(comp)
            for inst in comp.instructions:
                for callee in sequential_callees(inst):
                    if callee in seen:
                        raise HloVerifyError(
                            f"computation {callee.name} is called sequentially from more than one "
                            f"place (again by {inst.name}); run flatten_call_graph first",
                            instruction=inst.name, computation=comp.name)
                    seen.add(callee)
                    self.call_site[callee] = inst
                    stack.append(callee)

    @cached_property
    def thread_local(self) -> set[HloComputation]:
        """The computations run inside kernels; none may also run as a program step."""
        thread_local: set[HloComputation] = set()
        stack = [c for comp in self.sequential for inst in comp.instructions
                 for c in thread_local_callees(inst)]
        while stack:
            comp = stack.pop()
            if comp in thread_local:
                continue
            if comp in self.call_site or comp is self.module.entry:
                raise HloVerifyError(
                    f"computation {comp.name} is both run as a program step and inside a kernel "
                    "(conflicting allocation requirements); run flatten_call_graph first",
                    computation=comp.name)
            thread_local.add(comp)
            # most kernel instructions have no attributes at all (so call nothing)
            stack.extend(c for inst in comp.instructions if inst.attrs
                         for c in inst.called_computations)
        return thread_local
