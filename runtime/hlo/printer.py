"""HLO text from an ``HloModule``, in XLA's optimised-dump style.

The output is canonical: ``%`` on every name, signatures on every computation, callees before
callers, attributes in the order they were written. Parsing the output and printing again
gives the same text, which is the round-trip property the tests check.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from .attributes import quote_string
from .opcodes import ATTRIBUTE_KINDS
from .shape import index_text
from .opcode_enum import Opcode

if TYPE_CHECKING:     # the IR calls the printer (HloModule.to_text)
    from .ir import HloComputation, HloInstruction, HloModule

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*")


def module_to_text(module: HloModule) -> str:
    out = [header_text(module), ""]
    if module.stack_frames:
        out += [module.stack_frames, ""]
    for comp in module.computations:
        out.append(computation_to_text(comp))
        out.append("")
    return "\n".join(out)


def header_text(module: HloModule) -> str:
    name = module.name if _IDENTIFIER.fullmatch(module.name) else quote_string(module.name)
    parts = [f"HloModule {name}"]
    if module.is_scheduled:
        parts.append("is_scheduled=true")
    if module.input_output_alias:
        entries = ", ".join(
            f"{index_text(a.output_index)}: ({a.parameter_number}, {index_text(a.parameter_index)}, "
            f"{a.kind})" for a in module.input_output_alias)
        parts.append("input_output_alias={ " + entries + " }")
    if module.buffer_donors:
        entries = ", ".join(f"({d.parameter_number}, {index_text(d.parameter_index)})"
                            for d in module.buffer_donors)
        parts.append("buffer_donor={ " + entries + " }")
    if module.entry_computation_layout is not None:
        params, result = module.entry_computation_layout
        parts.append("entry_computation_layout={(" + ", ".join(p.to_text() for p in params)
                     + ")->" + result.to_text() + "}")
    for key, value in module.header_attrs.items():
        parts.append(f"{key}={_value_text(value)}")
    return ", ".join(parts)


def computation_to_text(comp: HloComputation) -> str:
    head = ("ENTRY " if comp.is_entry else "") + f"%{comp.name} {comp.signature_text()} {{"
    lines = [head]
    for inst in comp.instructions:
        lines.append("  " + instruction_to_text(inst))
    tail = "}"
    if comp.execution_thread is not None:
        tail += f", execution_thread={quote_string(comp.execution_thread)}"
    lines.append(tail)
    return "\n".join(lines)


def instruction_to_text(inst: HloInstruction) -> str:
    root = "ROOT " if inst.is_root else ""
    if inst.opcode == Opcode.PARAMETER:
        args = str(inst.parameter_number)
    elif inst.opcode == Opcode.CONSTANT:
        args = inst.literal.to_text() if inst.literal is not None else ""
    else:
        args = ", ".join(f"%{op.name}" for op in inst.operands)
    text = f"{root}%{inst.name} = {inst.shape.to_text()} {inst.opcode}({args})"
    for key, value in inst.attrs.items():
        text += f", {key}={attribute_text(key, value)}"
    return text


def attribute_text(key: str, value: object) -> str:
    kind = ATTRIBUTE_KINDS.get(key)
    if isinstance(value, (tuple, list)):
        if kind == "int_list":
            return "{" + ",".join(str(v) for v in value) + "}"
        if kind in ("computation_list", "instruction_list"):
            return "{" + ", ".join(f"%{c.name}" for c in value) + "}"
        if kind == "shape_list":
            return "{" + ", ".join(s.to_text() for s in value) + "}"
    if kind == "computation" and isinstance(value, _Named):
        return f"%{value.name}"
    return _value_text(value)


@runtime_checkable
class _Named(Protocol):
    """A computation, which attributes refer to by name (the IR imports this module, so the
    printer knows it by this shape only)."""

    @property
    def name(self) -> str: ...


def _value_text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        text = repr(value)
        return text[:-2] if text.endswith(".0") else text
    if isinstance(value, str):
        return quote_string(value)
    to_text = getattr(value, "to_text", None)
    if to_text is not None:
        return str(to_text())
    raise TypeError(f"cannot print attribute value {value!r}")
