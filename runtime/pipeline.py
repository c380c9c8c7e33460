"""The whole path from a verified module to its buffer assignment, in one visible list.

1. Optimisation passes (``OPTIMISATION``), on a copy of the module, given the device's
   ``Target``: they change what is computed and how. Each entry is (name, pass, whether it
   belongs to fusion): ``fusion=False`` skips the fusion passes, which gives one kernel per
   instruction (the reference behaviour tests compare against). The shard_map regions'
   outlining (each a host step running its body on every device), the collectives' rewrites
   (multi-device and one-device), the complex lowering, the stochastic-convert expansion,
   dynamic padding (kernels know no dynamic shape) and dead tuple elements (a dead
   rng-bit-generator held in a tuple is never lowered) always run: kernels know no
   collective, no complex type and no stochastic rounding (a multi-device collective is a
   host step exchanging data between devices, a one-device one a copy or zeros, complex
   values pairs of reals, FFTs dots, a stochastic-convert XLA's decomposition). Float
   normalization and the simplifier always run too: XLA always runs them, and they change
   values (a convert round trip through a type holding every value keeps a NaN's payload, a
   reduce of one element keeps -0), which must not depend on ``fusion``.
2. Pre-assignment passes, on another copy. First those that do not depend on donation
   (``COMMON_PREPARATION``: dead-code elimination, call-graph flattening, call and operand
   layouts), then, on a copy of that, those that do (``PREPARATION``): the donation plan
   (which aliases and donors apply), scheduling (the lowest simulated peak among post-order,
   the list scheduler and the module's own order when it is ``is_scheduled``), copy
   insertion. The result is a scheduled module: its instruction order is the schedule.
3. ``assign_buffers(module, schedule)`` on the prepared module.

``run`` does all three; ``buffer_assignment`` does 2 and 3. ``reassign`` (what a donation
toggle runs) starts from the plan's kept ``COMMON_PREPARATION`` result, so it redoes only
``PREPARATION`` and 3, sharing kernel bodies with the plans before it. Nothing here needs a
device: ``Target.for_kind(TargetKind.CPU)`` stands in for one.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import Callable

from .analysis.alias_analysis import AliasAnalysis
from .analysis.call_graph import CallGraph, sequential_computations
from .analysis.dataflow import Dataflow
from .analysis.memory_scheduler import choose_schedule
from .analysis.schedule import Schedule, build_schedule, text_order
from .analysis.schedule_basis import ScheduleBases
from .analysis.side_effects import SideEffects
from .buffers.assignment import BufferAssignment, assign_buffers, check_alignment
from .buffers.donation import AliasPlan, plan_aliasing
from .errors import HloArgumentError, HloUnsupportedError, internal_errors
from .gc_pause import with_gc_paused
from .hlo.clone import CloneMap, clone_module
from .hlo.ir import AliasEntry, HloInstruction, HloModule
from .hlo.verifier import verify
from .target import CPU, Target
from .passes.algebraic_rewrites import rewrite_float_algebra_in_place
from .passes.apply_schedule import schedule_in_place
from .passes.call_layouts import match_call_layouts
from .passes.cholesky_host_calls import cholesky_to_host_calls_in_place
from .passes.complex_lowering import lower_complex_in_place
from .passes.constant_divisors import multiply_by_reciprocals_in_place
from .passes.convolution_layout import relayout_convolution_kernels_in_place
from .passes.copy_insertion import insert_copies_in_place
from .passes.cse import cse_in_place
from .passes.dynamic_padding import pad_dynamic_shapes_in_place
from .passes.dce import remove_dead_code
from .passes.dot_operand_layouts import relayout_dot_operands_in_place
from .passes.contraction_upcast import upcast_narrow_contractions_in_place
from .passes.flatten_call_graph import flatten_in_place
from .passes.float_normalization import normalize_floats_in_place
from .passes.fusion import fuse_in_place
from .passes.inline_calls import inline_calls_in_place
from .passes.manual_regions import outline_manual_regions_in_place
from .passes.multi_output_fusion import multi_output_fuse_in_place
from .passes.one_device_collectives import rewrite_one_device_collectives_in_place
from .passes.operand_layouts import match_operand_layouts
from .passes.simplify import simplify_in_place
from .passes.spmd_collectives import rewrite_spmd_collectives_in_place
from .passes.split_reductions import split_reductions_in_place
from .passes.split_topk import split_topk_in_place
from .passes.stochastic_convert import expand_stochastic_converts_in_place
from .passes.transpose_folding import fold_transposes_in_place
from .passes.dead_tuple_elements import remove_dead_tuple_elements_in_place
from .passes.tree_reductions import tree_reductions_in_place

Pass = Callable[[HloModule, Target], None]

OPTIMISATION: list[tuple[str, Pass, bool]] = [
    ("manual-regions", outline_manual_regions_in_place, False),
    ("spmd-collectives", rewrite_spmd_collectives_in_place, False),
    ("one-device-collectives", rewrite_one_device_collectives_in_place, False),
    ("constant-divisors", multiply_by_reciprocals_in_place, False),
    ("algebraic-rewrites", rewrite_float_algebra_in_place, False),
    ("cholesky-host-calls", cholesky_to_host_calls_in_place, False),
    ("complex-lowering", lower_complex_in_place, False),
    ("stochastic-convert", expand_stochastic_converts_in_place, False),
    ("dynamic-padding", pad_dynamic_shapes_in_place, False),
    ("dead-tuple-elements", remove_dead_tuple_elements_in_place, False),
    ("float-normalization", normalize_floats_in_place, False),
    ("inline-calls", inline_calls_in_place, True),
    ("simplify", simplify_in_place, False),
    ("transpose-folding", fold_transposes_in_place, True),
    ("dot-operand-layouts", relayout_dot_operands_in_place, True),
    ("split-topk", split_topk_in_place, True),
    ("convolution-layout", relayout_convolution_kernels_in_place, True),
    ("contraction-upcast", upcast_narrow_contractions_in_place, True),
    ("tree-reductions", tree_reductions_in_place, False),
    ("fusion", fuse_in_place, True),
    ("cse", cse_in_place, True),
    ("multi-output-fusion", multi_output_fuse_in_place, True),
    ("split-reductions", split_reductions_in_place, True),
]


def optimise(module: HloModule, *, fusion: bool = True, target: Target = CPU) -> HloModule:
    """The module after the optimisation passes; the caller's module is never changed."""
    passes = [(name, run) for name, run, is_fusion in OPTIMISATION if fusion or not is_fusion]
    if not passes:
        return module
    new, _ = clone_module(module)
    for name, run in passes:
        with internal_errors(f"the {name} pass"):
            run(new, target)
    return new


