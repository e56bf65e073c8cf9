"""Fixtures shared by the engine tests."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from app.engine.runtime import Runtime
from app.llama.config import ModelConfig
from tests.helpers.engine import loaded_runtime


@pytest.fixture(scope="module")
def f32_runtime(demo_models: Any) -> Iterator[Runtime]:
    """The demo F32 target alone, loaded once per test module."""
    with loaded_runtime(ModelConfig(str(demo_models.f32), n_ctx=2048)) as rt:
        yield rt


@pytest.fixture(scope="module")
def pair_runtime(demo_models: Any) -> Iterator[Runtime]:
    """The demo F32 target with its Q4_1 draft, loaded once per test module."""
    with loaded_runtime(
        ModelConfig(str(demo_models.f32), n_ctx=1024),
        ModelConfig(str(demo_models.q4_1), n_ctx=1024),
    ) as rt:
        yield rt
