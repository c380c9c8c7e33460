"""Running a host custom call: numpy views in, the function called per its api_version.

``ins`` is a list with one entry per operand (a nested tuple for a tuple operand); ``out`` is
the result array, or a (nested) tuple of arrays for a tuple result, where an element nobody
reads afterwards is simply scratch memory, as in XLA. Operand views are read-only unless an
output aliases them (``output_to_operand_aliasing``: one buffer, modified in place). The views
are valid only during the call.

Layouts: a view shows the logical array whatever the physical layout. Where
``operand_layout_constraints`` asks for another layout than the operand has (XLA's layout
assignment would insert a copy), the function gets a copy in the asked layout; and where an
in-place output's layout differs from its operand's, the operand is read first and the output
starts out holding the operand's values, so modification semantics hold.

A function may also return its result instead of writing it: the returned arrays must then
have exactly the result's shapes and dtypes, which is how a wrong shape or dtype is caught.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from ..analysis.in_place import same_physical_shape
from ..hlo.shape import index_text
from .call_site import CallSite, Leaf, Tree, leaves, operand_leaf_shape
from .conventions import HOST_CONVENTIONS, CallArguments
from .mapping import MappedLeaves, array_in_layout


@dataclass
class HostCallRunner:
    """The ``run`` of a ``HostCall`` plan step: ``runner(executor, bindings)``."""

    site: CallSite
    function: Callable

    def __call__(self, executor, bindings: list[Any]) -> None:
        site = self.site
        invoke = HOST_CONVENTIONS[site.api_version]
        with MappedLeaves(executor.device, bindings, site.all_leaves()) as mapped:
            ins = [self._operand(mapped, k, tree) for k, tree in enumerate(site.operands)]
            out = _build(site.result, mapped.view)
            self._start_in_place_outputs(ins, out)
            args = CallArguments(opaque=site.opaque, attrs=site.attrs, out=out, ins=ins)
            try:
                returned = invoke(self.function, args)
            except Exception as error:
                raise site.error(f"the host function raised {type(error).__name__}: {error}",
                                 hint=_expected_result(site)) from error
            if returned is not None:
                _store(site, returned, site.result, out, ())
        if args.status.failed:
            raise site.error(f"failed: {args.status.message}")

    def _operand(self, mapped: MappedLeaves, number: int, tree: Tree):
        site = self.site
        aliased_by = {pair.operand_index: _pick(site.result, pair.output_index)
                      for pair in site.aliases if pair.operand_number == number}

        def view(leaf: Leaf) -> np.ndarray:
            array = mapped.view(leaf)
            wanted = operand_leaf_shape(site, number, leaf.index, leaf.shape)
            output = aliased_by.get(leaf.index)
            as_is = same_physical_shape(wanted, leaf.shape)
            if as_is and isinstance(output, Leaf) and same_physical_shape(output.shape, leaf.shape):
                return array            # in place: the output's own bytes, writable
            if not as_is or output is not None:
                array = array_in_layout(array, wanted)
            array.flags.writeable = False
            return array
        return _build(tree, view)

    def _start_in_place_outputs(self, ins: list, out) -> None:
        """An in-place output in another layout than its operand shares the bytes but not the
        element order: give it the operand's values (``_operand`` copied them out first)."""
        for pair in self.site.aliases:
            output = _pick(self.site.result, pair.output_index)
            operand = _pick(self.site.operands[pair.operand_number], pair.operand_index)
            if isinstance(output, Leaf) and isinstance(operand, Leaf) and \
                    not same_physical_shape(output.shape, operand.shape):
                _pick(out, pair.output_index)[...] = \
                    _pick(ins[pair.operand_number], pair.operand_index)


def _build(tree: Tree, view: Callable[[Leaf], np.ndarray]):
    if isinstance(tree, tuple):
        return tuple(_build(t, view) for t in tree)
    return None if tree is None else view(tree)


def _pick(value, index: tuple[int, ...]):
    for k in index:
        value = value[k]
    return value


def _store(site: CallSite, returned, tree: Tree, out, index: tuple[int, ...]) -> None:
    """Copy a returned value into the outputs, insisting on exact shapes and dtypes."""
    if isinstance(tree, tuple):
        if not isinstance(returned, (tuple, list)) or len(returned) != len(tree):
            raise site.error(f"the host function returned {_describe(returned)}, but the result "
                             f"{index_text(index)} is a tuple of {len(tree)}",
                             hint=_expected_result(site))
        for k, (value, element) in enumerate(zip(returned, tree)):
            _store(site, value, element, out[k], index + (k,))
        return
    if tree is None:
        return
    want = tree.shape
    try:
        array = np.asarray(returned)
    except (ValueError, TypeError):
        array = None
    if array is None or array.dtype != want.element_type.numpy or array.shape != want.dims:
        raise site.error(f"the host function returned {_describe(returned)} for result "
                         f"{index_text(index)}, which is {want.to_text(False)}",
                         hint="return arrays of exactly the result's shapes and dtypes, or "
                              "write into out")
    out[...] = array


def _describe(value) -> str:
    if isinstance(value, np.ndarray):
        return f"{value.dtype}{list(value.shape)}"
    if isinstance(value, (tuple, list)):
        return "(" + ", ".join(_describe(v) for v in value) + ")"
    return type(value).__name__


def _expected_result(site: CallSite) -> str:
    if isinstance(site.result, Leaf):
        return f"out is {site.result.shape.to_text(False)}"
    shapes = ", ".join(leaf.shape.to_text(False) for leaf in leaves(site.result))
    return f"out is a tuple of {shapes}"


__all__ = ["HostCallRunner"]
