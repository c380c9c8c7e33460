"""``cholesky`` as a host call computing what XLA's CPU backend computes for it.

XLA's CPU backend never generates code for the instruction: its ``CholeskyExpander`` rewrites
it into a blocked algorithm of dots, triangular solves and loops, whose result differs from
LAPACK's ``potrf`` where the input is not Hermitian positive definite (a whole matrix of NaNs
once any pivot's real part is negative, zeros in the other triangle, a diagonal keeping its
imaginary part divided by the pivot's root). Each ``cholesky`` of f32, f64, c64 or c128 values
becomes a ``custom-call`` to ``CHOLESKY_TARGET`` (``custom_calls/cholesky.py`` computes that
algorithm with numpy), placed before complex-lowering so its complex buffers stay complex as
LAPACK's calls' do. f16 and bf16, which the expander computes step by step in their own
precision, are refused at their line rather than answered more precisely than XLA.
"""

from __future__ import annotations

from ..errors import HloUnsupportedError
from ..hlo.attributes import BackendConfig, Identifier
from ..hlo.ir import HloInstruction, HloModule
from ..hlo.opcode_enum import Opcode
from ..target import CPU, Target
from .part_builder import PartBuilder, expand_matching_in_place, type_of

CHOLESKY_TARGET = "hlo_magic.cholesky"
_COMPUTED_TYPES = ("f32", "f64", "c64", "c128")


def cholesky_to_host_calls_in_place(module: HloModule, target: Target = CPU) -> None:
    expand_matching_in_place(module, lambda i: i.opcode == Opcode.CHOLESKY, _expand)


def _expand(build: PartBuilder, inst: HloInstruction) -> HloInstruction | None:
    if inst.opcode != Opcode.CHOLESKY:
        return None
    (a,) = inst.operands
    if type_of(a).name not in _COMPUTED_TYPES:
        raise HloUnsupportedError(
            f"cholesky {inst.name} of {type_of(a)} values is not supported: XLA computes it "
            f"step by step in {type_of(a)}; only {', '.join(_COMPUTED_TYPES)} run here",
            instruction=inst.name, location=inst.location)
    lower = "true" if inst.bool_attr("lower", False) else "false"
    call = build.add(Opcode.CUSTOM_CALL, inst.shape, [a],
                     custom_call_target=CHOLESKY_TARGET,
                     api_version=Identifier("API_VERSION_TYPED_FFI"),
                     backend_config=BackendConfig(f"{{lower = {lower}}}", quoted=False))
    call.name = inst.name
    return call
