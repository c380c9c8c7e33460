"""Fresh instruction and computation names, the way XLA's name uniquer makes them."""

from __future__ import annotations

from ..hlo.ir import HloModule


class NameUniquer:
    """``base`` if free, else ``base.1``, ``base.2``... (names are unique in the module)."""

    def __init__(self, taken: set[str]) -> None:
        self.taken = taken

    @classmethod
    def instructions_of(cls, module: HloModule) -> NameUniquer:
        return cls({i.name for i in module.instructions()})

    @classmethod
    def computations_of(cls, module: HloModule) -> NameUniquer:
        return cls({c.name for c in module.computations})

    def __call__(self, base: str) -> str:
        name, k = base, 0
        while name in self.taken:
            k += 1
            name = f"{base}.{k}"
        self.taken.add(name)
        return name
