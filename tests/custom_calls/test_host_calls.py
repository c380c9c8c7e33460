"""Host custom calls: XLA's CPU convention over numpy views of the device buffers."""

import numpy as np
import pytest

import runtime
from runtime import CustomCallError

SEED = """HloModule do_it
ENTRY e {
  p0 = f32[128] parameter(0)
  p1 = f32[2048] parameter(1)
  ROOT r = f32[2048] custom-call(p0, p1), custom_call_target="do_custom_call"API
}"""


def seed(api: str = "", extra: str = "") -> str:
    text = f", api_version={api}" if api else ""
    return SEED.replace("API", text + extra)


def expected(b: np.ndarray, c: np.ndarray) -> np.ndarray:
    return b[np.arange(2048) % 128] + c


@pytest.fixture
def seed_inputs():
    rng = np.random.default_rng(1)
    return rng.standard_normal(128).astype(np.float32), rng.standard_normal(2048).astype(np.float32)


def test_seed_example_original_api(seed_inputs):
    def do_custom_call(out, ins):
        for i in range(2048):
            out[i] = ins[0][i % 128] + ins[1][i]
    runtime.register_custom_call("do_custom_call", do_custom_call)
    b, c = seed_inputs
    np.testing.assert_array_equal(runtime.compile(seed())(b, c), expected(b, c))


def test_status_returning_success_and_failure_with_the_seeds_message(seed_inputs):
    bad = {"condition": False}

    def do_custom_call(out, ins, status):
        if bad["condition"]:
            status.set_failure("An error occurred")
            return
        out[:] = ins[0][np.arange(2048) % 128] + ins[1]
    runtime.register_custom_call("do_custom_call", do_custom_call)
    exe = runtime.compile(seed("API_VERSION_STATUS_RETURNING"))
    b, c = seed_inputs
    np.testing.assert_array_equal(exe(b, c), expected(b, c))
    bad["condition"] = True
    with pytest.raises(CustomCallError, match="An error occurred") as info:
        exe(b, c)
    assert info.value.target == "do_custom_call"
    assert info.value._render_traceback_()[-1].startswith("CustomCallError: ")


def test_unified_api_passes_the_opaque_bytes(seed_inputs):
    seen = []

    def do_custom_call(out, ins, opaque, status):
        seen.append(opaque)
        out[:] = ins[0][np.arange(2048) % 128] + ins[1] * float(opaque.split(b"=")[1])
    runtime.register_custom_call("do_custom_call", do_custom_call)
    text = seed("API_VERSION_STATUS_RETURNING_UNIFIED", ', backend_config="scale=2\\x01"')
    b, c = seed_inputs
    with pytest.raises(CustomCallError, match="ValueError"):
        runtime.compile(text)(b, c)
    assert seen == [b"scale=2\x01"]
    seen.clear()
    text = seed("API_VERSION_STATUS_RETURNING_UNIFIED", ', backend_config="scale=2"')
    np.testing.assert_array_equal(runtime.compile(text)(b, c), b[np.arange(2048) % 128] + 2 * c)
    assert seen == [b"scale=2"]


def test_typed_ffi_attributes_arrive_as_keyword_arguments():
    got = {}

    def ffi_op(out, ins, **attrs):
        got.update(attrs)
        out[:] = ins[0] * attrs["alpha"] + attrs["n"]
    runtime.register_custom_call("ffi_op", ffi_op)
    text = """HloModule m
ENTRY e {
  y = f32[4] parameter(0)
  ROOT u = f32[4]{0} custom-call(y), custom_call_target="ffi_op", api_version=API_VERSION_TYPED_FFI, backend_config={alpha = 2.0 : f32, n = 3 : i64, name = "abc", v = dense<[1, 2]> : tensor<2xi32>}
}"""
    out = runtime.compile(text)(np.arange(4, dtype=np.float32))
    np.testing.assert_array_equal(out, np.arange(4, dtype=np.float32) * 2 + 3)
    assert got["alpha"] == np.float32(2.0) and type(got["alpha"]) is np.float32
    assert got["n"] == 3 and type(got["n"]) is np.int64
    assert got["name"] == "abc"
    np.testing.assert_array_equal(got["v"], np.array([1, 2], np.int32))
    assert got["v"].dtype == np.int32


def test_typed_ffi_attribute_syntax_error_points_at_the_attribute():
    runtime.register_custom_call("ffi_op", lambda out, ins, **attrs: None)
    text = """HloModule m
ENTRY e {
  y = f32[4] parameter(0)
  ROOT u = f32[4]{0} custom-call(y), custom_call_target="ffi_op", api_version=API_VERSION_TYPED_FFI, backend_config={alpha = 2.0 : f99}
}"""
    with pytest.raises(runtime.HloParseError, match="element type") as info:
        runtime.compile(text)
    assert info.value.line == 4
    assert info.value.source_line[info.value.column - 1:].startswith("f99")
    assert info.value.instruction == "u"


