"""The jnp.linalg modules the LAPACK tests run (shared by the generator and the tests)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LinalgCase:
    function: str                     # a jnp.linalg function name
    dtype: str
    shapes: tuple[tuple[int, ...], ...]

    @property
    def name(self) -> str:
        dims = "_".join("x".join(map(str, s)) for s in self.shapes)
        return f"{self.function}_{self.dtype}_{dims}"


CASES = [
    LinalgCase("solve", "float32", ((3, 3), (3,))),
    LinalgCase("solve", "float64", ((2, 4, 4), (2, 4, 2))),
    LinalgCase("inv", "float32", ((4, 4),)),
    LinalgCase("det", "float64", ((5, 5),)),
    LinalgCase("cholesky", "float32", ((3, 3),)),
    LinalgCase("cholesky", "float64", ((2, 4, 4),)),
    LinalgCase("qr", "float32", ((4, 3),)),
    LinalgCase("qr", "float64", ((3, 3),)),
    LinalgCase("eigh", "float32", ((4, 4),)),
    LinalgCase("eigh", "float64", ((2, 3, 3),)),
    LinalgCase("svd", "float32", ((5, 4),)),
    LinalgCase("svd", "float64", ((2, 3, 5),)),
    LinalgCase("svdvals", "float32", ((4, 6),)),
]
