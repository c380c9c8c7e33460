"""Property: on random modules the assignment is sound, and running the module inside the
assigned memory gives the same results as running it with no sharing at all."""

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import runtime

from .checked import assigned
from .memory_interpreter import MemoryRun, run_reference
from .random_modules import random_modules


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_modules(), st.data())
def test_assignment_of_random_modules_is_sound_and_runs(generated, data):
    text, params = generated
    module = runtime.parse(text)
    before = module.to_text()
    donated = data.draw(st.one_of(st.none(), st.frozensets(st.integers(0, params - 1))),
                        label="donated")
    alignment = data.draw(st.sampled_from([1, 16, 128]), label="alignment")
    ba = assigned(module, donated=donated, alignment=alignment)
    assert module.to_text() == before
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))
    args = [rng.integers(-3, 4, size=4).astype(np.float32) for _ in range(params)]
    got = MemoryRun(ba).run([a.copy() for a in args])
    want = run_reference(module, args)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
