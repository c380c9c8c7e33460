"""rng-bit-generator bits and new state, bit for bit against XLA (jax) and the corpus."""

from __future__ import annotations

from math import prod
from pathlib import Path

import numpy as np
import pytest

from runtime.codegen.rng_algorithms import rng_bit_generator
from runtime.errors import HloUnsupportedError
from tests.clharness import elementwise_kernel, program_source, run
from tests.codegen.golden_cases import RNG_CASES
from tests.conftest import corpus_dir

GOLDEN = np.load(Path(__file__).parent / "data" / "xla_golden.npz")


def _generate(cases: list[tuple[str, str, tuple[int, ...], np.ndarray]]):
    """Run every (algorithm, bits type, shape, u64 state) case in one program.

    Returns, per case, the bits (as uint64) and the new state.
    """
    generators = [rng_bit_generator(alg, len(state), et, shape)
                  for alg, et, shape, state in cases]
    width = max(len(state) for *_, state in cases)
    state_words = [f"st[sel[i] * {width} + {w}]" for w in range(width)]
    bits_branches = "".join(
        f"    case {c}: out[i] = (ulong){g.element(state_words[:g.state_words], 'idx[i]')};"
        f" break;\n" for c, g in enumerate(generators))
    state_branches = "".join(
        f"    case {c}: {{ ulong s[{g.state_words}] = {{"
        + ", ".join(g.new_state(state_words[:g.state_words])) + "}; out[i] = s[idx[i]]; break; }\n"
        for c, g in enumerate(generators))
    params = [("ulong", "st"), ("int", "sel"), ("ulong", "idx"), ("ulong", "out")]
    source = program_source([
        elementwise_kernel("bits", params, f"  switch (sel[i]) {{\n{bits_branches}  }}"),
        elementwise_kernel("state", params, f"  switch (sel[i]) {{\n{state_branches}  }}"),
    ])
    states = np.zeros(len(cases) * width, np.uint64)
    for c, (*_, state) in enumerate(cases):
        states[c * width:c * width + len(state)] = state
    results = []
    for kernel, sizes in (("bits", [g.num_elements for g in generators]),
                          ("state", [g.state_words for g in generators])):
        sel = np.repeat(np.arange(len(cases), dtype=np.int32), sizes)
        idx = np.concatenate([np.arange(n, dtype=np.uint64) for n in sizes])
        out = run(source, kernel, [states, sel, idx, np.zeros(len(sel), np.uint64)],
                  len(sel))[-1]
        results.append(np.split(out, np.cumsum(sizes)[:-1]))
    return list(zip(*results))


def test_bits_and_new_state_match_xla_for_every_algorithm_type_and_shape():
    cases = [(alg, et, shape, np.array(key, np.uint32).view(np.uint64))
             for _, alg, et, shape, key in RNG_CASES]
    for (name, *_), (bits, state) in zip(RNG_CASES, _generate(cases)):
        want_bits = GOLDEN[f"rng/{name}/bits"]
        np.testing.assert_array_equal(bits.astype(want_bits.dtype), want_bits, err_msg=name)
        np.testing.assert_array_equal(state, GOLDEN[f"rng/{name}/state"], err_msg=name)


def test_philox_bits_hand_checked():
    """jax 0.10.2: rng_bit_generator(uint32 [1, 2, 3, 4], (5,), uint32), rng_default."""
    state = np.array([1, 2, 3, 4], np.uint32).view(np.uint64)
    [(bits, new_state)] = _generate([("rng_default", "u32", (5,), state)])
    assert bits.tolist() == [512747620, 1298009047, 1267190206, 761827841, 1383286907]
    assert new_state.view(np.uint32).tolist() == [1, 2, 5, 4]


def test_corpus_random_rbg_bits():
    """The entry's rng-bit-generator (u32[16], rng_default) reproduces XLA's output."""
    data = np.load(corpus_dir() / "random_rbg.npz")
    state = data["arg_0"].view(np.uint64)
    [(bits, _)] = _generate([("rng_default", "u32", (16,), state)])
    np.testing.assert_array_equal(bits.astype(np.uint32), data["out_1"])


def test_philox_three_word_state_uses_words_1_and_2_as_counter():
    """A 2-word state counts with (state[1], state[0]); a 3-word one with (state[1], state[2]).

    With state[2] equal to the key the two layouts name the same counter, so the bits agree;
    the 128-bit counter carries into the high word.
    """
    key, low = 7, 2 ** 64 - 1
    three, two = _generate([("rng_philox", "u64", (3,), np.array([key, low, key], np.uint64)),
                            ("rng_philox", "u64", (3,), np.array([key, low], np.uint64))])
    np.testing.assert_array_equal(three[0], two[0])
    assert three[1].tolist() == [key, 1, key + 1]
    assert two[1].tolist() == [key, 1]


@pytest.mark.parametrize("dims, blocks", [((), 1), ((5,), 3), ((7, 3), 12), ((2, 3, 4), 12),
                                          ((3, 1, 5), 9)])
def test_three_fry_counter_advances_by_the_halved_shape(dims, blocks):
    assert rng_bit_generator("rng_three_fry", 2, "u32", dims).blocks == blocks
    assert rng_bit_generator("rng_three_fry", 2, "u64", dims).blocks == prod(dims)


def test_unsupported_configurations_are_refused():
    with pytest.raises(HloUnsupportedError, match="rng_mersenne"):
        rng_bit_generator("rng_mersenne", 2, "u32", (4,))
    with pytest.raises(HloUnsupportedError, match="2 words, got 3"):
        rng_bit_generator("rng_three_fry", 3, "u32", (4,))
    with pytest.raises(HloUnsupportedError, match="f32"):
        rng_bit_generator("rng_default", 2, "f32", (4,))


FLOAT_STREAM = """HloModule float_stream
ENTRY e {
  s = f32[4] parameter(0)
  r = (f32[4], f32[4]) rng-bit-generator(s), algorithm=rng_default
  bits = f32[4] get-tuple-element(r), index=1
  n = f32[4] negate(s)
  ROOT out = f32[4] add(n, s)
}
"""


def test_a_float_stream_is_valid_hlo_refused_only_where_it_is_computed():
    """XLA's verifier asks nothing of the element types; XLA runs this module, whose stream
    is dead. A live one is refused at its line, when it is lowered."""
    import runtime
    x = np.arange(4, dtype=np.float32)
    np.testing.assert_array_equal(runtime.compile(FLOAT_STREAM)(x), np.zeros(4, np.float32))
    live = FLOAT_STREAM.replace("ROOT out = f32[4] add(n, s)", "ROOT out = f32[4] add(n, bits)")
    with pytest.raises(HloUnsupportedError) as caught:
        runtime.compile(live)
    assert caught.value.line == 4
