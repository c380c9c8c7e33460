"""HLO text of counted loops, for the fusion passes' loop tests."""


def counted_loop(trips: int, state: dict[str, str], step: str, results: list[str],
                 entry: str, init: list[str], computations: str = "") -> str:
    """A while loop over (counter, ``state``'s elements) running ``trips`` times: the body
    binds each element to its name in ``state`` and the counter to ``i``, runs ``step`` and
    carries ``results`` on; the entry computation runs ``entry`` (``zero`` and ``fz`` defined)
    and starts from ``init``; ``computations`` go before the loop's (fused computations the
    step calls)."""
    shape = "(s32[], " + ", ".join(state.values()) + ")"
    reads = "\n".join(f"  {name} = {s} get-tuple-element(p), index={k}"
                       for k, (name, s) in enumerate(state.items(), 1))
    return f"""
HloModule loop
{computations}
cond {{
  p = {shape} parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant({trips})
  ROOT lt = pred[] compare(i, n), direction=LT
}}
body {{
  p = {shape} parameter(0)
  i = s32[] get-tuple-element(p), index=0
{reads}
  zero = s32[] constant(0)
{step}
  one = s32[] constant(1)
  next = s32[] add(i, one)
  ROOT out = {shape} tuple(next, {", ".join(results)})
}}
ENTRY e {{
  zero = s32[] constant(0)
  fz = f32[] constant(0)
{entry}
  init = {shape} tuple(zero, {", ".join(init)})
  ROOT w = {shape} while(init), condition=cond, body=body
}}
"""
