"""Fusion before buffer assignment, the way XLA's instruction fusion does it.

Each sequential computation (the entry, loop bodies and conditions, branches, called
computations) is walked from its root towards its parameters. An instruction that may root a
fusion starts a group; its operands are then considered producers in decreasing post-order
position, so every user of a producer has been decided before the producer is. A producer
joins the group when the rules table allows its opcode and

* all its users are in the group (it *moves* into the kernel), or it is cheap enough to copy
  into this kernel while its other users keep the original (it is *duplicated*), and the copy
  reads no more bytes than the value it replaces: the large values its cheap cone starts from
  that the kernel does not read already (``fusion_cost.duplicate_reads_no_more``), so a copy
  never keeps more values live or moves more bytes than reading the original would;
* it is not expensive while the group reads its elements many times (a broadcast, a window,
  a gather source, a gather's indices when a slice has several elements), which would
  multiply its cost (``fusion_cost.may_evaluate_repeatedly``);
* it is not an operand the group's root updates in place (dynamic-update-slice, scatter);
* the kernel would compute it at no more than ``MAX_INDEXINGS`` distinct indices (each is a
  copy of its code: ``lax.associative_scan``'s slices and pads double them per level);
* for a dot or convolution (output fusion): the group is elementwise from its root down to it
  at the root's own index, and nothing else of it is fused.

Then, where the table enables it, a group absorbs producer groups whose results only it
reads when the row analysis (``analysis.rows``) says the merged kernel can compute every
reduction and every repeatedly-read expensive value once per row, and the cost model
(``fusion_cost.row_merge_cost``) says the merge pays: no reduction (nor any operand-bound
value) is computed again for rows that share its output, and any cheaper value recomputed
costs less than the bytes the merge saves. That turns a layer norm's reductions, their scalar
epilogues and the normalisation into one kernel, and keeps a batch norm's per-channel sums
(whose rows would be single elements) in their own reduction kernels.

Finally each group of two or more instructions becomes a ``fusion`` instruction calling a
fused computation (``kind=kLoop``, ``kInput`` when rooted at a reduce, ``kOutput`` around a
dot or convolution), so the module prints as valid HLO and buffer assignment sees only the
fusion's result. Instructions with control dependencies are left alone. The pass is linear in
the module size apart from the bounded row merges, and deterministic (post-order positions
decide every tie).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

from ..analysis.call_graph import sequential_computations
from ..analysis.rows import is_expensive, reads_many_times, row_count
from ..hlo.attributes import Identifier
from ..hlo.clone import clone_module
from ..hlo.ir import HloComputation, HloInstruction, HloModule
from ..hlo.opcode_enum import Opcode
from ..hlo.opcodes import OPCODES
from ..hlo.shape import ArrayShape
from .dce import remove_dead_code
from ..target import CPU, Target
from ..analysis.fusion_cost import (duplicate_reads_no_more, may_evaluate_repeatedly, recompute_sources,
                          row_merge_cost)
from ..analysis.fusion_rules import (FusionRules, in_epilogue, in_place_operands,
                           in_place_roots)
from .names import FreshNames

MOVE, DUPLICATE = "move", "duplicate"


def fuse(module: HloModule, target: Target = CPU) -> HloModule:
    """A fused copy of ``module`` for a device of the given target."""
    new, _ = clone_module(module)
    fuse_in_place(new, target)
    return new


def fuse_in_place(module: HloModule, target: Target = CPU) -> None:
    rules = target.fusion
    names = FreshNames(module)
    names.taken |= {c.name for c in module.computations}   # fused computations too
    for comp in sequential_computations(module):
        groups = _Planner(comp, rules).plan()
        _Builder(module, comp, names).build(groups)
    remove_dead_code(module)


@dataclass(eq=False)
class _Group:
    root: HloInstruction
    kind: str
    members: dict[HloInstruction, None] = field(default_factory=dict)   # an ordered set
    excluded: frozenset[HloInstruction] = frozenset()
    reused: set[HloInstruction] = field(default_factory=set)       # read many times per output
    same_index: set[HloInstruction] = field(default_factory=set)   # read at the root's index
    moved: set[HloInstruction] = field(default_factory=set)        # members that leave the caller
    duplicates: int = 0                                            # copies counted in the budget
    indexings: dict[HloInstruction, int] = field(default_factory=dict)   # see ``_indexings``
    parameters: set[HloInstruction] = field(default_factory=set)   # operands from outside
    merged_into: _Group | None = None


class _Planner:
    """Decides the groups of one computation (nothing is changed until ``_Builder``)."""

    def __init__(self, comp: HloComputation, rules: FusionRules) -> None:
        self.rules = rules
        self.comp_root = comp.root
        self.order = comp.post_order()
        self.pos = {inst: i for i, inst in enumerate(self.order)}
        self.users: dict[HloInstruction, list[HloInstruction]] = {i: [] for i in self.order}
        self.pinned: set[HloInstruction] = set()
        for inst in self.order:
            for op in dict.fromkeys(inst.operands):
                self.users[op].append(inst)
            if inst.control_predecessors:
                self.pinned.add(inst)
                self.pinned.update(inst.control_predecessors)
            if _complex_bitcast(inst):
                self.pinned.add(inst)
        self.owner: dict[HloInstruction, _Group] = {}
        self.groups: list[_Group] = []
        self.dead: set[HloInstruction] = set()        # every user has its own copy
        # groups reading an instruction from outside (it is among their parameters)
        self.readers: dict[HloInstruction, set[_Group]] = {i: set() for i in self.order}
        self.sources = recompute_sources(self.order, self._recomputable)

    def plan(self) -> list[_Group]:
        for inst in reversed(self.order):
            if inst in self.owner or inst in self.pinned or inst.opcode not in self.rules.roots:
                continue
            if self._only_duplicates_needed(inst):
                self.dead.add(inst)
                continue
            self._grow(inst)
        if self.rules.row_fusion:
            for group in self.groups:
                if group.merged_into is None:
                    self._merge_rows(group)
        return [g for g in self.groups if g.merged_into is None and len(g.members) > 1]

    def _only_duplicates_needed(self, inst: HloInstruction) -> bool:
        """Every user already has its own copy of ``inst`` (or is dead code itself) and no
        kernel reads it: it would be dead code."""
        users = self.users[inst]
        return inst is not self.comp_root and bool(users) and not self.readers[inst] and all(
            u in self.dead or (u in self.owner and inst in self.owner[u].members) for u in users)

    def _duplicable(self, inst: HloInstruction) -> bool:
        rules = self.rules
        if inst.opcode in rules.duplicable:
            return _small_if_constant(inst)
        return (rules.duplicate_cheap_elementwise and OPCODES[inst.opcode].elementwise
                and not is_expensive(inst))

    def _materialized(self, inst: HloInstruction) -> bool:
        """Whether ``inst`` is computed into memory whatever this group does: a reader never
        takes it into its kernel (a dot or convolution reads its operands from memory; so do
        ops that root no fusion and join none)."""
        rules = self.rules
        return any(u.opcode in rules.heroes
                   or (u.opcode not in rules.roots and u.opcode not in rules.producers)
                   for u in self.users[inst])

    def _recomputable(self, inst: HloInstruction) -> bool:
        """Duplicable and computed from its operands' elements alone (no data movement)."""
        return self._duplicable(inst) and (OPCODES[inst.opcode].elementwise
                                           or OPCODES[inst.opcode].free_duplicate)

    def _only_reader(self, group: _Group, inst: HloInstruction) -> bool:
        """Whether ``group`` is the only reader of ``inst``, so it may move into the group: a
        duplicated member's original stays behind and still reads its operands, and so do
        copies of it in other groups."""
        return (inst is not self.comp_root
                and all(u in group.moved or u in self.dead for u in self.users[inst])
                and self.readers[inst] <= {group})

    def _set_parameters(self, group: _Group, parameters: set[HloInstruction]) -> None:
        for op in group.parameters - parameters:
            self.readers[op].discard(group)
        for op in parameters - group.parameters:
            self.readers[op].add(group)
        group.parameters = parameters

    # --- growing a group from its root ---------------------------------------------------
    def _grow(self, root: HloInstruction) -> None:
        group = _Group(root, self.rules.roots[root.opcode],
                       excluded=frozenset(root.operands[k] for k in in_place_operands(root)))
        group.members[root] = None
        group.indexings[root] = 1
        group.moved.add(root)
        group.same_index.add(root)
        self._set_parameters(group, set(root.operands))
        self.owner[root] = group
        self.groups.append(group)
        heap: list[tuple[int, int]] = []
        readers: dict[HloInstruction, list[HloInstruction]] = {}   # operand -> members using it

        def push_operands(inst: HloInstruction) -> None:
            for op in dict.fromkeys(inst.operands):
                if op in group.excluded:
                    continue
                if op not in readers:
                    readers[op] = []
                    heapq.heappush(heap, (-self.pos[op], self.pos[op]))
                readers[op].append(inst)

        push_operands(root)
        while heap:
            producer = self.order[heapq.heappop(heap)[1]]
            decision = self._decide(group, producer, readers[producer])
            if decision is None:
                continue
            group.members[producer] = None
            self._set_parameters(group, (group.parameters - {producer}) | {
                op for op in producer.operands if op not in group.members})
            if decision == MOVE:
                self.owner[producer] = group
                group.moved.add(producer)
            if producer.opcode in self.rules.heroes:
                group.kind = "kOutput"
            else:
                push_operands(producer)

    def _decide(self, group: _Group, producer: HloInstruction,
                inside: list[HloInstruction]) -> str | None:
        """MOVE, DUPLICATE or None for ``producer``, which the members ``inside`` read."""
        rules = self.rules
        if (producer in self.pinned or producer.shape.is_tuple
                or producer.opcode not in rules.producers | rules.heroes
                or len(group.members) >= rules.max_members):
            return None
        reused = any(u in group.reused or any(reads_many_times(u, k)
                                              for k, op in enumerate(u.operands) if op is producer)
                     for u in inside)
        if reused and not may_evaluate_repeatedly(producer):
            return None
        same_index = all(u in group.same_index and OPCODES[u.opcode].elementwise
                         and producer.array_shape.dims == u.array_shape.dims for u in inside)
        moves = self._only_reader(group, producer)
        if producer.opcode in rules.heroes:
            if group.kind != "kLoop" or not moves or not same_index or reused \
                    or not all(in_epilogue(m) for m in group.members):
                return None
            decision = MOVE
        elif group.kind == "kOutput" and not in_epilogue(producer):
            return None
        elif moves:
            decision = MOVE
        elif self._duplicable(producer) and (OPCODES[producer.opcode].free_duplicate
                                             or group.duplicates < rules.max_duplicates):
            if producer in self.sources and not duplicate_reads_no_more(
                    producer, self.sources[producer], group.members.keys() | group.parameters,
                    self._materialized(producer)):
                return None
            decision = DUPLICATE
        else:
            return None
        added = {op for op in producer.operands if op not in group.members}
        if len((group.parameters - {producer}) | added) > rules.max_parameters:
            return None
        indexings = _indexings(group, producer, inside)
        if indexings > MAX_INDEXINGS:
            return None
        group.indexings[producer] = indexings
        if decision == DUPLICATE and not OPCODES[producer.opcode].free_duplicate:
            group.duplicates += 1
        if reused:
            group.reused.add(producer)
        if same_index:
            group.same_index.add(producer)
        return decision

    # --- row fusion ------------------------------------------------------------------------
    def _merge_rows(self, group: _Group) -> None:
        if group.kind == "kOutput" or group.root.opcode in in_place_roots():
            return
        for _ in range(self.rules.max_row_merges):
            producer = self._row_producer(group)
            if producer is None:
                return
            for m in producer.members:
                group.members[m] = None
                if self.owner.get(m) is producer:
                    self.owner[m] = group
            group.moved |= producer.moved
            producer.merged_into = group
            self._set_parameters(producer, set())
            self._set_parameters(group, {op for m in group.members for op in m.operands
                                         if op not in group.members})

    def _row_producer(self, group: _Group) -> _Group | None:
        """The nearest producer group whose result only ``group`` reads and whose merge keeps a
        valid row plan with enough rows."""
        for q in sorted(group.parameters, key=self.pos.__getitem__, reverse=True):
            producer = self.owner.get(q)
            if (producer is None or producer is group or producer.root is not q
                    or producer.merged_into is not None or producer.kind == "kOutput"
                    or (q.opcode not in self.rules.producers and q.opcode != Opcode.REDUCE)
                    or not self._only_reader(group, q)
                    or len(group.members) + len(producer.members) > self.rules.max_members):
                continue
            members = set(group.members) | set(producer.members)
            rows = row_count(group.root, members)
            if rows is not None and row_merge_cost(group.root, members, rows, q,
                                                   self.rules.min_rows).pays:
                return producer
        return None


