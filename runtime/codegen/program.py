"""One OpenCL program per module: kernels deduplicated by text, deterministic source.

Kernels are registered with a placeholder name; identical text means identical kernel, so the
first registration names it (``k<n>_<instruction>``, numbered in schedule order) and later ones
reuse it. Array constants that live inside fused computations (XLA emits them as globals) go
into one embedded-constant blob, aligned like the arena, uploaded once per executable.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field

import numpy as np

from ..hlo.ir import HloInstruction
from ..hlo.packing import to_storage
from ..hlo.shape import ArrayShape
from . import cltypes, templates
from .kernel import EMBEDDED, SCALAR_DTYPES, BufferRef, KernelBuilder
from .plan import NestedLoop, Step, iter_launches, iter_steps

_PLACEHOLDER = "__KERNEL__"
# the argument bytes every OpenCL device takes (CL_DEVICE_MAX_PARAMETER_SIZE is at least 1024;
# PoCL reports 1024, NVIDIA 4352): launches merged or chained into one stay within it, less
# what predication's guard adds (a selector buffer and two ints)
MAX_PARAMETER_BYTES = 1024 - 32
_IDENT = re.compile(r"[^A-Za-z0-9_]")


@dataclass
class Program:
    source: str
    kernel_names: list[str]
    embedded: bytes
    plan: list[Step]
    options: tuple[str, ...]
    kernel_instructions: dict[str, list[str]] = field(default_factory=dict)
    kernel_texts: dict[str, str] = field(default_factory=dict)     # name -> its source

    @property
    def source_hash(self) -> str:
        return hashlib.sha256(self.source.encode()).hexdigest()[:16]


def parameter_bytes(kernel_text: str) -> int:
    """The bytes of a kernel's arguments (its source's first line), each aligned to its size."""
    total = 0
    for param in _params(kernel_text):
        kind = param.rpartition(" ")[0]
        size = 8 if kind.endswith("*") else SCALAR_DTYPES[kind].itemsize
        total = -(-total // size) * size + size
    return total


def _params(kernel_text: str) -> list[str]:
    header = kernel_text.split("\n", 1)[0]
    return header[header.index("(") + 1:header.rindex(")")].split(", ")


class ProgramBuilder:
    def __init__(self, alignment: int = 128, subtracting_loop_pragma: str = "") -> None:
        self.alignment = alignment
        self.subtracting_loop_pragma = subtracting_loop_pragma
        self._by_text: dict[str, str] = {}
        self._texts: list[str] = []
        self.names: list[str] = []
        self.uses_fp64 = False
        self.embedded = bytearray()
        self._embedded_at: dict[int, int] = {}
        self._zeros_at: dict[int, int] = {}
        self._blocks_at: dict[bytes, int] = {}
        self.kernel_instructions: dict[str, list[str]] = {}
        self._functions: dict[str, str] = {}     # kernel name -> the kernel as a function

    def add_kernel(self, kb: KernelBuilder, *instructions: str) -> str:
        self.uses_fp64 |= kb.uses_fp64
        return self.add_text(kb.render(_PLACEHOLDER, self.subtracting_loop_pragma),
                             list(instructions))

    def add_text(self, text: str, instructions: list[str]) -> str:
        """A kernel's source, named ``__KERNEL__`` (deduplicated by text), for ``instructions``."""
        name = self._by_text.get(text)
        if name is None:
            name = f"k{len(self.names)}_{_IDENT.sub('_', instructions[0])[:40]}"
            self._by_text[text] = name
            self._texts.append(text.replace(_PLACEHOLDER, name, 1))
            self.names.append(name)
            self.kernel_instructions[name] = []
        self.kernel_instructions[name].extend(instructions)
        return name

    def kernel_text(self, name: str) -> str:
        return self._texts[self.names.index(name)]

    def kernel_params(self, name: str) -> list[str]:
        """The kernel's parameter declarations, in order."""
        return _params(self.kernel_text(name))

    def parameter_bytes(self, kernel: str) -> int:
        return parameter_bytes(self.kernel_text(kernel))

    def add_function(self, kernel: str) -> str:
        """The kernel as a function of its arguments and its work-item's global ids
        (``launch_merging``, ``launch_chaining``): ``get_global_id(d)`` is the function's
        ``mg_id<d>``."""
        function = f"{kernel}_part"
        if kernel not in self._functions:
            text = self.kernel_text(kernel)
            body = text.split("\n", 1)[1]
            params = ", ".join(_params(text))
            for d in range(3):
                body = body.replace(f"get_global_id({d})", f"mg_id{d}")
            self._functions[kernel] = (f"void {function}({params}, long mg_id0, long mg_id1, "
                                       f"long mg_id2) {{\n" + body)
        return function

    def add_guarded(self, kernel: str, buffers: int, pred: bool, instructions: list[str]) -> str:
        """``kernel`` returning at once unless a selector in device memory selects it
        (``predication``): a buffer argument after its ``buffers`` buffers and, after its
        scalars, the wanted value (a pred: 1 or 0; an index: the branch number) and, for an
        index, the branch count (out of range selects the last branch, as XLA's does). A guard
        added to a guarded kernel is tested before the ones it has. A launch with the
        work bound (the first scalar) 0 reads no selector either: the warm-up binds a
        one-byte scratch buffer to every buffer argument."""
        text = self.kernel_text(kernel)
        body = text.split("\n", 1)[1]
        params = _params(text)
        bound = params[2 * buffers].rpartition(" ")[2]
        g = f"gd{sum(p.endswith('_gbase') for p in params)}"
        scalars = [f"int {g}_want"] + ([] if pred else [f"int {g}_count"])
        params = [*params[:2 * buffers], f"__global const uchar* {g}_gbase", f"ulong {g}_off",
                  *params[2 * buffers:], *scalars]
        if pred:
            test = f"  if ({bound} != 0 && ({g}_gbase[{g}_off] != 0) != {g}_want) return;"
        else:
            test = (f"  if ({bound} != 0) {{\n"
                    f"    int {g}_v = *(__global const int*)({g}_gbase + {g}_off);\n"
                    f"    if ({g}_v < 0 || {g}_v >= {g}_count) {g}_v = {g}_count - 1;\n"
                    f"    if ({g}_v != {g}_want) return;\n  }}")
        lines = [f"__kernel void {_PLACEHOLDER}(" + ", ".join(params) + ") {", test, body]
        return self.add_text("\n".join(lines), instructions)

    def embed(self, inst: HloInstruction) -> BufferRef:
        """Place an array constant in the embedded blob (physical layout), once per instruction."""
        if id(inst) not in self._embedded_at:
            shape = inst.shape
            assert isinstance(shape, ArrayShape) and inst.literal is not None
            data = np.asarray(inst.literal.data, dtype=shape.element_type.numpy)
            physical = np.ascontiguousarray(data.transpose(tuple(reversed(shape.minor_to_major))))
            pad = (-len(self.embedded)) % self.alignment
            self.embedded.extend(b"\0" * pad)
            self._embedded_at[id(inst)] = len(self.embedded)
            self.embedded.extend(to_storage(physical, shape.element_type).tobytes())
        return BufferRef(EMBEDDED, self._embedded_at[id(inst)])

    def embed_bytes(self, data: bytes) -> BufferRef:
        """``data`` in the embedded blob (once however often it is asked for): a chained
        launch's block of arguments (``launch_chaining``)."""
        key = hashlib.sha256(data).digest()
        if key not in self._blocks_at:
            pad = (-len(self.embedded)) % self.alignment
            self.embedded.extend(b"\0" * pad)
            self._blocks_at[key] = len(self.embedded)
            self.embedded.extend(data)
        return BufferRef(EMBEDDED, self._blocks_at[key])

    def zeros(self, nbytes: int) -> BufferRef:
        """At least ``nbytes`` zero bytes in the embedded blob (one region per power-of-two
        size, shared by every kernel that asks): what a kernel reads in place of an operand's
        elements that are not there, such as a convolution's padding."""
        size = 1 << max(0, nbytes - 1).bit_length()
        if size not in self._zeros_at:
            pad = (-len(self.embedded)) % self.alignment
            self.embedded.extend(b"\0" * pad)
            self._zeros_at[size] = len(self.embedded)
            self.embedded.extend(b"\0" * size)
        return BufferRef(EMBEDDED, self._zeros_at[size])

    def finish(self, plan: list[Step]) -> Program:
        """The program of ``plan``: kernels no launch uses any more (merged into another's
        launch, ``launch_merging``) are left out, and so not compiled."""
        assert not any(isinstance(s, NestedLoop) for s in iter_steps(plan)), \
            "a loop deferred by a device-loop attempt reached the finished plan"
        used = {step.kernel for step in iter_launches(plan)}
        kept = [(name, text) for name, text in zip(self.names, self._texts) if name in used]
        body = "\n\n".join([*self._functions.values(), *(text for _, text in kept)])
        parts = [templates.FP_CONTRACT_OFF]
        if self.uses_fp64 or "double" in body:
            parts.append(cltypes.FP64_PRAGMA)
        prelude = cltypes.prelude_for(cltypes.helpers_used(body))
        if prelude:
            parts.append(prelude)
        parts.append(body)
        return Program(source="\n\n".join(parts) + "\n", kernel_names=[n for n, _ in kept],
                       embedded=bytes(self.embedded), plan=plan, options=(),
                       kernel_instructions={n: self.kernel_instructions[n] for n, _ in kept},
                       kernel_texts=dict(kept))
