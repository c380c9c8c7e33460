"""Opcodes are a closed vocabulary: ``Opcode`` members, one per row of the opcode table.

Read statically over every module of ``runtime`` and ``hlo_magic`` but the table itself
(``runtime/hlo/opcodes.py``): no string literal is compared with an opcode (``inst.opcode``,
a name bound from one, or a parameter called ``opcode``), a misspelt one included, and no
module-level table or registry is keyed by a string that names an opcode. A per-opcode fact
is a column of the table; a rule registry is keyed by ``Opcode`` members.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from runtime.hlo.opcode_enum import Opcode
from runtime.hlo.opcodes import OPCODES

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("runtime", "hlo_magic")
TABLE = "runtime/hlo/opcodes.py"
OPCODE_NAMES = frozenset(op.value for op in Opcode)

# module-level tables with keys spelt like opcodes that are something else: (module, table)
NOT_OPCODE_TABLES = {
    ("hlo_magic/__init__.py", "_EXPORTS"): "exported names (the `compare` function)",
    ("hlo_magic/timeline.py", "KIND_STYLES"): "buffer kinds (parameter, constant, ...)",
    ("runtime/analysis/dataflow.py", "WRITING_KINDS"): "value kinds (parameter, constant)",
    ("runtime/codegen/cltypes.py", "_UNSUPPORTED_REASONS"): "element-type kinds (complex)",
    ("runtime/hlo/lexer.py", "_KIND_OF"): "token kinds (pad)",
    ("runtime/hlo/shape_inference.py", "_CLASSES"): "element-type classes (complex)",
}


def modules(root: Path = REPO) -> dict[str, ast.Module]:
    found = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            name = path.relative_to(root).as_posix()
            if name != TABLE:
                found[name] = ast.parse(path.read_text())
    return found


def _strings(node: ast.AST, only_opcodes: bool) -> Iterator[ast.Constant]:
    """String literals in ``node``: itself, or the elements of a tuple, list or set literal,
    or of ``frozenset(...)``/``set(...)``/``tuple(...)``/``dict.fromkeys(...)``."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        if not only_opcodes or node.value in OPCODE_NAMES:
            yield node
    elif isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        for element in node.elts:
            yield from _strings(element, only_opcodes)
    elif isinstance(node, ast.Call) and node.args and (
            (isinstance(node.func, ast.Name) and node.func.id in ("frozenset", "set", "tuple"))
            or (isinstance(node.func, ast.Attribute) and node.func.attr == "fromkeys")):
        yield from _strings(node.args[0], only_opcodes)


def _is_opcode_attribute(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "opcode"


def _opcode_names(function: ast.AST) -> set[str]:
    """Names a function binds to an opcode (``op = inst.opcode``), and ``opcode``."""
    return {"opcode"} | {target.id for node in ast.walk(function) if isinstance(node, ast.Assign)
                         and _is_opcode_attribute(node.value)
                         for target in node.targets if isinstance(target, ast.Name)}


def compared_strings(tree: ast.Module) -> Iterator[ast.Constant]:
    """String literals compared (==, !=, in, not in) with an opcode."""
    scopes: list[tuple[ast.AST, set[str]]] = [(tree, set())]
    scopes += [(fn, _opcode_names(fn)) for fn in ast.walk(tree)
               if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))]
    seen: set[int] = set()
    for scope, names in scopes:
        for node in ast.walk(scope):
            if not isinstance(node, ast.Compare):
                continue
            sides = [node.left, *node.comparators]
            if any(_is_opcode_attribute(s) or (isinstance(s, ast.Name) and s.id in names)
                   for s in sides):
                for side in sides:
                    for literal in _strings(side, only_opcodes=False):
                        if id(literal) not in seen:
                            seen.add(id(literal))
                            yield literal


