"""Multi-output fusion: a loop kernel also writes the same-shape values it reads that other
instructions read too (XLA's producer-consumer multi-output fusion).

Instruction fusion (``fusion.py``) fuses a producer into its consumer only when the consumer
is its one reader, or when the producer is cheap enough to compute twice. An expensive
elementwise value read by two kernels stays a kernel of its own: a GRU step computes its
gates (``exp``), the candidate state (``tanh``) and the new state in three launches, because
the backward pass keeps each of them. Every launch costs the device a few microseconds
whatever its size, and in a loop body that is paid on every iteration.

Here a loop kernel (a ``kLoop`` fusion, or an elementwise instruction) absorbs an operand
computed by another such kernel of the same shape, layout and kind of element type (floats
the vector loops compute together, or one other type), which it reads only
elementwise at its own index: the merged kernel computes the operand once per element, uses
it, and writes it out too (the fusion's result becomes a tuple, its readers
``get-tuple-element``s). Nothing is computed twice and no bytes are added: the producer's
result is written once, as before, and the consumer no longer reads it back.

A merge never creates a cycle: the producer's other readers all come after the consumer in
post-order, so none of them can be an operand of it (nor feed one); the merged kernel takes
the consumer's place in that order, which stays a topological one. Scalars (loop counters,
which the trip-count analysis reads) and instructions with control dependencies are left
alone, and so are fusions a row kernel computes (their expensive values once per row). The kernel families that compute loop fusions on vectors (``codegen.vector_loop``,
``codegen.row_vector_loop``) store each output of such a tuple.
"""

from __future__ import annotations

from ..analysis.call_graph import sequential_computations
from ..analysis.rows import plan_rows
from ..hlo.attributes import Identifier
from ..hlo.dtypes import ElementType
from ..hlo.ir import HloComputation, HloInstruction, HloModule
from ..hlo.opcodes import OPCODES
from ..hlo.shape import ArrayShape, TupleShape
from ..target import CPU, Target
from .dce import remove_dead_code
from .fusion_rules import FusionRules, in_place_roots
from .names import FreshNames


def multi_output_fuse_in_place(module: HloModule, target: Target = CPU) -> None:
    rules = target.fusion
    if not rules.multi_output:
        return
    names = FreshNames(module)
    names.taken |= {c.name for c in module.computations}
    for comp in sequential_computations(module):
        _Merger(module, comp, names, rules).run()
    remove_dead_code(module)


def _outputs(inst: HloInstruction) -> list[HloInstruction]:
    """The values a loop kernel computes, as instructions of its fused computation (or the
    instruction itself when it is not a fusion)."""
    if inst.opcode != "fusion":
        return [inst]
    root = inst.calls.root
    return list(root.operands) if root.opcode == "tuple" else [root]


def _loop_kernel(inst: HloInstruction) -> bool:
    """An elementwise instruction, or a ``kLoop`` fusion whose outputs are elementwise."""
    if inst.control_predecessors:
        return False
    if inst.opcode != "fusion":
        spec = OPCODES[inst.opcode]
        return spec.elementwise and not spec.side_effect and not inst.called_computations
    return str(inst.attrs.get("kind")) == "kLoop" and all(
        OPCODES[out.opcode].elementwise and out.opcode not in in_place_roots()
        for out in _outputs(inst))


def _kind(et: ElementType) -> str:
    """Element types a vector loop computes together (f32 and bf16 both as f32 vectors): a
    kernel writing a float and a predicate, say, would lose its vector form."""
    return "float" if et.name in ("f32", "bf16") else et.name


def _row_kernel(inst: HloInstruction) -> bool:
    """A fusion the row kernel computes (``analysis.rows``), its expensive values once a row."""
    return inst.opcode == "fusion" and inst.calls.root.opcode != "tuple" \
        and plan_rows(inst.calls.root, inst.calls.instructions) is not None


