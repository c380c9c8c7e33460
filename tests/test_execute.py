"""The executor: arguments, donation in place vs copy-protection, deleted arrays, errors."""

import io
import os

import ml_dtypes
import numpy as np
import pytest

import runtime
from runtime import DeviceArray, DonatedBufferError, HloArgumentError
from runtime.execution.executable import Executable

INCREMENT_SHORT = """HloModule increment, input_output_alias={ {}: 0 }
ENTRY entry {
  %p = f32[] parameter(0)
  %c = f32[] constant(1)
  ROOT %out = f32[] add(%p, %c)
}"""

INCREMENT_LONG = """HloModule increment, input_output_alias={ {}: (0, {}, may-alias) }
ENTRY entry {
  %p = f32[] parameter(0)
  %c = f32[] constant(1)
  ROOT %out = f32[] add(%p, %c)
}"""

SCALE_VECTOR = """HloModule scale, input_output_alias={ {0}: (0, {}, may-alias) }
ENTRY e {
  x = f32[1024] parameter(0)
  s = f32[] parameter(1)
  b = f32[1024] broadcast(s), dimensions={}
  m = f32[1024] multiply(x, b)
  r = f32[] reduce(x, s), dimensions={0}, to_apply=add
  ROOT t = (f32[1024], f32[]) tuple(m, r)
}
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}"""

MUST_ALIAS = """HloModule m, input_output_alias={ {}: (0, {}, must-alias) }
ENTRY e {
  x = f32[4] parameter(0)
  ROOT y = f32[4] negate(x)
}"""


@pytest.mark.parametrize("text", [INCREMENT_SHORT, INCREMENT_LONG], ids=["short", "long"])
def test_increment_both_alias_syntaxes(text):
    exe = runtime.compile(text)
    assert exe(np.float32(41)) == np.float32(42)
    assert exe(41.0) == np.float32(42)


def test_donated_device_array_is_updated_in_place_and_deleted():
    exe = runtime.compile(SCALE_VECTOR)
    x0 = np.arange(1024, dtype=np.float32)
    x = runtime.device_put(x0)
    buffer_before = x.buffer
    m, r = exe.run(x, np.float32(2), donate=(0,))
    assert exe.last_run.donated == (0,)
    assert exe.last_run.copied == ()
    assert m.buffer is buffer_before                   # the output took the input's buffer
    np.testing.assert_array_equal(np.asarray(m), x0 * 2)
    # a reduce from s (not its identity) in XLA's tree: each of the 32 windows of 32 and the
    # final reduce start from s
    assert float(np.asarray(r)) == pytest.approx(x0.sum() + 33 * 2)
    assert x.is_deleted()
    with pytest.raises(DonatedBufferError, match=exe.last_run.name):
        np.asarray(x)
    with pytest.raises(DonatedBufferError):
        exe.run(x, np.float32(1))


def test_undonated_alias_gets_copy_protection_and_input_is_untouched():
    exe = runtime.compile(SCALE_VECTOR)
    x0 = np.arange(1024, dtype=np.float32)
    x = runtime.device_put(x0)
    m, _ = exe.run(x, np.float32(3))
    assert exe.last_run.donated == ()
    assert exe.last_run.copied == (0,)
    assert m.buffer is not x.buffer
    np.testing.assert_array_equal(np.asarray(m), x0 * 3)
    np.testing.assert_array_equal(np.asarray(x), x0)   # read the input back: unchanged
    assert not x.is_deleted()


def test_donating_a_numpy_array_leaves_the_host_array_alone():
    exe = runtime.compile(SCALE_VECTOR)
    x0 = np.arange(1024, dtype=np.float32)
    keep = x0.copy()
    m, _ = exe.run(x0, np.float32(2), donate=(0,))
    np.testing.assert_array_equal(x0, keep)
    np.testing.assert_array_equal(np.asarray(m), keep * 2)


def test_must_alias_without_donation_is_an_error():
    exe = runtime.compile(MUST_ALIAS)
    x = runtime.device_put(np.ones(4, np.float32))
    with pytest.raises(HloArgumentError, match="must-alias") as raised:
        exe.run(x)
    assert raised.value.line == 1      # the header's input_output_alias
    np.testing.assert_array_equal(np.asarray(exe.run(x, donate=0)), -np.ones(4, np.float32))