@dataclass
class Prepared:
    """A module on its way to buffer assignment: after ``PREPARATION`` it is scheduled (its
    instruction order is ``schedule``), with the donation plan applied and copies inserted."""

    module: HloModule
    donation: AliasPlan
    schedule: Schedule | None = None
    call_graph: CallGraph | None = None     # of the finished module, for buffer assignment
    # has_side_effect's memo: the schedulers and copy insertion's dead-code elimination would
    # otherwise each walk every kernel body again
    effects: SideEffects = field(default_factory=dict)
    # a reassign's: the schedules kept for the module's donation sets, and each instruction
    # of ``prepare``'s source (``common``) -> its copy in ``module``
    bases: ScheduleBases | None = None
    copied: CloneMap | None = None


def _apply_donation(p: Prepared) -> None:
    """Only the aliases the plan applies, and only the donors it left unused, stay."""
    p.module.input_output_alias = p.donation.aliases
    unused = {(d.parameter_number, d.parameter_index) for d in p.donation.unused_donors}
    p.module.buffer_donors = [d for d in p.module.buffer_donors
                              if (d.parameter_number, d.parameter_index) in unused]


def _schedule(p: Prepared) -> None:
    """Order every sequential computation by the schedule of the lowest simulated peak: the
    kept basis's, where its orders hold for this donation set, else made afresh."""
    kept = p.bases.choose(p.module.input_output_alias) if p.bases is not None else None
    if kept is None:
        flow = Dataflow(p.module)
        p.schedule = choose_schedule(flow, AliasAnalysis(flow, p.module.input_output_alias),
                                     p.effects)
    else:
        chosen, basis = kept
        assert p.copied is not None
        p.effects.update(basis.effects)      # its kernel bodies' entries hold here too
        mine = p.copied.instructions
        computations = {c.name: c for c in p.module.computations}
        p.schedule = build_schedule(
            p.module, {computations[name]: [mine[basis.original[i]] for i in sequence]
                       for name, sequence in chosen.sequences.items()},
            chosen.scheduler, chosen.peaks)
    schedule_in_place(p.module, p.schedule.sequences)


