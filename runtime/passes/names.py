"""Fresh instruction and computation names, the way XLA's name uniquer makes them."""

from __future__ import annotations

from ..hlo.ir import HloModule


class NameUniquer:
    """``base`` if free, else ``base.1``, ``base.2``... (names are unique in the module)."""

    def __init__(self, taken: set[str]) -> None:
        self.taken = taken
        self._next: dict[str, int] = {}     # base -> first suffix not tried yet

    @classmethod
    def instructions_of(cls, module: HloModule) -> NameUniquer:
        return cls({i.name for i in module.instructions()})

    @classmethod
    def computations_of(cls, module: HloModule) -> NameUniquer:
        return cls({c.name for c in module.computations})

    def __call__(self, base: str) -> str:
        k = self._next.get(base, 0)
        name = base if k == 0 else f"{base}.{k}"
        while name in self.taken:
            k += 1
            name = f"{base}.{k}"
        self._next[base] = k + 1
        self.taken.add(name)
        return name
