"""``%hlo_devices``: the OpenCL devices, as a table with a text and an HTML form."""

from __future__ import annotations

from dataclasses import dataclass, field

from .formatting import format_bytes
from .render import to_html, to_text
from .report import Table


@dataclass(frozen=True)
class DeviceTable:
    devices: list            # runtime.Device
    default: object | None   # the device %%hlo uses when no --device is given
    reasons: dict[str, str] = field(default_factory=dict)   # spec -> why it is (not) used

    def table(self) -> Table:
        rows = [(d.spec, d.platform_short, d.kind, d.name, d.driver_version,
                 format_bytes(d.global_mem_bytes), f"{d.mem_base_addr_align} B",
                 self.reasons.get(d.spec, "default" if d is self.default else ""))
                for d in self.devices]
        notes = ["use --device SPEC (or %config HloMagics.device = 'SPEC') to pick one; a SPEC is "
                 "a kind (cpu, gpu), a platform (pocl, nvidia), or either with :N"]
        return Table("OpenCL devices", ("spec", "platform", "kind", "name", "driver", "memory",
                                        "alignment", "used?"), rows, notes)

    def __repr__(self) -> str:
        return to_text([self.table()])

    def _repr_html_(self) -> str:
        return to_html([self.table()])
