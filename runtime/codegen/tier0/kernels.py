"""The source of tier 0's generic kernels: one per class of element types, each an
interpreter of op programs (``op_program``) over the cases of ``cases`` it holds.

A kernel's work-item computes the program's ``per`` consecutive output elements (header word
``PER``: ``ELEMENTS`` for an elementwise step, one for a reduction or a dot): it splits the
first one's position into the iteration space's multi-index (``m0``: the first output's
dimensions in physical order) and steps it from one element to the next. For each it runs
the program's three sections of instructions, each a ``switch`` case over a register file of
unions: *init* once (a reduction's initial values into its accumulators), *body* once per
element of the reduced space (the reduced dimensions, appended to ``m0``, stepped in the
order the program gives: a reduce's input's memory order, a dot's contracting dimensions in
order; the accumulators updated after the reducer's values are all computed), then *tail*
once (the outputs from the accumulators and the rest of the step; an elementwise step is a
tail alone). Where an operand is read is an index map (``t0_map``; none, the element's own
position, where the operand is laid out as the space): stages, each a linear combination of
a multi-index that the next stage splits again by its dimensions (a reshape or bitcast that
regroups dimensions); broadcasts, transposes, slices and reverses fold into one stage's
coefficients. The source is the same for every module, so it is built once per device and its
binary cached on disk (``runtime.execution.generic_kernels``). Reductions and dots share the
elementwise kernels (a loop around the body section) rather than adding kernels of their
own: each kernel is a large switch, and the build is paid per kernel and variant.

Classes: the smallest kernel whose element types and arithmetic cover a program runs it
(``kernel_for``), so a module of f32 arithmetic does not wait for a kernel holding f64's.
"""

from __future__ import annotations

from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from functools import cache

from .. import cltypes, templates
from .cases import MEMBER, Case, all_cases

MAX_RANK = 8              # of the output space and the reduced space together
MAX_REGISTERS = 64
MAX_BUFFERS = 16          # operand and output buffers of one launch (the program is one more)
INSTRUCTION_WORDS = 6     # case, destination, three sources, auxiliary word
# header words: the space's rank (1) and dimensions (2..), then these, then the reduced
# space's dimensions from REDUCED_DIMS; the instructions follow at HEADER_WORDS
PER, REDUCED_RANK, INIT, BODY, TAIL, REDUCED_COUNT = 10, 11, 12, 13, 14, 15
REDUCED_DIMS = 16
HEADER_WORDS = REDUCED_DIMS + MAX_RANK
LOCAL_SIZE = 64           # one work-group size, so PoCL compiles two variants per kernel
# consecutive elements a work-item of an elementwise step computes: its multi-index steps
# from one to the next (no division) and its setup (buffer pointers, the first multi-index)
# is shared
ELEMENTS = 16

_INTS = frozenset({"s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64"})


@dataclass(frozen=True)
class KernelClass:
    name: str
    types: frozenset[str]          # element types its loads, stores and conversions touch
    arithmetic: frozenset[str]     # element types whose arithmetic it holds

    @property
    def kernel(self) -> str:
        return f"t0_generic_{self.name}"

    def holds(self, case: Case) -> bool:
        return case.types <= self.types and (case.arithmetic is None
                                             or case.arithmetic in self.arithmetic)

    @property
    def needs_fp64(self) -> bool:
        return "f64" in self.types


def _class(name: str, types: AbstractSet[str], arithmetic: AbstractSet[str]) -> KernelClass:
    return KernelClass(name, frozenset(types | {"pred"}), frozenset(arithmetic | {"pred"}))


KERNEL_CLASSES: tuple[KernelClass, ...] = (
    _class("pred", set(), set()),
    _class("int", set(_INTS), set(_INTS)),
    _class("f32", _INTS | {"f32"}, {"f32"}),
    _class("half", _INTS | {"f32", "f16", "bf16"}, {"f32", "f16", "bf16"}),
    _class("f64", _INTS | {"f32", "f64"}, {"f32", "f64"}),
    _class("all", _INTS | {"f32", "f16", "bf16", "f64"}, _INTS | {"f32", "f16", "bf16", "f64"}),
)


def kernel_for(case_keys: set[tuple], has_fp64: bool) -> KernelClass | None:
    """The first class holding every case of a program (None: no kernel holds them)."""
    by_key = {c.key: c for c in all_cases()}
    wanted = [by_key[k] for k in case_keys]
    for cls in KERNEL_CLASSES:
        if (has_fp64 or not cls.needs_fp64) and all(cls.holds(c) for c in wanted):
            return cls
    return None


