"""Figure themes: the matplotlib settings hlo-magic's figures are drawn under.

Notebook front ends have light and dark themes, and a PNG with a white background and black
text is a glaring block in a dark one. ``HloMagics.figure_theme`` (or ``set_figure_theme``)
picks one of ``THEMES``: "light" draws black on white; "dark" draws light text and lines on a
transparent background, which reads on any dark theme. The settings apply through
``matplotlib.rc_context`` around each figure function, so the user's own matplotlib
defaults are never changed. matplotlib is imported only when a figure is drawn.
"""

from __future__ import annotations

from contextlib import contextmanager
from functools import wraps
from typing import TYPE_CHECKING, Callable, Iterator, ParamSpec, TypeVar

if TYPE_CHECKING:   # matplotlib is imported only when a figure is drawn
    from matplotlib.typing import RcKeyType

_LIGHT_INK, _DARK_INK = "black", "#E6E6E6"


def _colours(ink: str, background: str, frame: str) -> dict[RcKeyType, object]:
    return {"figure.facecolor": background, "axes.facecolor": background,
            "text.color": ink, "axes.labelcolor": ink, "axes.titlecolor": ink,
            "xtick.color": ink, "ytick.color": ink, "axes.edgecolor": frame,
            "legend.labelcolor": ink, "hatch.color": ink}


THEMES: dict[str, dict[RcKeyType, object]] = {
    "light": _colours(_LIGHT_INK, "white", "black"),
    "dark": _colours(_DARK_INK, "none", "#9A9A9A"),
}
_current = "light"

_P = ParamSpec("_P")
_R = TypeVar("_R")


def set_figure_theme(name: str) -> None:
    """Use ``THEMES[name]`` for every figure drawn from now on."""
    global _current
    if name not in THEMES:
        raise ValueError(f"figure theme {name!r}: expected one of {', '.join(THEMES)}")
    _current = name


def figure_theme() -> str:
    return _current


@contextmanager
def theme_context(name: str | None = None) -> Iterator[None]:
    import matplotlib
    with matplotlib.rc_context(THEMES[name or _current]):
        yield


def themed(draw: Callable[_P, _R]) -> Callable[_P, _R]:
    """Run a figure function under the current theme."""
    @wraps(draw)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        with theme_context():
            return draw(*args, **kwargs)
    return wrapper


def ink() -> str:
    """The colour of text and lines in the theme being drawn."""
    import matplotlib
    return matplotlib.rcParams["text.color"]