def _copy_insertion(p: Prepared) -> None:
    """Copies go into the scheduled order; the schedule is the resulting module's order. The
    scheduler's call graph checked the kernels, and neither the new order nor the copies call
    anything: the call graphs here skip walking every kernel body again."""
    assert p.schedule is not None
    insert_copies_in_place(p.module, p.effects, CallGraph(p.module, check_kernels=False))
    p.call_graph = CallGraph(p.module, check_kernels=False)
    p.schedule = build_schedule(p.module, text_order(p.call_graph), p.schedule.scheduler,
                                p.schedule.peaks)


#: Passes that read neither ``input_output_alias`` nor ``buffer_donors``: run once per module
#: (``prepare_common``), their result kept for every donation set ``reassign`` plans.
COMMON_PREPARATION: list[tuple[str, Callable[[HloModule], None]]] = [
    ("dce", remove_dead_code),
    ("flatten-call-graph", flatten_in_place),
    ("call-layouts", match_call_layouts),
    ("operand-layouts", match_operand_layouts),
]

#: Passes whose result depends on the donation set, run for each one.
PREPARATION: list[tuple[str, Callable[[Prepared], None]]] = [
    ("apply-donation", _apply_donation),
    ("schedule", _schedule),
    ("copy-insertion", _copy_insertion),
]


def prepare_common(module: HloModule) -> HloModule:
    """``COMMON_PREPARATION`` on a copy of ``module`` (verified first, so a malformed module or
    an alias that cannot be honoured is a located ``HloVerifyError``)."""
    assert module.entry is not None
    verify(module)
    _reject_unbounded_shapes(module)
    common = clone_module(module)[0]
    for name, step in COMMON_PREPARATION:
        with internal_errors(f"the {name} pass"):
            step(common)
    return common


def prepare(common: HloModule, plan: AliasPlan, bases: ScheduleBases | None = None
            ) -> Prepared:
    """``PREPARATION`` on a copy of ``common`` (``prepare_common(source)``, left unchanged) for
    ``plan``, ``plan_aliasing`` of ``source`` for a donation set. The copy shares
    ``common``'s thread-local computations (kernel bodies, reducers): these passes change only
    sequential ones, and a large model's fusion bodies are most of its instructions.
    ``bases``: ``common``'s (``bases_of``), whose schedules serve where they hold."""
    module, mapping = _share_kernels(common)
    prepared = Prepared(module, plan, bases=bases, copied=mapping)
    for name, step in PREPARATION:
        with internal_errors(f"the {name} pass"):
            step(prepared)
    return prepared


def _share_kernels(common: HloModule) -> tuple[HloModule, CloneMap]:
    """A copy of ``common`` that shares its kernel bodies and reducers."""
    sequential = set(sequential_computations(common))
    return clone_module(common, share={c for c in common.computations if c not in sequential})


#: kept ``prepare_common`` result -> the schedules kept for its donation sets (``reassign``)
_BASES: weakref.WeakKeyDictionary[HloModule, ScheduleBases] = weakref.WeakKeyDictionary()


