"""The registry: keyed by (target, platform), replace on re-register, list, unregister."""

import numpy as np
import pytest

import runtime
from runtime import CustomCallError

TEXT = """HloModule m
ENTRY e {
  x = f32[4] parameter(0)
  ROOT y = f32[4] custom-call(x), custom_call_target="op"
}"""


def test_register_list_replace_and_unregister():
    first = runtime.register_custom_call("op", lambda out, ins: None)
    second = runtime.register_custom_call("op", lambda out, ins: None)
    cl = runtime.register_custom_call("op", "__kernel void k(__global float* a) {}",
                                      platform="OpenCL", kernel="k")
    assert runtime.registered_custom_calls() == [second, cl]
    assert runtime.registered_custom_calls("host") == [second]
    assert second.serial > first.serial
    assert "op [opencl]: kernel k" in repr(cl)
    runtime.unregister_custom_call("op", "host")
    assert runtime.registered_custom_calls() == [cl]
    runtime.unregister_custom_call("op")
    assert runtime.registered_custom_calls() == []


def test_re_registering_recompiles_and_old_executables_keep_their_implementation():
    runtime.register_custom_call("op", lambda out, ins: out.fill(1))
    old = runtime.compile(TEXT)
    assert runtime.compile(TEXT).cache_hit
    runtime.register_custom_call("op", lambda out, ins: out.fill(2))
    new = runtime.compile(TEXT)
    assert not new.cache_hit
    x = np.zeros(4, np.float32)
    np.testing.assert_array_equal(new(x), np.full(4, 2, np.float32))
    np.testing.assert_array_equal(old(x), np.full(4, 1, np.float32))


@pytest.mark.parametrize("args, kwargs, message", [
    (("", lambda o, i: None), {}, "non-empty string"),
    (("op", lambda o, i: None), {"platform": "cuda"}, "platform must be one of host, opencl"),
    (("op", "not callable"), {}, "must be a Python function"),
    (("op", 42), {"platform": "opencl", "kernel": "k"}, "takes OpenCL C source text"),
    (("op", "__kernel void k() {}"), {"platform": "opencl"}, "needs source and kernel=NAME"),
    (("op", "src"), {"platform": "opencl", "kernel": "not a name"}, "C identifier"),
    (("op", "src"), {"platform": "opencl", "kernel": "k", "global_size": 0}, "global_size"),
    (("op", "src"), {"platform": "opencl", "kernel": "k", "local_size": (1, 2, 3, 4)},
     "local_size"),
    (("op",), {"platform": "opencl", "launcher": "nope"}, "launcher must be a function"),
])
def test_bad_registrations_name_the_problem(args, kwargs, message):
    with pytest.raises(CustomCallError, match=message):
        runtime.register_custom_call(*args, **kwargs)
    assert runtime.registered_custom_calls() == []


def test_unregistering_what_is_not_registered():
    runtime.register_custom_call("op", lambda out, ins: None)
    with pytest.raises(CustomCallError, match="'nope' is not registered on any platform; "
                                              "registered: op"):
        runtime.unregister_custom_call("nope")
    with pytest.raises(CustomCallError, match="built in"):
        runtime.unregister_custom_call("lapack_sgetrf_ffi")
    with pytest.raises(CustomCallError, match="platform 'opencl'"):
        runtime.unregister_custom_call("op", "opencl")


def test_target_kernel_lookup_errors():
    host = runtime.register_custom_call("op", lambda out, ins: None)
    with pytest.raises(CustomCallError, match="without OpenCL source"):
        host.program(runtime.get_device())
    cl = runtime.register_custom_call("op", "__kernel void k(__global float* a) {}",
                                      platform="opencl", launcher=lambda *a: None)
    with pytest.raises(CustomCallError, match="name the kernel"):
        cl.kernel(runtime.get_device())
    with pytest.raises(CustomCallError, match="neither a runtime.Device"):
        cl.kernel("gpu", "k")
    assert cl.kernel(runtime.get_device(), "k") is cl.kernel(runtime.get_device().queue, "k")
    assert cl.program(runtime.get_device()) is cl.program(runtime.get_device())   # built once
