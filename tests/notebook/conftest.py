"""A real IPython ``InteractiveShell`` (history off) with hlo_magic loaded fresh per test."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("MPLBACKEND", "Agg")


@pytest.fixture(scope="session")
def shell():
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config
    config = Config()
    config.HistoryManager.enabled = False
    return InteractiveShell.instance(config=config)


@pytest.fixture
def ip(shell):
    """The shell with the extension loaded; afterwards unloaded and its ``%config`` settings
    (kept in the shell's config, so they survive a reload) dropped, so each test starts fresh."""
    shell.run_line_magic("load_ext", "hlo_magic")
    before = set(shell.user_ns)
    yield shell
    shell.run_line_magic("unload_ext", "hlo_magic")
    shell.config.pop("HloMagics", None)
    for name in set(shell.user_ns) - before:
        del shell.user_ns[name]