def bases_of(common: HloModule) -> ScheduleBases:
    """The schedules kept for ``common``'s donation sets: made as ``reassign`` needs them, so
    that a toggle's new set mostly reuses a list order made before."""
    if common not in _BASES:
        held = weakref.ref(common)      # a strong one would keep the entry for ever

        def copier(aliases: list[AliasEntry]
                   ) -> tuple[HloModule, dict[HloInstruction, HloInstruction]]:
            original = held()
            assert original is not None         # the bases are reached through it
            module, mapping = _share_kernels(original)
            module.input_output_alias, module.buffer_donors = aliases, []
            return module, {copy: original for original, copy in mapping.instructions.items()}
        _BASES[common] = ScheduleBases(copier)
    return _BASES[common]


@with_gc_paused
def buffer_assignment(module: HloModule, *, alignment: int = 128,
                      donated: frozenset[int] | None = None) -> BufferAssignment:
    """The memory plan of ``module`` (never mutated): ``prepare_common``, ``prepare``, then
    ``assign_buffers``.

    ``donated``: None means as the module says (every ``input_output_alias`` entry applied,
    every ``buffer_donor`` matched); otherwise only parameters in the set are donated: aliases
    of other parameters are not applied (those outputs get their own allocations and the
    parameter lives to the end) and only their donors are matched.
    """
    check_alignment(alignment)
    return _assign(prepare_common(module), module, alignment, donated)


@with_gc_paused
def reassign(assignment: BufferAssignment, donated: frozenset[int] | None) -> BufferAssignment:
    """The plan of the same module at the same alignment for another choice of donated
    parameters (``buffer_assignment``'s ``donated``): what a donation toggle shows without a
    device. It starts from the kept ``prepare_common`` result (``prepared_from``), so only the
    passes that depend on donation run again; the plan is the one ``buffer_assignment`` makes."""
    if assignment.prepared_from is None:
        raise HloArgumentError("this assignment was made from a module prepared outside the "
                               "pipeline; make it with pipeline.buffer_assignment to reassign "
                               "it")
    return _assign(assignment.prepared_from, assignment.source, assignment.alignment, donated,
                   assignment.family, bases_of(assignment.prepared_from))


def _assign(common: HloModule, source: HloModule, alignment: int,
            donated: frozenset[int] | None,
            family: list[BufferAssignment] | None = None,
            bases: ScheduleBases | None = None) -> BufferAssignment:
    """One path for both: a fresh assignment and a toggle's must give the same plan. The
    plan depends on ``donated`` only through the aliasing it applies, so a plan of ``family``
    with the same aliasing is that plan (a module without aliases has one plan)."""
    with internal_errors("the donation plan"):
        plan = plan_aliasing(source, donated)
    for made in family or ():
        if made.donation == plan:
            return made
    prepared = prepare(common, plan, bases)
    assert prepared.schedule is not None
    return assign_buffers(
        prepared.module, prepared.schedule, alignment=alignment, donation=prepared.donation,
        source=source, prepared_from=common, call_graph=prepared.call_graph, family=family)


def run(module: HloModule, target: Target = CPU, *, fusion: bool = True,
        alignment: int = 128) -> BufferAssignment:
    """Optimisation passes, pre-assignment passes, buffer assignment."""
    return buffer_assignment(optimise(module, fusion=fusion, target=target), alignment=alignment)


def _reject_unbounded_shapes(module: HloModule) -> None:
    """``f32[?]`` has no size, so there is nothing to allocate (bounded ``<=N`` is fine)."""
    for inst in module.instructions():
        if any(shape.is_unbounded for _, shape in inst.shape.leaves()):
            raise HloUnsupportedError(
                f"{inst.name} has shape {inst.shape} with an unbounded dimension: it has no size "
                "to allocate", instruction=inst.name,
                computation=inst.parent.name if inst.parent else None, location=inst.location)
