"""A context larger than the target was trained on is run as asked, with a word that replies
past that length may lose track (as llama-server warns); none when it fits."""

from __future__ import annotations

from pathlib import Path

from pytestqt.qtbot import QtBot

from app.llama.facts import ModelFacts
from tests.helpers.fake_model import TRAINED_CONTEXT
from tests.helpers.fake_window import TIMEOUT_MS, open_fake_window
from tests.helpers.qt_window import close_window
from ui.window.main_window import UiState


def _facts(n_ctx: int, n_ctx_train: int) -> ModelFacts:
    return ModelFacts("/m/model.gguf", 64, n_ctx, n_ctx_train, 2, 8, 2, 1, 1000, 0, 0, 0)


def test_the_note_names_both_lengths_only_past_the_trained_one() -> None:
    assert _facts(8192, 8192).context_note() is None
    assert _facts(4096, 0).context_note() is None  # the file does not say
    note = _facts(16384, 8192).context_note()
    assert note is not None and "16384" in note and "8192" in note and "model.gguf" in note


def test_the_window_says_so_when_the_context_passes_the_trained_length(
    qtbot: QtBot, isolated_data_dir: Path, files: dict[str, Path]
) -> None:
    window = open_fake_window(isolated_data_dir, files, **{"models/n_ctx": 2 * TRAINED_CONTEXT})
    try:
        with qtbot.waitSignal(window.catalogChanged, timeout=TIMEOUT_MS):
            window.start()
        qtbot.waitUntil(lambda: window.state == UiState.Idle, timeout=TIMEOUT_MS)
        message = window.statusBar().currentMessage()
        assert f"({2 * TRAINED_CONTEXT} tokens)" in message and "trained on" in message
        # A reload of the same target and context (threads changed) does not say it again.
        window.statusBar().clearMessage()
        with qtbot.waitSignal(window.modelsLoaded, timeout=TIMEOUT_MS):
            window.settings_panel.threads.setValue(2)
        qtbot.waitUntil(lambda: window.state == UiState.Idle, timeout=TIMEOUT_MS)
        assert "trained on" not in window.statusBar().currentMessage()
    finally:
        close_window(window)
