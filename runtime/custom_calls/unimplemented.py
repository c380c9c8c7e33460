"""Custom calls nothing implements: compiled to a host step that raises if it is ever reached.

Refusing such a module would refuse programs that run fine: Equinox's ``error_if`` and
Diffrax's ``throw=True`` put a ``jax.pure_callback`` in a ``conditional`` branch taken only
on invalid input. So the call becomes a ``HostCall`` whose ``run`` raises a located
``CustomCallError`` naming the instruction, its line and target; a run that reaches it fails
like any failing custom call (it returns nothing, undonated inputs are untouched), and
``runtime.analyze`` and the reports list these calls beforehand.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import CustomCallError, SourceLocation


@dataclass(frozen=True)
class UnimplementedCall:
    """One custom call without an implementation: ``why`` completes "...reached, but" and
    ``short`` says it in a report's few words."""

    target: str
    instruction: str
    location: SourceLocation | None
    why: str
    short: str
    hint: str

    def error(self) -> CustomCallError:
        return CustomCallError(
            f"custom call {self.instruction} (target {self.target!r}) was reached at run time, "
            f"but {self.why}", target=self.target, instruction=self.instruction,
            location=self.location, hint=self.hint)

    def __call__(self, executor: Any, bindings: list[Any]) -> None:
        """The ``run`` of its ``HostCall`` step."""
        raise self.error()

    def summary(self) -> str:
        line = f" (line {self.location.line})" if self.location is not None else ""
        return f"{self.instruction}{line}: {self.target}, {self.short}"


__all__ = ["UnimplementedCall"]
