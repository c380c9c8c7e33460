"""On-demand lexer for HLO text.

Tokens are produced one at a time from the current offset so the parser can, at any point,
take a balanced ``{...}`` blob verbatim (backend configs in MLIR or JSON syntax, shardings)
instead of tokenising it. One compiled regular expression with named groups does the work;
its alternatives are ordered as XLA's lexer tries them (decimal, dim labels, NxM, padding,
integer), so ``1_1`` is a padding token and ``3x3`` a window size.
"""

from __future__ import annotations

import bisect
import re

from ..errors import HloParseError, SourceLocation

# token kinds
EOF = "eof"
NAME = "name"          # %ident, or ident immediately followed by ':' (colon consumed)
ATTR = "attr"          # ident immediately followed by '=' ('=' consumed)
IDENT = "ident"
INT = "int"
FLOAT = "float"
STRING = "string"
DIM_LABELS = "dim_labels"
DXD = "dxd"
PAD = "pad"
DOTS = "dots"
PUNCT = "punct"

_IDENT = r"[A-Za-z_][A-Za-z0-9_.\-]*"
# Blanks and comments before a token. Possessive, so a comment is never given back to be lexed
# as tokens when what follows it does not match (``// c`` at the end of the text).
_BLANKS = r"(?:[ \t\r\n]++|//[^\n]*+|/\*.*?\*/)*+"
# Each alternative's group is named after the token kind it produces (``_KIND_OF``).
_TOKEN = re.compile(
    _BLANKS +
    r"(?:"
    r"(?P<dots>\.\.\.)"
    r"|(?P<dim_labels>[0-9bf?]{2,}_[0-9io?]{2,}->[0-9bf?]{2,})"
    r"|(?P<float>-?nan(?:\(0x[0-9a-fA-F]+\))?(?![A-Za-z0-9_.\-])|-inf(?![A-Za-z0-9_.\-])"
    r"|-?(?:\d+\.\d*|\.\d+|\d+)[eE][+-]?\d+|-?(?:\d+\.\d*|\.\d+))"
    r"|(?P<dxd>\d+(?:x\d+)+(?![A-Za-z0-9_]))"
    r"|(?P<pad>-?\d+_-?\d+(?:_-?\d+)?(?:x-?\d+_-?\d+(?:_-?\d+)?)*)"
    r"|(?P<int>-?\d+)"
    r"|%(?P<pname>[A-Za-z0-9_.\-]+)"
    r"|(?P<attr>" + _IDENT + r")(?==(?!=))"
    r"|(?P<cname>" + _IDENT + r")(?=:)"
    r"|(?P<ident>" + _IDENT + r")"
    r'|(?P<string>"(?:[^"\\\n]|\\.)*"|\'(?:[^\'\\\n]|\\.)*\')'
    r"|(?P<punct>->|<=|[=,:*#+~?\[\]{}()<>!])"
    r")",
    re.S,
)
_KIND_OF = {"dots": DOTS, "dim_labels": DIM_LABELS, "float": FLOAT, "dxd": DXD, "pad": PAD,
            "int": INT, "pname": NAME, "attr": ATTR, "cname": NAME, "ident": IDENT,
            "string": STRING, "punct": PUNCT}
_SKIP = re.compile(_BLANKS, re.S)
_CLOSERS = {"{": "}", "[": "]", "(": ")"}
_BRACKET_OR_QUOTE = re.compile(r"[{}\[\]()\"'/]")
_QUOTED = {'"': re.compile(r'"(?:[^"\\]|\\.)*"', re.S), "'": re.compile(r"'(?:[^'\\]|\\.)*'", re.S)}


