"""Byte, time and change formatting."""

import pytest

from hlo_magic.formatting import format_bytes, format_change, format_seconds


@pytest.mark.parametrize("n, text", [(0, "0 B"), (12, "12 B"), (1023, "1023 B"),
                                     (1024, "1.0 KiB"), (1536, "1.5 KiB"),
                                     (4 * 2 ** 20, "4.0 MiB"), (3 * 2 ** 40, "3.0 TiB"),
                                     (2 ** 52, "4096.0 TiB")])
def test_bytes(n, text):
    assert format_bytes(n) == text


def test_seconds_and_changes():
    assert [format_seconds(s) for s in (0.00025, 0.0842, 3.2)] == ["250 us", "84.2 ms", "3.20 s"]
    assert format_change(12, 8) == "\u221233 %"
    assert format_change(8, 12) == "+50 %"
    assert format_change(5, 5) == "\u00b10 %"
    assert format_change(172_800, 172_224) == "\u22120.3 %"     # not "-0 %"
    assert format_change(100_000, 100_004) == "+0.004 %"
    assert format_change(10 ** 9, 10 ** 9 - 128) == "\u22120.00001 %"
    assert format_change(0, 4) == "+\u221e %"
