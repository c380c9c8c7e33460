"""hlo-magic's compiler and runtime: HLO text in, buffer assignment and OpenCL execution out.

This package never imports IPython; the notebook layer (``hlo_magic``) sits on top of the
public names exported here.
"""

from .errors import (
    CustomCallError, DeviceError, DonatedBufferError, HloArgumentError, HloError, HloParseError,
    HloUnsupportedError, HloVerifyError, InternalCompilerError,
)
from .errors import internal_errors as _internal_errors
from .analyzer import Analysis, analyze
from .buffers.collective_traffic import CollectiveTraffic, collective_traffic
from .compiler import compile
from .custom_calls import (
    CustomCallStatus, CustomCallTarget, register_custom_call, registered_custom_calls,
    unregister_custom_call,
)
from .execution.arrays import DeviceArray, device_put
from .opencl.device import Device, device_reasons, devices, get_device
from .execution.executable import Executable, RunRecord
from .hlo import HloModule
from .hlo.parser import parse as _parse_unverified
from .hlo.verifier import verify as _verify
from .inputs import random_arguments, random_device_arguments, zeros_arguments
from .pipeline import reassign
from .version import __version__


def parse(text: str, *, verify: bool = True) -> HloModule:
    """Parse HLO text into an ``HloModule``; by default also verify it (shapes, aliasing).

    Even with ``verify=False`` a result shape the text omits must be inferable, so an
    ``HloVerifyError`` is still possible there."""
    with _internal_errors("parsing"):
        module = _parse_unverified(text)
    if verify:
        with _internal_errors("verification"):
            _verify(module)
    return module


__all__ = [
    "parse", "analyze", "Analysis", "compile", "Executable", "DeviceArray", "RunRecord",
    "device_put", "devices", "device_reasons",
    "get_device", "Device", "HloModule", "HloError", "HloParseError", "HloVerifyError", "HloUnsupportedError",
    "HloArgumentError", "DonatedBufferError", "CustomCallError", "DeviceError",
    "InternalCompilerError", "__version__",
    "register_custom_call", "unregister_custom_call", "registered_custom_calls",
    "CustomCallTarget", "CustomCallStatus", "random_arguments", "zeros_arguments", "reassign",
    "collective_traffic", "CollectiveTraffic", "random_device_arguments",
]
