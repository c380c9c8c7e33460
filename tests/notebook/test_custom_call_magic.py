"""%%hlo_custom_call: OpenCL source, launchers and host functions, then %%hlo runs them."""

from __future__ import annotations

import numpy as np
import pytest
from IPython.core.error import UsageError
from IPython.utils.capture import capture_output

import runtime
from hlo_magic.custom_calls import kernel_names

SEED_HLO = """HloModule do_it

ENTRY e {
  p0 = f32[128] parameter(0)
  p1 = f32[2048] parameter(1)
  ROOT r = f32[2048] custom-call(p0, p1), custom_call_target="do_custom_call"OPTIONS
}
"""

SEED_KERNEL = """__kernel void custom_call_kernel(__global const float* in0,
                                 __global const float* in1,
                                 __global float* out) {
  size_t idx = get_global_id(0);
  out[idx] = in0[idx % 128] + in1[idx];
}
"""


def seed_hlo(options: str = "") -> str:
    return SEED_HLO.replace("OPTIONS", options)


@pytest.fixture
def registry():
    """Each test starts and ends with no user registrations."""
    def clear():
        for target in runtime.registered_custom_calls():
            runtime.unregister_custom_call(target.name, target.platform)
    clear()
    yield
    clear()


@pytest.fixture
def seed_inputs(ip):
    rng = np.random.default_rng(3)
    b = rng.standard_normal(128).astype(np.float32)
    c = rng.standard_normal(2048).astype(np.float32)
    ip.user_ns.update(b=b, c=c)
    return b, c


def expected(b, c):
    return b[np.arange(2048) % 128] + c


def test_the_cells_kernel_runs_with_xlas_gpu_convention(ip, registry, seed_inputs):
    registration = ip.run_cell_magic("hlo_custom_call", "do_custom_call", SEED_KERNEL)
    assert repr(registration) == ("registered custom call do_custom_call [opencl]: kernel "
                                  "custom_call_kernel")
    assert "<code>do_custom_call [opencl]: kernel custom_call_kernel</code>" in \
        registration._repr_html_()
    result = ip.run_cell_magic("hlo", "--run b c -q -o r", seed_hlo()) or ip.user_ns["r"]
    np.testing.assert_array_equal(result.outputs, expected(*seed_inputs))


def test_kernel_is_picked_or_named(ip, registry):
    two = SEED_KERNEL + "__kernel void other(__global float* x) { x[0] = 0.0f; }\n"
    assert kernel_names(two) == ["custom_call_kernel", "other"]
    with pytest.raises(UsageError, match=r"exactly one __kernel function or name one with "
                                         r"--kernel \(found: custom_call_kernel, other\)"):
        ip.run_cell_magic("hlo_custom_call", "do_custom_call", two)
    with pytest.raises(UsageError, match=r"\(found: none\)"):
        ip.run_cell_magic("hlo_custom_call", "do_custom_call", "int x;\n")
    registration = ip.run_cell_magic("hlo_custom_call", "do_custom_call --kernel other", two)
    assert registration.target.kernel_name == "other"
    with pytest.raises(runtime.CustomCallError, match="has no kernel 'missing'; it defines: "
                                                      "custom_call_kernel, other"):
        ip.run_cell_magic("hlo_custom_call", "do_custom_call --kernel missing", two)


def test_a_build_error_shows_in_the_registering_cell(ip, registry):
    source = "__kernel void k(__global float* a) {\n  a[0] = undefined_thing;\n}\n"
    with capture_output() as cap:
        result = ip.run_cell(f"%%hlo_custom_call broken\n{source}")
    assert isinstance(result.error_in_exec, runtime.DeviceError)
    assert "the OpenCL source of custom call target 'broken' does not build" in cap.stdout
    assert "2 |   a[0] = undefined_thing;" in cap.stdout
    assert "Traceback" not in cap.stdout


