"""Building one OpenCL kernel's source and its launch arguments together.

A kernel's text must depend only on the *structure* of what it computes (opcodes, element
types, ranks, which dimensions map where), never on sizes, strides, offsets or constant
values: those become kernel arguments. Then every instruction that differs only in sizes
shares one kernel, and PoCL (which compiles each kernel at its first launch, ~70-100 ms)
compiles it once. ``KernelBuilder`` enforces that by construction: numbers enter the text only
through ``param``/``scalar``, which return argument names and record the values for the launch.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

import numpy as np

from ..buffers.slices import BufferRef
from ..hlo.dtypes import ElementType
from ..hlo.shape import Shape
from . import cltypes

# numpy dtypes of scalar kernel arguments, keyed by their OpenCL C type
SCALAR_DTYPES: dict[str, np.dtype] = {
    "char": np.dtype(np.int8), "uchar": np.dtype(np.uint8), "short": np.dtype(np.int16),
    "ushort": np.dtype(np.uint16), "int": np.dtype(np.int32), "uint": np.dtype(np.uint32),
    "long": np.dtype(np.int64), "ulong": np.dtype(np.uint64), "float": np.dtype(np.float32),
    "double": np.dtype(np.float64),
}


EMBEDDED = -1

# buffer arguments are a<k>, index arguments n<k>, other scalar arguments s<k>
_ARGUMENT_PREFIXES = frozenset({"a", "n", "s"})


@dataclass
class BufferArg:
    name: str
    element_type: ElementType
    writable: bool
    ref: BufferRef


@dataclass
class KernelBuilder:
    """Accumulates declarations, statements and arguments of one kernel."""

    index_type: str = "int"
    buffers: list[BufferArg] = field(default_factory=list)
    scalars: list[tuple[str, str, object]] = field(default_factory=list)   # (ctype, name, value)
    body: list[str] = field(default_factory=list)
    helpers: set[str] = field(default_factory=set)
    uses_fp64: bool = False
    _depth: int = 1
    _counter: int = 0
    _params: dict[object, str] = field(default_factory=dict)
    _subtracting_loops: list[int] = field(default_factory=list)   # their ``for`` lines

    # --- arguments --------------------------------------------------------------------------
    def buffer(self, et: ElementType, ref: BufferRef, writable: bool = False,
               key: object = None) -> str:
        """A typed pointer to ``ref``; ``key`` lets two reads of one operand share the argument."""
        if key is not None and ("buf", key) in self._params:
            return self._params[("buf", key)]
        name = f"a{len(self.buffers)}"
        self.buffers.append(BufferArg(name, et, writable, ref))
        self._note_type(et)
        if key is not None:
            self._params[("buf", key)] = name
        return name

    def param(self, value: int, key: object = None) -> str:
        """An index-typed argument (a size, stride or offset). ``key`` deduplicates by meaning,
        never by value, so the text stays independent of the numbers."""
        if key is not None and ("param", key) in self._params:
            return self._params[("param", key)]
        name = f"n{len(self.scalars)}"
        self.scalars.append((self.index_type, name, int(value)))
        if key is not None:
            self._params[("param", key)] = name
        return name

    def scalar(self, ctype: str, value: object, key: object = None) -> str:
        if key is not None and ("scalar", key) in self._params:
            return self._params[("scalar", key)]
        name = f"s{len(self.scalars)}"
        self.scalars.append((ctype, name, value))
        if ctype == "double":
            self.uses_fp64 = True
        if key is not None:
            self._params[("scalar", key)] = name
        return name

    def _note_type(self, et: ElementType) -> None:
        if cltypes.needs_fp64(et):
            self.uses_fp64 = True

    # --- statements -------------------------------------------------------------------------
    def fresh(self, prefix: str = "v") -> str:
        """A new local name; the arguments' own prefixes (``a``, ``n``, ``s`` and a number)
        get an underscore, so a local never shadows an argument."""
        self._counter += 1
        if prefix in _ARGUMENT_PREFIXES:
            prefix += "_"
        return f"{prefix}{self._counter}"

    def line(self, text: str) -> None:
        self.body.append("  " * self._depth + text)

    def let(self, ctype: str, expr: str, prefix: str = "v") -> str:
        """Declare a new variable holding ``expr`` and return its name."""
        name = self.fresh(prefix)
        self.line(f"{ctype} {name} = {expr};")
        return name

    def declare(self, ctype: str, prefix: str = "v", init: str | None = None) -> str:
        name = self.fresh(prefix)
        self.line(f"{ctype} {name}" + (f" = {init};" if init is not None else ";"))
        return name

    @contextlib.contextmanager
    def block(self, header: str, subtracting: bool = False):
        """A C block; ``subtracting``: a loop whose float accumulation may compile to
        ``acc - x`` (``render`` puts the target's ``subtracting_loop_pragma`` before it)."""
        if subtracting:
            self._subtracting_loops.append(len(self.body))
        self.line(header + " {")
        self._depth += 1
        try:
            yield
        finally:
            self._depth -= 1
            self.line("}")

    # --- output -----------------------------------------------------------------------------
    def signature_args(self) -> list[str]:
        args = []
        for b in self.buffers:
            args.append(f"__global uchar* {b.name}_base")
            args.append(f"ulong {b.name}_off")
        for ctype, name, _ in self.scalars:
            args.append(f"{ctype} {name}")
        return args

    def render(self, name: str, subtracting_loop_pragma: str = "") -> str:
        """The kernel's source, the pragma before each loop opened as ``subtracting``."""
        lines = [f"__kernel void {name}(" + ", ".join(self.signature_args()) + ") {"]
        for b in self.buffers:
            st = cltypes.storage_type(b.element_type)
            const = "" if b.writable else "const "
            lines.append(f"  __global {const}{st}* {b.name} = "
                         f"(__global {const}{st}*)({b.name}_base + {b.name}_off);")
        marked = set(self._subtracting_loops) if subtracting_loop_pragma else set()
        for i, line in enumerate(self.body):
            if i in marked:
                lines.append(line[:len(line) - len(line.lstrip())] + subtracting_loop_pragma)
            lines.append(line)
        lines.append("}")
        return "\n".join(lines)

    def scalar_arg_values(self) -> list[np.generic]:
        return [SCALAR_DTYPES[ctype].type(value) for ctype, _, value in self.scalars]


def argument_value(et: ElementType, value) -> np.generic:
    """A scalar of ``et`` as the kernel argument of its compute type (f16/bf16 widen to float,
    exactly; pred becomes 0/1). ``value`` may be any one-element array (an ``f32[1]``
    constant's literal)."""
    ctype = cltypes.compute_type(et)
    return SCALAR_DTYPES[ctype].type(np.asarray(value).reshape(()).astype(SCALAR_DTYPES[ctype]))


def needs_long_index(*shapes: Shape) -> bool:
    """32-bit index arithmetic suffices unless some tensor has 2^31 elements or more."""
    return any(not s.is_tuple and s.element_count >= 2 ** 31 - 1 for s in shapes)