NESTED = """HloModule nested
ENTRY e {
  p0 = (f32[32], (f32[64], f32[128]), f32[256]) parameter(0)
  cc = (f32[512], f32[1024]) custom-call(p0), custom_call_target="do_custom_call"
  ROOT r = f32[512] get-tuple-element(cc), index=0
}"""


def test_nested_tuple_operand_and_a_tuple_output_used_as_scratch():
    seen = {}

    def do_custom_call(out, ins):
        (a, (b, c), d), = ins
        result, scratch = out
        seen["shapes"] = [x.shape for x in (a, b, c, d, result, scratch)]
        scratch[:] = np.concatenate([a, b, c, d, np.zeros(1024 - 480, np.float32)])
        result[:] = scratch[:512] * 2
    runtime.register_custom_call("do_custom_call", do_custom_call)
    parts = [np.full(n, k + 1, np.float32) for k, n in enumerate((32, 64, 128, 256))]
    exe = runtime.compile(NESTED)
    out = exe((parts[0], (parts[1], parts[2]), parts[3]))
    np.testing.assert_array_equal(out, np.concatenate(parts + [np.zeros(32, np.float32)]) * 2)
    assert seen["shapes"] == [(32,), (64,), (128,), (256,), (512,), (1024,)]
    scratch = [r for r in exe.buffer_assignment.records() if r["name"] == "cc{1}"]
    assert [(r["kind"], r["size"]) for r in scratch] == [("temp", 4096)]


def test_views_show_logical_arrays_in_any_layout():
    seen = {}

    def f(out, ins):
        seen["in_fortran"] = ins[0].flags.f_contiguous
        seen["out_fortran"] = out.flags.f_contiguous
        out[...] = ins[0].T @ ins[0]
    runtime.register_custom_call("gram", f)
    text = """HloModule m
ENTRY e {
  p = f32[2,3]{1,0} parameter(0)
  t = f32[2,3]{0,1} copy(p)
  c = f32[3,3]{0,1} custom-call(t), custom_call_target="gram"
  ROOT r = f32[3,3]{1,0} copy(c)
}"""
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(runtime.compile(text)(a), a.T @ a)
    assert seen == {"in_fortran": True, "out_fortran": True}


def test_operand_layout_constraint_hands_the_function_that_layout():
    seen = {}

    def f(out, ins):
        seen["fortran"] = ins[0].flags.f_contiguous
        out[...] = ins[0] + 1
    runtime.register_custom_call("plus_one", f)
    text = """HloModule m
ENTRY e {
  p = f32[2,3]{1,0} parameter(0)
  ROOT c = f32[2,3]{1,0} custom-call(p), custom_call_target="plus_one", operand_layout_constraints={f32[2,3]{0,1}}
}"""
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(runtime.compile(text)(a), a + 1)
    assert seen["fortran"]


INPLACE = """HloModule m
ENTRY e {
  x = f32[8] parameter(0)
  y = f32[8] add(x, x)
  t = f32[8]{0} custom-call(y), custom_call_target="inplace", output_to_operand_aliasing={ {}: (0, {}) }
  ROOT r = f32[8] negate(t)
}"""


def test_in_place_call_gets_one_buffer_as_operand_and_output():
    seen = {}

    def inplace(out, ins):
        seen["shared"] = np.shares_memory(out, ins[0])
        seen["before"] = out.copy()
        out += 1
    runtime.register_custom_call("inplace", inplace)
    exe = runtime.compile(INPLACE)
    x = np.arange(8, dtype=np.float32)
    np.testing.assert_array_equal(exe(x), -(2 * x + 1))
    assert seen["shared"]
    np.testing.assert_array_equal(seen["before"], 2 * x)
    ba = exe.buffer_assignment
    call = next(i for i in ba.module.entry.instructions if i.name == "t")
    assert ba.slice(call) == ba.slice(call.operands[0])


def test_in_place_output_in_another_layout_starts_with_the_operands_values():
    seen = {}

    def inplace(out, ins):
        seen["out"] = out.copy()
        out += 1
    runtime.register_custom_call("inplace", inplace)
    text = """HloModule m
ENTRY e {
  p = f32[2,3]{1,0} parameter(0)
  q = f32[2,3]{1,0} add(p, p)
  t = f32[2,3]{0,1} custom-call(q), custom_call_target="inplace", output_to_operand_aliasing={ {}: (0, {}) }
  ROOT r = f32[2,3]{1,0} copy(t)
}"""
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(runtime.compile(text)(a), 2 * a + 1)
    np.testing.assert_array_equal(seen["out"], 2 * a)


