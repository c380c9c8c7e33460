"""Copy insertion: add the copies without which the aliasing constraints cannot all hold.

Loop state, conditional outputs, in-place operands and aliased parameters each force values
into shared bytes (runtime.analysis.alias_analysis). When two such values would be live at
once (a while's initial value still read after the loop, a loop state element read after the
body has overwritten it, swapped state elements, an aliased parameter read after its output
is written) or when an output would be a parameter the caller owns, a constant, or the same
bytes as another output, a copy must separate them.

The method is XLA's: first add copies *everywhere* a constraint meets a value (every loop
init and body-result element, every branch result, every in-place operand, every entry output,
every aliased parameter), which is conflict-free by construction; then try to remove each copy,
latest first, keeping it only if merging its source and its result into one buffer would let a
write clobber a live value (or break an output rule). The module must be scheduled (its text
order is the order checked against); copies are placed next to what needs them, so it stays
scheduled. Each surviving copy carries its reason in ``frontend_attributes``, so the reason
survives printing and parsing; ``inserted_copies`` reads them back.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection
from dataclasses import dataclass

from ..analysis.alias_analysis import AliasAnalysis, HloBuffer
from ..analysis.call_graph import CallGraph, sequential_callees, sequential_computations
from ..analysis.dataflow import Dataflow, HloValue
from ..analysis.in_place import in_place_pairs, may_hand_off
from ..analysis.liveness import LiveRange, Liveness, writable_parameters
from ..analysis.schedule import build_schedule, text_order
from ..analysis.side_effects import SideEffects
from ..hlo.attributes import RawText, quote_string, unquote_string
from ..hlo.clone import clone_module
from ..hlo.ir import HloComputation, HloInstruction, HloModule
from ..hlo.opcode_enum import Opcode
from ..hlo.shape import ShapeIndex, index_text
from .dce import remove_dead_code
from .names import FreshNames

REASON_KEY = "copy_insertion"
#: why a copy is needed, worded once all removals are known (names may change until then)
Reason = Callable[[], str]
_REASON = re.compile(REASON_KEY + r'="((?:[^"\\]|\\.)*)"')


@dataclass(frozen=True)
class InsertedCopy:
    instruction: str
    reason: str


def inserted_copies(module: HloModule,
                    sequential: Collection[HloComputation] | None = None) -> list[InsertedCopy]:
    """The copies copy insertion added to ``module``, with their reasons, in module order.
    ``sequential``: the module's sequential computations, where the caller has them: only those
    get copies, and a model's kernel bodies hold most of its instructions."""
    out = []
    for comp in module.computations:
        if sequential is not None and comp not in sequential:
            continue
        for inst in comp.instructions:
            attr = inst.attrs.get("frontend_attributes")
            if inst.opcode == Opcode.COPY and isinstance(attr, RawText):
                m = _REASON.search(attr.text)
                if m:
                    out.append(InsertedCopy(inst.name, unquote_string(m.group(1))))
    return out


def copy_insertion(module: HloModule) -> HloModule:
    new, _ = clone_module(module)
    insert_copies_in_place(new)
    return new


def insert_copies_in_place(module: HloModule, effects: SideEffects | None = None,
                           graph: CallGraph | None = None) -> None:
    """The pass itself, for pipelines that already work on a clone they own. ``effects``: a
    ``has_side_effect`` memo the caller holds for this module (the copies have none);
    ``graph``: the module's call graph, where the caller has it."""
    graph = graph if graph is not None else CallGraph(module)
    everywhere = _CopiesEverywhere(module, graph)
    # the copies, tuples and get-tuple-elements added call nothing: the call graph stands
    kept = _remove_unneeded_copies(module, everywhere.roles, graph)
    for copy, reason in kept.items():
        copy.attrs["frontend_attributes"] = RawText(f"{{{REASON_KEY}={quote_string(reason)}}}")
    everywhere.restore_untouched_tuples()
    # only sequential computations got copies; kernel bodies are left as they were
    remove_dead_code(module, sequential_computations(module), effects)


# --- phase 1: copies everywhere ----------------------------------------------------------

class _Inserter:
    """Adds instructions to a computation at a fixed place in its (scheduled) order."""

    def __init__(self, comp: HloComputation, at: int, names: FreshNames) -> None:
        self.comp = comp
        self.at = at
        self.names = names

    def add(self, opcode: Opcode, shape, operands: list[HloInstruction],
            attrs: dict | None = None) -> HloInstruction:
        inst = HloInstruction(self.names.fresh(opcode), opcode, shape, list(operands),
                              dict(attrs or {}), parent=self.comp)
        self.comp.instructions.insert(self.at, inst)
        self.at += 1
        return inst


