"""The same HLO text on XLA's CPU backend (jaxlib), for comparison; optional.

The text goes through jaxlib's own HLO parser (``jaxlib._hlo.hlo_module_from_text``) to an
HloModuleProto, which ``_jax.mlir.hlo_to_stablehlo`` turns into the StableHLO that
``Client.compile_and_load`` accepts: XLA compiles exactly the module we compile, with its full
CPU pipeline. Nothing here is needed when jax is not installed (``available()`` says so).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any


def available() -> bool:
    try:
        import jax  # noqa: F401
        import jaxlib._hlo  # noqa: F401
    except ImportError:
        return False
    return True


@dataclass
class XlaProgram:
    executable: Any
    compile_seconds: float
    memory: dict[str, int]       # argument, output, alias, temp (bytes)

    @property
    def total_bytes(self) -> int:
        m = self.memory
        return m["argument"] + m["output"] + m["temp"] - m["alias"]

    def runner(self, args, donates: bool = False):
        """A function doing one timed ``execute`` on device-resident arguments, outputs ready.
        XLA consumes aliased arguments, so with ``donates`` each run gets fresh ones (untimed)."""
        import jax
        buffers = [jax.device_put(a) for a in args]

        def run() -> float:
            nonlocal buffers
            if donates:
                buffers = [jax.device_put(a) for a in args]
            start = time.perf_counter()
            for out in self.executable.execute(buffers):
                out.block_until_ready()
            return time.perf_counter() - start
        return run


def compile_hlo(text: str, disabled_passes: str = "") -> XlaProgram:
    """``disabled_passes``: XLA's pass names to leave out, comma-separated
    (``--xla_disable_hlo_passes``)."""
    import jaxlib._hlo as hlo
    from jax._src import compiler, xla_bridge
    from jax._src.lib import _jax
    from jax._src.lib import xla_client as xc
    backend = xla_bridge.get_backend("cpu")
    devices = xc.DeviceList(tuple(backend.local_devices()[:1]))
    options = compiler.get_compile_options(num_replicas=1, num_partitions=1)
    options.executable_build_options.debug_options.xla_disable_hlo_passes = disabled_passes
    start = time.perf_counter()
    proto = hlo.hlo_module_from_text(text).as_serialized_hlo_module_proto()
    stablehlo = _jax.mlir.hlo_to_stablehlo(proto)
    executable = backend.compile_and_load(stablehlo, executable_devices=devices,
                                          compile_options=options)
    seconds = time.perf_counter() - start
    stats = executable.get_compiled_memory_stats()
    memory = {"argument": stats.argument_size_in_bytes, "output": stats.output_size_in_bytes,
              "alias": stats.alias_size_in_bytes, "temp": stats.temp_size_in_bytes}
    return XlaProgram(executable, seconds, memory)
