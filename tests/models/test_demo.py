"""The demo family is derived once, with progress, and reused."""

from __future__ import annotations

from pathlib import Path

import pytest

from models.demo import DERIVED_TYPES, bundled_model_path, ensure_demo_models
from models.inspect import inspect_gguf


@pytest.mark.model
def test_demo_models_are_built_once_with_progress(tmp_path: Path) -> None:
    calls: list[tuple[int, int, str]] = []
    demo = ensure_demo_models(lambda done, total, msg: calls.append((done, total, msg)), tmp_path)
    assert [c[0] for c in calls] == [0, 1, 2, 3, 4]
    assert all(c[1] == len(DERIVED_TYPES) for c in calls)
    expected = {"F32": demo.f32, "Q8_0": demo.q8_0, "Q4_0": demo.q4_0, "Q2_K": demo.q2_k}
    for type_name, path in expected.items():
        assert inspect_gguf(path).quantization == type_name
    assert demo.q4_1 == bundled_model_path()
    mtimes = {p: p.stat().st_mtime_ns for p in expected.values()}

    calls.clear()
    again = ensure_demo_models(lambda done, total, msg: calls.append((done, total, msg)), tmp_path)
    assert again == demo
    assert calls == []
    assert {p: p.stat().st_mtime_ns for p in expected.values()} == mtimes
    # No temporary files are left behind where discovery would see them.
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in expected.values())