# a member the kernel would compute at more distinct indices than this stays outside (XLA's
# FusionNodeIndexingEvaluation allows 15): each index is its own copy of the member's code
MAX_INDEXINGS = 15


def _indexings(group: _Group, producer: HloInstruction, inside: list[HloInstruction]) -> int:
    """How many distinct indices the kernel would compute ``producer`` at: elementwise readers
    of its shape share their own indices, any other reader (a slice, pad, concatenation,
    reshape, broadcast) indexes it anew for each of its own. ``lax.associative_scan``'s
    slices, pads and concatenations double this at every level, and a kernel fusing them all
    grew its code four-fold per doubling of the scan (n=1500 never finished compiling)."""
    def same_index(user: HloInstruction) -> bool:
        return (OPCODES[user.opcode].elementwise
                and user.array_shape.dims == producer.array_shape.dims)

    shared = max((group.indexings[u] for u in inside if same_index(u)), default=0)
    return shared + sum(group.indexings[u] * sum(op is producer for op in u.operands)
                        for u in inside if not same_index(u))


def _complex_bitcast(inst: HloInstruction) -> bool:
    """A bitcast between a complex value and its pair form (``complex_lowering``): it only
    renames a buffer, and no kernel can read the complex side."""
    return inst.opcode == Opcode.BITCAST and any(
        isinstance(s, ArrayShape) and s.element_type.is_complex
        for s in (inst.shape, inst.operands[0].shape))


