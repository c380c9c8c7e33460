"""``template_fill.fill`` is ``string.Template.substitute``, parsing each template once."""

from string import Template

import pytest

from runtime.codegen import cltypes
from runtime.codegen.template_fill import fill

CASES = [
    ("$x + $y", {"x": "a[i]", "y": "1.0f"}),
    ("${T}4 v = ($T)($x);", {"T": "float", "x": "q"}),
    ("$$x costs $$5: $x", {"x": "v1"}),
    ("no placeholders", {}),
    ("$a$a${a}", {"a": 3}),
    ("", {}),
]


@pytest.mark.parametrize("template,values", CASES)
def test_fill_matches_string_template(template, values):
    assert fill(template, values) == Template(template).substitute(values)
    assert fill(template, **values) == Template(template).substitute(**values)


def test_keywords_override_the_mapping_like_string_template():
    assert fill("$x", {"x": "mapping"}, x="keyword") == "keyword"


def test_missing_and_malformed_placeholders_raise_like_string_template():
    with pytest.raises(KeyError):
        fill("$x + $y", x="1")
    with pytest.raises(ValueError):
        fill("cost $5", {})


def test_every_element_type_template_fills_as_before():
    values = {"ptr": "p", "index": "i", "value": "v", "x": "e"}
    rows = list(cltypes.CL_TYPES.values())
    assert rows
    for row in rows:
        for template in (row.load, row.store, row.round):
            assert fill(template, values) == Template(template).substitute(values)
