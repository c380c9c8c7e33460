"""The import graph of ``runtime`` and ``hlo_magic``, read statically (function-level imports
included): no cycles anywhere, and no module imports a later stage of the pipeline.

Stages, in pipeline order, each a folder of ``runtime`` or one top-level module: errors (and
the garbage-collector pause, a utility of no stage) < hlo (parse, verify) < analysis (with the
fusion cost model and rules) < passes (and the target) < buffers (assignment) < the pipeline
that runs them (``runtime/pipeline.py``) < the OpenCL platform (``runtime/opencl``: devices,
kernel caches) < custom calls < codegen < execution (kernel builds, arrays, executables) < the
compiler and the package's API < the front ends (the notebook layer and the ``hlo`` command).
A module may import its own stage or earlier ones.
Importing a submodule also runs its parent packages' ``__init__``; those implicit edges are
Python's package mechanics, not dependencies, and are not counted; nor are imports under
``if TYPE_CHECKING:`` (annotations only, never executed).
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("runtime", "hlo_magic")

# (module-name prefix, stage); the longest matching prefix decides
STAGES = [
    ("runtime.errors", 0), ("runtime.version", 0), ("runtime.gc_pause", 0),
    ("runtime.hlo", 1),
    ("runtime.analysis", 2),
    ("runtime.passes", 3), ("runtime.target", 3),
    ("runtime.buffers", 4),
    ("runtime.pipeline", 5),
    ("runtime.opencl", 6),
    ("runtime.custom_calls", 7),
    ("runtime.codegen", 8),
    ("runtime.execution", 9),
    ("runtime", 10),
    ("hlo_magic", 11),
    ("runtime.cli", 11),      # a front end like the notebook layer: `hlo memory --png` draws its figure
]


def module_files() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (REPO / package).rglob("*.py"):
            parts = list(path.relative_to(REPO).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """Modules of ours that ``name`` imports anywhere in its text."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    tree = ast.parse(path.read_text())
    type_only = {id(n) for block in ast.walk(tree) if isinstance(block, ast.If)
                 and ast.unparse(block.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING")
                 for stmt in block.body for n in ast.walk(stmt)}
    found = set()
    for node in ast.walk(tree):
        if id(node) in type_only:
            continue
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                prefix = package[:len(package) - node.level + 1]
                base = ".".join(prefix + ([node.module] if node.module else []))
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base
                       for a in node.names]
        else:
            continue
        found.update(t for t in targets if t in modules and t != name)
    return found


def graph() -> dict[str, set[str]]:
    modules = module_files()
    return {name: imports_of(name, path, modules) for name, path in modules.items()}


def stage(name: str) -> int:
    return max(((len(prefix), rank) for prefix, rank in STAGES
                if name == prefix or name.startswith(prefix + ".")))[1]


def cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(g[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(g):
        if v not in index:
            visit(v)
    return found


def test_the_graph_sees_function_level_and_relative_imports():
    g = graph()
    assert "runtime.codegen.families" in g["runtime.codegen.lower"]
    assert "runtime.opencl.device" in g["runtime.compiler"]          # inside a function
    assert "runtime.opencl.device" in g["runtime.custom_calls.registry"]


def test_no_import_cycles():
    assert cycles(graph()) == []


def test_cycle_detection_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_module_imports_a_later_stage():
    g = graph()
    later = sorted(f"{m} (stage {stage(m)}) imports {t} (stage {stage(t)})"
                   for m, targets in g.items() for t in targets if stage(t) > stage(m))
    assert later == []


def test_layers_are_folders():
    """Every stage is a folder of ``runtime`` (or one top-level module): a module's stage
    never depends on its name within its folder, so a folder never imports a later one."""
    for prefix, _ in STAGES:
        parts = prefix.split(".")
        path = REPO.joinpath(*parts)
        assert len(parts) <= 2 and (path.is_dir() or path.with_suffix(".py").is_file()), prefix


def test_the_lowering_registry_imports_no_family_and_families_not_lower():
    g = graph()
    assert not {t for t in g["runtime.codegen.registry"] if t.startswith("runtime.")}
    families = [m for m in g if m.startswith("runtime.codegen.families")]
    assert families and all("runtime.codegen.lower" not in g[m] for m in families)


def test_stages_follow_the_pipeline():
    order = ["runtime.hlo.ir", "runtime.passes.fusion", "runtime.buffers.assignment",
             "runtime.pipeline", "runtime.codegen.lower", "runtime.execution.executable",
             "runtime.compiler", "hlo_magic.magics"]
    ranks = [stage(m) for m in order]
    assert ranks == sorted(ranks) and len(set(ranks)) == len(ranks)


def test_the_notebook_layer_reaches_no_compiler_internals():
    """``hlo_magic`` reports what ``runtime`` computed; the passes, the pipeline, code
    generation and OpenCL stay behind ``runtime``'s top level."""
    g = graph()
    internal = ("runtime.passes", "runtime.pipeline", "runtime.codegen", "runtime.opencl")
    reached = {(m, t) for m, targets in g.items() if m.startswith("hlo_magic")
               for t in targets if t.startswith(internal)}
    assert not reached, sorted(reached)
