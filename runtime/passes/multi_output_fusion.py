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
result is written once, as before, and the consumer no longer reads it back. The consumer
may also be the producer's only reader: a value whose readers this pass merged into one kernel
(instruction fusion does not run again), or a multi-output kernel (instruction fusion never
fuses a tuple: a threefry round's chain of two-output kernels, each read only by the next, is
one kernel). The producer may itself be such a multi-output kernel, and passes repeat while
one merges anything: a GRU backward step's gradient of its candidate reads a value whose other
reader came first, and joins the kernel that reader and the value became.

A merge never creates a cycle: the producer's other readers all come after the consumer in
post-order, so none of them can be an operand of it (nor feed one); the merged kernel takes
the consumer's place in that order, which stays a topological one. Scalars (loop counters,
which the trip-count analysis reads) and instructions with control dependencies are left
alone, and so are fusions a row kernel computes (their expensive values once per row). The
kernel families that compute loop fusions on vectors (``codegen.families.vector_loop``,
``codegen.families.row_vector_loop``) store each output of such a tuple.

Then windows (XLA's in-place dynamic-update-slice fusion): a scan step stacks what it computes
into the loop's outputs with dynamic-update-slices, each a kernel of its own that reads the
value back (a GRU step: its cell, then one launch writing nine slices). A *window kernel* (a
dynamic-update-slice of an operand it updates in place, or a ``kLoop`` fusion rooted at one)
joins a loop kernel whose index space is its update's (``analysis.loop_outputs``): the kernel
computing its update, which it must read only as that update, at the update's own element, or
else one reading an operand it reads (the scan step's kernels read the loop counter, or the old
state it stacks). The merged kernel writes the window as an extra output, in place; outputs no
one reads any more (a value written only for its windows) leave it. The host must not read
what the window overwrites, and the merged kernel goes to the later one's place when nothing
reads the earlier one's results in between, else to the earlier one's when what the later one
reads is computed by then (a get-tuple-element of the loop state moves up with it).
"""

from __future__ import annotations

from ..analysis.call_graph import sequential_computations
from ..analysis.in_place import in_place_pairs, kernel_outputs, parameter_read_at_own_index
from ..analysis.loop_outputs import window_fits
from ..analysis.rows import plan_rows
from ..hlo.attributes import Identifier
from ..hlo.dtypes import ElementType
from ..hlo.ir import HloComputation, HloInstruction, HloModule
from ..hlo.opcode_enum import Opcode
from ..hlo.opcodes import OPCODES
from ..hlo.shape import ArrayShape, TupleShape
from ..target import CPU, Target
from .dce import remove_dead_code
from ..analysis.fusion_rules import FusionRules, in_place_roots
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
    if inst.opcode != Opcode.FUSION:
        return [inst]
    root = inst.calls.root_instruction
    return list(root.operands) if root.opcode == Opcode.TUPLE else [root]


def _loop_kernel(inst: HloInstruction) -> bool:
    """An elementwise instruction, or a ``kLoop`` fusion whose outputs are elementwise."""
    if inst.control_predecessors:
        return False
    if inst.opcode != Opcode.FUSION:
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
    return inst.opcode == Opcode.FUSION and inst.calls.root_instruction.opcode != Opcode.TUPLE \
        and plan_rows(inst.calls.root_instruction, inst.calls.instructions) is not None


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
        self.made: list[HloInstruction] = []      # the fusions merges made
        self.fused_names: set[str] = set()        # the names in the computation being built

    def run(self) -> None:
        self._merge_consumers()
        self._merge_windows()
        for fusion in self.made:
            if fusion in self.pos:
                self._drop_unread_outputs(fusion)
        if self.fused:
            at = self.module.computations.index(self.comp)
            self.module.computations[at:at] = self.fused
            self.comp.instructions = sorted(
                (i for i in self.comp.instructions if i in self.pos), key=self.pos.__getitem__)

    def _merge_consumers(self) -> None:
        """Consumers latest first, each absorbing producers while it can; again while a pass
        merges anything (a merge can make a producer's other reader follow a consumer passed
        over before: it then reads a kernel placed later)."""
        again = True
        while again:
            again = False
            for consumer in sorted(self.pos, key=self.pos.__getitem__, reverse=True):
                again |= self._absorb(consumer)

    def _absorb(self, consumer: HloInstruction) -> bool:
        """Merge producers into ``consumer`` while one qualifies; whether any did."""
        absorbed = False
        if consumer in self.pos and self._kernel(consumer):
            merged = True
            while merged:
                merged = False
                producers = dict.fromkeys(
                    op.operands[0] if op.opcode == Opcode.GET_TUPLE_ELEMENT else op
                    for op in consumer.operands)
                for producer in sorted(producers, key=self.pos.__getitem__, reverse=True):
                    if self._mergeable(producer, consumer):
                        consumer = self._merge(producer, consumer)
                        self.made.append(consumer)
                        merged = absorbed = True
                        break
        return absorbed

    # --- windows ------------------------------------------------------------------------
    def _merge_windows(self) -> None:
        """Each window kernel, in order, joins a loop kernel computing what it stores (or
        reading what it reads) over the window's index space."""
        for window in sorted(self.pos, key=self.pos.__getitem__):
            if window not in self.pos or window in self.pinned or _target(window) is None:
                continue
            for host in self._hosts(window):
                if self._window_mergeable(host, window):
                    self.made.append(self._merge_window(host, window))
                    break

    def _drop_unread_outputs(self, fusion: HloInstruction) -> None:
        """Outputs no one reads any more (a value written only for the dynamic-update-slices
        the kernel now computes itself, or read only by the consumer that absorbed a
        multi-output producer) leave the kernel."""
        gtes = self.users[fusion]
        read = {g.index for g in gtes if self.users[g] or self.comp.root is g}
        root = fusion.calls.root_instruction
        keep = [k for k in range(len(root.operands)) if k in read]
        if len(keep) == len(root.operands):
            return
        root.operands = [root.operands[k] for k in keep]
        root.shape = fusion.shape = TupleShape(tuple(o.shape for o in root.operands))
        for gte in gtes:
            if gte.index in read:
                gte.attrs["index"] = keep.index(gte.index)
            else:
                del self.pos[gte]
        self.users[fusion] = [g for g in gtes if g in self.pos]

    def _hosts(self, window: HloInstruction) -> list[HloInstruction]:
        """Kernels whose results ``window`` reads, then kernels reading what it reads (a scan
        step's kernels all read the loop counter)."""
        target = _target(window)
        producers = [op.operands[0] if op.opcode == Opcode.GET_TUPLE_ELEMENT else op
                     for op in window.operands if op is not target]
        siblings = [u for op in window.operands if op is not target
                    for u in self.users[op] if u is not window]
        return [k for k in dict.fromkeys(producers + siblings) if k in self.pos]

    def _space(self, inst: HloInstruction) -> ArrayShape | None:
        """The index space of a loop kernel that may take a window: a loop kernel's shape, or
        the space of one that has windows already."""
        if inst in self.pinned or inst.control_predecessors or _row_kernel(inst):
            return None
        found = kernel_outputs(inst) if str(inst.attrs.get("kind")) == "kLoop" else None
        if found is not None:
            return found[0] if found[0].element_count >= 2 else None
        if inst.opcode == Opcode.FUSION and (str(inst.attrs.get("kind")) != "kLoop"
                                        or inst.calls.root_instruction.opcode in in_place_roots()):
            return None
        if inst.opcode != Opcode.FUSION and not _loop_kernel(inst):
            return None
        return self._shape(inst)

    def _window_mergeable(self, host: HloInstruction, window: HloInstruction) -> bool:
        space = self._space(host)
        dus = window.calls.root_instruction if window.opcode == Opcode.FUSION else window
        if space is None or not window_fits(space, dus) \
                or _kind(dus.array_shape.element_type) != _kind(space.element_type):
            return False
        target = _target(window)
        results = self._results(host)
        if target in results or target in host.operands \
                or sum(op is target for op in window.operands) != 1:
            return False           # the kernel would read what the window overwrites
        if host is self.comp.root or host in self.users[window] or host.shape.is_tuple and any(
                u.opcode != Opcode.GET_TUPLE_ELEMENT for u in self.users[host]):
            return False           # read whole, or reading the window's result
        if not self._reads_update_only(window, results):
            return False
        if self._place(host, window, results) is None:
            return False
        members = len(_body(host)) + len(_body(window))
        # a window's operand is written, never read: its output is its one kernel argument
        written = {host.operands[p.operand_number] for p in in_place_pairs(host)} | {target}
        operands = (set(host.operands) | set(window.operands)) - results - written
        outputs = len(_outputs(host)) + 1
        return members <= self.rules.max_members \
            and len(operands) + outputs <= self.rules.max_parameters

    def _results(self, kernel: HloInstruction) -> set[HloInstruction]:
        """``kernel`` and its get-tuple-elements: what reads of its results read."""
        return {kernel} | {u for u in self.users[kernel] if u.opcode == Opcode.GET_TUPLE_ELEMENT}

    def _place(self, host: HloInstruction, window: HloInstruction,
               results: set[HloInstruction]) -> float | None:
        """Where the merged kernel may go: the later one's place when nothing reads the
        earlier one's results before it, else the earlier one's when all the later one
        reads is computed before that (and, for a window, nothing else reads what it
        overwrites in between); None when neither keeps the order a topological one."""
        first, last = sorted((host, window), key=self.pos.__getitem__)
        start, end = self.pos[first], self.pos[last]
        readers = [u for r in (results if first is host else {window}) for u in self.users[r]
                   if u is not last and u not in results]
        if all(self.pos[u] > end for u in readers):
            return end
        target = _target(window)
        between = [u for u in self.users[target] if u is not window
                   and start < self.pos[u] < end] if last is window and target else []
        if all(self._before(op, start) for op in last.operands if op not in results) \
                and not between:
            return start
        return None

    def _before(self, inst: HloInstruction, at: float) -> bool:
        """Whether ``inst`` comes before ``at``, or is a get-tuple-element of something that
        does (post-order puts each right before its first reader; it may move up)."""
        return self.pos[inst] < at or inst.opcode == Opcode.GET_TUPLE_ELEMENT \
            and self.pos[inst.operands[0]] < at

    @staticmethod
    def _reads_update_only(window: HloInstruction, results: set[HloInstruction]) -> bool:
        """Whether ``window`` reads the host's results only as its update, at the update's
        own element (the merged kernel computes them at that element)."""
        if window.opcode != Opcode.FUSION:
            return all(op not in results for k, op in enumerate(window.operands) if k != 1)
        fused = window.calls
        return all(parameter_read_at_own_index(fused, p.param_number, {id(fused.root)})
                   for p in fused.parameters
                   if window.operands[p.param_number] in results)

    def _merge_window(self, host: HloInstruction, window: HloInstruction) -> HloInstruction:
        at = self._place(host, window, self._results(host))
        assert at is not None
        fused, operands, values, windows = self._combine(host, window)
        fusion = self._fusion(fused, values + windows, operands, host.location)
        for op in fusion.operands:
            if self.pos[op] >= at:                 # a get-tuple-element moving up (``_before``)
                self.pos[op] = (self.pos[op.operands[0]] + at) / 2
        self._place_fusion(fusion, at)
        if host.shape.is_tuple:
            self._move_elements(host, fusion, 0, window)
        else:
            self._redirect(host, self._element(fusion, 0), window)
        self._redirect(window, self._element(fusion, len(values)), None)
        for op in dict.fromkeys(fusion.operands):
            self.users[op] = [u for u in self.users[op]
                              if u is not host and u is not window] + [fusion]
        return fusion

    def _redirect(self, old: HloInstruction, new: HloInstruction,
                  skip: HloInstruction | None) -> None:
        """``old``'s readers (but ``skip``) read ``new`` instead; ``old`` leaves the order."""
        for user in self.users.pop(old):
            if user is not skip:
                user.operands = [new if op is old else op for op in user.operands]
                self.users[new].append(user)
        if self.comp.root is old:
            self.comp.root = new
        del self.pos[old]

    def _move_elements(self, kernel: HloInstruction, fusion: HloInstruction, offset: int,
                       skip: HloInstruction) -> None:
        """A multi-output ``kernel``'s get-tuple-elements read ``fusion`` instead, ``offset``
        outputs on, right after it; ``kernel`` (and ``skip``, which the fusion absorbed) leave
        their readers; ``kernel`` leaves the order."""
        n = len(fusion.tuple_shape.elements)
        for gte in self.users.pop(kernel):
            gte.operands = [fusion]
            gte.attrs["index"] = gte.index + offset
            self.pos[gte] = self.pos[fusion] + (gte.index + 1) / (n + 1)
            self.users[gte] = [u for u in self.users[gte] if u is not skip]
            self.users[fusion].append(gte)
        del self.pos[kernel]

    def _place_fusion(self, fusion: HloInstruction, at: float) -> None:
        """``fusion`` enters the computation at position ``at``, read by no one yet."""
        self.pos[fusion] = at
        self.users[fusion] = []
        self.comp.instructions.append(fusion)

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
        if producer not in self.pos or not self._kernel(producer):
            return False
        if producer.shape.is_tuple and any(u.opcode != Opcode.GET_TUPLE_ELEMENT
                                           for u in self.users[producer]):
            return False       # a multi-output producer read whole
        shape, mine = self._shape(producer), self._shape(consumer)
        if shape is None or mine is None or shape.dims != mine.dims \
                or shape.minor_to_major != mine.minor_to_major \
                or _kind(shape.element_type) != _kind(mine.element_type):
            return False
        results = self._results(producer)
        others = [u for r in results for u in self.users[r]
                  if u is not consumer and u not in results]
        if any(self.pos[u] <= self.pos[consumer] for u in others):
            return False       # a merge could close a cycle
        if not self._read_at_own_index(results, shape, consumer) \
                or _row_kernel(producer) or _row_kernel(consumer):
            return False
        members = len(_body(producer)) + len(_body(consumer))
        operands = set(producer.operands) | set(consumer.operands) - results
        outputs = len(_outputs(consumer)) + len(_outputs(producer))
        return members <= self.rules.max_members \
            and len(operands) + outputs <= self.rules.max_parameters

    @staticmethod
    def _read_at_own_index(results: set[HloInstruction], shape: ArrayShape,
                           consumer: HloInstruction) -> bool:
        """Whether the consumer reads the producer's ``results`` only through elementwise
        instructions of their ``shape`` (so each element is computed once, at the consumer's
        index)."""
        if consumer.opcode != Opcode.FUSION:
            return True
        params = [p for p in consumer.calls.parameters
                  if consumer.operands[p.param_number] in results]
        for inst in consumer.calls.instructions:
            for op in inst.operands:
                if op in params and not (OPCODES[inst.opcode].elementwise
                                         and inst.array_shape.dims == shape.dims):
                    return False
        return True

    def _merge(self, producer: HloInstruction, consumer: HloInstruction) -> HloInstruction:
        fused, operands, values, outputs = self._combine(producer, consumer)
        fusion = self._fusion(fused, outputs + values, operands, consumer.location)
        self._replace(producer, consumer, fusion, len(outputs))
        return fusion

    def _combine(self, first: HloInstruction, second: HloInstruction):
        """A computation holding copies of both kernels' computations, ``second`` reading
        ``first``'s results as computed there: (the computation, the outer operands of its
        parameters, the copies of ``first``'s outputs, those of ``second``'s)."""
        fused = HloComputation(self.names.fresh("fused_computation"))
        operands: list[HloInstruction] = []
        params: dict[HloInstruction, HloInstruction] = {}
        self.fused_names = set()

        def parameter(outer: HloInstruction) -> HloInstruction:
            if outer not in params:
                params[outer] = HloInstruction(
                    self.names.fresh(f"param_{len(operands)}"), Opcode.PARAMETER, outer.shape,
                    parameter_number=len(operands), parent=fused)
                operands.append(outer)
                fused.instructions.append(params[outer])
            return params[outer]

        values = self._inline(first, fused, parameter)
        return fused, operands, values, self._inline(
            second, fused, lambda outer: _bound(outer, first, values) or parameter(outer))

    def _fusion(self, fused: HloComputation, outputs: list[HloInstruction],
                operands: list[HloInstruction], location) -> HloInstruction:
        """A ``kLoop`` fusion of ``fused``, whose root becomes the tuple of ``outputs``."""
        root = HloInstruction(self.names.fresh("tuple"), Opcode.TUPLE,
                              TupleShape(tuple(o.shape for o in outputs)), operands=outputs,
                              parent=fused)
        fused.instructions.append(root)
        fused.root = root
        self.fused.append(fused)
        return HloInstruction(self.names.fresh("multi_output_fusion"), Opcode.FUSION, root.shape,
                              operands=operands,
                              attrs={"kind": Identifier("kLoop"), "calls": fused},
                              location=location, parent=self.comp)

    def _inline(self, inst: HloInstruction, fused: HloComputation, bind) -> list[HloInstruction]:
        """Copies of ``inst``'s computation in ``fused`` (its operands as ``bind`` gives
        them); the copies of its outputs."""
        if inst.opcode != Opcode.FUSION:
            return [self._copy(inst, fused, [bind(op) for op in inst.operands])]
        copies: dict[HloInstruction, HloInstruction] = {}
        for member in inst.calls.instructions:
            if member.opcode == Opcode.PARAMETER:
                copies[member] = bind(inst.operands[member.param_number])
            elif member is not inst.calls.root or member.opcode != Opcode.TUPLE:
                copies[member] = self._copy(member, fused,
                                            [copies[op] for op in member.operands])
        return [copies[o] for o in _outputs(inst)]

    def _copy(self, inst: HloInstruction, fused: HloComputation,
              operands: list[HloInstruction]) -> HloInstruction:
        # every field of inst, then the changed ones; the name stays (the producer and the
        # consumer leave the module, so each member lives on in one computation only) unless
        # the other kernel's computation already gave it to a copy: names are only unique
        # within a computation, and two fused computations often share theirs ("c", "add")
        copy = object.__new__(HloInstruction)
        copy.__dict__.update(inst.__dict__)
        if copy.name in self.fused_names:
            copy.name = self.names.fresh(inst.name)
        self.fused_names.add(copy.name)
        copy.operands = operands
        copy.attrs = dict(inst.attrs)
        copy.parent = fused
        fused.instructions.append(copy)
        return copy

    def _replace(self, producer: HloInstruction, consumer: HloInstruction,
                 fusion: HloInstruction, count: int) -> None:
        """``fusion`` takes the consumer's place: the consumer's readers read its first
        ``count`` outputs (a multi-output consumer's get-tuple-elements now read the fusion),
        the producer's other readers the rest (a multi-output producer's get-tuple-elements
        move to the fusion, ``count`` on)."""
        self._place_fusion(fusion, self.pos[consumer])
        first = fusion if consumer.shape.is_tuple else self._element(fusion, 0)
        if producer.shape.is_tuple:
            self._move_elements(producer, fusion, count, consumer)
        else:
            self._redirect(producer, self._element(fusion, count), consumer)
        self._redirect(consumer, first, None)
        for op in dict.fromkeys(fusion.operands):
            self.users[op] = [u for u in self.users[op]
                              if u is not producer and u is not consumer] + [fusion]

    def _element(self, fusion: HloInstruction, k: int) -> HloInstruction:
        """A get-tuple-element of output ``k``, placed right after the fusion."""
        elements = fusion.tuple_shape.elements
        gte = HloInstruction(self.names.fresh(Opcode.GET_TUPLE_ELEMENT), Opcode.GET_TUPLE_ELEMENT,
                             elements[k], operands=[fusion], attrs={"index": k},
                             parent=self.comp)
        self.pos[gte] = self.pos[fusion] + (k + 1) / (len(elements) + 1)
        self.users[gte] = []
        self.users[fusion].append(gte)
        self.comp.instructions.append(gte)
        return gte


def _bound(outer: HloInstruction, producer: HloInstruction,
           values: list[HloInstruction]) -> HloInstruction | None:
    """The copy in the merged computation of the producer's result ``outer`` reads (the
    producer itself, or one of its get-tuple-elements); None for any other operand."""
    if outer is producer:
        return values[0]
    if outer.opcode == Opcode.GET_TUPLE_ELEMENT and outer.operands[0] is producer:
        return values[outer.index]
    return None


def _target(inst: HloInstruction) -> HloInstruction | None:
    """The operand a window kernel writes its update into, in place: a bare
    dynamic-update-slice's operand 0, or that of a ``kLoop`` fusion rooted at one on a
    parameter it updates in place; None for any other instruction."""
    if inst.opcode == Opcode.DYNAMIC_UPDATE_SLICE:
        return inst.operands[0] if inst.array_shape.element_count >= 2 else None
    if inst.opcode != Opcode.FUSION or str(inst.attrs.get("kind")) != "kLoop" \
            or inst.calls.root_instruction.opcode != Opcode.DYNAMIC_UPDATE_SLICE or inst.shape.is_tuple:
        return None
    pairs = in_place_pairs(inst)
    return inst.operands[pairs[0].operand_number] if pairs else None


def _body(inst: HloInstruction) -> list[HloInstruction]:
    return inst.calls.instructions if inst.opcode == Opcode.FUSION else [inst]
