"""Report parts built from a buffer assignment (the data both renderers show)."""

import runtime
from hlo_magic.report import GLOSSARY, allocation_table, memory_table, peak_table
from runtime.pipeline import buffer_assignment

from .hlo_texts import ADD_MUL

FOUR_CONSTANTS = """HloModule consts

ENTRY main {
  x = f32[] parameter(0)
  c1 = f32[] constant(1)
  c2 = f32[] constant(2)
  c3 = f32[] constant(3)
  c4 = f32[] constant(4)
  a = f32[] add(x, c1)
  b = f32[] multiply(a, c2)
  c = f32[] subtract(b, c3)
  ROOT d = f32[] divide(c, c4)
}
"""


def test_many_constants_share_one_allocation_row():
    table = allocation_table(buffer_assignment(runtime.parse(FOUR_CONSTANTS)), limit=25)
    kinds = [row[1] for row in table.rows]
    assert kinds.count("constant") == 1
    (row,) = [row for row in table.rows if row[1] == "constant"]
    assert row == ("1\u20134", "constant", "16 B", "4 constants, one allocation each",
                   "c1, c2, c3, c4")


def test_few_constants_keep_their_own_rows_and_the_limit_counts_the_rest():
    three = FOUR_CONSTANTS.replace("  c4 = f32[] constant(4)\n", "").replace(
        "divide(c, c4)", "divide(c, c3)")
    table = allocation_table(buffer_assignment(runtime.parse(three)), limit=2)
    assert [row[0] for row in table.rows] == ["0", "1"]
    assert table.omitted == 4 and table.omitted_what == "allocations"   # c2, c3, d, temp


def test_memory_and_peak_tables_say_what_the_numbers_are():
    plan = buffer_assignment(runtime.parse(ADD_MUL))
    memory = {row[0]: row for row in memory_table(plan).rows}
    assert memory["alias"][1:] == ("128 B", "")         # the meaning is in the glossary
    assert dict(GLOSSARY)["alias"] == "parameter bytes an output lives in"
    assert memory["peak"][1] == "400 B" and "reached at step 4 (t)" in memory["peak"][2]
    assert "fragmentation" not in memory          # no temp arena
    peak = peak_table(plan, limit=25)
    assert [(row[0], row[2]) for row in peak.rows] == [
        ("s", "128 B"), ("x", "256 B"), ("y", "384 B"), ("t", "400 B")]
