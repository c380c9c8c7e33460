"""Alias analysis: which values must live in the same bytes (one *buffer*).

Each rule of hlo-reference §8.3 contributes edges between values; buffers are the connected
components. The edges are kept (not just the components) so that whoever shows a buffer can
say which constraint put each value into it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from ..hlo.ir import AliasEntry, HloInstruction
from ..hlo.opcode_enum import Opcode
from .call_graph import sequential_callees
from .dataflow import Dataflow, HloValue
from .in_place import in_place_pairs

@dataclass(frozen=True, eq=False)
class MustAlias:
    """``a`` and ``b`` share bytes because of ``kind`` at ``site`` (state/output ``index``)."""

    # "while-init" | "while-body-root" | "while-result" | "branch-root" | "in-place" |
    # "input-output-alias"
    kind: str
    a: HloValue
    b: HloValue
    site: HloInstruction      # the while, conditional, in-place instruction or entry root
    index: tuple[int, ...]    # loop state / conditional output / in-place operand / entry output
    detail: int = 0           # branch number, in-place operand number or aliased parameter number


@dataclass(eq=False)
class HloBuffer:
    id: int
    values: list[HloValue] = field(default_factory=list)

    @cached_property
    def size(self) -> int:
        return max(v.size for v in self.values)

    @property
    def first(self) -> HloValue:
        return self.values[0]

    def __repr__(self) -> str:
        return f"<buffer {self.id}: {', '.join(v.label for v in self.values)}>"


class AliasAnalysis:
    def __init__(self, dataflow: Dataflow, aliases: list[AliasEntry]) -> None:
        self.dataflow = dataflow
        self.edges: list[MustAlias] = []
        self._collect_edges(aliases)
        self.buffers: list[HloBuffer] = []
        self._buffer_of: dict[HloValue, HloBuffer] = {}
        self._components()

    def buffer_of(self, value: HloValue) -> HloBuffer:
        return self._buffer_of[value]

    def _edge(self, kind: str, a: HloValue, b: HloValue, site: HloInstruction,
              index: tuple[int, ...], detail: int = 0) -> None:
        if a is not b:
            self.edges.append(MustAlias(kind, a, b, site, index, detail))

    def _collect_edges(self, aliases: list[AliasEntry]) -> None:
        flow = self.dataflow
        for comp in flow.call_graph.sequential:
            for inst in comp.instructions:
                if inst.opcode == Opcode.WHILE:
                    self._while_edges(inst)
                elif inst.opcode == Opcode.CONDITIONAL:
                    for k, branch in enumerate(sequential_callees(inst)):
                        assert branch.root is not None
                        roots = flow.value_set(branch.root)
                        for index, value in flow.value_set(inst).items():
                            self._edge("branch-root", roots[index], value, inst, index, k)
                for pair in in_place_pairs(inst):
                    operand = flow.value_at(inst.operands[pair.operand_number], pair.operand_index)
                    self._edge("in-place", operand, flow.value_at(inst, pair.output_index), inst,
                               pair.output_index, pair.operand_number)
        entry = flow.module.entry
        assert entry is not None and entry.root is not None
        params = {p.parameter_number: p for p in entry.parameters}   # a model aliases hundreds
        for alias in aliases:
            param = flow.value_at(params[alias.parameter_number], alias.parameter_index)
            output = flow.value_at(entry.root, alias.output_index)
            self._edge("input-output-alias", param, output, entry.root, alias.output_index,
                       alias.parameter_number)

    def _while_edges(self, inst: HloInstruction) -> None:
        flow = self.dataflow
        loop = flow.loops[inst]
        _, body = sequential_callees(inst)
        assert body.root is not None
        init = flow.value_set(inst.operands[0])
        roots = flow.value_set(body.root)
        for index, state in loop.state.items():
            self._edge("while-init", init[index], state, inst, index)
            self._edge("while-body-root", state, roots[index], inst, index)
            self._edge("while-result", state, loop.result[index], inst, index)

    def _components(self) -> None:
        parent: dict[HloValue, HloValue] = {}

        def find(v: HloValue) -> HloValue:
            root = v
            while parent.get(root, root) is not root:
                root = parent[root]
            while v is not root:
                parent[v], v = root, parent[v]
            return root

        for e in self.edges:
            ra, rb = find(e.a), find(e.b)
            if ra is not rb:
                if ra.id < rb.id:
                    parent[rb] = ra
                else:
                    parent[ra] = rb
        by_root: dict[HloValue, HloBuffer] = {}
        for value in self.dataflow.values:
            root = find(value)
            buffer = by_root.get(root)
            if buffer is None:
                buffer = by_root[root] = HloBuffer(len(self.buffers))
                self.buffers.append(buffer)
            buffer.values.append(value)
            self._buffer_of[value] = buffer
