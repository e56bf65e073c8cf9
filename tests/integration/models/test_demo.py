"""The demo family is derived once, with progress, and reused."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from models.demo import DERIVED_TYPES, bundled_model_path, ensure_demo_models
from models.gguf import inspect_gguf


@pytest.mark.model
def test_demo_models_are_built_once_with_progress(tmp_path: Path) -> None:
    calls: list[tuple[int, int, str]] = []
    demo = ensure_demo_models(lambda done, total, msg: calls.append((done, total, msg)), tmp_path)
    expected = {"F32": demo.f32, "Q8_0": demo.q8_0, "Q4_0": demo.q4_0, "Q2_K": demo.q2_k}
    # Progress counts bytes across all the files: it starts at 0, never goes back, never
    # passes the total, ends exactly at it, and says which file it writes and how big.
    dones = [c[0] for c in calls]
    totals = {c[1] for c in calls}
    assert len(totals) == 1
    total = totals.pop()
    assert dones[0] == 0 and dones[-1] == total
    assert dones == sorted(dones) and max(dones) <= total
    # The estimate is within a factor of two of what lands on disk (it feeds a progress bar).
    on_disk = sum(p.stat().st_size for p in expected.values())
    assert on_disk / 2 < total < on_disk * 2
    for path in expected.values():
        writing = [msg for _, _, msg in calls if msg.startswith(f"writing {path.name}: ")]
        assert writing, f"no progress names {path.name}"
        assert all(" of about " in msg and "MiB" in msg for msg in writing)
        # The size said before the first byte is written is the file's own, within 10 %
        # (llama.cpp writes wider types for some tensors than the one asked for).
        announced = re.search(r"of about ([0-9.]+) MiB", writing[0])
        assert announced, writing[0]
        assert abs(float(announced[1]) * 2**20 / path.stat().st_size - 1) < 0.1, writing[0]
    assert calls[-1][2].startswith("demo models ready: wrote ")
    assert len(DERIVED_TYPES) == len(expected)
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


@pytest.mark.model
def test_a_raising_progress_callback_stops_the_derivation_cleanly(tmp_path: Path) -> None:
    """How a cancel reaches the derivation: the error comes out, no half-written file stays."""

    class StopError(Exception):
        pass

    def progress(done: int, total: int, message: str) -> None:
        if done > 0:
            raise StopError

    with pytest.raises(StopError):
        ensure_demo_models(progress, tmp_path)
    left = list(tmp_path.iterdir())
    assert not [p for p in left if p.suffix == ".partial"]
    assert len(left) <= 1  # at most the first file, finished before the raise was seen
    for path in left:
        assert inspect_gguf(path).quantization == "F32"