def test_donating_an_array_passed_twice_is_an_error():
    text = """HloModule two, input_output_alias={ {}: (0, {}, may-alias) }
    ENTRY e {
      a = f32[8] parameter(0)
      b = f32[8] parameter(1)
      ROOT s = f32[8] add(a, b)
    }"""
    exe = runtime.compile(text)
    x = runtime.device_put(np.ones(8, np.float32))
    with pytest.raises(HloArgumentError, match="also passed as argument 1"):
        exe.run(x, x, donate=(0,))
    assert not x.is_deleted()
    np.testing.assert_array_equal(np.asarray(exe.run(x, x)), 2 * np.ones(8, np.float32))


def test_unusable_donation_is_reported_and_array_kept():
    exe = runtime.compile(SCALE_VECTOR)
    s = runtime.device_put(np.float32(2))
    exe.run(np.zeros(1024, np.float32), s, donate=(1,))
    assert 1 in exe.last_run.unusable
    assert "no output aliases parameter 1" in exe.last_run.unusable[1]
    assert not s.is_deleted()


@pytest.mark.parametrize("args,match", [
    ((np.zeros(1024, np.float32),), "takes 2 argument"),
    ((np.zeros(1023, np.float32), np.float32(1)), r"must be f32\[1024\]"),
    ((np.zeros(1024, np.float64), np.float32(1)), r"got f64\[1024\]"),
    ((np.zeros(1024, np.float32), "x"), "must be an array or a number"),
])
def test_argument_errors_print_the_signature(args, match):
    exe = runtime.compile(SCALE_VECTOR)
    with pytest.raises(HloArgumentError, match=match) as info:
        exe(*args)
    if "takes" in match or "must be f32" in match or "got f64" in match:
        assert "f32[1024]" in str(info.value)


def test_bf16_arguments_as_the_void_bytes_np_load_gives():
    """``np.savez`` keeps bf16 as plain ``|V2`` bytes; such an array is the bf16 parameter's
    bytes, while a void of another size (or bits of another type) is still refused."""
    exe = runtime.compile("HloModule m\nENTRY e {\n  x = bf16[3] parameter(0)\n"
                          "  ROOT n = bf16[3] negate(x)\n}\n")
    x = np.array([1.5, -2, 3], ml_dtypes.bfloat16)
    buffer = io.BytesIO()
    np.savez(buffer, x=x)
    buffer.seek(0)
    stored = np.load(buffer)["x"]
    assert stored.dtype == np.dtype("V2")
    np.testing.assert_array_equal(np.asarray(exe(stored)), -x)
    for wrong, why in ((x.view(np.uint16), "must be bf16"), (np.zeros(3, "V4"), "no HLO type")):
        with pytest.raises(HloArgumentError, match=why):
            exe(wrong)


def test_donate_index_out_of_range():
    exe = runtime.compile(SCALE_VECTOR)
    with pytest.raises(HloArgumentError, match="5 is not a parameter number or name"):
        exe.run(np.zeros(1024, np.float32), np.float32(1), donate=(5,))


def test_tuple_parameter_and_bf16_values():
    text = """HloModule tp
    ENTRY e {
      t = (bf16[3], s32[2]) parameter(0)
      a = bf16[3] get-tuple-element(t), index=0
      b = s32[2] get-tuple-element(t), index=1
      c = bf16[3] add(a, a)
      d = s32[2] multiply(b, b)
      ROOT r = (bf16[3], s32[2]) tuple(c, d)
    }"""
    a = np.array([1.5, -2.25, 3.0], dtype=ml_dtypes.bfloat16)
    b = np.array([3, -4], dtype=np.int32)
    c, d = runtime.compile(text)((a, b))
    assert c.dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(c.astype(np.float32), np.array([3.0, -4.5, 6.0], np.float32))
    np.testing.assert_array_equal(d, np.array([9, 16], np.int32))


def test_column_major_parameter_and_result_layouts():
    text = """HloModule cm
    ENTRY e {
      x = f32[2,3]{0,1} parameter(0)
      ROOT y = f32[2,3]{1,0} copy(x)
    }"""
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(runtime.compile(text)(x), x)