class _Merger:
    def __init__(self, module: HloModule, comp: HloComputation, names: FreshNames,
                 rules: FusionRules) -> None:
        self.module, self.comp, self.names, self.rules = module, comp, names, rules
        order = comp.post_order()
        self.pos: dict[HloInstruction, float] = {inst: float(i) for i, inst in enumerate(order)}
        self.users: dict[HloInstruction, list[HloInstruction]] = {i: [] for i in order}
        for inst in order:
            for op in dict.fromkeys(inst.operands):
                self.users[op].append(inst)
        self.pinned = {p for inst in order for p in inst.control_predecessors}
        self.fused: list[HloComputation] = []

    def run(self) -> None:
        for consumer in sorted(self.pos, key=self.pos.__getitem__, reverse=True):
            if consumer not in self.pos or not self._kernel(consumer):
                continue
            merged = True
            while merged:
                merged = False
                for producer in sorted(dict.fromkeys(consumer.operands),
                                       key=self.pos.__getitem__, reverse=True):
                    if self._mergeable(producer, consumer):
                        consumer = self._merge(producer, consumer)
                        merged = True
                        break
        if self.fused:
            at = self.module.computations.index(self.comp)
            self.module.computations[at:at] = self.fused
            self.comp.instructions = sorted(
                (i for i in self.comp.instructions if i in self.pos), key=self.pos.__getitem__)

    def _kernel(self, inst: HloInstruction) -> bool:
        return inst not in self.pinned and _loop_kernel(inst)

    def _shape(self, inst: HloInstruction) -> ArrayShape | None:
        """The shape every output of a loop kernel shares (None: it has none or no kernel)."""
        shapes = [o.shape for o in _outputs(inst)]
        first = shapes[0]
        if not isinstance(first, ArrayShape) or first.element_count < 2 or any(
                not isinstance(s, ArrayShape) or s.dims != first.dims
                or s.minor_to_major != first.minor_to_major
                or _kind(s.element_type) != _kind(first.element_type) for s in shapes):
            return None
        return first

    def _mergeable(self, producer: HloInstruction, consumer: HloInstruction) -> bool:
        if producer.shape.is_tuple or not self._kernel(producer):
            return False
        shape, mine = self._shape(producer), self._shape(consumer)
        if shape is None or mine is None or shape.dims != mine.dims \
                or shape.minor_to_major != mine.minor_to_major \
                or _kind(shape.element_type) != _kind(mine.element_type):
            return False
        others = [u for u in self.users[producer] if u is not consumer]
        if not others or any(self.pos[u] <= self.pos[consumer] for u in others):
            return False       # its one reader fuses it already; or a merge could close a cycle
        if not self._read_at_own_index(producer, consumer) \
                or _row_kernel(producer) or _row_kernel(consumer):
            return False
        members = len(_body(producer)) + len(_body(consumer))
        operands = set(producer.operands) | set(consumer.operands) - {producer}
        outputs = len(_outputs(consumer)) + 1
        return members <= self.rules.max_members \
            and len(operands) + outputs <= self.rules.max_parameters

    @staticmethod
    def _read_at_own_index(producer: HloInstruction, consumer: HloInstruction) -> bool:
        """Whether the consumer reads the producer only through elementwise instructions of
        its own shape (so each element is computed once, at the consumer's index)."""
        if consumer.opcode != "fusion":
            return True
        params = [p for p in consumer.calls.parameters
                  if consumer.operands[p.parameter_number] is producer]
        dims = producer.shape.dims  # type: ignore[union-attr]
        for inst in consumer.calls.instructions:
            for op in inst.operands:
                if op in params and not (OPCODES[inst.opcode].elementwise
                                         and inst.shape.dims == dims):  # type: ignore[union-attr]
                    return False
        return True

    def _merge(self, producer: HloInstruction, consumer: HloInstruction) -> HloInstruction:
        fused = HloComputation(self.names.fresh("fused_computation"))
        operands: list[HloInstruction] = []
        params: dict[HloInstruction, HloInstruction] = {}

        def parameter(outer: HloInstruction) -> HloInstruction:
            if outer not in params:
                params[outer] = HloInstruction(
                    self.names.fresh(f"param_{len(operands)}"), "parameter", outer.shape,
                    parameter_number=len(operands), parent=fused)
                operands.append(outer)
                fused.instructions.append(params[outer])
            return params[outer]

        [value] = self._inline(producer, fused, parameter)
        outputs = self._inline(consumer, fused,
                               lambda outer: value if outer is producer else parameter(outer))
        outputs.append(value)
        root = HloInstruction(self.names.fresh("tuple"), "tuple",
                              TupleShape(tuple(o.shape for o in outputs)), operands=outputs,
                              parent=fused)
        fused.instructions.append(root)
        fused.root = root
        self.fused.append(fused)
        fusion = HloInstruction(self.names.fresh("multi_output_fusion"), "fusion", root.shape,
                                operands=operands,
                                attrs={"kind": Identifier("kLoop"), "calls": fused},
                                location=consumer.location, parent=self.comp)
        self._replace(producer, consumer, fusion, len(outputs))
        return fusion

    def _inline(self, inst: HloInstruction, fused: HloComputation, bind) -> list[HloInstruction]:
        """Copies of ``inst``'s computation in ``fused`` (its operands as ``bind`` gives
        them); the copies of its outputs."""
        if inst.opcode != "fusion":
            return [self._copy(inst, fused, [bind(op) for op in inst.operands])]
        copies: dict[HloInstruction, HloInstruction] = {}
        for member in inst.calls.instructions:
            if member.opcode == "parameter":
                copies[member] = bind(inst.operands[member.parameter_number])
            elif member is not inst.calls.root or member.opcode != "tuple":
                copies[member] = self._copy(member, fused,
                                            [copies[op] for op in member.operands])
        return [copies[o] for o in _outputs(inst)]

    def _copy(self, inst: HloInstruction, fused: HloComputation,
              operands: list[HloInstruction]) -> HloInstruction:
        # every field of inst, then the changed ones; the name stays: the producer and the
        # consumer leave the module, so each member lives on in one computation only
        copy = object.__new__(HloInstruction)
        copy.__dict__.update(inst.__dict__)
        copy.operands = operands
        copy.attrs = dict(inst.attrs)
        copy.parent = fused
        fused.instructions.append(copy)
        return copy

    def _replace(self, producer: HloInstruction, consumer: HloInstruction,
                 fusion: HloInstruction, count: int) -> None:
        """``fusion`` takes the consumer's place: the consumer's readers read its first
        outputs (a multi-output consumer's get-tuple-elements now read the fusion), the
        producer's other readers its last."""
        at = self.pos[consumer]
        self.pos[fusion] = at
        self.users[fusion] = []
        self.comp.instructions.append(fusion)
        reads = {consumer: fusion if consumer.shape.is_tuple else self._element(fusion, 0),
                 producer: self._element(fusion, count - 1)}
        for old, new in reads.items():
            for user in self.users.pop(old):
                if user is not consumer:
                    user.operands = [new if op is old else op for op in user.operands]
                    self.users[new].append(user)
            if self.comp.root is old:
                self.comp.root = new
            del self.pos[old]
        for op in dict.fromkeys(fusion.operands):
            self.users[op] = [u for u in self.users[op]
                              if u is not producer and u is not consumer] + [fusion]

    def _element(self, fusion: HloInstruction, k: int) -> HloInstruction:
        """A get-tuple-element of output ``k``, placed right after the fusion."""
        elements = fusion.shape.elements  # type: ignore[union-attr]
        gte = HloInstruction(self.names.fresh("get-tuple-element"), "get-tuple-element",
                             elements[k], operands=[fusion], attrs={"index": k},
                             parent=self.comp)
        self.pos[gte] = self.pos[fusion] + (k + 1) / (len(elements) + 1)
        self.users[gte] = []
        self.users[fusion].append(gte)
        self.comp.instructions.append(gte)
        return gte


def _body(inst: HloInstruction) -> list[HloInstruction]:
    return inst.calls.instructions if inst.opcode == "fusion" else [inst]
