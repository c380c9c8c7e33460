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
from ..hlo.shape import ArrayShape
from . import cltypes, templates
from .kernel import EMBEDDED, BufferRef, KernelBuilder
from .plan import Step

_PLACEHOLDER = "__KERNEL__"
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
        self.kernel_instructions: dict[str, list[str]] = {}

    def add_kernel(self, kb: KernelBuilder, instruction: str) -> str:
        text = kb.render(_PLACEHOLDER, self.subtracting_loop_pragma)
        name = self._by_text.get(text)
        if name is None:
            name = f"k{len(self.names)}_{_IDENT.sub('_', instruction)[:40]}"
            self._by_text[text] = name
            self._texts.append(text.replace(_PLACEHOLDER, name, 1))
            self.names.append(name)
            self.kernel_instructions[name] = []
        self.kernel_instructions[name].append(instruction)
        self.uses_fp64 |= kb.uses_fp64
        return name

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
            self.embedded.extend(physical.tobytes())
        return BufferRef(EMBEDDED, self._embedded_at[id(inst)])

    def finish(self, plan: list[Step]) -> Program:
        body = "\n\n".join(self._texts)
        parts = [templates.FP_CONTRACT_OFF]
        if self.uses_fp64 or "double" in body:
            parts.append(cltypes.FP64_PRAGMA)
        prelude = cltypes.prelude_for(cltypes.helpers_used(body))
        if prelude:
            parts.append(prelude)
        parts.append(body)
        return Program(source="\n\n".join(parts) + "\n", kernel_names=list(self.names),
                       embedded=bytes(self.embedded), plan=plan, options=(),
                       kernel_instructions=self.kernel_instructions,
                       kernel_texts=dict(zip(self.names, self._texts)))