def _table(statement: ast.stmt) -> tuple[str, ast.expr] | None:
    """(name, value) of a module-level assignment."""
    if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
        return ast.unparse(statement.targets[0]), statement.value
    if isinstance(statement, ast.AnnAssign) and statement.value is not None:
        return ast.unparse(statement.target), statement.value
    return None


def table_keys(tree: ast.Module) -> Iterator[tuple[str, ast.Constant]]:
    """(table, literal) for each string naming an opcode that keys a module-level dict or is
    an element of a module-level set (``dict.fromkeys`` and ``frozenset(...)`` included)."""
    seen: set[int] = set()
    for statement in tree.body:
        table = _table(statement)
        if table is None:
            continue
        name, value = table
        for node in ast.walk(value):
            literals: list[ast.Constant] = []
            if isinstance(node, ast.Dict):
                for key in node.keys:
                    if key is not None:
                        literals += _strings(key, only_opcodes=True)
            elif isinstance(node, ast.Set) or (isinstance(node, ast.Call) and (
                    (isinstance(node.func, ast.Name) and node.func.id in ("frozenset", "set"))
                    or (isinstance(node.func, ast.Attribute) and node.func.attr == "fromkeys"))):
                literals += _strings(node, only_opcodes=True)
            for literal in literals:
                if id(literal) not in seen:
                    seen.add(id(literal))
                    yield name, literal


def registered_strings(tree: ast.Module) -> Iterator[ast.Constant]:
    """String literals naming opcodes passed as keys to a lowering registry's ``register``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                and node.func.id == "register":
            for arg in node.args:
                yield from _strings(arg, only_opcodes=True)


def offenders(root: Path = REPO) -> list[str]:
    found = []
    for module, tree in modules(root).items():
        found += [f"{module}:{s.lineno}: {s.value!r} compared with an opcode"
                  for s in compared_strings(tree)]
        found += [f"{module}:{s.lineno}: {s.value!r} keys the table {table}"
                  for table, s in table_keys(tree) if (module, table) not in NOT_OPCODE_TABLES]
        found += [f"{module}:{s.lineno}: {s.value!r} registered as a string"
                  for s in registered_strings(tree)]
    return found


def test_opcodes_are_compared_and_keyed_as_members():
    found = offenders()
    assert not found, (f"{len(found)} opcode strings outside the opcode table (use Opcode "
                       "members, or a column of runtime/hlo/opcodes.py):\n" + "\n".join(found))


def test_tables_not_keyed_by_opcodes_still_exist():
    """Each exemption still names a table whose keys spell like opcodes (none goes stale)."""
    trees = modules()
    for module, table in NOT_OPCODE_TABLES:
        assert any(name == table for name, _ in table_keys(trees[module])), (module, table)


def test_every_member_has_a_row_and_every_row_a_member():
    assert set(Opcode) == set(OPCODES)
    for opcode, spec in OPCODES.items():
        assert type(opcode) is Opcode and spec.name is opcode


def test_members_print_as_their_text():
    assert str(Opcode.GET_TUPLE_ELEMENT) == "get-tuple-element"
    assert f"{Opcode.ADD}({Opcode.ROUND_NEAREST_AFZ})" == "add(round-nearest-afz)"
    assert Opcode.ADD == "add"


def test_the_check_sees_each_form():
    """The scan above finds a comparison, a membership test, a table key and a registration."""
    tree = ast.parse(
        'T = {"add": 1, "x": 2}\nS = frozenset({"copy"})\nU = dict.fromkeys(("dot",), 1)\n'
        'def f(inst):\n    op = inst.opcode\n    return op in ("while", "oops") '
        'or inst.opcode == "tuple"\n'
        '@register("reduce")\ndef g(opcode):\n    return opcode != "sort"\n')
    assert sorted(s.value for s in compared_strings(tree)) == ["oops", "sort", "tuple", "while"]
    assert sorted((t, s.value) for t, s in table_keys(tree)) == [
        ("S", "copy"), ("T", "add"), ("U", "dot")]
    assert [s.value for s in registered_strings(tree)] == ["reduce"]
