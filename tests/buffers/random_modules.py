"""Random HLO modules (as text) for property tests of buffer assignment.

DAGs of elementwise ops, reshape/bitcast round trips, tuple/get-tuple-element, in-place
dynamic-update-slice, calls from several sites, while loops (state elements passed through,
swapped, duplicated, updated elementwise or in place, nested loops) and conditionals, with
outputs that repeat values or return parameters and constants, and random
input_output_alias / buffer_donor headers. Every array is f32[4] (16 bytes), so any output can
alias any parameter. Values stay small integers so the two interpreters agree bit for bit.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import strategies as st

F4 = "f32[4]"


@dataclass
class Scope:
    """A computation being written: its lines and the f32[4] values it can use."""

    lines: list[str] = field(default_factory=list)
    values: list[str] = field(default_factory=list)


class ModuleWriter:
    def __init__(self, draw) -> None:
        self.draw = draw
        self.counter = 0
        self.computations: list[str] = []
        self.entry_loops: list[tuple[str, str]] = []   # (while name, state shape) in the entry

    def fresh(self, base: str) -> str:
        self.counter += 1
        return f"{base}.{self.counter}"

    def pick(self, scope: Scope) -> str:
        return self.draw(st.sampled_from(scope.values))

    def emit(self, scope: Scope, line: str, name: str, keep: bool = True) -> str:
        scope.lines.append(f"  {name} = {line}")
        if keep:
            scope.values.append(name)
        return name

    def constant(self, scope: Scope) -> str:
        xs = self.draw(st.lists(st.integers(-3, 3), min_size=4, max_size=4))
        return self.emit(scope, f"{F4} constant({{{', '.join(map(str, xs))}}})", self.fresh("c"))

    def ops(self, scope: Scope, count: int, depth: int) -> None:
        kinds = ["unary", "binary", "binary", "constant", "reshape", "tuple", "dus", "call"]
        if depth < 2:
            kinds += ["while", "while", "conditional"]
        for _ in range(count):
            getattr(self, "_" + self.draw(st.sampled_from(kinds)))(scope, depth)

    def _unary(self, scope: Scope, depth: int) -> None:
        op = self.draw(st.sampled_from(["negate", "abs", "copy"]))
        self.emit(scope, f"{F4} {op}({self.pick(scope)})", self.fresh(op))

    def _binary(self, scope: Scope, depth: int) -> None:
        op = self.draw(st.sampled_from(["add", "subtract", "multiply", "maximum", "minimum"]))
        self.emit(scope, f"{F4} {op}({self.pick(scope)}, {self.pick(scope)})", self.fresh(op))

    def _constant(self, scope: Scope, depth: int) -> None:
        self.constant(scope)

    def _reshape(self, scope: Scope, depth: int) -> None:
        square = self.emit(scope, f"f32[2,2] reshape({self.pick(scope)})", self.fresh("r"), keep=False)
        back = self.draw(st.sampled_from(["reshape", "bitcast"]))
        self.emit(scope, f"{F4} {back}({square})", self.fresh(back))

    def _tuple(self, scope: Scope, depth: int) -> None:
        a, b = self.pick(scope), self.pick(scope)
        t = self.emit(scope, f"({F4}, {F4}) tuple({a}, {b})", self.fresh("t"), keep=False)
        k = self.draw(st.integers(0, 1))
        self.emit(scope, f"{F4} get-tuple-element({t}), index={k}", self.fresh("gte"))

    def _dus(self, scope: Scope, depth: int) -> None:
        start = self.draw(st.integers(0, 3))
        piece = self.emit(scope, f"f32[1] slice({self.pick(scope)}), slice={{[{start}:{start + 1}]}}",
                          self.fresh("piece"), keep=False)
        at = self.emit(scope, f"s32[] constant({self.draw(st.integers(0, 3))})", self.fresh("i"),
                       keep=False)
        self.emit(scope, f"{F4} dynamic-update-slice({self.pick(scope)}, {piece}, {at})",
                  self.fresh("dus"))

    def helper(self) -> str:
        """A computation called from several places (flattening must clone it)."""
        name = "helper"
        if not any(c.startswith(f"{name} ") for c in self.computations):
            self.computations.append(f"{name} {{\n  hp = {F4} parameter(0)\n"
                                     f"  ROOT hs = {F4} add(hp, hp)\n}}\n")
        return name

    def _call(self, scope: Scope, depth: int) -> None:
        self.emit(scope, f"{F4} call({self.pick(scope)}), to_apply={self.helper()}",
                  self.fresh("call"))

    def _while(self, scope: Scope, depth: int) -> None:
        width = self.draw(st.integers(1, 3))
        elements = [self.pick(scope) for _ in range(width)]
        state_shape = "(s32[], " + ", ".join([F4] * width) + ")"
        trips = self.draw(st.integers(0, 3))
        cond, body = self.fresh("cond"), self.fresh("body")
        self.computations.append(
            f"{cond} {{\n  cp = {state_shape} parameter(0)\n  cc = s32[] get-tuple-element(cp), index=0\n"
            f"  cn = s32[] constant({trips})\n  ROOT clt = pred[] compare(cc, cn), direction=LT\n}}\n")
        inner = Scope()
        inner.lines.append(f"  bp = {state_shape} parameter(0)")
        for k in range(width):
            self.emit(inner, f"{F4} get-tuple-element(bp), index={k + 1}", self.fresh("bg"))
        counter = self.emit(inner, "s32[] get-tuple-element(bp), index=0", self.fresh("bc"), keep=False)
        one = self.emit(inner, "s32[] constant(1)", self.fresh("one"), keep=False)
        step = self.emit(inner, f"s32[] add({counter}, {one})", self.fresh("next"), keep=False)
        self.ops(inner, self.draw(st.integers(0, 4)), depth + 1)
        results = [self.pick(inner) for _ in range(width)]
        inner.lines.append(f"  ROOT broot = {state_shape} tuple({step}, {', '.join(results)})")
        self.computations.append(f"{body} {{\n" + "\n".join(inner.lines) + "\n}\n")
        zero = self.emit(scope, "s32[] constant(0)", self.fresh("zero"), keep=False)
        init = self.emit(scope, f"{state_shape} tuple({zero}, {', '.join(elements)})",
                         self.fresh("init"), keep=False)
        loop = self.emit(scope, f"{state_shape} while({init}), condition={cond}, body={body}",
                         self.fresh("while"), keep=False)
        for k in range(width):
            self.emit(scope, f"{F4} get-tuple-element({loop}), index={k + 1}", self.fresh("w"))
        if depth == 0:
            self.entry_loops.append((loop, state_shape))

    def _conditional(self, scope: Scope, depth: int) -> None:
        piece = self.emit(scope, f"f32[1] slice({self.pick(scope)}), slice={{[0:1]}}",
                          self.fresh("p"), keep=False)
        scalar = self.emit(scope, f"f32[] reshape({piece})", self.fresh("s"), keep=False)
        zero = self.emit(scope, "f32[] constant(0)", self.fresh("z"), keep=False)
        pred = self.emit(scope, f"pred[] compare({scalar}, {zero}), direction=GT", self.fresh("pr"),
                         keep=False)
        branches, operands = [], []
        for _ in range(2):
            width = self.draw(st.integers(1, 2))
            shape = "(" + ", ".join([F4] * width) + ")"
            operands.append(self.emit(
                scope, f"{shape} tuple({', '.join(self.pick(scope) for _ in range(width))})",
                self.fresh("arg"), keep=False))
            inner = Scope()
            inner.lines.append(f"  ap = {shape} parameter(0)")
            for k in range(width):
                self.emit(inner, f"{F4} get-tuple-element(ap), index={k}", self.fresh("ag"))
            self.ops(inner, self.draw(st.integers(0, 2)), depth + 1)
            results = ", ".join(self.pick(inner) for _ in range(2))
            inner.lines.append(f"  ROOT aroot = ({F4}, {F4}) tuple({results})")
            name = self.fresh("branch")
            self.computations.append(f"{name} {{\n" + "\n".join(inner.lines) + "\n}\n")
            branches.append(name)
        result = self.emit(
            scope, f"({F4}, {F4}) conditional({pred}, {operands[0]}, {operands[1]}), "
                   f"true_computation={branches[0]}, false_computation={branches[1]}",
            self.fresh("cond"), keep=False)
        for k in range(2):
            self.emit(scope, f"{F4} get-tuple-element({result}), index={k}", self.fresh("cg"))


@st.composite
def random_modules(draw) -> tuple[str, int]:
    """(HLO text, number of parameters)."""
    writer = ModuleWriter(draw)
    entry = Scope()
    params = draw(st.integers(1, 3))
    for n in range(params):
        writer.emit(entry, f"{F4} parameter({n})", f"p{n}")
    if draw(st.booleans()):
        writer.constant(entry)
    writer.ops(entry, draw(st.integers(1, 8)), 0)
    if writer.entry_loops and draw(st.booleans()):
        loop, shape = writer.entry_loops[-1]
        entry.lines.append(f"  ROOT out = {shape} copy({loop})")
        body = "ENTRY main {\n" + "\n".join(entry.lines) + "\n}\n"
        return "HloModule random\n\n" + "\n".join(writer.computations) + "\n" + body, params
    outputs = [writer.pick(entry) for _ in range(draw(st.integers(1, 4)))]
    tuple_root = len(outputs) > 1 or draw(st.booleans())
    if tuple_root:
        entry.lines.append(f"  ROOT out = ({', '.join([F4] * len(outputs))}) tuple({', '.join(outputs)})")
    else:
        entry.lines.append(f"  ROOT out = {F4} negate({outputs[0]})")
    free = list(range(params))
    aliases = []
    for k in range(len(outputs) if tuple_root else 1):
        if free and draw(st.booleans()):
            p = free.pop(draw(st.integers(0, len(free) - 1)))
            kind = draw(st.sampled_from(["may-alias", "must-alias"]))
            index = f"{{{k}}}" if tuple_root else "{}"
            aliases.append(f"{index}: {p}" if not tuple_root and draw(st.booleans())
                           else f"{index}: ({p}, {{}}, {kind})")
    donors = [f"({p}, {{}})" for p in free if draw(st.booleans())]
    header = "HloModule random"
    if aliases:
        header += ", input_output_alias={ " + ", ".join(aliases) + " }"
    if donors:
        header += ", buffer_donor={ " + ", ".join(donors) + " }"
    body = "ENTRY main {\n" + "\n".join(entry.lines) + "\n}\n"
    return header + "\n\n" + "\n".join(writer.computations) + "\n" + body, params
