"""``rng-bit-generator`` bit-exact with XLA's CPU backend, as per-element OpenCL C.

XLA expands ``(new_state, bits) = rng-bit-generator(state), algorithm=A`` into counter-based
generators (xla/service/rng_bit_generator_expander.cc, xla/hlo/builder/lib/prng.cc); on CPU
``rng_default`` is Philox. The state is a u64 vector: word 0 is the key, the rest the counter.

* Philox4x32 (10 rounds): the 128-bit counter is (state[1], state[2]) for 3 words and
  (state[1], state[0]) for 2. Block b = counter + b gives four u32 words; 32-bit (and narrower)
  outputs take element i from word i % 4 of block i / 4, 64-bit outputs pair words (0,1) and
  (2,3) of block i / 2. The new state is the key, then the counter advanced by the number of
  blocks (only its low word for a 2-word state).
* ThreeFry2x32 (20 rounds): the counter is state[1]. 64-bit outputs: element i is the block of
  counter + i. 32-bit (and narrower) outputs split the shape in two along its first even
  dimension (or its largest, rounded up): element (.., j, ..) is word j % 2 of the block at the
  row-major position of (.., j / 2, ..) in the halved shape. The new state is the key, then the
  counter advanced by the number of blocks.

Narrower outputs (8 and 16 bits) are the low bits of the 32-bit ones; signed outputs carry the
same bits. Every output element is one independent expression (``RngBitGenerator.element``),
so the bits array is an ordinary one-work-item-per-element kernel; the new state is a few
scalar expressions (``RngBitGenerator.new_state``).
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod
from typing import Sequence

from ..errors import HloUnsupportedError
from ..hlo.dtypes import ElementType
from .cltypes import Helper, cl_type

_ALGORITHMS = {"rng_default": "philox", "rng_philox": "philox", "rng_three_fry": "three_fry"}
_STATE_WORDS = {"philox": (2, 3), "three_fry": (2,)}

HELPERS: tuple[Helper, ...] = (
    Helper("xla_threefry2x32",
           "uint2 xla_threefry2x32(ulong key, ulong counter) {\n"
           "  uint ks0 = (uint)key, ks1 = (uint)(key >> 32);\n"
           "  uint ks2 = 0x1BD11BDAu ^ ks0 ^ ks1;\n"
           "  uint x0 = (uint)counter + ks0, x1 = (uint)(counter >> 32) + ks1;\n"
           "  const uint rot[8] = {13, 15, 26, 6, 17, 29, 16, 24};\n"
           "  for (uint block = 0; block < 5; ++block) {\n"
           "    for (uint r = 0; r < 4; ++r) {\n"
           "      uint s = rot[(block & 1u) * 4 + r];\n"
           "      x0 += x1;\n"
           "      x1 = rotate(x1, s);\n"
           "      x1 ^= x0;\n"
           "    }\n"
           "    uint k = block + 1;\n"
           "    uint a = (k % 3 == 0) ? ks0 : ((k % 3 == 1) ? ks1 : ks2);\n"
           "    uint b = (k % 3 == 0) ? ks1 : ((k % 3 == 1) ? ks2 : ks0);\n"
           "    x0 += a;\n"
           "    x1 += b + k;\n"
           "  }\n"
           "  return (uint2)(x0, x1);\n"
           "}\n"),
    Helper("xla_philox4x32",
           "uint4 xla_philox4x32(ulong key, ulong counter_lo, ulong counter_hi) {\n"
           "  uint k0 = (uint)key, k1 = (uint)(key >> 32);\n"
           "  uint x0 = (uint)counter_lo, x1 = (uint)(counter_lo >> 32);\n"
           "  uint x2 = (uint)counter_hi, x3 = (uint)(counter_hi >> 32);\n"
           "  for (int round = 0; round < 10; ++round) {\n"
           "    uint hi0 = mul_hi(x0, 0xD2511F53u), lo0 = x0 * 0xD2511F53u;\n"
           "    uint hi1 = mul_hi(x2, 0xCD9E8D57u), lo1 = x2 * 0xCD9E8D57u;\n"
           "    x0 = hi1 ^ x1 ^ k0;\n"
           "    x1 = lo1;\n"
           "    x2 = hi0 ^ x3 ^ k1;\n"
           "    x3 = lo0;\n"
           "    k0 += 0x9E3779B9u;\n"
           "    k1 += 0xBB67AE85u;\n"
           "  }\n"
           "  return (uint4)(x0, x1, x2, x3);\n"
           "}\n"),
    Helper("xla_philox_block",
           "uint4 xla_philox_block(ulong key, ulong counter_lo, ulong counter_hi, ulong block) {\n"
           "  ulong lo = counter_lo + block;\n"
           "  return xla_philox4x32(key, lo, lo < counter_lo ? counter_hi + 1 : counter_hi);\n"
           "}\n",
           ("xla_philox4x32",)),
    # Word i % 4 is picked by two bit tests, not a chain of `lane == k` tests: clang folds
    # such a chain into a `switch` on an i2 (`trunc i64 %i to i2`), which Oclgrind 21.10
    # evaluates without truncating, so words 0 and 1 of every block after the first came
    # out as word 3 on the simulated GPU.
    Helper("xla_philox_u32",
           "uint xla_philox_u32(ulong key, ulong counter_lo, ulong counter_hi, ulong i) {\n"
           "  uint4 w = xla_philox_block(key, counter_lo, counter_hi, i >> 2);\n"
           "  uint2 pair = (i & 2) ? w.zw : w.xy;\n"
           "  return (i & 1) ? pair.y : pair.x;\n"
           "}\n",
           ("xla_philox_block",)),
    Helper("xla_philox_u64",
           "ulong xla_philox_u64(ulong key, ulong counter_lo, ulong counter_hi, ulong i) {\n"
           "  uint4 w = xla_philox_block(key, counter_lo, counter_hi, i >> 1);\n"
           "  return (i & 1) ? (((ulong)w.w << 32) | w.z) : (((ulong)w.y << 32) | w.x);\n"
           "}\n",
           ("xla_philox_block",)),
    Helper("xla_threefry_u64",
           "ulong xla_threefry_u64(ulong key, ulong counter, ulong i) {\n"
           "  uint2 w = xla_threefry2x32(key, counter + i);\n"
           "  return ((ulong)w.y << 32) | w.x;\n"
           "}\n",
           ("xla_threefry2x32",)),
    # i is the row-major index in the output; the split dimension has size d (halved: hd)
    # and `inner` elements after it.
    Helper("xla_threefry_u32",
           "uint xla_threefry_u32(ulong key, ulong counter, ulong i, ulong inner, ulong d,\n"
           "                      ulong hd) {\n"
           "  ulong r = i % inner, t = i / inner;\n"
           "  ulong j = t % d, o = t / d;\n"
           "  uint2 w = xla_threefry2x32(key, counter + (o * hd + j / 2) * inner + r);\n"
           "  return (j & 1) ? w.y : w.x;\n"
           "}\n",
           ("xla_threefry2x32",)),
)


@dataclass(frozen=True)
class RngBitGenerator:
    """One ``rng-bit-generator``: the resolved algorithm, state size, output type and dims."""

    algorithm: str  # "philox" | "three_fry"
    state_words: int
    bits_type: str  # HLO element type of the bits output
    dims: tuple[int, ...]

    @property
    def num_elements(self) -> int:
        return prod(self.dims)

    @property
    def blocks(self) -> int:
        """Generator blocks consumed, i.e. how far the counter advances."""
        bits = cl_type(self.bits_type).bits
        if self.algorithm == "philox":
            per_block = 2 if bits == 64 else 4
            return -(-self.num_elements // per_block)
        if bits == 64:
            return self.num_elements
        _, d, hd = self._split()
        return self.num_elements // d * hd if d else 1

    def _split(self) -> tuple[int, int, int]:
        """(elements after the split dimension, its size, its halved size) for ThreeFry32."""
        if not self.dims:
            return 1, 1, 1
        even = [k for k, d in enumerate(self.dims) if d % 2 == 0]
        split = even[0] if even else max(range(len(self.dims)), key=lambda k: (self.dims[k], -k))
        d = self.dims[split]
        return prod(self.dims[split + 1:]), d, -(-d // 2)

    def element(self, state: Sequence[str], index: str) -> str:
        """Output element ``index`` (a C expression, row-major) as the bits type's compute type.

        ``state`` are C expressions (ulong) for the state words.
        """
        row = cl_type(self.bits_type)
        key = state[0]
        if self.algorithm == "philox":
            counter_lo, counter_hi = (state[1], state[2]) if self.state_words == 3 \
                else (state[1], state[0])
            width = "u64" if row.bits == 64 else "u32"
            raw = f"xla_philox_{width}({key}, {counter_lo}, {counter_hi}, (ulong)({index}))"
        elif row.bits == 64:
            raw = f"xla_threefry_u64({key}, {state[1]}, (ulong)({index}))"
        else:
            inner, d, hd = self._split()
            raw = (f"xla_threefry_u32({key}, {state[1]}, (ulong)({index}), {inner}UL, {d}UL, "
                   f"{hd}UL)")
        return f"(({row.compute}){raw})"

    def new_state(self, state: Sequence[str]) -> list[str]:
        """C expressions (ulong) for each word of the new state."""
        advanced = f"({state[1]} + {self.blocks}UL)"
        if self.algorithm == "philox" and self.state_words == 3:
            carry = f"({advanced} < {state[1]} ? {state[2]} + 1UL : {state[2]})"
            return [state[0], advanced, carry]
        return [state[0], advanced]


def rng_bit_generator(algorithm: str, state_words: int, bits_type: ElementType | str,
                      dims: Sequence[int]) -> RngBitGenerator:
    """Describe ``rng-bit-generator(u64[state_words]) -> bits_type[dims]``."""
    resolved = _ALGORITHMS.get(str(algorithm))
    if resolved is None:
        raise HloUnsupportedError(f"unknown rng-bit-generator algorithm {algorithm}; expected "
                                  f"one of {sorted(_ALGORITHMS)}")
    if state_words not in _STATE_WORDS[resolved]:
        raise HloUnsupportedError(f"rng-bit-generator with {resolved} takes a u64 state of "
                                  f"{' or '.join(map(str, _STATE_WORDS[resolved]))} words, "
                                  f"got {state_words}")
    name = bits_type if isinstance(bits_type, str) else bits_type.name
    if cl_type(name).family not in ("sint", "uint"):
        raise HloUnsupportedError(f"rng-bit-generator output type {name} is not supported: "
                                  "expected an integer type")
    return RngBitGenerator(resolved, state_words, name, tuple(int(d) for d in dims))


__all__ = ["HELPERS", "RngBitGenerator", "rng_bit_generator"]
