"""The text report and the structured records."""

from .checked import assigned
from .test_assignment import LOOP, XLA_EXAMPLE


def test_report_lists_allocations_copies_schedule_statistics_and_the_peak():
    text = assigned(XLA_EXAMPLE).to_text()
    lines = text.splitlines()
    assert lines[0] == "BufferAssignment for module jit_f (alignment 128 bytes):"
    assert lines[1] == ("allocation 0: size 128, parameter 0, shape |f32[4,8]| at ShapeIndex {}, "
                        "maybe-live-out, aliased with output {0} (may-alias):")
    assert lines[2].startswith(" value: <") and "x.1" in lines[2] and "live 0-1" in lines[2]
    assert "allocation 5: size 128, preallocated-temp:" in lines
    assert " copy.0: parameter 0 {}, aliased with output {0}: multiply_add_fusion would overwrite " \
           "x.1, which is still needed until wrapped_reduce" in lines
    assert "Schedule: module (7 steps; simulated peaks: module 276, list 276, post-order 276)" in lines
    for stat in (" argument: 256", " output: 148", " alias: 128", " temp: 128", " constant: 4",
                 " total (argument + output + temp - alias): 404",
                 " temp arena: 128 (spatial order); liveness lower bound 128; fragmentation 0 (0.0%)",
                 " live-range peak (largest total bytes live at one step): 392 at step 5 "
                 "(wrapped_reduce)"):
        assert stat in lines
    peak = lines[lines.index("Buffers live at the peak (largest first):") + 1:]
    assert peak[0] == " copy.0: 128 bytes (cumulative 128), f32[4,8], temp, live 1-5"
    assert peak[-1].startswith(" wrapped_reduce: 4 bytes (cumulative 392)")


def test_records_have_exactly_the_documented_keys():
    records = assigned(LOOP).records()
    assert records and all(list(r) == ["name", "allocation", "kind", "offset", "size", "start", "end"]
                           for r in records)
    assert {r["kind"] for r in records} == {"parameter", "constant", "output", "temp"}
