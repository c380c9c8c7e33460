"""OpenCL custom calls: XLA's GPU convention (operand leaves in pre-order, then outputs)."""

import numpy as np
import pytest

import runtime
from runtime import CustomCallError, DeviceError
from runtime.opencl.device import opencl

from .test_host_calls import NESTED, seed

SEED_KERNEL = """__kernel void custom_call_kernel(__global const float* in0,
                                 __global const float* in1,
                                 __global float* out) {
  size_t idx = get_global_id(0);
  out[idx] = in0[idx % 128] + in1[idx];
}
"""


@pytest.fixture
def seed_inputs():
    rng = np.random.default_rng(2)
    return rng.standard_normal(128).astype(np.float32), rng.standard_normal(2048).astype(np.float32)


def test_seed_kernel_matches_numpy(seed_inputs):
    runtime.register_custom_call("do_custom_call", SEED_KERNEL, platform="opencl",
                                 kernel="custom_call_kernel")
    exe = runtime.compile(seed())
    b, c = seed_inputs
    np.testing.assert_array_equal(exe(b, c), b[np.arange(2048) % 128] + c)
    assert exe.program.kernel_names == []      # user kernels are not generated kernels


def test_opencl_registration_wins_over_host(seed_inputs):
    runtime.register_custom_call("do_custom_call", lambda out, ins: out.__setitem__(
        slice(None), 0))
    runtime.register_custom_call("do_custom_call", SEED_KERNEL, platform="opencl",
                                 kernel="custom_call_kernel")
    b, c = seed_inputs
    np.testing.assert_array_equal(runtime.compile(seed())(b, c), b[np.arange(2048) % 128] + c)
    runtime.unregister_custom_call("do_custom_call", "opencl")
    np.testing.assert_array_equal(runtime.compile(seed())(b, c), np.zeros(2048, np.float32))


NESTED_KERNEL = """__kernel void six(__global const float* s0, __global const float* s1,
                  __global const float* s2, __global const float* s3,
                  __global float* o0, __global float* o1) {
  size_t i = get_global_id(0);
  float v = i < 32 ? s0[i] : i < 96 ? s1[i - 32] : i < 224 ? s2[i - 96] : i < 480 ? s3[i - 224] : 0.0f;
  o1[i] = v;
  if (i < 512) o0[i] = 2.0f * v;
}
"""


def test_nested_tuple_buffers_are_flattened_in_pre_order():
    runtime.register_custom_call("do_custom_call", NESTED_KERNEL, platform="opencl",
                                 kernel="six", global_size=1024, local_size=64)
    parts = [np.full(n, k + 1, np.float32) for k, n in enumerate((32, 64, 128, 256))]
    out = runtime.compile(NESTED)((parts[0], (parts[1], parts[2]), parts[3]))
    np.testing.assert_array_equal(out, np.concatenate(parts + [np.zeros(32, np.float32)]) * 2)


def test_kernel_reads_temp_arena_values_through_sub_buffers():
    runtime.register_custom_call("scale", """
__kernel void twice(__global const float* x, __global float* y) {
  size_t i = get_global_id(0);
  y[i] = 2.0f * x[i];
}""", platform="opencl", kernel="twice")
    text = """HloModule m
ENTRY e {
  x = f32[300] parameter(0)
  a = f32[300] negate(x)
  b = f32[300] custom-call(a), custom_call_target="scale"
  c = f32[300] custom-call(b), custom_call_target="scale"
  ROOT r = f32[300] add(c, a)
}"""
    x = np.arange(300, dtype=np.float32)
    np.testing.assert_array_equal(runtime.compile(text)(x), -5 * x)