class Lexer:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 1 if text.startswith("\ufeff") else 0   # after the current token (and a BOM)
        self._line_starts = [0] + [m.end() for m in re.finditer("\n", text)]
        self.kind = EOF
        self.value = ""
        self.start = 0
        self.end = 0
        # what the parser is inside, so every error can name it
        self.computation: str | None = None
        self.instruction: str | None = None
        self.advance()

    # --- positions ------------------------------------------------------------------------
    def location(self, offset: int) -> SourceLocation:
        line = bisect.bisect_right(self._line_starts, offset)
        start = self._line_starts[line - 1]
        stop = self.text.find("\n", start)
        source = self.text[start:stop if stop >= 0 else len(self.text)]
        return SourceLocation(line, offset - start + 1, source.rstrip("\r"))

    def error(self, message: str, offset: int | None = None, hint: str | None = None) -> HloParseError:
        return HloParseError(message, location=self.location(self.start if offset is None else offset),
                             hint=hint, computation=self.computation, instruction=self.instruction)

    # --- tokens -----------------------------------------------------------------------------
    def advance(self) -> None:
        m = _TOKEN.match(self.text, self.pos)
        group = m.lastgroup if m is not None else None
        if m is None or group is None:
            skip = _SKIP.match(self.text, self.pos)
            at = skip.end() if skip else self.pos
            if at >= len(self.text):
                self.kind, self.value, self.start, self.end = EOF, "", len(self.text), len(self.text)
                self.pos = len(self.text)
                return
            raise self._bad_character(at)
        start, end = m.span(group)
        self.kind = _KIND_OF[group]
        self.value = self.text[start:end]
        if group == "pname":
            start -= 1                    # the token starts at its '%'
        elif group == "attr" or group == "cname":
            end += 1                      # the '=' or ':' belongs to the token
        self.start, self.end, self.pos = start, end, end

    def _bad_character(self, at: int) -> HloParseError:
        text = self.text
        if text.startswith("/*", at):
            return self.error("unterminated block comment: '/*' has no matching '*/'", at)
        ch = text[at]
        if ch in "\"'":
            return self.error("unterminated string literal", at)
        if ch == "\0":
            return self.error("unexpected NUL byte in HLO text", at)
        if ch == "/":
            return self.error("unexpected '/': comments start with '//' or '/*'", at)
        if ch == "%":
            return self.error("expects a name after '%'", at)
        return self.error(f"unexpected character {ch!r}", at)

    def describe(self) -> str:
        """The current token as error messages quote it."""
        if self.kind == EOF:
            return "end of text"
        if self.kind == NAME:
            return f"name '%{self.value}'" if self.text[self.start] == "%" else f"'{self.value}:'"
        if self.kind == ATTR:
            return f"'{self.value}='"
        return f"'{self.value}'"

    def at(self, kind: str, value: str | None = None) -> bool:
        return self.kind == kind and (value is None or self.value == value)

    def at_punct(self, value: str) -> bool:
        return self.kind == PUNCT and self.value == value

    # --- raw captures -----------------------------------------------------------------------
    def take_balanced(self) -> str:
        """Return the ``{...}``, ``[...]`` or ``(...)`` group starting at the current token,
        verbatim (strings respected), and continue lexing after it."""
        open_at = self.start
        if self.text[open_at] not in _CLOSERS:
            raise self.error(f"expects '{{' but sees {self.describe()}")
        end = self._scan_balanced(open_at)
        self.pos = end
        self.advance()
        return self.text[open_at:end]

    def _scan_balanced(self, open_at: int) -> int:
        """Offset just after the bracket that closes the one at ``open_at``."""
        text = self.text
        stack = [_CLOSERS[text[open_at]]]
        i = open_at + 1
        while True:
            m = _BRACKET_OR_QUOTE.search(text, i)
            if m is None:
                raise self.error(f"unterminated '{text[open_at]}': no matching "
                                 f"'{_CLOSERS[text[open_at]]}'", open_at)
            i = m.start()
            ch = text[i]
            if ch in "\"'/":
                i = self._skip_string_or_comment(i)
                continue
            if ch in _CLOSERS:
                stack.append(_CLOSERS[ch])
            else:
                if ch != stack[-1]:
                    raise self.error(f"unbalanced '{ch}': expected '{stack[-1]}'", i)
                stack.pop()
                if not stack:
                    return i + 1
            i += 1

    def _skip_string_or_comment(self, i: int) -> int:
        """Offset after the string or comment starting at ``i`` (a lone '/' is one character),
        so brackets inside them do not count when capturing raw text."""
        text = self.text
        ch = text[i]
        if ch == "/":
            if text.startswith("//", i):
                stop = text.find("\n", i)
                return len(text) if stop < 0 else stop
            if text.startswith("/*", i):
                stop = text.find("*/", i + 2)
                if stop < 0:
                    raise self.error("unterminated block comment: '/*' has no matching '*/'", i)
                return stop + 2
            return i + 1
        m = _QUOTED[ch].match(text, i)
        if m is None:
            raise self.error("unterminated string literal", i)
        return m.end()

    def take_raw_value(self) -> str:
        """An attribute value of free form: a balanced group, or text up to the next comma,
        newline or closing bracket at nesting depth zero (``replica_groups=[2,2]<=[4]``)."""
        text = self.text
        begin = i = self.start
        n = len(text)
        while i < n:
            ch = text[i]
            if ch in "{[(":
                i = self._scan_balanced(i)
            elif ch in ",\n)}]" or text.startswith(("//", "/*"), i):
                break
            elif ch in "\"'/":
                i = self._skip_string_or_comment(i)
            else:
                i += 1
        raw = text[begin:i].rstrip()
        if not raw:
            raise self.error("expects an attribute value")
        self.pos = begin + len(raw)
        self.advance()
        return raw

    def skip_to_offset(self, offset: int) -> None:
        self.pos = offset
        self.advance()