SIDE_EFFECTS = """HloModule m
ENTRY e {
  x = f32[4] parameter(0)
  a = f32[4] custom-call(x), custom_call_target="log", custom_call_has_side_effect=true, backend_config="first"
  b = f32[4] custom-call(x), custom_call_target="log", custom_call_has_side_effect=true, backend_config="second"
  pure = f32[4] custom-call(x), custom_call_target="log", api_version=API_VERSION_STATUS_RETURNING_UNIFIED, backend_config="pure"
  c = f32[4] custom-call(x), custom_call_target="log", custom_call_has_side_effect=true, backend_config="third"
  ROOT r = f32[4] negate(x)
}"""


def test_side_effecting_calls_run_in_order_even_when_unused_and_pure_ones_are_removed():
    calls = []

    def log(out, ins, opaque, status):
        calls.append(opaque.decode())
        out[:] = 0
    runtime.register_custom_call("log", log)
    text = SIDE_EFFECTS.replace("custom_call_has_side_effect=true,",
                                "custom_call_has_side_effect=true, "
                                "api_version=API_VERSION_STATUS_RETURNING_UNIFIED,")
    exe = runtime.compile(text)
    for run in range(2):
        np.testing.assert_array_equal(exe(np.ones(4, np.float32)), -np.ones(4, np.float32))
    assert calls == ["first", "second", "third"] * 2
    order = [i.name for i in exe.buffer_assignment.schedule.sequences["e"]
             if i.opcode == "custom-call"]
    assert order == ["a", "b", "c"]


def test_host_call_inside_a_loop_runs_every_iteration():
    calls = []

    def bump(out, ins):
        calls.append(float(ins[0]))
        out[...] = ins[0] + 1
    runtime.register_custom_call("bump", bump)
    text = """HloModule m
cond {
  s = f32[] parameter(0)
  ten = f32[] constant(3)
  ROOT lt = pred[] compare(s, ten), direction=LT
}
body {
  s = f32[] parameter(0)
  ROOT n = f32[] custom-call(s), custom_call_target="bump"
}
ENTRY e {
  x = f32[] parameter(0)
  ROOT w = f32[] while(x), condition=cond, body=body
}"""
    assert runtime.compile(text)(np.float32(0)) == 3
    assert calls == [0.0, 1.0, 2.0]


def test_exception_fails_the_run_with_the_cause_and_leaves_inputs_intact(seed_inputs):
    def broken(out, ins):
        out[:] = 7
        raise ZeroDivisionError("boom")
    runtime.register_custom_call("do_custom_call", broken)
    text = SEED.replace("API", "").replace("HloModule do_it", "HloModule do_it, input_output_alias={ {}: (1, {}, may-alias) }")
    exe = runtime.compile(text)
    b, c = seed_inputs
    db, dc = runtime.device_put(b), runtime.device_put(c)
    with pytest.raises(CustomCallError, match="ZeroDivisionError: boom") as info:
        exe.run(db, dc)
    assert isinstance(info.value.__cause__, ZeroDivisionError)
    np.testing.assert_array_equal(np.asarray(db), b)
    np.testing.assert_array_equal(np.asarray(dc), c)
    runtime.register_custom_call("do_custom_call",
                                 lambda out, ins: out.__setitem__(slice(None), ins[1]))
    np.testing.assert_array_equal(runtime.compile(text)(b, c), c)


def test_operands_are_read_only():
    def writes_input(out, ins):
        ins[0][0] = 1
    runtime.register_custom_call("do_custom_call", writes_input)
    with pytest.raises(CustomCallError, match="read-only"):
        runtime.compile(seed())(np.zeros(128, np.float32), np.zeros(2048, np.float32))


def test_returned_result_is_stored_and_checked(seed_inputs):
    runtime.register_custom_call("do_custom_call",
                                 lambda out, ins: ins[0][np.arange(2048) % 128] + ins[1])
    b, c = seed_inputs
    np.testing.assert_array_equal(runtime.compile(seed())(b, c), expected(b, c))
    runtime.register_custom_call("do_custom_call",
                                 lambda out, ins: (ins[0][np.arange(2048) % 128] + ins[1]).astype(np.float64))
    with pytest.raises(CustomCallError, match=r"returned float64\[2048\] .* f32\[2048\]"):
        runtime.compile(seed())(b, c)
    runtime.register_custom_call("do_custom_call", lambda out, ins: ins[1][:100])
    with pytest.raises(CustomCallError, match=r"returned float32\[100\] for result \{\}"):
        runtime.compile(seed())(b, c)
    runtime.register_custom_call("do_custom_call", lambda out, ins: (ins[1], ins[0]))
    with pytest.raises(CustomCallError, match=r"returned \(float32\[2048\], float32\[128\]\)"):
        runtime.compile(seed())(b, c)