_MAP_FUNCTION = """\
long t0_map(__global const long* P, long at, const long* m0, int k0, long e) {
  int stages = (int)P[at++];
  if (stages == 0) return e;
  long L = P[at + k0];
  for (int j = 0; j < k0; ++j) L += P[at + j] * m0[j];
  at += k0 + 1;
  for (int s = 1; s < stages; ++s) {
    int k = (int)P[at++];
    long m[%(rank)d];
    long rest = L;
    for (int d = k - 1; d >= 0; --d) { long n = P[at + d]; m[d] = rest %% n; rest /= n; }
    at += k;
    L = P[at + k];
    for (int j = 0; j < k; ++j) L += P[at + j] * m[j];
    at += k + 1;
  }
  return L;
}""" % {"rank": MAX_RANK}


def _kernel(cls: KernelClass) -> str:
    buffers = [f"__global uchar* a{k}_base, ulong a{k}_off" for k in range(MAX_BUFFERS)]
    signature = ", ".join([*buffers, "__global uchar* ap_base, ulong ap_off", "long n0"])
    cases = "\n".join(f"          case {n}: {c.statement} break;"
                      for n, c in enumerate(all_cases()) if cls.holds(c))
    members = sorted({MEMBER[cltypes.compute_type(t)] for t in cls.types},
                     key=list(MEMBER.values()).index)
    union = "union { " + " ".join(f"{ctype} {m};" for ctype, m in MEMBER.items()
                                   if m in members) + " }"
    return "\n".join([
        f"__kernel void {cls.kernel}({signature}) {{",
        "  if (n0 <= 0) return;           // a warming launch: the program is not there",
        "  __global const long* P = (__global const long*)(ap_base + ap_off);",
        f"  long first = (long)get_global_id(0) * P[{PER}];",
        "  if (first >= n0) return;",
        f"  long last = min(first + P[{PER}], n0);",
        f"  __global uchar* B[{MAX_BUFFERS}];",
        *(f"  B[{k}] = a{k}_base + a{k}_off;" for k in range(MAX_BUFFERS)),
        f"  int ko = (int)P[1], kr = (int)P[{REDUCED_RANK}];",
        "  // read once: stores through B may alias P, so the compiler would reload them",
        f"  long R = P[{REDUCED_COUNT}], init = P[{INIT}], body = init + P[{BODY}];",
        f"  long tail = body + P[{TAIL}];",
        "  int start = init == 0 && R == 0 ? 2 : 0;   // an elementwise program: its tail alone",
        f"  long m0[{MAX_RANK}];",
        "  long rest = first;",
        "  for (int d = ko - 1; d > 0; --d) { long n = P[2 + d]; m0[d] = rest % n; rest /= n; }",
        "  if (ko > 0) m0[0] = rest;",
        f"  {union} r[{MAX_REGISTERS}];",
        f"  __global const long* code = P + {HEADER_WORDS};",
        "  for (long eo = first; eo < last; ++eo) {",
        "    int k0 = ko, phase = start;",
        "    long e = eo, red = 0, i = start ? body : 0;",
        "    long stop = start ? tail : init;",
        "    for (;;) {",
        "      for (; i < stop; ++i) {",
        f"        __global const long* I = code + {INSTRUCTION_WORDS} * i;",
        "        switch ((int)I[0]) {",
        cases,
        "        }",
        "      }",
        "      if (phase == 0 && R > 0) {",
        "        phase = 1; k0 = ko + kr; e = eo * R; stop = body;",
        "        for (int d = 0; d < kr; ++d) m0[ko + d] = 0;",
        "        continue;",
        "      }",
        "      if (phase == 1 && ++red < R) {",
        f"        for (int d = kr - 1; d >= 0; --d) {{ if (++m0[ko + d] < P[{REDUCED_DIMS} + d]) "
        "break; m0[ko + d] = 0; }",
        "        ++e; i = init;",
        "        continue;",
        "      }",
        "      if (phase < 2) {",
        "        phase = 2; k0 = ko; e = eo; i = body; stop = tail;",
        "        continue;",
        "      }",
        "      break;",
        "    }",
        "    for (int d = ko - 1; d >= 0; --d) { if (++m0[d] < P[2 + d]) break; m0[d] = 0; }",
        "  }",
        "}",
    ])


@cache
def source(has_fp64: bool) -> str:
    """The generic kernels' program: every class the device can run."""
    classes = [c for c in KERNEL_CLASSES if has_fp64 or not c.needs_fp64]
    body = "\n\n".join([_MAP_FUNCTION, *(_kernel(c) for c in classes)])
    parts = [templates.FP_CONTRACT_OFF]
    if has_fp64:
        parts.append(cltypes.FP64_PRAGMA)
    parts.append(cltypes.prelude_for(cltypes.helpers_used(body)))
    parts.append(body)
    return "\n\n".join(parts) + "\n"


def kernel_names(has_fp64: bool) -> list[str]:
    return [c.kernel for c in KERNEL_CLASSES if has_fp64 or not c.needs_fp64]