def _rss_bytes() -> int:
    with open(f"/proc/{os.getpid()}/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_repeated_runs_do_not_grow_memory():
    """1,000 runs, each producing a fresh 1 MiB output and copy-protecting a 1 MiB input: a
    leak of the per-run buffers would grow the process by about 2 GB (PoCL buffers are host
    memory)."""
    exe = runtime.compile(SCALE_VECTOR.replace("1024", "262144"))
    x = runtime.device_put(np.ones(262144, np.float32))
    for _ in range(100):
        exe.run(x, np.float32(1))[0].block_until_ready()
    before = _rss_bytes()
    for _ in range(1000):
        m, r = exe.run(x, np.float32(1))
        del m, r
    exe.device.queue.finish()
    grown = _rss_bytes() - before
    # allocator noise is tens of MiB at most; a leaked run would add 2 MiB each (2 GiB total)
    assert grown < 256 * 2**20, f"process grew by {grown / 2**20:.1f} MiB over 1000 runs"


def test_device_array_round_trip_and_repr():
    a = np.arange(12, dtype=np.int64).reshape(3, 4)
    d = runtime.device_put(a)
    assert isinstance(d, DeviceArray)
    assert d.shape == (3, 4) and d.dtype == np.int64
    np.testing.assert_array_equal(np.asarray(d), a)
    assert "s64[3,4]" in repr(d)
    assert d.block_until_ready() is d


def test_compile_cache_hit_is_reported():
    text = INCREMENT_LONG.replace("increment", "increment_cache_probe")
    first = runtime.compile(text)
    again = runtime.compile(text + "\n// a comment changes nothing\n")
    assert not first.cache_hit
    assert again.cache_hit
    assert again.program is first.program


def test_copies_from_cache_hits_keep_the_buffers_their_kernels_point_at():
    """The copies a cache hit returns share the built kernels, whose arguments point at the
    executable's own buffers once set (the temp arena, the embedded constants): a copy that
    ran and was dropped must not take those buffers with it (a later copy's kernels then read
    freed memory: the notebook's second run of a cell crashed PoCL)."""
    import gc
    text = """HloModule cache_hit_buffers
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] add(a, b)
}
ENTRY e {
  x = f32[64] parameter(0)
  c = f32[64] constant({%s})
  y = f32[64] add(x, c)
  t = f32[64] tanh(y)
  zero = f32[] constant(0)
  s = f32[] reduce(t, zero), dimensions={0}, to_apply=add
  sb = f32[64] broadcast(s), dimensions={}
  ROOT r = f32[64] multiply(t, sb)
}""" % ", ".join(str(float(v)) for v in range(64))
    x = np.linspace(-1, 1, 64, dtype=np.float32)
    t = np.tanh(x + np.arange(64, dtype=np.float32))
    want = t * t.sum()
    runtime.compile(text)
    for _ in range(3):
        copy = runtime.compile(text)
        assert copy.cache_hit
        np.testing.assert_allclose(np.asarray(copy(x)), want, rtol=1e-5)
        del copy
        gc.collect()
        # the freed memory handed out again, and overwritten
        litter = [runtime.device_put(np.full(n, np.nan, np.float32))
                  for n in (16, 32, 64, 128, 256, 512) for _ in range(4)]
        del litter


def test_a_module_larger_than_device_memory_fails_before_allocating():
    text = """HloModule huge
    ENTRY e {
      s = f32[] parameter(0)
      ROOT b = f32[200000,1000000] broadcast(s), dimensions={}
    }"""
    exe = runtime.compile(text)
    s = runtime.device_put(np.float32(1))
    with pytest.raises(runtime.DeviceError, match=r"needs 800000000004 bytes of device memory, "
                                                  r"but .* has \d+ bytes") as info:
        exe.run(s)
    assert info.value.line == 4                     # located at the value that outgrows it
    assert exe.last_run is None                     # nothing ran, nothing was returned
    np.testing.assert_array_equal(np.asarray(s), np.float32(1))


def test_cache_key_ignores_comments_and_blanks_but_not_string_contents():
    from runtime.compiler import normalise
    a = 'x = f32[] custom-call(), backend_config="a//b"  // note\n'
    assert normalise(a) == normalise('x =  f32[]\ncustom-call(),  /* c */ backend_config="a//b"')
    assert normalise(a) != normalise('x = f32[] custom-call(), backend_config="a//c"')
    assert normalise('b="a  b"') != normalise('b="a b"')


def test_donate_by_name_and_each_parameter_once():
    exe = runtime.compile(SCALE_VECTOR)
    names = exe.parameter_names
    x = runtime.device_put(np.zeros(1024, np.float32))
    exe.run(x, np.float32(1), donate=names[0])
    assert exe.last_run.donated == (0,) and x.is_deleted()
    for twice in ((0, 0), f"0,{names[0]}", (names[0], 0)):
        y = runtime.device_put(np.zeros(1024, np.float32))
        with pytest.raises(HloArgumentError, match=r"parameter 0 \(.*\) is given as .* and again"):
            exe.run(y, np.float32(1), donate=twice)
        assert not y.is_deleted()
    with pytest.raises(HloArgumentError, match="'nope' is not a parameter number or name"):
        exe.run(np.zeros(1024, np.float32), np.float32(1), donate="nope")


# one kernel (sizes are arguments) launched by two steps, each with its own scalars, in a loop
SHARED_KERNEL_LOOP = """HloModule shared
body {
  s = (s32[], f32[8], f32[16]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  a = f32[8] get-tuple-element(s), index=1
  b = f32[16] get-tuple-element(s), index=2
  ea = f32[8] sine(a)
  eb = f32[16] sine(b)
  one = s32[] constant(1)
  j = s32[] add(i, one)
  ROOT out = (s32[], f32[8], f32[16]) tuple(j, ea, eb)
}
cond {
  s = (s32[], f32[8], f32[16]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(5)
  ROOT lt = pred[] compare(i, n), direction=LT
}
ENTRY e {
  x = f32[8] parameter(0)
  y = f32[16] parameter(1)
  z = s32[] constant(0)
  init = (s32[], f32[8], f32[16]) tuple(z, x, y)
  w = (s32[], f32[8], f32[16]) while(init), condition=cond, body=body
  ra = f32[8] get-tuple-element(w), index=1
  rb = f32[16] get-tuple-element(w), index=2
  ROOT r = (f32[8], f32[16]) tuple(ra, rb)
}"""


def test_steps_sharing_a_kernel_set_their_scalars_once_and_compute_their_own_sizes(
        monkeypatch, unchained):
    """Each launch step has its own kernel object: the loop's two sine steps share one
    generated kernel, and neither sets every argument again at each of its launches, nor any
    argument again within a run. (The two steps are independent, so the loop body's launch
    merging would make them one launch, and chaining too: both are off here.)"""
    from runtime import compiler
    from runtime.codegen import plan_passes
    from runtime.execution import program_cache
    monkeypatch.setattr(plan_passes, "PLAN_PASSES", plan_passes.without("merge-launches"))
    monkeypatch.setattr(program_cache, "load", lambda key: None)
    compiler.clear_cache()
    exe = runtime.compile(SHARED_KERNEL_LOOP)
    compiler.clear_cache()

    def launches_in(steps):
        for step in steps:
            if type(step).__name__ == "Launch":
                yield step
            for part in ("condition", "body"):
                yield from launches_in(getattr(step, part, []))
    launches = list(launches_in(exe.program.plan))
    assert len({s.kernel for s in launches}) < len(launches)
    import pyopencl as cl
    calls, bound = [], []     # set_args calls; steps bound in this run
    original = cl.Kernel.set_args
    monkeypatch.setattr(cl.Kernel, "set_args",
                        lambda self, *args: calls.append(self) or original(self, *args))
    bind = Executable._bind_arguments
    monkeypatch.setattr(Executable, "_bind_arguments",
                        lambda self, step, b: bound.append(step) or bind(self, step, b))
    rng = np.random.default_rng(0)
    for _ in range(2):
        bound.clear()
        x = rng.standard_normal(8).astype(np.float32)
        y = rng.standard_normal(16).astype(np.float32)
        a, b = exe(x, y)
        want_a, want_b = x.astype(np.float64), y.astype(np.float64)
        for _ in range(5):
            want_a, want_b = np.sin(want_a), np.sin(want_b)
        np.testing.assert_allclose(a, want_a, rtol=1e-5)
        np.testing.assert_allclose(b, want_b, rtol=1e-5)
        # a run binds each step's arguments once, not again at each of the 5 iterations
        assert len(bound) <= len(launches)
    assert len(calls) <= len(launches)


def test_a_device_array_meets_a_parameter_laid_out_column_major():
    """device_put stores row-major; a {0,1} parameter gets the array in its own order."""
    text = """HloModule m, input_output_alias={ {}: (0, {}, may-alias) }
    ENTRY e {
      x = f32[3,4]{0,1} parameter(0)
      ROOT y = f32[3,4]{0,1} negate(x)
    }"""
    exe = runtime.compile(text)
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    kept = runtime.device_put(x)
    np.testing.assert_array_equal(np.asarray(exe.run(kept)), -x)
    np.testing.assert_array_equal(np.asarray(kept), x)
    donated = runtime.device_put(x)
    np.testing.assert_array_equal(np.asarray(exe.run(donated, donate=0)), -x)
    assert donated.is_deleted()