def _array_leaves(inst: HloInstruction) -> set[ShapeIndex]:
    return {index for index, shape in inst.shape.leaves() if shape.is_array}


class _CopiesEverywhere:
    """Phase 1: a copy wherever a constraint meets a value. ``roles`` says what each copy is
    for (the start of its reason); ``rebuilt`` maps each new tuple to the tuple it replaced."""

    def __init__(self, module: HloModule, graph: CallGraph) -> None:
        self.module = module
        self.names = FreshNames(module)
        self.roles: dict[HloInstruction, str] = {}
        self.rebuilt: dict[HloInstruction, HloInstruction] = {}
        entry = module.entry
        assert entry is not None
        self._copy_aliased_parameters()
        for comp in graph.sequential:
            for inst in list(comp.instructions):
                self._copy_around(comp, inst)
        self._replace_root(entry, "output {index}")

    def _copy_around(self, comp: HloComputation, inst: HloInstruction) -> None:
        if inst.opcode == Opcode.WHILE:
            _, body = sequential_callees(inst)
            ins = _Inserter(comp, comp.instructions.index(inst), self.names)
            inst.operands[0] = self._rebuild(ins, inst.operands[0], _array_leaves(inst),
                                             f"initial loop state {{index}} of {inst.name}")
            # two stages, so that every element is read before any is overwritten (swaps)
            for _ in range(2):
                self._replace_root(
                    body, f"loop state {{index}} computed by the body of {inst.name}")
        elif inst.opcode == Opcode.CONDITIONAL:
            for k, branch in enumerate(sequential_callees(inst)):
                self._replace_root(branch, f"output {{index}} of branch {k} of {inst.name}")
        for pair in in_place_pairs(inst):
            ins = _Inserter(comp, comp.instructions.index(inst), self.names)
            inst.operands[pair.operand_number] = self._rebuild(
                ins, inst.operands[pair.operand_number], {pair.operand_index},
                f"operand {pair.operand_number} {{index}} of {inst.name}, which {inst.opcode} "
                "overwrites in place")

    def _rebuild(self, ins: _Inserter, source: HloInstruction, leaves: set[ShapeIndex],
                 role: str) -> HloInstruction:
        """``source``'s value with a fresh copy at each index in ``leaves`` (tuples above them
        are rebuilt, so they get fresh pointer tables too)."""
        # every index on the way to a leaf (a model's result tuple has hundreds of leaves)
        above = {leaf[:n] for leaf in leaves for n in range(len(leaf) + 1)}

        def build(node: HloInstruction, index: ShapeIndex) -> HloInstruction:
            if index not in above:
                return node
            if not node.shape.is_tuple:
                copy = ins.add(Opcode.COPY, node.shape, [node])
                self.roles[copy] = role.replace("{index}", index_text(index))
                return copy
            children = []
            for k, element in enumerate(node.shape.elements):
                child = node.operands[k] if node.opcode == Opcode.TUPLE else ins.add(
                    Opcode.GET_TUPLE_ELEMENT, element, [node], {"index": k})
                children.append(build(child, index + (k,)))
            rebuilt = ins.add(Opcode.TUPLE, node.shape, children)
            self.rebuilt[rebuilt] = node
            return rebuilt

        return build(source, ())

    def _replace_root(self, comp: HloComputation, role: str) -> None:
        assert comp.root is not None
        ins = _Inserter(comp, len(comp.instructions), self.names)
        comp.root = self._rebuild(ins, comp.root, _array_leaves(comp.root), role)

    def _copy_aliased_parameters(self) -> None:
        """Readers of an aliased parameter read a copy taken first, so the output may be
        written into the parameter's bytes at any time."""
        entry = self.module.entry
        assert entry is not None
        by_parameter: dict[int, dict[ShapeIndex, ShapeIndex]] = {}
        for alias in self.module.input_output_alias:
            by_parameter.setdefault(alias.parameter_number, {})[alias.parameter_index] = \
                alias.output_index
        # found once, in order: the copies added for one parameter read no other parameter
        readers_of: dict[HloInstruction, list[HloInstruction]] = {}
        for inst in entry.instructions:
            for op in dict.fromkeys(inst.operands):
                if op.opcode == Opcode.PARAMETER:
                    readers_of.setdefault(op, []).append(inst)
        params = {p.parameter_number: p for p in entry.parameters}
        for number, outputs in sorted(by_parameter.items()):
            param = params[number]
            readers = readers_of.get(param, [])
            ins = _Inserter(entry, entry.instructions.index(param) + 1, self.names)
            role = (f"parameter {number} {{index}}, aliased with output "
                    f"{', '.join(index_text(o) for o in outputs.values())}")
            replacement = self._rebuild(ins, param, set(outputs), role)
            for reader in readers:
                reader.operands = [replacement if op is param else op for op in reader.operands]
            if entry.root is param:
                entry.root = replacement

    def restore_untouched_tuples(self) -> None:
        """Where no copy survived under a rebuilt tuple, put the original value back (if
        nothing else used it), so the module keeps its own names and shape, and a value that
        was a tuple to begin with (a while's result) keeps its own pointer table."""
        def used(inst: HloInstruction, comp: HloComputation) -> bool:
            return comp.root is inst or any(inst in i.operands for i in comp.instructions)

        def untouched(new: HloInstruction, original: HloInstruction) -> bool:
            if original.opcode == Opcode.TUPLE:
                return all(a is b for a, b in zip(new.operands, original.operands))
            return all(op.opcode == Opcode.GET_TUPLE_ELEMENT and op.operands[0] is original
                       and op.attrs.get("index") == k for k, op in enumerate(new.operands))

        changed = True
        while changed:
            changed = False
            for new in self.rebuilt:
                original = new
                while original in self.rebuilt:
                    original = self.rebuilt[original]
                comp = new.parent
                assert comp is not None
                if (not used(new, comp) or (original.opcode == Opcode.TUPLE and used(original, comp))
                        or not untouched(new, original)):
                    continue
                for inst in comp.instructions:
                    inst.operands = [original if op is new else op for op in inst.operands]
                if comp.root is new:
                    comp.root = original
                changed = True


