"""The bundle tests build a ~0.5 GB folder (and, the first time, a portable llama.cpp): they
run only when asked for with `-m bundle`, never as part of a plain `pytest`."""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if "bundle" in (config.getoption("markexpr") or ""):
        return
    chosen = [item for item in items if item.get_closest_marker("bundle") is None]
    if len(chosen) != len(items):
        config.hook.pytest_deselected(items=[i for i in items if i not in chosen])
        items[:] = chosen
