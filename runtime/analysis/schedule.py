"""Schedules: the order in which each sequential computation runs its instructions.

Buffer reuse needs a total order, so every sequential computation gets a sequence, and the
module gets one flattened timeline: walking the entry's sequence, a call/while/conditional is
preceded by the steps of what it runs (a while's condition then body, a conditional's branches
in order), then the instruction itself. Step i of the timeline is ``flattened[i]``.

Two schedulers produce sequences (the text order of an ``is_scheduled`` module is a third
candidate): plain post-order, and XLA's greedy list scheduler, which at every step picks the
ready instruction that frees the most bytes net of what it defines (parameters and constants
count for nothing; ties go to text order). Side-effecting instructions keep their text order.
In a loop body (a tuple parameter, a tuple root of the same shape) the list scheduler runs the
instruction computing state element i after the other readers of the old element i, where
that order exists: then it may write the new state into the old state's bytes without a copy
(XLA orders loop-state updates after their last read the same way). The entry's outputs
aliased with parameters (a donated weight and its update) are ordered the same way, and the
post-order keeps the same edges.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import Callable

from ..hlo.graph import post_order as graph_post_order
from ..hlo.ir import AliasEntry, HloComputation, HloInstruction, HloModule
from ..hlo.opcode_enum import Opcode
from .call_graph import CallGraph, sequential_callees
from .dataflow import Dataflow, HloValue
from .side_effects import SideEffects, has_side_effect

Sequences = dict[HloComputation, list[HloInstruction]]


@dataclass
class Schedule:
    sequences: dict[str, list[HloInstruction]]   # computation name -> its sequence
    flattened: list[HloInstruction]               # step i -> instruction
    scheduler: str                                # which candidate was chosen
    # candidate -> peak bytes simulated before copy insertion (no-fragmentation heap)
    peaks: dict[str, int] = field(default_factory=dict)
    step: dict[HloInstruction, int] = field(default_factory=dict, repr=False)
    spans: dict[HloComputation, tuple[int, int]] = field(default_factory=dict, repr=False)

    @property
    def last_step(self) -> int:
        return len(self.flattened) - 1


def build_schedule(module: HloModule, sequences: Sequences, scheduler: str,
                   peaks: dict[str, int] | None = None) -> Schedule:
    assert module.entry is not None
    schedule = Schedule({c.name: list(seq) for c, seq in sequences.items()}, [], scheduler,
                        dict(peaks or {}))

    def walk(comp: HloComputation) -> None:
        first = len(schedule.flattened)
        for inst in sequences[comp]:
            for callee in sequential_callees(inst):
                walk(callee)
            schedule.step[inst] = len(schedule.flattened)
            schedule.flattened.append(inst)
        schedule.spans[comp] = (first, len(schedule.flattened) - 1)

    walk(module.entry)
    return schedule


def text_order(call_graph: CallGraph) -> Sequences:
    return {c: list(c.instructions) for c in call_graph.sequential}


def post_order(call_graph: CallGraph, module: HloModule | None = None,
               effects: SideEffects | None = None) -> Sequences:
    """Operands first, text order breaking ties, with the list scheduler's ordering edges
    (side effects in text order, loop-state and donated updates after the other reads of what
    they overwrite): without them a GRU's scan steps computed the new hidden state and counter
    before their old values' last reads, and each needed a copy every iteration (six a step,
    240 a run); ResNet-18's donated weight updates, 62 copies. ``effects``: see
    ``_predecessors``."""
    sequences: Sequences = {}
    for comp in call_graph.sequential:
        preds = _predecessors(comp, module, effects)
        sequences[comp] = graph_post_order(comp.instructions, lambda inst: preds[inst])
    return sequences


def list_order(flow: Dataflow, effects: SideEffects | None = None) -> Sequences:
    return {c: _list_schedule(c, flow, effects) for c in flow.call_graph.sequential}


def _predecessors(comp: HloComputation, module: HloModule | None = None,
                  effects: SideEffects | None = None
                  ) -> dict[HloInstruction, list[HloInstruction]]:
    """Operands, control predecessors, and the previous side-effecting instruction (side
    effects keep their text order). ``effects``: ``has_side_effect``'s memo, shared by callers
    that order the same module more than once (each search would otherwise walk every kernel
    body again: ViT-tiny's 8,500 fused instructions)."""
    preds: dict[HloInstruction, list[HloInstruction]] = {}
    previous_effect: HloInstruction | None = None
    memo: SideEffects = effects if effects is not None else {}
    for inst in comp.instructions:
        found = list(dict.fromkeys(inst.operands + inst.control_predecessors))
        if has_side_effect(inst, memo):
            if previous_effect is not None and previous_effect not in found:
                found.append(previous_effect)
            previous_effect = inst
        preds[inst] = found
    pairs = _in_place_updates(comp, module)
    if pairs:
        users: dict[HloInstruction, list[HloInstruction]] = {i: [] for i in preds}
        for inst, found in preds.items():
            for p in found:
                users[p].append(inst)
        for update, readers in pairs:
            _order_update_after_reads(comp, update, readers, preds, users)
    return preds


def _in_place_updates(comp: HloComputation, module: HloModule | None
                      ) -> list[tuple[HloInstruction, list[HloInstruction]]]:
    """(instruction, readers of the value it may overwrite) for each result written where an
    input was: loop-state element i of a loop body (a tuple parameter, a tuple root of the same
    shape), and in the entry each output aliased with a parameter (a donated weight's update)."""
    root = comp.root
    if root is None:
        return []
    if module is not None and comp is module.entry and root.opcode == Opcode.TUPLE:
        return [(update, readers)
                for _, update, readers in donated_updates(comp, module.input_output_alias)]
    params = comp.parameters
    if root.opcode == Opcode.TUPLE and len(params) == 1 and params[0].shape == root.shape:
        readers = _element_readers(comp)
        return _written([(update, readers(params[0], (i,)))
                         for i, update in enumerate(root.operands)])
    return []


def donated_updates(entry: HloComputation, aliases: list[AliasEntry]
                    ) -> list[tuple[AliasEntry, HloInstruction, list[HloInstruction]]]:
    """``_in_place_updates`` of an entry whose root is a tuple, for the applied ``aliases``,
    each with its alias: the only ordering edges a donation set adds (``ScheduleBasis``
    checks them)."""
    assert entry.root is not None
    readers = _element_readers(entry)
    by_number = {p.parameter_number: p for p in entry.parameters}
    found: list[tuple[AliasEntry, HloInstruction, list[HloInstruction]]] = []
    for alias in aliases:
        param = by_number.get(alias.parameter_number)
        if param is not None and len(alias.output_index) == 1:
            update = entry.root.operands[alias.output_index[0]]
            if _writes(update):
                found.append((alias, _writer(update),
                              readers(param, tuple(alias.parameter_index))))
    return found


def _element_readers(comp: HloComputation
                     ) -> Callable[[HloInstruction, tuple[int, ...]], list[HloInstruction]]:
    """(parameter, index) -> the instructions of ``comp`` that read that element of it."""
    users: dict[HloInstruction, list[HloInstruction]] = {}
    for inst in comp.instructions:
        for op in dict.fromkeys(inst.operands):
            users.setdefault(op, []).append(inst)

    def element_readers(param: HloInstruction, index: tuple[int, ...]) -> list[HloInstruction]:
        if not index:
            return users.get(param, [])
        if len(index) != 1:
            return []
        return [u for g in users.get(param, []) if g.opcode == Opcode.GET_TUPLE_ELEMENT
                and g.index == index[0] for u in users.get(g, [])]
    return element_readers


def _written(pairs: list[tuple[HloInstruction, list[HloInstruction]]]
             ) -> list[tuple[HloInstruction, list[HloInstruction]]]:
    """The pairs whose value an instruction computes, with that instruction."""
    return [(_writer(u), r) for u, r in pairs if _writes(u)]


def _writes(value: HloInstruction) -> bool:
    """Whether an instruction computes ``value`` (it is not a forwarded parameter, constant
    or tuple element)."""
    return _writer(value).opcode not in (Opcode.GET_TUPLE_ELEMENT, Opcode.PARAMETER,
                                         Opcode.CONSTANT, Opcode.TUPLE)


def _writer(value: HloInstruction) -> HloInstruction:
    """The instruction computing ``value``: an output of a multi-output fusion is computed by
    the fusion."""
    if value.opcode == Opcode.GET_TUPLE_ELEMENT and value.operands[0].opcode == Opcode.FUSION:
        return value.operands[0]
    return value


def _order_update_after_reads(comp: HloComputation, update: HloInstruction,
                              readers: list[HloInstruction],
                              preds: dict[HloInstruction, list[HloInstruction]],
                              users: dict[HloInstruction, list[HloInstruction]]) -> None:
    """Make ``update`` wait for the other ``readers`` of the value it overwrites, unless a
    reader depends on it (edges that would close a cycle are skipped). ``users`` is ``preds``
    reversed, kept so as edges are added: what depends on ``update`` is found once, forwards
    from it (an update is usually late, with few dependents), and the edges added here, into
    ``update``, change none of it."""
    dependents = _dependents(update, users)
    for reader in readers:
        if (reader is not update and reader is not comp.root and reader not in preds[update]
                and reader not in dependents):
            preds[update].append(reader)
            users[reader].append(update)


def _dependents(inst: HloInstruction,
                users: dict[HloInstruction, list[HloInstruction]]) -> set[HloInstruction]:
    """``inst`` and everything that depends on it."""
    seen = {inst}
    stack = [inst]
    while stack:
        for u in users[stack.pop()]:
            if u not in seen:
                seen.add(u)
                stack.append(u)
    return seen


def _list_schedule(comp: HloComputation, flow: Dataflow,
                   effects: SideEffects | None = None) -> list[HloInstruction]:
    preds = _predecessors(comp, flow.module, effects)
    successors: dict[HloInstruction, list[HloInstruction]] = {i: [] for i in comp.instructions}
    waiting = {i: len(p) for i, p in preds.items()}
    for inst, found in preds.items():
        for p in found:
            successors[p].append(inst)
    order_index = {inst: n for n, inst in enumerate(comp.instructions)}
    root_values = set(flow.value_set(comp.root).values()) if comp.root is not None else set()
    # a value is freed when its last user in this computation runs; values that flow out of
    # the computation, and parameters and constants, are never freed here
    users: dict[HloValue, set[HloInstruction]] = {}
    operand_values: dict[HloInstruction, set[HloValue]] = {}
    for inst in comp.instructions:
        held = {v for k in range(len(inst.operands)) for _, v in flow.operand_values(inst, k)}
        operand_values[inst] = held
        for v in held:
            if v.writes and v.kind == "def" and v not in root_values:
                users.setdefault(v, set()).add(inst)
    remaining = {v: len(u) for v, u in users.items()}
    defined = {inst: sum(v.size for v in flow.defined_by(inst) if v.kind == "def")
               for inst in comp.instructions}

    def priority(inst: HloInstruction) -> int:
        freed = sum(v.size for v in operand_values[inst] if remaining.get(v) == 1)
        return freed - defined[inst]

    current: dict[HloInstruction, int] = {}
    heap: list[tuple[int, int]] = []    # (-priority, text position): stale entries are skipped

    def push(inst: HloInstruction) -> None:
        current[inst] = priority(inst)
        heapq.heappush(heap, (-current[inst], order_index[inst]))

    for inst in comp.instructions:
        if waiting[inst] == 0:
            push(inst)
    order: list[HloInstruction] = []
    done: set[HloInstruction] = set()
    while heap:
        neg, position = heapq.heappop(heap)
        inst = comp.instructions[position]
        if inst in done or -neg != current[inst]:
            continue
        done.add(inst)
        order.append(inst)
        for v in operand_values[inst]:
            if v in remaining:
                remaining[v] -= 1
                if remaining[v] == 1:
                    for other in users[v]:
                        if other not in done and waiting[other] == 0:
                            push(other)
        for succ in successors[inst]:
            waiting[succ] -= 1
            if waiting[succ] == 0:
                push(succ)
    return order