def test_returned_tuple_must_match_the_tuple_result():
    runtime.register_custom_call("do_custom_call", lambda out, ins: ins[0][2])
    parts = (np.zeros(32, np.float32), (np.zeros(64, np.float32), np.zeros(128, np.float32)),
             np.zeros(256, np.float32))
    with pytest.raises(CustomCallError, match=r"returned float32\[256\], but the result \{\} is a tuple of 2"):
        runtime.compile(NESTED)(parts)
    runtime.register_custom_call("do_custom_call",
                                 lambda out, ins: (np.ones(512, np.float32), np.ones(1024, np.int32)))
    with pytest.raises(CustomCallError, match=r"int32\[1024\] for result \{1\}, which is f32\[1024\]"):
        runtime.compile(NESTED)(parts)


def test_writing_the_wrong_shape_is_a_clear_error(seed_inputs):
    runtime.register_custom_call("do_custom_call", lambda out, ins: out.__setitem__(
        slice(None), np.zeros(3, np.float32)))
    with pytest.raises(CustomCallError, match=r"could not broadcast.*out is f32\[2048\]"):
        runtime.compile(seed())(*seed_inputs)


def test_unknown_target_fails_when_reached_listing_registrations(seed_inputs):
    runtime.register_custom_call("other_host", lambda out, ins: None)
    runtime.register_custom_call("other_cl", "__kernel void k(__global float* a) {}",
                                 platform="opencl", kernel="k")
    exe = runtime.compile(seed())
    assert [c.instruction for c in exe.analysis.unimplemented_custom_calls] == ["r"]
    with pytest.raises(CustomCallError, match="do_custom_call") as info:
        exe(*seed_inputs)
    message = str(info.value)
    assert "host: other_host" in message and "opencl: other_cl" in message
    assert info.value.line == 5 and info.value.target == "do_custom_call"


def test_tokens_are_none_leaves():
    seen = {}

    def f(out, ins):
        seen["ins"] = [type(x).__name__ for x in ins]
        seen["out"] = [type(x).__name__ for x in out]
        out[0][:] = ins[0] * 3
    runtime.register_custom_call("with_token", f)
    text = """HloModule m
ENTRY e {
  x = f32[4] parameter(0)
  tok = token[] after-all()
  c = (f32[4], token[]) custom-call(x, tok), custom_call_target="with_token", custom_call_has_side_effect=true
  ROOT r = f32[4] get-tuple-element(c), index=0
}"""
    np.testing.assert_array_equal(runtime.compile(text)(np.ones(4, np.float32)),
                                  np.full(4, 3, np.float32))
    assert seen == {"ins": ["ndarray", "NoneType"], "out": ["ndarray", "NoneType"]}


def test_a_raising_function_renders_the_users_frames_first(seed_inputs):
    def check(values):
        raise ValueError("broken on purpose")

    def broken_call(out, ins):
        check(ins[1])
    runtime.register_custom_call("do_custom_call", broken_call)
    with pytest.raises(CustomCallError) as info:
        runtime.compile(seed())(*seed_inputs)
    cause, tb = info.value.user_frames()
    assert isinstance(cause, ValueError) and tb.tb_frame.f_code.co_name == "broken_call"
    lines = info.value._render_traceback_()
    assert lines[0] == "Traceback (most recent call last):"
    user = lines.index("ValueError: broken on purpose")
    assert any("broken_call" in line for line in lines[:user])
    assert any("check(ins[1])" in line for line in lines[:user])
    assert not any("runtime" in line and "custom_calls" in line for line in lines[:user])
    assert lines[-1].startswith("CustomCallError: custom call 'do_custom_call' (r): the host "
                                "function raised ValueError: broken on purpose")


def test_a_reported_failure_has_no_frames_to_show(seed_inputs):
    def failing(out, ins, status):
        status.set_failure("bad input")
    runtime.register_custom_call("do_custom_call", failing)
    with pytest.raises(CustomCallError) as info:
        runtime.compile(seed("API_VERSION_STATUS_RETURNING"))(*seed_inputs)
    assert info.value.user_frames() is None
    assert not info.value._render_traceback_()[0].startswith("Traceback")
