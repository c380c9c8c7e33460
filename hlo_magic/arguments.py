"""Checking the values of ``%%hlo`` flags: each mistake is one ``UsageError`` sentence naming
the flag, the value given and what is allowed (IPython prints exactly ``UsageError`` as one red
line; a subclass would get a full traceback)."""

from __future__ import annotations

import ast
import difflib
import keyword
import re
from types import ModuleType
from typing import Any, Callable, Iterable, Mapping, Sequence

from IPython.core.error import UsageError
from IPython.core.magic_arguments import parse_argstring

from runtime.buffers.donation_spec import resolve_donation
from runtime.errors import HloArgumentError

from .report import SECTIONS

SHOW_VALUES = (*SECTIONS, "none")
MADE_UP = ("random", "zeros")     # --run WORD: inputs made from the parameters' shapes
_UNRECOGNIZED = re.compile(r"unrecognized arguments: (.*)", re.S)
_NOT_IDENTIFIER = re.compile(r"\W")


def parse_line(magic: Callable, line: str):
    """``parse_argstring`` with a hint for a mistyped option: ``--shwo`` is an unknown option,
    and the closest of the magic's own options (``--show``) is suggested."""
    try:
        return parse_argstring(magic, line)
    except UsageError as error:
        unknown = _UNRECOGNIZED.match(str(error))
        if unknown is None:
            raise
        parser = getattr(magic, "parser")     # set by magic_arguments' decorators
        options = [o for action in parser._actions for o in action.option_strings]
        flags = [t for t in unknown.group(1).split() if t.startswith("-")]
        if not flags:
            raise
        hints = []
        for flag in flags:
            close = difflib.get_close_matches(flag.split("=")[0], options, n=2, cutoff=0.7)
            hints.append(f"unknown option {flag}" + (f": did you mean {' or '.join(close)}?"
                                                     if close else ""))
        raise UsageError(f"{'; '.join(hints)} (options: "
                         f"{', '.join(o for o in options if o.startswith('--'))})") from None


def parse_show(value: str, flag: str = "--show") -> tuple[str, ...]:
    """``assignment,timeline`` -> ("assignment", "timeline"); ``none`` stands alone."""
    parts = tuple(p.strip() for p in value.split(",") if p.strip())
    bad = [p for p in parts if p not in SHOW_VALUES]
    if not parts or bad:
        raise UsageError(f"{flag} {value!r}: expected a comma-separated list of "
                         f"{', '.join(SHOW_VALUES)}")
    if "none" in parts and len(parts) > 1:
        raise UsageError(f"{flag} {value!r}: 'none' cannot be combined with other sections")
    return parts


def parse_donate(value: str, names: Sequence[str]) -> frozenset[int]:
    """``0,2``, ``w,g`` or ``all`` -> parameter numbers, checked against the entry's
    parameter ``names`` (the runtime's rules: each parameter at most once)."""
    if not value.strip():
        return frozenset()
    try:
        return resolve_donation(value, names, what=f"--donate {value!r}")
    except HloArgumentError as error:
        hint = f" ({error.hint})" if error.hint else ""
        raise UsageError(f"{error.message}{hint}") from None


def made_up_inputs(run: list[str] | None, seed: int | None,
                   namespace: Mapping[str, Any]) -> str | None:
    """"random" or "zeros" for ``--run random`` / ``--run zeros``, else None. A notebook
    variable of that name that could be an input is refused rather than guessed at: the
    module would run on other values than the user meant (``import random`` or numpy's
    ``zeros`` function are not inputs, and do not count)."""
    word = run[0] if run and len(run) == 1 and run[0] in MADE_UP else None
    if seed is not None and (word != "random" or seed < 0):
        raise UsageError(f"--seed {seed}: a non-negative seed for --run random's inputs"
                         if word == "random" else
                         f"--seed {seed} is the seed of --run random's inputs; give --run "
                         "random as well")
    if word is not None and word in namespace and not _not_an_input(namespace[word]):
        raise UsageError(f"--run {word}: the notebook has a variable named {word!r}, and "
                         f"--run {word} means made-up {word} inputs; pass the variable with "
                         f"-i {word}, or rename it")
    return word


def _not_an_input(value: Any) -> bool:
    return isinstance(value, ModuleType) or callable(value)


def split_names(value: str | None) -> list[str]:
    """``-i a,b`` -> ["a", "b"]."""
    if not value:
        return []
    return [n.strip() for n in value.split(",") if n.strip()]


def lookup(namespace: Mapping[str, Any], names: Iterable[str], flag: str) -> list[Any]:
    """The user's values for ``names``; a missing name lists the similar ones that exist."""
    values = []
    for name in names:
        if name in namespace:
            values.append(namespace[name])
            continue
        public = [k for k in namespace if not k.startswith("_")]
        close = difflib.get_close_matches(name, public, n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise UsageError(f"{flag}: no variable named {name!r} in the notebook{hint}")
    return values


def evaluate_call(line: str, namespace: dict[str, Any], magic: str) -> tuple[Any, tuple, dict]:
    """``f(x, *xs, n=2, **kw)`` -> the function and its arguments, each expression evaluated
    in the notebook's ``namespace`` (the call itself is not made)."""
    text = line.strip()
    try:
        call = ast.parse(text, mode="eval").body
    except SyntaxError as error:
        raise UsageError(f"{magic} {text!r}: expected a call such as f(x, y) ({error.msg})") \
            from None
    if not isinstance(call, ast.Call):
        raise UsageError(f"{magic} {text!r}: expected a call such as f(x, y), the way the "
                         "jitted function is called")

    def value(node: ast.expr) -> Any:
        return eval(compile(ast.Expression(node), f"<{magic}>", "eval"), namespace)

    args: list[Any] = []
    for node in call.args:
        if isinstance(node, ast.Starred):
            args.extend(value(node.value))
        else:
            args.append(value(node))
    kwargs: dict[str, Any] = {}
    for keyword_node in call.keywords:
        if keyword_node.arg is None:
            kwargs.update(value(keyword_node.value))
        else:
            kwargs[keyword_node.arg] = value(keyword_node.value)
    return value(call.func), tuple(args), kwargs


def per_device(args: Sequence[Any], devices: int) -> list[list[Any]]:
    """Each device's arguments from the values ``--run`` names for a multi-device module: a
    list or tuple of ``devices`` arrays is one array per device (``[x0, x1]`` for 2
    devices); any other value is every device's."""
    def for_device(value: Any, d: int) -> Any:
        if isinstance(value, (list, tuple)) and len(value) == devices and \
                all(hasattr(v, "shape") and hasattr(v, "dtype") for v in value):
            return value[d]
        return value
    return [[for_device(a, d) for a in args] for d in range(devices)]


def lookup_function(namespace: Mapping[str, Any], name: str, flag: str) -> Callable:
    """The user's function called ``name`` (a missing name lists similar ones)."""
    (fn,) = lookup(namespace, [name], flag)
    if not callable(fn):
        raise UsageError(f"{flag} {name!r}: expected a function, got {type(fn).__name__}")
    return fn


def python_name(name: str) -> str:
    """A module name as a Python identifier: ``jit_f.1`` -> ``jit_f_1``, ``if`` -> ``if_``."""
    ident = _NOT_IDENTIFIER.sub("_", name)
    if not ident or ident[0].isdigit():
        ident = "_" + ident
    if keyword.iskeyword(ident):
        ident += "_"
    return ident


def check_identifier(value: str, flag: str) -> str:
    if not value.isidentifier() or keyword.iskeyword(value):
        raise UsageError(f"{flag} {value!r}: expected a Python variable name")
    return value