def _small_if_constant(inst: HloInstruction) -> bool:
    return inst.opcode != Opcode.CONSTANT or (isinstance(inst.shape, ArrayShape)
                                         and inst.shape.element_count <= 1)


# --- building fusion instructions ------------------------------------------------------------

class _Builder:
    def __init__(self, module: HloModule, comp: HloComputation, names: FreshNames) -> None:
        self.module = module
        self.comp = comp
        self.names = names

    def build(self, groups: list[_Group]) -> None:
        """Replace each group's root by a fusion and drop the members that moved into it;
        duplicated members stay for their other users (dead-code elimination drops the rest)."""
        if not groups:
            return
        pos = {inst: i for i, inst in enumerate(self.comp.instructions)}
        fusion_of: dict[HloInstruction, HloInstruction] = {}
        moved: set[HloInstruction] = set()
        fused: list[HloComputation] = []
        for group in groups:
            members = sorted(group.members, key=pos.__getitem__)
            fusion_of[group.root] = self._fusion(group, members, fused)
            moved.update(group.moved)
        at = self.module.computations.index(self.comp)
        self.module.computations[at:at] = fused
        kept = [fusion_of.get(inst, inst) for inst in self.comp.instructions
                if inst in fusion_of or inst not in moved]
        for inst in kept:
            inst.operands = [fusion_of.get(op, op) for op in inst.operands]
        self.comp.instructions = kept
        if self.comp.root in fusion_of:
            self.comp.root = fusion_of[self.comp.root]

    def _fusion(self, group: _Group, members: list[HloInstruction],
                computations: list[HloComputation]) -> HloInstruction:
        fused = HloComputation(self.names.fresh("fused_computation"))
        computations.append(fused)
        copies: dict[HloInstruction, HloInstruction] = {}
        operands: list[HloInstruction] = []
        for m in members:
            for op in m.operands:
                if op not in group.members and op not in copies:
                    name = self.names.fresh(f"param_{len(operands)}")
                    copies[op] = HloInstruction(name, Opcode.PARAMETER, op.shape,
                                                parameter_number=len(operands), parent=fused)
                    operands.append(op)
                    fused.instructions.append(copies[op])
        for m in members:
            copy = object.__new__(HloInstruction)      # every field of m, then the changed ones
            copy.__dict__.update(m.__dict__)
            copy.name = m.name if m in group.moved else self.names.fresh(m.name)
            copy.operands = [copies[op] for op in m.operands]
            copy.attrs = dict(m.attrs)
            copy.parent = fused
            copies[m] = copy
            fused.instructions.append(copy)
        fused.root = copies[group.root]
        attrs: dict[str, object] = {"kind": Identifier(group.kind), "calls": fused}
        if "metadata" in group.root.attrs:
            attrs["metadata"] = group.root.metadata
        return HloInstruction(self.names.fresh(f"{group.root.opcode}_fusion"), Opcode.FUSION,
                              group.root.shape, operands=operands, attrs=attrs,
                              location=group.root.location, parent=self.comp)
