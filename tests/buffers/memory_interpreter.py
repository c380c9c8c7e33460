"""Run a module twice: once in the memory a buffer assignment lays out, once with no sharing.

The memory run keeps one byte array per allocation and reads and writes every value at its
slice, exactly as the OpenCL executor will. Before an instruction runs, its output bytes are
filled with garbage unless it may legitimately overwrite an operand in place, so a value that
was wrongly given bytes still in use is destroyed and the results differ from the reference run.
Loops and conditionals run over the same buffers each iteration, with no moves: if the
assignment did not put loop state and branch results where they belong, results differ too.

Only the handful of opcodes the random and hand-written test modules use are implemented.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from runtime.analysis.call_graph import sequential_callees
from runtime.analysis.in_place import may_hand_off
from runtime.buffers.assignment import BufferAssignment
from runtime.hlo.ir import HloComputation, HloInstruction, HloModule
from runtime.hlo.shape import subshape

_COMPARE = {"EQ": np.equal, "NE": np.not_equal, "LT": np.less, "LE": np.less_equal,
            "GT": np.greater, "GE": np.greater_equal}


def _dus(inst: HloInstruction, xs: list[np.ndarray]) -> np.ndarray:
    out = xs[0].copy()
    update = xs[1]
    starts = [int(np.clip(int(i), 0, d - u)) for i, d, u in zip(xs[2:], out.shape, update.shape)]
    out[tuple(slice(s, s + u) for s, u in zip(starts, update.shape))] = update
    return out


def _dynamic_slice(inst: HloInstruction, xs: list[np.ndarray]) -> np.ndarray:
    sizes = inst.attrs["dynamic_slice_sizes"]
    starts = [int(np.clip(int(i), 0, d - s)) for i, d, s in zip(xs[1:], xs[0].shape, sizes)]
    return xs[0][tuple(slice(a, a + s) for a, s in zip(starts, sizes))].copy()


def _slice(inst: HloInstruction, xs: list[np.ndarray]) -> np.ndarray:
    spec = inst.attrs["slice"]
    return xs[0][tuple(slice(d.start, d.limit, d.stride) for d in spec.dims)].copy()


OPS: dict[str, Callable[[HloInstruction, list[np.ndarray]], np.ndarray]] = {
    "add": lambda i, xs: xs[0] + xs[1],
    "subtract": lambda i, xs: xs[0] - xs[1],
    "multiply": lambda i, xs: xs[0] * xs[1],
    "maximum": lambda i, xs: np.maximum(xs[0], xs[1]),
    "minimum": lambda i, xs: np.minimum(xs[0], xs[1]),
    "negate": lambda i, xs: -xs[0],
    "abs": lambda i, xs: np.abs(xs[0]),
    "copy": lambda i, xs: xs[0].copy(),
    "compare": lambda i, xs: _COMPARE[str(i.attrs["direction"])](xs[0], xs[1]),
    "select": lambda i, xs: np.where(xs[0], xs[1], xs[2]),
    "broadcast": lambda i, xs: np.broadcast_to(
        xs[0].reshape([i.shape.dims[d] if d in i.attrs["dimensions"] else 1
                       for d in range(len(i.shape.dims))]), i.shape.dims).copy(),
    "reshape": lambda i, xs: xs[0].reshape(i.shape.dims),
    "dynamic-update-slice": _dus,
    "dynamic-slice": _dynamic_slice,
    "slice": _slice,
}


def _constant(inst: HloInstruction) -> np.ndarray:
    assert inst.literal is not None
    return inst.literal.numpy()


def run_reference(module: HloModule, args: list[np.ndarray]) -> list[np.ndarray]:
    """The module's output leaves, computed with every value in its own array."""
    assert module.entry is not None

    def run(comp: HloComputation, params: list) -> object:
        env: dict[HloInstruction, object] = {}
        for inst in comp.instructions:
            op = inst.opcode
            xs = [env[o] for o in inst.operands]
            if op == "parameter":
                env[inst] = params[inst.parameter_number]
            elif op == "constant":
                env[inst] = _constant(inst)
            elif op == "tuple":
                env[inst] = tuple(xs)
            elif op == "get-tuple-element":
                env[inst] = xs[0][inst.attrs["index"]]
            elif op == "bitcast":
                env[inst] = xs[0].reshape(inst.shape.dims)
            elif op == "copy" and inst.shape.is_tuple:
                env[inst] = xs[0]
            elif op == "call":
                env[inst] = run(sequential_callees(inst)[0], xs)
            elif op == "while":
                condition, body = sequential_callees(inst)
                state = xs[0]
                while bool(run(condition, [state])):
                    state = run(body, [state])
                env[inst] = state
            elif op == "conditional":
                branches = sequential_callees(inst)
                k = _branch_index(xs[0], len(branches))
                env[inst] = run(branches[k], [xs[k + 1]])
            else:
                env[inst] = OPS[op](inst, xs)
        assert comp.root is not None
        return env[comp.root]

    return _leaves(run(module.entry, list(args)))


