"""Each test starts and ends with an empty custom-call registry (built-ins stay)."""

from __future__ import annotations

import pytest

import runtime


@pytest.fixture(autouse=True)
def empty_registry():
    _clear()
    yield
    _clear()


def _clear() -> None:
    for target in runtime.registered_custom_calls():
        runtime.unregister_custom_call(target.name, target.platform)
