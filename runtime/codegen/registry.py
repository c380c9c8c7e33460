"""The lowering registry: rules keyed by (opcode or fusion kind, target kind), with priority.

A rule takes (context, instruction) and returns plan steps, or None to decline. The rules for
a key are tried target-specific first, then common (``target=None``), each group by
descending priority; two rules may not share (key, target, priority), so which rule wins never
depends on the order in which modules were imported. Kernel families register into the
registry; this module imports none of them (``codegen.lower`` imports the family package).

Keys: an opcode ("dot"); ``FUSION`` for rules that look at a fusion's whole structure (output
fusion into a dot, row fusion of reductions); ``fusion_root(op)`` for fusions whose fused
computation has root ``op``; ``LOOP`` for shapes of the loop kernel (called with (context,
instruction, root, fused parameters)); ``ANY`` for what lowers an instruction no rule took.

Packed 2- and 4-bit arrays (``dtypes.PACKED``) are read and written only by rules registered
with ``packed=True`` (the loop kernel's scalar form, scatter, byte copies, control flow): an
instruction that touches one is offered to no other rule, so no family's vector loads,
tiles or row forms ever index packed bytes as elements.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    from ..target import TargetKind

FUSION = "fusion"
LOOP = "loop-variant"
ANY = "*"


def fusion_root(opcode: str) -> str:
    return f"fusion-root:{opcode}"


@dataclass(frozen=True)
class Registration:
    key: str
    target: TargetKind | None   # None: every target
    priority: int
    rule: Callable
    packed: bool = False     # whether the rule handles packed 2- and 4-bit arrays


_RULES: dict[str, list[Registration]] = {}


def register(*keys: str, target: TargetKind | None = None, priority: int = 0,
             fusion_root_too: bool = False, packed: bool = False
             ) -> Callable[[Callable], Callable]:
    """Decorator: register the rule under each key (with ``fusion_root_too`` also for fusions
    rooted at that opcode)."""
    def deco(rule: Callable) -> Callable:
        for key in keys:
            add(key, rule, target=target, priority=priority, packed=packed)
            if fusion_root_too:
                add(fusion_root(key), rule, target=target, priority=priority, packed=packed)
        return rule
    return deco


def add(key: str, rule: Callable, *, target: TargetKind | None = None, priority: int = 0,
        packed: bool = False) -> None:
    entries = _RULES.setdefault(key, [])
    for e in entries:
        if e.target == target and e.priority == priority and e.rule is not rule:
            raise ValueError(f"two lowering rules for ({key!r}, {target!r}) at priority "
                             f"{priority}: {e.rule.__qualname__} and {rule.__qualname__}")
    if not any(e.target == target and e.rule is rule for e in entries):
        entries.append(Registration(key, target, priority, rule, packed))


def rules(key: str, target: TargetKind, packed: bool = False) -> list[Callable]:
    """The rules for ``key`` on a target kind, in the order they are tried; with ``packed``
    (the instruction touches a packed array) only those registered for packed arrays."""
    entries = [e for e in _RULES.get(key, []) if e.packed or not packed]
    specific = sorted((e for e in entries if e.target == target), key=lambda e: -e.priority)
    common = sorted((e for e in entries if e.target is None), key=lambda e: -e.priority)
    return [e.rule for e in specific + common]


def registrations() -> dict[str, list[Registration]]:
    """Everything registered, by key (for the exhaustiveness test and documentation)."""
    return {k: list(v) for k, v in _RULES.items()}
