"""Module verification: per-instruction shape rules plus module-level invariants.

Runs after parsing (and after every pass in tests). Each failure is an ``HloVerifyError``
located at the instruction (or the header entry, or the signature) at fault, naming what was
expected and what was found, in XLA's vocabulary where XLA has one.
"""

from __future__ import annotations

from ..errors import HloVerifyError
from .ir import HloComputation, HloInstruction, HloModule
from .opcodes import ATTRIBUTE_VALUES, OPCODES
from .shape import ArrayShape, Shape, compatible, index_text, is_valid_index, subshape
from .shape_inference import ShapeError, check_operand_types
from .opcode_enum import Opcode


def verify(module: HloModule) -> None:
    if module.entry is None:
        raise HloVerifyError("the module has no ENTRY computation")
    for comp in module.computations:
        verify_computation(comp)
    _verify_entry_layout(module)
    _verify_aliasing(module)


def infer_shape(inst: HloInstruction) -> Shape:
    """The instruction's result shape by its opcode's rule (checking its operands and
    attributes), or a located ``HloVerifyError`` saying what is wrong with them."""
    spec = OPCODES[inst.opcode]
    try:
        shape = spec.shape_rule(inst)
        if spec.operand_types is not None:
            check_operand_types(inst, spec.operand_types)
        return shape
    except ShapeError as e:
        raise _located(inst, f"{inst.opcode} {inst.name}: {e.message}",
                       expected=e.expected, got=e.got) from None


def _located(inst: HloInstruction, message: str, *, expected: str | None = None,
             got: str | None = None) -> HloVerifyError:
    return HloVerifyError(message, location=inst.location,
                          instruction=inst.name, computation=inst.parent.name if inst.parent else None,
                          expected=expected, got=got)


def verify_computation(comp: HloComputation) -> None:
    _verify_parameter_numbers(comp)
    names: set[str] = set()
    for inst in comp.instructions:
        if inst.name in names:
            raise _located(inst, f"instruction already exists: {inst.name}")
        names.add(inst.name)
        verify_instruction(inst)
    _verify_signature(comp)


def _verify_parameter_numbers(comp: HloComputation) -> None:
    """Numbers must be exactly 0..n-1 (XLA crashes on a gap rather than reporting it)."""
    seen: dict[int, HloInstruction] = {}
    for p in comp.instructions:
        if p.opcode != Opcode.PARAMETER:
            continue
        number = p.parameter_number
        if number is None or number < 0:
            raise _located(p, f"parameter {p.name} has no valid parameter number")
        if number in seen:
            raise _located(p, f"parameter number {number} is used twice in computation "
                           f"{comp.name} (also by {seen[number].name})")
        seen[number] = p
    for expected in range(len(seen)):
        if expected not in seen:
            p = seen[min(n for n in seen if n > expected)]
            raise _located(p, f"parameter numbers of computation {comp.name} must be "
                           f"0..{len(seen) - 1} without gaps; parameter({expected}) is missing",
                           expected=f"parameter({expected})", got=f"parameter({p.parameter_number})")


def _verify_signature(comp: HloComputation) -> None:
    """A written signature's result must agree with the root, as XLA's parser requires. Its
    parameter list is not checked: XLA reads it and takes the parameters from the body's
    ``parameter(N)`` instructions (``ENTRY main () -> f32[6]`` with two parameters parses),
    and so does this runtime (the parser warns when the two disagree)."""
    sig = comp.signature
    if sig is None:
        return
    root = comp.root
    assert root is not None
    if not compatible(sig.result.shape, root.shape):
        raise HloVerifyError(
            f"Shape of computation {comp.name}, {sig.result.shape.to_text(False)}, is not "
            f"compatible with that of its root instruction {root.name}, "
            f"{root.shape.to_text(False)}", location=sig.result.location,
            computation=comp.name, expected=root.shape.to_text(False),
            got=sig.result.shape.to_text(False))


def verify_instruction(inst: HloInstruction) -> None:
    spec = OPCODES[inst.opcode]
    n = len(inst.operands)
    if n < spec.min_operands or (spec.max_operands is not None and n > spec.max_operands):
        raise _located(inst, f"{inst.opcode} expects {spec.arity_text} operands, but has "
                       f"{n} operands", expected=spec.arity_text, got=str(n))
    for op in inst.operands:
        if op.parent is not inst.parent:
            raise _located(inst, f"operand {op.name} belongs to another computation")
    for name, value in inst.attrs.items():
        allowed = ATTRIBUTE_VALUES.get(name)
        if allowed is not None and str(value) not in allowed:
            raise _located(inst, f"{name}={value} is not one of {', '.join(sorted(allowed))}",
                           expected=" | ".join(sorted(allowed)), got=str(value))
    inferred = infer_shape(inst)
    if not compatible(inferred, inst.shape):
        raise _located(inst,
                       f"{inst.opcode} {inst.name} has shape {inst.shape.to_text(False)}, but its "
                       f"operands give {inferred.to_text(False)}",
                       expected=inferred.to_text(False), got=inst.shape.to_text(False))


