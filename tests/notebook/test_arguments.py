"""Flag values: each mistake is one UsageError naming the flag, the value and what is allowed."""

import pytest
from IPython.core.error import UsageError

from hlo_magic.arguments import (
    check_identifier, lookup, parse_donate, parse_show, python_name, split_names,
)


def test_show_lists():
    assert parse_show("assignment, timeline") == ("assignment", "timeline")
    assert parse_show("none") == ("none",)
    with pytest.raises(UsageError, match=r"^--show '': expected a comma-separated list"):
        parse_show("")


def test_donate_values():
    assert parse_donate("", 3) == frozenset()
    assert parse_donate("0, 2", 3) == frozenset({0, 2})
    assert parse_donate("all", 3) == frozenset({0, 1, 2})
    with pytest.raises(UsageError, match=r"expected comma-separated numbers in none \(the entry "
                                         r"has no parameters\)"):
        parse_donate("0", 0)


def test_names_and_identifiers():
    assert split_names("a, b,,c") == ["a", "b", "c"] and split_names(None) == []
    assert python_name("jit_f.1") == "jit_f_1"
    assert python_name("1module") == "_1module"
    assert python_name("if") == "if_"
    assert check_identifier("r", "-o") == "r"
    with pytest.raises(UsageError, match="-o 'class': expected a Python variable name"):
        check_identifier("class", "-o")


def test_lookup_reads_only_the_named_variables():
    namespace = {"a": 1, "b": 2, "_hidden": 3}
    assert lookup(namespace, ["b", "a"], "--run") == [2, 1]
    with pytest.raises(UsageError, match=r"^--run: no variable named 'c' in the notebook$"):
        lookup(namespace, ["c"], "--run")
