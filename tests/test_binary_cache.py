"""Program binaries saved after a kernel ran load back (and run); bad ones are dropped."""

from types import SimpleNamespace

import numpy as np

from runtime.opencl import binary_cache
from runtime.opencl.device import get_device, opencl

SOURCE = "__kernel void twice(__global float* a) { a[get_global_id(0)] *= 2.0f; }\n"


def _run(program, values: np.ndarray) -> np.ndarray:
    cl = opencl()
    dev = get_device()
    buf = cl.Buffer(dev.context, cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR,
                    hostbuf=values)
    kernel = cl.Kernel(program, "twice")
    kernel.set_args(buf)
    cl.enqueue_nd_range_kernel(dev.queue, kernel, (values.size,), (values.size,))
    out = np.empty_like(values)
    cl.enqueue_copy(dev.queue, out, buf)
    return out


def test_saved_binary_loads_and_runs(tmp_path, monkeypatch):
    monkeypatch.setenv("POCL_CACHE_DIR", str(tmp_path))
    cl, dev = opencl(), get_device()
    options = ("-cl-denorms-are-zero",)
    assert binary_cache.load(cl, dev, SOURCE, options) is None
    program = cl.Program(dev.context, SOURCE).build(options=list(options))
    values = np.arange(8, dtype=np.float32)
    _run(program, values)
    binary_cache.save(cl, dev, SOURCE, options, program)
    path = binary_cache.binary_path(dev, SOURCE, options)
    assert path.is_file() and path.parent.parent == tmp_path
    loaded = binary_cache.load(cl, dev, SOURCE, options)
    np.testing.assert_array_equal(_run(loaded, values), 2 * values)
    assert binary_cache.binary_path(dev, SOURCE + " ", options) != path


def test_a_corrupt_binary_is_deleted(tmp_path, monkeypatch):
    monkeypatch.setenv("POCL_CACHE_DIR", str(tmp_path))
    cl, dev = opencl(), get_device()
    path = binary_cache.binary_path(dev, SOURCE, ())
    path.parent.mkdir(parents=True)
    path.write_bytes(b"not a program")
    assert binary_cache.load(cl, dev, SOURCE, ()) is None
    assert not path.exists()


def test_other_drivers_keep_no_binaries():
    assert binary_cache.binary_path(SimpleNamespace(is_pocl=False), SOURCE, ()) is None
