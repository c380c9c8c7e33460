"""The glossary folded into every report: XLA's memory words, then the notation a report and
the module text show without explaining (layouts, shape indices, allocation numbers, fusion
kinds, JAX's parameter names).

Each entry says what the word means in this report, in a line; the tests check that every
notation it explains is one the report or the annotated module really prints.
"""

from __future__ import annotations

MEMORY_WORDS: list[tuple[str, str]] = [
    ("argument", "parameter allocations"),
    ("output", "maybe-live-out allocations (aliased parameters and tuple tables included)"),
    ("alias", "parameter bytes an output lives in"),
    ("temp", "the temp arena, shared by every temporary"),
    ("constant", "constant allocations"),
    ("total", "argument + output + temp \u2212 alias"),
    ("peak", "live-range peak: the most bytes live at one step of the schedule (parameters, "
             "constants, outputs and temporaries)"),
    ("fragmentation", "temp arena beyond its liveness lower bound"),
]

NOTATION: list[tuple[str, str]] = [
    ("temp arena", "one allocation for all temporaries: buffers whose live ranges do not "
                   "overlap share its bytes"),
    ("live range", "the schedule steps from the instruction that writes a buffer to its last "
                   "reader; two buffers may share bytes only if their live ranges are disjoint"),
    ("donation", "handing a parameter's buffer to the run so an aliased output is written in "
                 "place (a donated device array is deleted); an undonated one is copied "
                 "first or the output gets its own buffer"),
    ("may-alias, must-alias", "input_output_alias entries: the output may live in the "
                              "parameter's buffer if the caller donates it; must-alias: every "
                              "run has to donate it"),
    ("buffer_donor", "a parameter whose buffer any output of the same byte size may take when "
                     "donated"),
    ("f32[4,8]{1,0}", "a layout: the dimensions from fastest- to slowest-varying in memory "
                      "({1,0} is row-major; {0} for one dimension)"),
    ("output {0}, {1,2}", "a shape index: element 0 of the result tuple, element 2 of its "
                          "element 1; {} is the whole result"),
    ("#28, #3 +128", "allocation 28 (its number in the allocation table); byte offset 128 "
                     "in allocation 3"),
    ("kLoop, kInput, kOutput", "fusion kinds: an elementwise loop; a fusion rooted at a "
                               "reduction; elementwise work fused around a dot or convolution"),
    ("flat_0_.1, w__b__.1", "JAX's parameter names: the argument's path (flat[0], w['b']) with "
                            "brackets and quotes written _, then the .N XLA adds to keep "
                            "names unique"),
]

GLOSSARY: list[tuple[str, str]] = MEMORY_WORDS + NOTATION