# --- phase 2: remove what is not needed ---------------------------------------------------

class _Merger:
    """Buffers of the copy-everywhere module, merged as copies are found unnecessary."""

    def __init__(self, module: HloModule, graph: CallGraph) -> None:
        self.flow = Dataflow(module, graph)
        self.aliasing = AliasAnalysis(self.flow, module.input_output_alias)
        self.schedule = build_schedule(module, text_order(self.flow.call_graph), "module")
        liveness = Liveness(self.flow, self.schedule)
        self.ranges: dict[HloValue, LiveRange] = dict(liveness.ranges)
        self.writable = writable_parameters(module)
        self.aliased_output = {a.output_index: (a.parameter_number, a.parameter_index)
                               for a in module.input_output_alias}
        entry = module.entry
        assert entry is not None and entry.root is not None
        self.outputs: dict[HloValue, set[ShapeIndex]] = {}
        for index, value in self.flow.value_set(entry.root).items():
            self.outputs.setdefault(value, set()).add(index)
        self.group: dict[HloBuffer, HloBuffer] = {}
        self.members: dict[HloBuffer, list[HloValue]] = {
            b: list(b.values) for b in self.aliasing.buffers}
        self.absorbed: dict[HloValue, set[HloValue]] = {}
        self.replaced: dict[HloValue, HloValue] = {}
        self.removed_copies: set[HloInstruction] = set()

    def find(self, buffer: HloBuffer) -> HloBuffer:
        while buffer in self.group:
            buffer = self.group[buffer]
        return buffer

    def representative(self, value: HloValue) -> HloValue:
        while value in self.replaced:
            value = self.replaced[value]
        return value

    def names(self, value: HloValue) -> set[HloValue]:
        return self.absorbed.get(value, set()) | {value}

    def label(self, value: HloValue) -> str:
        """The name a value goes by once the copies removed so far are gone."""
        return self.representative(value).label

    def try_remove(self, copy: HloInstruction) -> Reason | None:
        """Remove ``copy`` if that is safe; otherwise say why it is needed."""
        flow = self.flow
        removed = flow.value_at(copy)
        source = self.representative(flow.value_at(copy.operands[0]))
        b_source = self.find(self.aliasing.buffer_of(source))
        b_copy = self.find(self.aliasing.buffer_of(removed))
        merged = [v for v in self.members[b_source] if v is not removed]
        if b_copy is not b_source:
            merged += [v for v in self.members[b_copy] if v is not removed]
        s_range, c_range = self.ranges[source], self.ranges[removed]
        new_range = LiveRange(min(s_range.start, c_range.start), max(s_range.end, c_range.end))
        new_outputs = self.outputs.get(source, set()) | self.outputs.get(removed, set())

        def live(v: HloValue) -> LiveRange:
            return new_range if v is source else self.ranges[v]

        def outputs(v: HloValue) -> set[ShapeIndex]:
            return new_outputs if v is source else self.outputs.get(v, set())

        def names(v: HloValue) -> set[HloValue]:
            return self.names(v) | self.names(removed) if v is source else self.names(v)

        reason = (self._read_only_conflict(merged) or self._write_conflict(merged, live, names)
                  or self._output_conflict(merged, outputs))
        if reason is None:
            if b_copy is not b_source:
                self.group[b_copy] = b_source
            self.members[b_source] = merged
            self.ranges[source] = new_range
            self.outputs[source] = new_outputs
            self.absorbed[source] = names(source)
            self.replaced[removed] = source
            self.removed_copies.add(copy)
        return reason

    def _output_conflict(self, merged: list[HloValue],
                         outputs: Callable[[HloValue], set[ShapeIndex]]) -> Reason | None:
        held = [(v, o) for v in merged for o in sorted(outputs(v))]
        if not held:
            return None
        indices = sorted({o for _, o in held})
        if len(indices) > 1:
            return lambda: (f"outputs {index_text(indices[0])} and {index_text(indices[1])} "
                            "would share the same bytes")
        (output,) = indices
        for v in merged:
            if v.kind == "constant":
                return lambda: (f"output {index_text(output)} would be constant {v.label}, "
                                "which is read-only")
            if v.kind == "parameter" and (v.instruction.parameter_number, v.index) != \
                    self.aliased_output.get(output):
                return lambda: (f"output {index_text(output)} would be parameter "
                                f"{v.instruction.parameter_number} {index_text(v.index)} "
                                f"({v.label}), which the caller owns and which is not aliased "
                                "with that output")
        return None

    def _read_only_conflict(self, merged: list[HloValue]) -> Reason | None:
        for v in merged:
            read_only = v.kind == "constant" or (
                v.kind == "parameter"
                and (v.instruction.parameter_number, v.index) not in self.writable)
            writers = [w for w in merged if w.writes and w is not v and w.size]
            if read_only and writers:
                what = ("a constant" if v.kind == "constant"
                        else "a parameter not aliased with an output")
                return lambda: (f"{v.label} is read-only ({what}), but "
                                f"{self.label(writers[0])} would be written into its bytes")
        return None

    def _write_conflict(self, merged: list[HloValue], live: Callable[[HloValue], LiveRange],
                        names: Callable[[HloValue], set[HloValue]]) -> Reason | None:
        flow = self.flow
        for w in merged:
            if not w.writes or not w.size:
                continue
            at = live(w).start
            for a in merged:
                if a is w:
                    continue
                r = live(a)
                if r.start <= at <= r.end:
                    if r.end == at and may_hand_off(flow, names(a), w):
                        continue
                    reader = self.reader_at(a, r.end)
                    return lambda: (f"{self.label(w)} would overwrite {self.label(a)}, which is "
                                    f"still needed{reader()}")
        return None

    def reader_at(self, value: HloValue, step: int) -> Callable[[], str]:
        """' until X', X being the instruction that needs ``value`` last, if it survives."""
        last = self.schedule.flattened[step]

        def text() -> str:
            if last in self.removed_copies:
                return " later"
            return f" until {last.name}"
        return text


def _remove_unneeded_copies(module: HloModule, roles: dict[HloInstruction, str],
                            graph: CallGraph) -> dict[HloInstruction, str]:
    """Phase 2. Removes copies (latest first) and returns the kept ones with reasons."""
    merger = _Merger(module, graph)
    order = merger.schedule.step
    needed: dict[HloInstruction, Reason] = {}
    for copy in sorted(roles, key=lambda c: order[c], reverse=True):
        reason = merger.try_remove(copy)
        if reason is not None:
            needed[copy] = reason
    removed = merger.removed_copies
    kept = {copy: f"{roles[copy]}: {reason()}" for copy, reason in needed.items()}

    def target(inst: HloInstruction) -> HloInstruction:
        while inst in removed:
            inst = inst.operands[0]
        return inst

    for comp in module.computations:
        if not any(i in removed for i in comp.instructions):
            continue
        comp.instructions = [i for i in comp.instructions if i not in removed]
        for inst in comp.instructions:
            inst.operands = [target(op) for op in inst.operands]
        assert comp.root is not None
        comp.root = target(comp.root)
    return kept
