"""Output buffers of dropped results are reused by later runs, never while still held, and
never after being donated."""

import gc

import numpy as np

import runtime

DOUBLE = """
HloModule double
ENTRY e {
  x = f32[1024] parameter(0)
  ROOT y = f32[1024] add(x, x)
}
"""

INCREMENT = """
HloModule inc, input_output_alias={ {}: (0, {}, may-alias) }
ENTRY e {
  x = f32[8] parameter(0)
  one = f32[] constant(1)
  ones = f32[8] broadcast(one), dimensions={}
  ROOT y = f32[8] add(x, ones)
}
"""


def test_held_results_are_never_overwritten():
    exe = runtime.compile(DOUBLE)
    x = runtime.device_put(np.arange(1024, dtype=np.float32))
    results = [exe.run(x) for _ in range(4)]
    x2 = runtime.device_put(np.ones(1024, np.float32))
    later = exe.run(x2)
    for r in results:
        np.testing.assert_array_equal(np.asarray(r), 2 * np.arange(1024, dtype=np.float32))
    np.testing.assert_array_equal(np.asarray(later), np.full(1024, 2, np.float32))
    assert len({r.buffer.int_ptr for r in results + [later]}) == 5


def test_a_dropped_result_gives_its_buffer_to_the_next_run():
    exe = runtime.compile(DOUBLE)
    x = runtime.device_put(np.arange(1024, dtype=np.float32))
    first = exe.run(x)
    handle = first.buffer.int_ptr
    del first
    gc.collect()
    second = exe.run(x)
    assert second.buffer.int_ptr == handle
    np.testing.assert_array_equal(np.asarray(second), 2 * np.arange(1024, dtype=np.float32))


def test_donated_buffers_are_not_taken_back():
    exe = runtime.compile(INCREMENT)
    x = runtime.device_put(np.zeros(8, np.float32))
    y = exe.run(x)                      # not donated: a fresh, recyclable output
    z = exe.run(y, donate=(0,))         # y's buffer now holds z
    del y
    gc.collect()
    w = exe.run(runtime.device_put(np.full(8, 10, np.float32)))
    assert w.buffer.int_ptr != z.buffer.int_ptr
    np.testing.assert_array_equal(np.asarray(z), np.full(8, 2, np.float32))
    np.testing.assert_array_equal(np.asarray(w), np.full(8, 11, np.float32))