def _verify_entry_layout(module: HloModule) -> None:
    if module.entry_computation_layout is None:
        return
    params, result = module.entry_computation_layout
    entry = module.entry
    assert entry is not None
    where = module.attribute_locations.get("entry_computation_layout")
    got = entry.parameter_shapes
    if len(params) != len(got):
        raise HloVerifyError(f"entry_computation_layout lists {len(params)} parameters, but the "
                             f"entry computation {entry.name} has {len(got)}", location=where,
                             expected=str(len(got)), got=str(len(params)), computation=entry.name)
    for i, (a, b) in enumerate(zip(params, got)):
        if not compatible(a, b):
            raise HloVerifyError(f"entry_computation_layout parameter {i} is {a.to_text(False)}, "
                                 f"but parameter({i}) of {entry.name} is {b.to_text(False)}",
                                 location=where, expected=b.to_text(False), got=a.to_text(False),
                                 computation=entry.name)
    if not compatible(result, entry.result_shape):
        raise HloVerifyError(f"entry_computation_layout result is {result.to_text(False)}, but "
                             f"{entry.name} returns {entry.result_shape.to_text(False)}",
                             location=where, expected=entry.result_shape.to_text(False),
                             got=result.to_text(False), computation=entry.name)


def _verify_aliasing(module: HloModule) -> None:
    entry = module.entry
    assert entry is not None
    params = entry.parameters
    out_shape = entry.result_shape
    outputs_seen: set[tuple[int, ...]] = set()
    params_seen: set[tuple[int, tuple[int, ...]]] = set()
    for a in module.input_output_alias:
        where = a.location
        if not is_valid_index(out_shape, a.output_index):
            raise HloVerifyError(f"input_output_alias output index {index_text(a.output_index)} is "
                                 f"not valid for the entry result {out_shape.to_text(False)}",
                                 location=where)
        if not 0 <= a.parameter_number < len(params):
            raise HloVerifyError(f"input_output_alias names parameter {a.parameter_number}, but "
                                 f"the entry computation has {len(params)} parameters",
                                 location=where, expected=f"0..{len(params) - 1}",
                                 got=str(a.parameter_number))
        pshape = params[a.parameter_number].shape
        if not is_valid_index(pshape, a.parameter_index):
            raise HloVerifyError(f"input_output_alias parameter index {index_text(a.parameter_index)} "
                                 f"is not valid for parameter {a.parameter_number} of shape "
                                 f"{pshape.to_text(False)}", location=where)
        out_sub = subshape(out_shape, a.output_index)
        in_sub = subshape(pshape, a.parameter_index)
        if out_sub.is_tuple or in_sub.is_tuple or not out_sub.is_array or not in_sub.is_array:
            raise HloVerifyError(f"input_output_alias entry {index_text(a.output_index)} must alias "
                                 f"arrays, not {in_sub.to_text(False)} and {out_sub.to_text(False)}",
                                 location=where)
        assert isinstance(out_sub, ArrayShape) and isinstance(in_sub, ArrayShape)
        if out_sub.is_unbounded or in_sub.is_unbounded:
            raise HloVerifyError(f"input_output_alias entry {index_text(a.output_index)} aliases a "
                                 f"shape with an unbounded dimension, which has no size",
                                 location=where)
        if out_sub.byte_size != in_sub.byte_size:
            raise HloVerifyError(
                f"Expected aliased input {a.parameter_number} at index "
                f"{index_text(a.parameter_index)} and output at index {index_text(a.output_index)} "
                f"to have the same size. Input sub-shape is {in_sub} with size {in_sub.byte_size}, "
                f"output sub-shape is {out_sub} with size {out_sub.byte_size}",
                location=where, expected=f"{out_sub.byte_size} bytes", got=f"{in_sub.byte_size} bytes")
        if a.output_index in outputs_seen:
            raise HloVerifyError(f"output {index_text(a.output_index)} is aliased twice in "
                                 f"input_output_alias", location=where)
        key = (a.parameter_number, a.parameter_index)
        if key in params_seen:
            raise HloVerifyError(f"parameter {a.parameter_number} at {index_text(a.parameter_index)} "
                                 f"is aliased to two outputs in input_output_alias", location=where)
        outputs_seen.add(a.output_index)
        params_seen.add(key)
    _verify_donors(module, params, params_seen)


def _verify_donors(module: HloModule, params: list[HloInstruction],
                   aliased: set[tuple[int, tuple[int, ...]]]) -> None:
    donors_seen: set[tuple[int, tuple[int, ...]]] = set()
    for d in module.buffer_donors:
        where = d.location
        if not 0 <= d.parameter_number < len(params):
            raise HloVerifyError(f"buffer_donor names parameter {d.parameter_number}, but the entry "
                                 f"computation has {len(params)} parameters", location=where,
                                 expected=f"0..{len(params) - 1}", got=str(d.parameter_number))
        pshape = params[d.parameter_number].shape
        if not is_valid_index(pshape, d.parameter_index):
            raise HloVerifyError(f"buffer_donor index {index_text(d.parameter_index)} is not valid "
                                 f"for parameter {d.parameter_number} of shape "
                                 f"{pshape.to_text(False)}", location=where)
        key = (d.parameter_number, d.parameter_index)
        if key in donors_seen:
            raise HloVerifyError(f"buffer_donor lists parameter {d.parameter_number} at "
                                 f"{index_text(d.parameter_index)} twice", location=where)
        donors_seen.add(key)
        if key in aliased:
            note = (f"parameter {d.parameter_number} at {index_text(d.parameter_index)} is both "
                    f"aliased in input_output_alias and a buffer_donor")
            if note not in module.warnings:
                module.warnings.append(note)