def _leaves(value: object) -> list[np.ndarray]:
    if isinstance(value, tuple):
        return [leaf for v in value for leaf in _leaves(v)]
    return [np.asarray(value)]


def _branch_index(selector: np.ndarray, n: int) -> int:
    if selector.dtype == np.bool_:
        return 0 if bool(selector) else 1
    k = int(selector)
    return k if 0 <= k < n else n - 1


class MemoryRun:
    """Executes ``ba.module`` over one byte array per allocation."""

    GARBAGE = 0x5A

    def __init__(self, ba: BufferAssignment) -> None:
        self.ba = ba
        self.memory = [np.full(a.size, self.GARBAGE, dtype=np.uint8) for a in ba.allocations]

    def read(self, inst: HloInstruction, index=()) -> np.ndarray:
        s = self.ba.slice(inst, index)
        shape = subshape(inst.shape, index)
        raw = self.memory[s.allocation][s.offset:s.offset + s.size]
        return raw.view(shape.element_type.numpy).reshape(shape.dims).copy()

    def write(self, inst: HloInstruction, value: np.ndarray) -> None:
        s = self.ba.slice(inst)
        data = np.ascontiguousarray(value, dtype=inst.shape.element_type.numpy)
        self.memory[s.allocation][s.offset:s.offset + s.size] = data.reshape(-1).view(np.uint8)

    def run(self, args: list[np.ndarray]) -> list[np.ndarray]:
        module = self.ba.module
        assert module.entry is not None and module.entry.root is not None
        for inst in module.instructions():
            if inst.opcode == "constant" and self.ba.dataflow.has_positions(inst):
                self.write(inst, _constant(inst))
        for param, arg in zip(module.entry.parameters, args):
            self.write(param, arg)
        self._run(module.entry)
        root = module.entry.root
        return [self.read(root, index) for index, shape in root.shape.leaves()]

    def _run(self, comp: HloComputation) -> None:
        for inst in self.ba.schedule.sequences[comp.name]:
            op = inst.opcode
            if op in ("parameter", "constant", "tuple", "get-tuple-element", "bitcast") or (
                    op == "copy" and inst.shape.is_tuple):
                continue    # they forward values or write only a tuple's pointer table
            if op == "call":
                self._run(sequential_callees(inst)[0])
            elif op == "while":
                condition, body = sequential_callees(inst)
                while True:
                    self._run(condition)
                    assert condition.root is not None
                    if not bool(self.read(condition.root)):
                        break
                    self._run(body)
            elif op == "conditional":
                branches = sequential_callees(inst)
                self._run(branches[_branch_index(self.read(inst.operands[0]), len(branches))])
            else:
                self._poison(inst)
                xs = [self.read(o) for o in inst.operands]
                self.write(inst, OPS[op](inst, xs))

    def _poison(self, inst: HloInstruction) -> None:
        """Garbage into the output bytes, unless an operand sharing them may be overwritten."""
        flow = self.ba.dataflow
        out = self.ba.slice(inst)
        result = flow.value_at(inst)
        for k, operand in enumerate(inst.operands):
            s = self.ba.slice(operand)
            shares = (s.allocation == out.allocation and s.offset < out.offset + out.size
                      and out.offset < s.offset + s.size)
            if shares and may_hand_off(flow, {flow.value_at(operand)}, result):
                return
        self.memory[out.allocation][out.offset:out.offset + out.size] = 0xA5
