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
    names = ["w", "g", "lr"]
    assert parse_donate("", names) == frozenset()
    assert parse_donate("0, 2", names) == frozenset({0, 2})
    assert parse_donate("all", names) == frozenset({0, 1, 2})
    assert parse_donate("w", names) == frozenset({0})
    assert parse_donate("g,%lr", names) == frozenset({1, 2})
    assert parse_donate("w, 1", names) == frozenset({0, 1})
    with pytest.raises(UsageError, match=r"expected none \(the entry has no parameters\)"):
        parse_donate("0", [])


@pytest.mark.parametrize("value, message", [
    ("0,0", r"--donate '0,0': parameter 0 \(w\) is given as '0' and again; name each donated "
            r"parameter once \(a buffer can be handed over once: drop the repeat\)"),
    ("w,0", r"parameter 0 \(w\) is given as 'w' and again as '0'"),
    ("q", r"'q' is not a parameter number or name; expected numbers 0..2, names w, g, lr, or "
          r"'all'$"),
    ("gg", r"'gg' is not a parameter number or name; did you mean g\?; expected"),
    ("3", r"--donate '3': 3 is not a parameter number or name"),
])
def test_donate_mistakes_are_one_usage_error(value, message):
    with pytest.raises(UsageError, match=message):
        parse_donate(value, ["w", "g", "lr"])


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


def test_a_donated_name_on_a_model_gets_the_closest_names_not_every_name():
    names = [f"flat_{k}_.1" for k in range(243)]
    with pytest.raises(UsageError) as e:
        parse_donate("flat_24_1", names)
    message = str(e.value)
    assert message.startswith("--donate 'flat_24_1': 'flat_24_1' is not a parameter number or "
                              "name; did you mean flat_24_.1, ")
    assert message.endswith("expected numbers 0..242, one of the 243 parameter names "
                            "(flat_0_.1, flat_1_.1, flat_2_.1, \u2026 flat_242_.1), or 'all'")
