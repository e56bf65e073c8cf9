"""The draft a user chose survives a restart and a round trip through another target, on the
real demo family and Gemma: the Q4_1 draft lives in its package, outside every folder the
window scans, which is how it used to drop out of the Draft list after a restart."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pytestqt.qtbot import QtBot

from models.demo import demo_file_name
from tests.helpers.qt_window import (
    REPLY_TIMEOUT_MS,
    TEST_THREADS,
    close_window,
    open_window,
    write_preferences,
)
from ui.window.main_window import MainWindow, UiState


def _fresh_profile(data_dir: Path, demo: Any) -> None:
    """A first start: no models chosen; the derived demo files are already in the models
    folder (linked from the test cache, as the first start would have written them)."""
    folder = data_dir / "models" / "demo"
    folder.mkdir(parents=True)
    derived = {"F32": demo.f32, "Q8_0": demo.q8_0, "Q4_0": demo.q4_0, "Q2_K": demo.q2_k}
    for type_name, path in derived.items():
        (folder / demo_file_name(type_name)).symlink_to(path)
    write_preferences(data_dir, {"models/n_threads": TEST_THREADS, "models/n_ctx": 1024})


def _start(qtbot: QtBot, data_dir: Path) -> MainWindow:
    window = open_window(data_dir)
    with qtbot.waitSignal(window.catalogChanged, timeout=REPLY_TIMEOUT_MS):
        window.start()
    assert window.state == UiState.Idle, window.banner.text
    return window


def _switch(qtbot: QtBot, window: MainWindow, target: Path) -> None:
    with qtbot.waitSignal(window.catalogChanged, timeout=REPLY_TIMEOUT_MS):
        window.choose_target(str(target))
    assert window.models.target_path is not None
    assert Path(window.models.target_path).resolve() == target.resolve(), window.banner.text


def _loaded_draft(window: MainWindow) -> Path | None:
    loaded = window.models.loaded
    assert loaded is not None
    return Path(loaded.draft.path).resolve() if loaded.draft.path else None


def _listed_drafts(window: MainWindow) -> list[Path]:
    return [
        Path(value).resolve()
        for _label, value, _enabled, _tip in window.controls.draft_entries()
        if value.endswith(".gguf")
    ]


def test_the_chosen_draft_comes_back_after_a_restart_and_a_target_round_trip(
    demo_models: Any, gemma_model: Path, isolated_data_dir: Path, qtbot: QtBot
) -> None:
    q4_1 = Path(demo_models.q4_1).resolve()
    f32 = isolated_data_dir / "models" / "demo" / demo_file_name("F32")
    _fresh_profile(isolated_data_dir, demo_models)

    window = _start(qtbot, isolated_data_dir)
    try:
        assert _loaded_draft(window) == q4_1
        with qtbot.waitSignal(window.catalogChanged, timeout=REPLY_TIMEOUT_MS):
            window.models.add_files([str(gemma_model)])
        _switch(qtbot, window, gemma_model)
        _switch(qtbot, window, f32)
        assert _loaded_draft(window) == q4_1
    finally:
        close_window(window)

    window = _start(qtbot, isolated_data_dir)
    try:
        assert _loaded_draft(window) == q4_1
        assert q4_1 in _listed_drafts(window)
        shown = window.controls.draft_combo.currentData()
        assert shown is not None and Path(str(shown)).resolve() == q4_1
        _switch(qtbot, window, gemma_model)
        _switch(qtbot, window, f32)
        assert _loaded_draft(window) == q4_1
        assert Path(str(window.controls.draft_combo.currentData())).resolve() == q4_1
    finally:
        close_window(window)
