"""Fresh instruction names for passes that add instructions."""

from __future__ import annotations

from ..hlo.ir import HloModule


class FreshNames:
    """Fresh instruction names (``copy.0``, ``copy.1``...) unused anywhere in the module."""

    def __init__(self, module: HloModule) -> None:
        self.taken = {inst.name for inst in module.instructions()}
        self.next: dict[str, int] = {}

    def fresh(self, base: str) -> str:
        n = self.next.get(base, 0)
        while f"{base}.{n}" in self.taken:
            n += 1
        self.next[base] = n + 1
        self.taken.add(f"{base}.{n}")
        return f"{base}.{n}"