def test_small_temps_read_by_a_kernel_keep_the_base_address_alignment():
    """Small temps pack at their own size's alignment, except what a custom call reads or
    writes: its sub-buffer needs the device's base-address alignment."""
    runtime.register_custom_call("scale", """
__kernel void twice(__global const float* x, __global float* y) {
  size_t i = get_global_id(0);
  y[i] = 2.0f * x[i];
}""", platform="opencl", kernel="twice")
    text = """HloModule m
ENTRY e {
  x = f32[3] parameter(0)
  a = f32[3] negate(x)
  e = f32[3] exponential(x)
  b = f32[3] custom-call(a), custom_call_target="scale"
  s = f32[3] add(e, b)
  c = f32[3] custom-call(s), custom_call_target="scale"
  ROOT r = f32[3] add(c, a)
}"""
    exe = runtime.compile(text, fusion=False)
    x = np.arange(3, dtype=np.float32)
    np.testing.assert_allclose(exe(x), 2 * (np.exp(x) - 2 * x) - x, rtol=1e-5)
    arena = [a for a in exe.buffer_assignment.allocations if a.kind == "temp"][0]
    offsets = {b.name: b.offset for b in arena.buffers}
    assert all(offsets[n] % 128 == 0 for n in ("a", "b", "s") if n in offsets), offsets


def test_launcher_gets_queue_buffers_opaque_and_status(seed_inputs):
    seen = {}

    def launch(queue, buffers, opaque, status):
        seen["opaque"] = opaque
        seen["sizes"] = [b.size for b in buffers]
        kernel = target.kernel(queue, "custom_call_kernel")
        kernel(queue, (int(opaque),), None, *buffers)
    target = runtime.register_custom_call("do_custom_call", SEED_KERNEL, platform="opencl",
                                          launcher=launch)
    text = seed("API_VERSION_STATUS_RETURNING", ', backend_config="2048"')
    b, c = seed_inputs
    np.testing.assert_array_equal(runtime.compile(text)(b, c), b[np.arange(2048) % 128] + c)
    assert seen == {"opaque": b"2048", "sizes": [512, 8192, 8192]}


def test_launcher_failure_and_exception(seed_inputs):
    def launch(queue, buffers, opaque, status):
        if opaque == b"raise":
            raise RuntimeError("launcher broke")
        status.set_failure("An error occurred")
    runtime.register_custom_call("do_custom_call", platform="opencl", launcher=launch)
    with pytest.raises(CustomCallError, match="An error occurred"):
        runtime.compile(seed(extra=', backend_config="fail"'))(*seed_inputs)
    with pytest.raises(CustomCallError, match="launcher broke") as info:
        runtime.compile(seed(extra=', backend_config="raise"'))(*seed_inputs)
    assert isinstance(info.value.__cause__, RuntimeError)


def test_typed_ffi_launcher_gets_attributes():
    seen = {}

    def launch(queue, buffers, opaque, status, **attrs):
        seen.update(attrs)
        opencl().enqueue_fill_buffer(queue, buffers[-1], np.float32(attrs["value"]), 0, 16)
    runtime.register_custom_call("fill", platform="opencl", launcher=launch)
    text = """HloModule m
ENTRY e {
  ROOT f = f32[4] custom-call(), custom_call_target="fill", api_version=API_VERSION_TYPED_FFI, backend_config={value = 2.5 : f32}
}"""
    np.testing.assert_array_equal(runtime.compile(text)(), np.full(4, 2.5, np.float32))
    assert seen == {"value": np.float32(2.5)}


def test_build_error_shows_the_users_line():
    source = "__kernel void k(__global float* a) {\n  a[0] = 1.0f\n  a[1] = undefined_thing;\n}\n"
    runtime.register_custom_call("do_custom_call", source, platform="opencl", kernel="k")
    with pytest.raises(DeviceError) as info:
        runtime.compile(seed())
    message = str(info.value)
    assert "do_custom_call" in message
    assert "2 |   a[0] = 1.0f" in message or "3 |   a[1] = undefined_thing;" in message


def test_kernel_signature_and_name_are_checked_at_compile_time():
    runtime.register_custom_call("do_custom_call", "__kernel void k(__global float* a) {}",
                                 platform="opencl", kernel="k")
    with pytest.raises(CustomCallError, match="takes 1 argument.*passes 3 buffer"):
        runtime.compile(seed())
    runtime.register_custom_call("do_custom_call", "__kernel void k(__global float* a) {}",
                                 platform="opencl", kernel="missing")
    with pytest.raises(CustomCallError, match="no kernel 'missing'; it defines: k"):
        runtime.compile(seed())
