"""hlo-magic's notebook layer: ``%%hlo``, rich reports, memory figures and donation widgets.

``%load_ext hlo_magic`` registers one ``HloMagics`` instance (it holds the settings shown by
``%config HloMagics``); ``%unload_ext`` removes it again. Loading imports neither pyopencl nor
matplotlib and prints nothing: the OpenCL device is chosen on first use.
"""

from __future__ import annotations

from typing import Any

__all__ = ["load_ipython_extension", "unload_ipython_extension", "HloMagics", "HloResult",
           "DonationModel", "DonationPanel", "plot_timeline", "plot_packing",
           "plot_peak_buffers", "plot_memory", "compare", "MemoryTimeline",
           "annotate", "from_jax"]

_EXPORTS = {
    "HloMagics": "magics", "HloResult": "result", "DonationModel": "donation",
    "DonationPanel": "widgets", "plot_timeline": "timeline", "plot_packing": "timeline",
    "plot_peak_buffers": "timeline", "plot_memory": "timeline", "compare": "timeline",
    "MemoryTimeline": "timeline_widget", "annotate": "annotated", "from_jax": "jax_programs",
}


def __getattr__(name: str) -> Any:
    """Import figures and widgets only when asked for (matplotlib is slow to import)."""
    if name not in _EXPORTS:
        raise AttributeError(f"module 'hlo_magic' has no attribute {name!r}")
    from importlib import import_module
    return getattr(import_module(f".{_EXPORTS[name]}", __name__), name)


_FIGURE = ("matplotlib.figure", "Figure")


def _figure_png(fig) -> bytes:
    from .timeline import figure_png
    return figure_png(fig)


def load_ipython_extension(ip) -> None:
    """Register the magics, and show a returned matplotlib ``Figure`` (ours are made without
    pyplot, so no backend displays them) as PNG; by type name, so matplotlib is not imported."""
    from .magics import HloMagics
    ip.register_magics(HloMagics(shell=ip))
    ip.display_formatter.formatters["image/png"].for_type_by_name(*_FIGURE, _figure_png)


def unload_ipython_extension(ip) -> None:
    """Undo ``load_ipython_extension``: the magics, the registry entry, the configurable and
    the figure formatter (unless someone replaced it since)."""
    from .magics import HloMagics
    manager = ip.magics_manager
    instance = manager.registry.pop(HloMagics.__name__, None)
    if instance is None:
        return
    for table in manager.magics.values():
        for name, func in list(table.items()):
            if getattr(func, "__self__", None) is instance:
                del table[name]
    if instance in ip.configurables:
        ip.configurables.remove(instance)
    png = ip.display_formatter.formatters["image/png"]
    name = ".".join(_FIGURE)
    try:
        ours = png.lookup_by_type(name) is _figure_png
    except KeyError:          # someone removed it already
        ours = False
    if ours:
        png.pop(name)