def test_a_launcher_gets_the_opaque_bytes(ip, registry, seed_inputs):
    seen = []

    def launch(queue, buffers, opaque, status):
        seen.append(opaque)
        kernel = runtime.custom_calls.lookup("do_custom_call").kernel(queue)
        kernel(queue, (int(opaque),), None, *buffers)
    ip.user_ns["launch"] = launch
    registration = ip.run_cell_magic("hlo_custom_call", "do_custom_call --launcher launch",
                                     SEED_KERNEL)
    assert registration.target.launcher is launch
    result = ip.run_cell_magic("hlo", "--run b c -q -o r",
                               seed_hlo(', backend_config="2048"')) or ip.user_ns["r"]
    np.testing.assert_array_equal(result.outputs, expected(*seed_inputs))
    assert seen == [b"2048"]


def test_host_functions_and_a_failing_status(ip, registry, seed_inputs):
    def do_custom_call(out, ins, status):
        if not np.isfinite(ins[1]).all():
            status.set_failure("An error occurred")
            return
        out[:] = ins[0][np.arange(2048) % 128] + ins[1]
    ip.user_ns["do_custom_call"] = do_custom_call
    registration = ip.run_line_magic("hlo_custom_call", "do_custom_call --host do_custom_call")
    assert registration.target.platform == "host"
    text = seed_hlo(", api_version=API_VERSION_STATUS_RETURNING")
    result = ip.run_cell_magic("hlo", "--run b c -q -o r", text) or ip.user_ns["r"]
    np.testing.assert_array_equal(result.outputs, expected(*seed_inputs))
    ip.user_ns["c"] = np.full(2048, np.nan, np.float32)
    with capture_output() as cap:
        failed = ip.run_cell(f"%%hlo --run b c\n{text}")
    assert isinstance(failed.error_in_exec, runtime.CustomCallError)
    last = [line for line in cap.stdout.splitlines() if line.strip()][-1]
    assert last.startswith("CustomCallError: ") and "An error occurred" in last


@pytest.mark.parametrize("line, cell, message", [
    ("t --host f", "__kernel void k() {}", "--host registers a notebook function on its own"),
    ("t --host f --kernel k", None, "--host registers a notebook function on its own"),
    ("t", None, "%hlo_custom_call needs OpenCL C source in a cell"),
    ("t", "  \n", "the cell is empty"),
    ("t --host missing_fn", None, "--host: no variable named 'missing_fn' in the notebook"),
    ("t --host not_a_function", None, "--host 'not_a_function': expected a function, got int"),
    ("t --launcher not_a_function", None, "--launcher 'not_a_function': expected a function"),
])
def test_misuse_is_a_usage_error(ip, registry, line, cell, message):
    ip.user_ns.update(f=print, not_a_function=3)
    with pytest.raises(UsageError) as caught:
        if cell is None:
            ip.run_line_magic("hlo_custom_call", line)
        else:
            ip.run_cell_magic("hlo_custom_call", line, cell)
    assert message in str(caught.value)


def test_a_raising_host_function_shows_the_users_frames_first(ip, registry):
    def check(values):
        if values.sum() > 0:
            raise ValueError("broken on purpose")

    def broken_call(out, ins):
        check(ins[1])
    ip.user_ns["broken_call"] = broken_call
    ip.run_line_magic("hlo_custom_call", "do_custom_call --host broken_call")
    ip.user_ns.update(B=np.ones(128, np.float32), C=np.ones(2048, np.float32))
    for full in (False, True):
        ip.run_line_magic("config", f"HloMagics.full_traceback = {full}")
        with capture_output() as cap:
            result = ip.run_cell("%%hlo --run B C\n" + seed_hlo())
        assert isinstance(result.error_in_exec, runtime.CustomCallError)
        text = cap.stdout
        user = text.index("broken on purpose")
        assert text.index("broken_call") < user
        assert "host.py" not in text[:user]            # the runtime's frames are not first
        assert "CustomCallError" in text[user:]
        assert ("host.py" in text[user:]) == full
