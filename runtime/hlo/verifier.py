"""Module verification: per-instruction shape rules plus module-level invariants.

Runs after parsing (and after every pass in tests). Each failure is an ``HloVerifyError``
located at the instruction (or the header entry) at fault, naming what was expected and what
was found, in XLA's vocabulary where XLA has one.
"""

from __future__ import annotations

from ..errors import HloError, HloVerifyError, SourceLocation
from .ir import HloComputation, HloInstruction, HloModule
from .opcodes import OPCODES
from .shape import ArrayShape, compatible, index_text, is_valid_index, subshape
from .shape_inference import ShapeError


def verify(module: HloModule) -> None:
    if module.entry is None:
        raise HloVerifyError("the module has no ENTRY computation")
    for comp in module.computations:
        verify_computation(module, comp)
    _verify_entry_layout(module)
    _verify_aliasing(module)


def _located(module: HloModule, inst: HloInstruction, message: str, **kwargs) -> HloVerifyError:
    return HloVerifyError(message, location=_loc(module, inst.location),
                          instruction=inst.name, computation=inst.parent.name if inst.parent else None,
                          **kwargs)


def _loc(module: HloModule, loc: SourceLocation | None) -> SourceLocation | None:
    if loc is None:
        return None
    if not loc.source_line and module.source_lines:
        return SourceLocation(loc.line, loc.column, module.source_line(loc.line))
    return loc


def verify_computation(module: HloModule, comp: HloComputation) -> None:
    params = [i for i in comp.instructions if i.opcode == "parameter"]
    numbers = sorted(i.parameter_number for i in params)  # type: ignore[type-var]
    seen: dict[int, HloInstruction] = {}
    for p in params:
        assert p.parameter_number is not None
        if p.parameter_number in seen:
            raise _located(module, p, f"parameter number {p.parameter_number} is used twice in "
                           f"computation {comp.name} (also by {seen[p.parameter_number].name})")
        seen[p.parameter_number] = p
    for expected, got in enumerate(numbers):
        if got != expected:
            p = seen[got]
            raise _located(module, p, f"parameter numbers of computation {comp.name} must be "
                           f"0..{len(numbers) - 1} without gaps; parameter({expected}) is missing",
                           expected=f"parameter({expected})", got=f"parameter({got})")
    names: set[str] = set()
    for inst in comp.instructions:
        if inst.name in names:
            raise _located(module, inst, f"instruction already exists: {inst.name}")
        names.add(inst.name)
        verify_instruction(module, inst)


def verify_instruction(module: HloModule, inst: HloInstruction) -> None:
    spec = OPCODES[inst.opcode]
    n = len(inst.operands)
    if n < spec.min_operands or (spec.max_operands is not None and n > spec.max_operands):
        raise _located(module, inst, f"{inst.opcode} expects {spec.arity_text} operands, but has "
                       f"{n} operands", expected=spec.arity_text, got=str(n))
    for op in inst.operands:
        if op.parent is not inst.parent:
            raise _located(module, inst, f"operand {op.name} belongs to another computation")
    try:
        inferred = spec.shape_rule(inst)
    except ShapeError as e:
        raise _located(module, inst, f"{inst.opcode} {inst.name}: {e.message}",
                       expected=e.expected, got=e.got) from None
    except HloError:
        raise
    except (AttributeError, KeyError, TypeError, IndexError, ValueError) as e:
        raise _located(module, inst, f"{inst.opcode} {inst.name} has malformed operands or "
                       f"attributes ({type(e).__name__}: {e})") from None
    if not compatible(inferred, inst.shape):
        raise _located(module, inst,
                       f"{inst.opcode} {inst.name} has shape {inst.shape.to_text(False)}, but its "
                       f"operands give {inferred.to_text(False)}",
                       expected=inferred.to_text(False), got=inst.shape.to_text(False))
    if inst.opcode == "constant" and inst.literal is not None and inst.literal.elided:
        note = (f"constant {inst.name} was printed elided as {{...}}: its values are unknown "
                "and it cannot be run")
        if note not in module.warnings:
            module.warnings.append(note)


def _verify_entry_layout(module: HloModule) -> None:
    if module.entry_computation_layout is None:
        return
    params, result = module.entry_computation_layout
    entry = module.entry
    assert entry is not None
    got = entry.parameter_shapes
    if len(params) != len(got):
        raise HloVerifyError(f"entry_computation_layout lists {len(params)} parameters, but the "
                             f"entry computation {entry.name} has {len(got)}",
                             expected=str(len(got)), got=str(len(params)), computation=entry.name)
    for i, (a, b) in enumerate(zip(params, got)):
        if not compatible(a, b):
            raise HloVerifyError(f"entry_computation_layout parameter {i} is {a.to_text(False)}, "
                                 f"but parameter({i}) of {entry.name} is {b.to_text(False)}",
                                 expected=b.to_text(False), got=a.to_text(False),
                                 computation=entry.name)
    if not compatible(result, entry.result_shape):
        raise HloVerifyError(f"entry_computation_layout result is {result.to_text(False)}, but "
                             f"{entry.name} returns {entry.result_shape.to_text(False)}",
                             expected=entry.result_shape.to_text(False),
                             got=result.to_text(False), computation=entry.name)


def _verify_aliasing(module: HloModule) -> None:
    entry = module.entry
    assert entry is not None
    params = entry.parameters
    out_shape = entry.result_shape
    outputs_seen: dict[tuple[int, ...], object] = {}
    params_seen: dict[tuple[int, tuple[int, ...]], object] = {}
    for a in module.input_output_alias:
        where = _loc(module, a.location)
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
        outputs_seen[a.output_index] = a
        params_seen[key] = a
    donors_seen: set[tuple[int, tuple[int, ...]]] = set()
    for d in module.buffer_donors:
        where = _loc(module, d.location)
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
        if key in params_seen:
            note = (f"parameter {d.parameter_number} at {index_text(d.parameter_index)} is both "
                    f"aliased in input_output_alias and a buffer_donor")
            if note not in module.warnings:
                module.warnings.append(note)
