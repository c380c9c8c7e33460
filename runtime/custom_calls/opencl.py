"""Running an OpenCL custom call: the user's kernel over the call's buffers, XLA-GPU style.

The kernel's arguments are the operands' leaf buffers in pre-order, then the result's leaf
buffers (the seed's ``buffers[0..5]``), each a plain ``__global T*``: the executor's buffers
are cut to each leaf with a sub-buffer (offsets in the assignment are multiples of the
device's base-address alignment, which is what makes sub-buffers legal). Token leaves have no
buffer and are skipped. By default the kernel runs over the first output's element count;
``global_size``/``local_size`` at registration override that, and a launcher
``fn(queue, buffers, opaque, status)`` replaces the launch altogether.

The source is built at compile time (once per device, cached like generated code); user
kernels have no work-bound argument, so they are never warm-launched the way generated ones
are.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from ..opencl.device import opencl
from ..errors import DeviceError
from .call_site import CallSite, Leaf
from .conventions import LAUNCHER_CONVENTIONS, CallArguments
from .registry import CustomCallTarget


@dataclass
class OpenCLCallRunner:
    """The ``run`` of a ``HostCall`` plan step that enqueues device work."""

    site: CallSite
    target: CustomCallTarget

    def launch_size(self) -> tuple[int, ...]:
        if self.target.global_size is not None:
            return self.target.global_size
        outputs = self.site.result_leaves()
        if not outputs:
            raise self.site.error("has no output to size the launch by",
                                  hint="register it with global_size=... or a launcher")
        return (outputs[0].shape.element_count,)

    def prepare(self, device) -> None:
        """Build the source and check the kernel's arguments (at compile time)."""
        if self.target.source is not None:
            try:
                self.target.program(device)
            except DeviceError as error:
                raise DeviceError(error.message, hint=error.hint, location=self.site.location,
                                  instruction=self.site.instruction) from None
        if self.target.launcher is not None:
            return
        kernel = self.target.kernel(device)
        wanted = kernel.get_info(opencl().kernel_info.NUM_ARGS)
        leaves = self.site.all_leaves()
        if wanted != len(leaves):
            raise self.site.error(
                f"kernel {self.target.kernel_name} takes {wanted} argument(s), but the call "
                f"passes {len(leaves)} buffer(s) (operand leaves, then result leaves: "
                f"{', '.join(leaf.shape.to_text(False) for leaf in leaves)})")
        self.launch_size()

    def __call__(self, executor, bindings: list[Any]) -> None:
        cl = opencl()
        device = executor.device
        try:
            buffers = [_leaf_buffer(bindings, leaf) for leaf in self.site.all_leaves()]
        except cl.Error as error:
            raise self.site.error(f"cannot cut its buffers out of the allocations: {error}",
                                  hint="compile with the device's base-address alignment "
                                       f"({device.mem_base_addr_align} bytes)") from error
        if self.target.launcher is not None:
            self._run_launcher(self.target.launcher, device, buffers)
            return
        size = self.launch_size()
        if 0 in size:
            return
        kernel = self.target.kernel(device)
        try:
            kernel.set_args(*buffers)
            cl.enqueue_nd_range_kernel(device.queue, kernel, size, self.target.local_size)
        except cl.Error as error:
            raise self.site.error(f"launching kernel {self.target.kernel_name} over {size} "
                                  f"failed: {error}") from error

    def _run_launcher(self, launcher: Callable[..., Any], device: Any,
                      buffers: list[Any]) -> None:
        site = self.site
        args = CallArguments(opaque=site.opaque, attrs=site.attrs, queue=device.queue,
                             buffers=buffers)
        try:
            LAUNCHER_CONVENTIONS[site.api_version](launcher, args)
        except Exception as error:
            raise site.error(f"the launcher raised {type(error).__name__}: {error}") from error
        if args.status.failed:
            raise site.error(f"failed: {args.status.message}")


def _leaf_buffer(bindings: list[Any], leaf: Leaf) -> Any:
    """The leaf's bytes as a buffer of their own (a sub-buffer of the allocation's root)."""
    cl = opencl()
    buffer = bindings[leaf.ref.allocation]
    offset = leaf.ref.offset
    parent = buffer.get_info(cl.mem_info.ASSOCIATED_MEMOBJECT)
    if parent is not None:            # the temp arena binds sub-buffers; OpenCL cannot nest them
        offset += buffer.offset
        buffer = parent
    if not leaf.nbytes or (offset == 0 and leaf.nbytes == buffer.size):
        return buffer
    return buffer.get_sub_region(offset, leaf.nbytes)


__all__ = ["OpenCLCallRunner"]
