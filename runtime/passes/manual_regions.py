"""shard_map regions of a module before partitioning, each made one host step that runs the
region once per device on its shard.

JAX prints a shard_map as a ``call`` of the region's body between boundary custom calls:
Shardy's ``xla.sdy.GlobalToLocalShape`` (its ``xla.sdy.in_shardings``) and
``xla.sdy.LocalToGlobalShape`` (``xla.sdy.out_shardings``), or the older ``Sharding`` ->
``SPMDFullToShardShape`` and ``Sharding`` -> ``SPMDShardToFullShape`` chains (the shardings
are the outer ``Sharding``'s and the ``SPMDShardToFullShape``'s ``sharding=``). The body is
written for one device of the mesh: local shapes, collectives over the mesh's device ids,
``partition-id`` for the device. The call and its boundaries become one custom-call to
``REGION_TARGET`` from the global operands to the global results, carrying a
``ManualRegion``: the body as a module of its own with ``num_partitions`` = the mesh's
devices (its collectives become exchanges, ``spmd_collectives``). Its host step
(``custom_calls.manual_region``) slices each operand per its in-sharding, runs the body on
every device with ``run_spmd`` and puts each result together per its out-sharding, which is
what XLA's partitioned program computes. A device not named by a sharding's tiles gets the
whole array; a result replicated over devices is taken from the first device holding it in
the mesh's order (the copy JAX reads).

Everything else about shardings changes no value on one device: ``Sharding`` and
``xla.sdy.FuncResultSharding`` custom calls become their operand. What cannot be run exactly is a located ``HloUnsupportedError``: a
boundary outside this pattern, a shard_map inside another one, uneven tiles, a collective
outside every region of a module sharded over several devices.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import HloUnsupportedError
from ..hlo.attributes import RawText
from ..hlo.clone import clone_module
from ..hlo.ir import HloComputation, HloInstruction, HloModule
from ..hlo.opcode_enum import Opcode
from ..hlo.opcodes import OPCODES
from ..hlo.sdy import Mesh, frontend_attributes, meshes, parse_sdy_shardings
from ..hlo.sharding import HloSharding, ShardingSyntaxError, parse_sharding
from ..hlo.shape import ArrayShape, Shape, TupleShape, compatible
from ..target import CPU, Target
from .names import FreshNames

REGION_TARGET = "hlo_magic.manual_region"
SHARDING = "Sharding"
# annotations that compute their operand: a sharding constraint, a function result's sharding
ANNOTATIONS = (SHARDING, "xla.sdy.FuncResultSharding")
GLOBAL_TO_LOCAL = ("xla.sdy.GlobalToLocalShape", "SPMDFullToShardShape")
LOCAL_TO_GLOBAL = ("xla.sdy.LocalToGlobalShape", "SPMDShardToFullShape")


@dataclass(frozen=True, eq=False)
class ManualRegion:
    """One shard_map region (the ``region`` attribute of its custom-call): ``module`` is the
    body, run on ``devices`` partitions; each operand is sliced per ``in_shardings`` and
    each result assembled per ``out_shardings`` (tiled or replicated, ``devices`` ids)."""

    instruction: str
    module: HloModule
    devices: int
    in_shardings: tuple[HloSharding, ...]
    out_shardings: tuple[HloSharding, ...]

    def to_text(self) -> str:
        ins = ", ".join(s.to_text() for s in self.in_shardings)
        outs = ", ".join(s.to_text() for s in self.out_shardings)
        return (f"{{body={self.module.entry_computation.name}, devices={self.devices}, "
                f"in={{{ins}}}, out={{{outs}}}}}")


def outline_manual_regions_in_place(module: HloModule, target: Target = CPU) -> None:
    try:
        known = meshes(_text(module.header_attrs.get("frontend_attributes")))
    except ShardingSyntaxError as error:
        raise HloUnsupportedError(f"module {module.name}: its xla.sdy.meshes attribute: "
                                  f"{error}") from None
    if _is_multi_device(module):
        _inline_whole_boundaries(module, known)
        _drop_sharding_calls(module)
        return
    regions = _outline_from_entry(module, known)
    if regions:
        _drop_uncalled(module)
    for inst in module.instructions():
        if _target(inst) in GLOBAL_TO_LOCAL + LOCAL_TO_GLOBAL:
            raise _unsupported(inst, "a shard_map boundary that is not around a call of the "
                               "region's body (the form JAX prints) is not supported")
    _drop_sharding_calls(module)
    if regions or _sharded(module):
        _refuse_collectives_outside_regions(module)


# --- finding a region ------------------------------------------------------------------------

def _target(inst: HloInstruction) -> str | None:
    if inst.opcode != Opcode.CUSTOM_CALL:
        return None
    return str(inst.attrs.get("custom_call_target", ""))


def _source(op: HloInstruction) -> tuple[HloInstruction, int] | None:
    """(the GlobalToLocal boundary, its operand index) a call operand comes from."""
    if op.opcode == Opcode.GET_TUPLE_ELEMENT and _target(op.operands[0]) in GLOBAL_TO_LOCAL:
        index = op.attrs.get("index")
        return op.operands[0], index if isinstance(index, int) else 0
    if _target(op) in GLOBAL_TO_LOCAL:
        return op, 0
    return None


def _outline_from_entry(module: HloModule, known: dict[str, Mesh]) -> int:
    """Outline the regions of every computation the entry reaches, callers first, so the
    body of a region (whose own boundaries belong to its module) is never searched here;
    the number outlined."""
    names = FreshNames(module)
    regions = 0
    seen: set[int] = set()
    stack = [module.entry_computation]
    while stack:
        comp = stack.pop()
        if id(comp) in seen:
            continue
        seen.add(id(comp))
        users = comp.users()
        calls = [i for i in comp.instructions if i.opcode == Opcode.CALL
                 and (any(_source(op) is not None for op in i.operands)
                      or not i.operands and _ends_in_boundary(i, users))]
        for call in calls:
            _outline(module, comp, call, known, names)
            regions += 1
        stack.extend(c for i in comp.instructions for c in i.called_computations)
    return regions


def _ends_in_boundary(call: HloInstruction, users: dict[int, list[HloInstruction]]) -> bool:
    """Whether a result of ``call`` goes to a LocalToGlobal boundary (a shard_map without
    operands, such as JAX's ``axis_index`` outside one, has no GlobalToLocal)."""
    holders = [call] + [u for u in users[id(call)] if u.opcode == Opcode.GET_TUPLE_ELEMENT]
    for holder in holders:
        for user in users[id(holder)]:
            if _target(user) == LOCAL_TO_GLOBAL[0] or (_target(user) == SHARDING and any(
                    _target(u) == LOCAL_TO_GLOBAL[1] for u in users[id(user)])):
                return True
    return False


def _outline(module: HloModule, comp: HloComputation, call: HloInstruction,
             known: dict[str, Mesh], names: FreshNames) -> None:
    users = comp.users()
    internal: set[int] = {id(call)}
    operands, in_shardings = [], []
    for op in call.operands:
        source = _source(op)
        if source is None:
            raise _unsupported(call, f"operand {op.name} of a shard_map body's call does not "
                               "come through a GlobalToLocalShape boundary like the others")
        boundary, index = source
        internal.update({id(op), id(boundary)})
        value, sharding, extra = _in_side(boundary, index, known)
        internal.update(extra)
        operands.append(value)
        in_shardings.append(sharding)
    results = _call_results(call, users, internal)
    ends: dict[int, tuple[HloInstruction, dict[int, int]]] = {}   # endpoint: {element: result}
    out_shardings: dict[int, tuple[HloSharding, Shape]] = {}
    for k, value in enumerate(results):
        for user in users[id(value)]:
            end, m, sharding, extra = _out_side(call, value, user, known, users)
            internal.update(extra)
            taken = ends.setdefault(id(end), (end, {}))[1]
            if k in out_shardings or m in taken:
                raise _unsupported(call, f"result {k} of the region leaves it twice")
            out_shardings[k] = (sharding, _element(end.shape, m))
            taken[m] = k
    if sorted(out_shardings) != list(range(len(results))):
        missing = sorted(set(range(len(results))) - set(out_shardings))
        raise _unsupported(call, f"results {missing} of the shard_map body do not leave it "
                           "through a LocalToGlobalShape boundary")
    devices = _device_count(call, in_shardings + [s for s, _ in out_shardings.values()])
    outs = [out_shardings[k] for k in range(len(results))]
    _check_tiles(call, [op.shape for op in operands], in_shardings,
                 [p.shape for p in _body(call).parameters], "operand")
    _check_tiles(call, [s for _, s in outs], [s for s, _ in outs],
                 [r.shape for r in results], "result")
    region = ManualRegion(call.name, _body_module(module, call, devices), devices,
                          tuple(in_shardings), tuple(s for s, _ in outs))
    _replace(comp, call, operands, [s for _, s in outs], region, ends, internal, users, names)


def _in_side(boundary: HloInstruction, index: int, known: dict[str, Mesh]
             ) -> tuple[HloInstruction, HloSharding, set[int]]:
    """(the global value, its in-sharding, the instructions between) of a GlobalToLocal."""
    if _target(boundary) == GLOBAL_TO_LOCAL[0]:
        shardings = _sdy(boundary, "xla.sdy.in_shardings", known)
        if index >= len(boundary.operands) or len(shardings) != len(boundary.operands):
            raise _unsupported(boundary, "its in_shardings do not give one sharding per operand")
        return boundary.operands[index], shardings[index], set()
    annotated = boundary.operands[0] if len(boundary.operands) == 1 else boundary
    if _target(annotated) != SHARDING or len(annotated.operands) != 1:
        raise _unsupported(boundary, "its operand is not the Sharding custom call giving the "
                           "region's in-sharding")
    return annotated.operands[0], _hlo_sharding(annotated), {id(annotated)}


def _call_results(call: HloInstruction, users: dict[int, list[HloInstruction]],
                  internal: set[int]) -> list[HloInstruction]:
    """The instructions holding each result of the body's call (the call or its GTEs)."""
    if not isinstance(call.shape, TupleShape):
        return [call]
    results: list[HloInstruction | None] = [None] * len(call.shape.elements)
    for user in users[id(call)]:
        index = user.attrs.get("index")
        if user.opcode != Opcode.GET_TUPLE_ELEMENT or not isinstance(index, int) \
                or not 0 <= index < len(results) or results[index] is not None:
            raise _unsupported(call, f"{user.name} uses the region's results other than "
                               "through one get-tuple-element each")
        results[index] = user
        internal.add(id(user))
    if any(r is None for r in results):
        raise _unsupported(call, "a result of the shard_map body is never used")
    return [r for r in results if r is not None]


def _out_side(call: HloInstruction, value: HloInstruction, user: HloInstruction,
              known: dict[str, Mesh], users: dict[int, list[HloInstruction]]
              ) -> tuple[HloInstruction, int, HloSharding, set[int]]:
    """(the LocalToGlobal endpoint ``value`` leaves through, the element of it ``value`` is
    (-1: the whole), its out-sharding, the instructions between)."""
    if _target(user) == LOCAL_TO_GLOBAL[0]:
        m = next(i for i, op in enumerate(user.operands) if op is value)
        shardings = _sdy(user, "xla.sdy.out_shardings", known)
        if len(shardings) != len(user.operands):
            raise _unsupported(user, "its out_shardings do not give one sharding per operand")
        return user, m if isinstance(user.shape, TupleShape) else -1, shardings[m], {id(user)}
    if _target(user) == SHARDING and len(users[id(user)]) == 1 \
            and _target(users[id(user)][0]) == LOCAL_TO_GLOBAL[1]:
        end = users[id(user)][0]
        return end, -1, _hlo_sharding(end), {id(user), id(end)}
    raise _unsupported(call, f"{user.name} uses a result of the shard_map body instead of a "
                       "LocalToGlobalShape boundary")


def _element(shape: Shape, m: int) -> Shape:
    return shape.elements[m] if isinstance(shape, TupleShape) and m >= 0 else shape


# --- checks ------------------------------------------------------------------------------------

def _device_count(call: HloInstruction, shardings: list[HloSharding]) -> int:
    for s in shardings:
        if s.kind not in ("tiled", "replicated") or any(k != "replicated"
                                                        for k, _ in s.subgroups):
            raise _unsupported(call, f"the shard_map sharding {s.to_text()} is neither tiled "
                               "nor replicated")
    counts = {s.device_count for s in shardings if s.device_count}
    if len(counts) != 1:
        raise _unsupported(call, "cannot tell the shard_map's devices from its shardings "
                           f"({', '.join(s.to_text() for s in shardings)})")
    devices = counts.pop()
    for s in shardings:
        if s.devices and sorted(s.devices) != list(range(devices)):
            raise _unsupported(call, f"the shard_map sharding {s.to_text()} does not name "
                               f"devices 0 to {devices - 1}")
    return devices


def _check_tiles(call: HloInstruction, globals_: list[Shape], shardings: list[HloSharding],
                 locals_: list[Shape], what: str) -> None:
    for k, (whole, s, local) in enumerate(zip(globals_, shardings, locals_)):
        if not isinstance(whole, ArrayShape) or not isinstance(local, ArrayShape):
            raise _unsupported(call, f"{what} {k} of the shard_map is not an array")
        tile = s.tile if s.kind == "tiled" else (1,) * len(whole.dims)
        if len(tile) != len(whole.dims) or any(d % t for d, t in zip(whole.dims, tile)) or \
                tuple(d // t for d, t in zip(whole.dims, tile)) != local.dims or \
                whole.element_type != local.element_type:
            raise _unsupported(call, f"{what} {k}: {whole.to_text(False)} split as "
                               f"{s.to_text()} does not give the body's "
                               f"{local.to_text(False)} on every device")


def _is_multi_device(module: HloModule) -> bool:
    counts = [module.header_attrs.get(k) for k in ("num_partitions", "replica_count")]
    return any(isinstance(n, int) and n > 1 for n in counts)


def _sharded(module: HloModule) -> bool:
    """Whether an annotation places a value on several devices (an unreadable one counts:
    the module may be written for several)."""
    for inst in module.instructions():
        text = _text(inst.attrs.get("sharding"))
        if text is None:
            continue
        try:
            sharding = parse_sharding(text)
        except ShardingSyntaxError:
            return True
        if any(s.device_count > 1 for s in (sharding, *sharding.elements)):
            return True
    return False


def _refuse_collectives_outside_regions(module: HloModule) -> None:
    for inst in module.instructions():
        if OPCODES[inst.opcode].one_device is not None:
            raise _unsupported(inst, "a collective outside every shard_map region of a module "
                               "sharded over several devices: its devices are the "
                               "partitioner's, which this one-device run does not reproduce")


# --- rewriting ---------------------------------------------------------------------------------

def _body_module(module: HloModule, call: HloInstruction, devices: int) -> HloModule:
    """The body of ``call`` as a module of its own, for ``devices`` partitions."""
    copy, mapping = clone_module(module)
    body = mapping.computation(_body(call))
    reachable = _reachable(body)
    copy.computations = [c for c in copy.computations if id(c) in reachable]
    for comp in copy.computations:
        comp.is_entry = comp is body
    copy.entry = body
    copy.name = f"{module.name}.{call.name}"
    copy.entry_computation_layout = None
    copy.input_output_alias, copy.buffer_donors = [], []
    copy.is_scheduled = False
    copy.header_attrs = {k: v for k, v in module.header_attrs.items()
                         if k not in ("entry_computation_layout", "replica_count")}
    copy.header_attrs["num_partitions"] = devices
    return copy


def _replace(comp: HloComputation, call: HloInstruction, operands: list[HloInstruction],
             shapes: list[Shape], region: ManualRegion,
             ends: dict[int, tuple[HloInstruction, dict[int, int]]], internal: set[int],
             users: dict[int, list[HloInstruction]], names: FreshNames) -> None:
    """``comp`` with the region's instructions replaced by one custom-call (and the
    get-tuple-elements each endpoint's users need)."""
    endpoints = set(ends)
    for inst in comp.instructions:
        if id(inst) in internal and id(inst) not in endpoints:
            for user in users[id(inst)]:
                if id(user) not in internal:
                    raise _unsupported(user, f"it uses {inst.name}, a value inside the "
                                       f"shard_map region of {call.name}")
    shape: Shape = shapes[0] if len(shapes) == 1 else TupleShape(tuple(shapes))
    step = HloInstruction(names.fresh(f"{call.name}.region"), Opcode.CUSTOM_CALL, shape,
                          list(operands), {"custom_call_target": REGION_TARGET,
                                           "region": region},
                          location=call.location, parent=comp)
    replaced: dict[int, HloInstruction] = {}
    out: list[HloInstruction] = []
    for inst in comp.instructions:
        if inst is call:
            out.append(step)
        if id(inst) not in internal:
            out.append(inst)
            continue
        if id(inst) not in endpoints:
            continue
        taken = ends[id(inst)][1]
        ks = [taken[m] for m in sorted(taken)]
        if isinstance(inst.shape, TupleShape) and len(shapes) > 1 and \
                ks == list(range(len(shapes))):
            value = step
        else:
            parts = [step if len(shapes) == 1 else _gte(step, k, shapes[k], names, out)
                     for k in ks]
            value = _tuple(inst, parts, names, out) if isinstance(inst.shape, TupleShape) \
                else parts[0]
        replaced[id(inst)] = value
    for inst in out:
        inst.operands = [replaced.get(id(op), op) for op in inst.operands]
    comp.instructions = out
    comp.root = replaced.get(id(comp.root), comp.root)


def _body(call: HloInstruction) -> HloComputation:
    body = call.attrs.get("to_apply")
    if not isinstance(body, HloComputation):
        raise _unsupported(call, "a shard_map body's call has no to_apply computation")
    return body


def _reachable(root: HloComputation) -> set[int]:
    """The ids of ``root`` and every computation it calls, directly or not."""
    found: set[int] = set()
    stack = [root]
    while stack:
        comp = stack.pop()
        if id(comp) not in found:
            found.add(id(comp))
            stack.extend(c for i in comp.instructions for c in i.called_computations)
    return found


def _drop_uncalled(module: HloModule) -> None:
    """Region bodies (and what only they call) that nothing calls any more: they live on in
    the regions' own modules."""
    reachable = _reachable(module.entry_computation)
    module.computations = [c for c in module.computations if id(c) in reachable]


def _gte(step: HloInstruction, k: int, shape: Shape, names: FreshNames,
         out: list[HloInstruction]) -> HloInstruction:
    inst = HloInstruction(names.fresh(f"{step.name}.{k}"), Opcode.GET_TUPLE_ELEMENT, shape,
                          [step], {"index": k}, location=step.location, parent=step.parent)
    out.append(inst)
    return inst


def _tuple(end: HloInstruction, parts: list[HloInstruction], names: FreshNames,
           out: list[HloInstruction]) -> HloInstruction:
    inst = HloInstruction(names.fresh(f"{end.name}.tuple"), Opcode.TUPLE,
                          TupleShape(tuple(p.shape for p in parts)), parts,
                          location=end.location, parent=end.parent)
    out.append(inst)
    return inst


def _inline_whole_boundaries(module: HloModule, known: dict[str, Mesh]) -> None:
    """Boundaries inside a region's body (run per device): a nested shard_map over the
    remaining axes (JAX writes ``axis_index`` of a partly manual shard_map so) whose
    shardings leave every value whole is each device's own computation, so its boundaries
    pass their operands on; any other is refused."""
    names = FreshNames(module)
    for comp in module.computations:
        replaced: dict[int, HloInstruction] = {}
        out: list[HloInstruction] = []
        for inst in comp.instructions:
            inst.operands = [replaced.get(id(op), op) for op in inst.operands]
            if _target(inst) not in GLOBAL_TO_LOCAL + LOCAL_TO_GLOBAL:
                out.append(inst)
                continue
            if not all(_whole(s) for s in _boundary_shardings(inst, known)):
                raise _unsupported(inst, "a shard_map boundary that splits a value inside "
                                   "another shard_map's body (a nested or partly manual "
                                   "shard_map over more axes) is not supported")
            ops = inst.operands
            if len(ops) == 1 and not isinstance(inst.shape, TupleShape):
                value = ops[0]
            else:
                value = _tuple(inst, list(ops), names, out)
            if value.shape.to_text(False) != inst.shape.to_text(False):
                raise _unsupported(inst, f"a shard_map boundary from {value.shape} to "
                                   f"{inst.shape} inside another shard_map's body")
            replaced[id(inst)] = value
        comp.instructions = out
        assert comp.root is not None
        comp.root = replaced.get(id(comp.root), comp.root)


def _boundary_shardings(inst: HloInstruction, known: dict[str, Mesh]) -> list[HloSharding]:
    target = _target(inst)
    if target == GLOBAL_TO_LOCAL[0]:
        return _sdy(inst, "xla.sdy.in_shardings", known)
    if target == LOCAL_TO_GLOBAL[0]:
        return _sdy(inst, "xla.sdy.out_shardings", known)
    shardings = [_hlo_sharding(inst)]
    if target == GLOBAL_TO_LOCAL[1] and inst.operands and _target(inst.operands[0]) == SHARDING:
        shardings.append(_hlo_sharding(inst.operands[0]))
    return shardings


def _whole(s: HloSharding) -> bool:
    """Whether every device holds the whole value under ``s``."""
    return s.kind in ("replicated", "manual") or (s.kind == "tiled" and set(s.tile) <= {1})


def _drop_sharding_calls(module: HloModule) -> None:
    """``Sharding`` and ``xla.sdy.FuncResultSharding`` custom calls annotate their operand
    and compute it: they are dropped, or become a copy where the result's layout is not the
    operand's (jit's result of a transpose: ``f32[16,16]{1,0}`` of an operand in ``{0,1}``)."""
    for comp in module.computations:
        for inst in comp.instructions:
            if _target(inst) in ANNOTATIONS and len(inst.operands) == 1 and \
                    inst.shape != inst.operands[0].shape and \
                    compatible(inst.shape, inst.operands[0].shape):
                inst.opcode = Opcode.COPY
                inst.attrs = {k: v for k, v in inst.attrs.items() if k == "metadata"}
        replaced = {id(i): i.operands[0] for i in comp.instructions
                    if _target(i) in ANNOTATIONS and len(i.operands) == 1
                    and i.shape == i.operands[0].shape}
        if not replaced:
            continue

        def value(inst: HloInstruction) -> HloInstruction:
            while id(inst) in replaced:
                inst = replaced[id(inst)]
            return inst
        for inst in comp.instructions:
            inst.operands = [value(op) for op in inst.operands]
        comp.instructions = [i for i in comp.instructions if id(i) not in replaced]
        assert comp.root is not None
        comp.root = value(comp.root)


# --- reading annotations -----------------------------------------------------------------------

def _text(value: object) -> str | None:
    return value.text if isinstance(value, RawText) else None


def _hlo_sharding(inst: HloInstruction) -> HloSharding:
    text = _text(inst.attrs.get("sharding"))
    if text is None:
        raise _unsupported(inst, "it has no sharding= annotation")
    try:
        return parse_sharding(text)
    except ShardingSyntaxError as error:
        raise _unsupported(inst, str(error)) from None


def _sdy(inst: HloInstruction, key: str, known: dict[str, Mesh]) -> list[HloSharding]:
    attrs = frontend_attributes(_text(inst.attrs.get("frontend_attributes")) or "{}")
    if key not in attrs:
        raise _unsupported(inst, f"it has no {key} frontend attribute")
    try:
        return parse_sdy_shardings(attrs[key], known)
    except ShardingSyntaxError as error:
        raise _unsupported(inst, str(error)) from None


def _unsupported(inst: HloInstruction, why: str) -> HloUnsupportedError:
    return HloUnsupportedError(
        f"{inst.opcode} {inst.name}: {why}", instruction=inst.name,
        computation=inst.parent.name if inst.parent else None, location=inst.location)
