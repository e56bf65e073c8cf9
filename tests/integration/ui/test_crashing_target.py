"""A model file that makes llama.cpp abort, remembered as the target, must not take the window
down at start (or at every start after): the engine worker checks each unknown file in a child
process before loading it, and says in one sentence why it is refused."""

from __future__ import annotations

from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from tests.helpers.hostile_gguf import build_corpus
from tests.helpers.model_files import bundled_q4_1
from tests.helpers.qt_window import close_window, open_window, write_preferences
from ui.window.main_window import UiState

TIMEOUT_MS = 120_000


@pytest.mark.model
def test_a_remembered_target_that_crashes_llama_leaves_the_window_up(
    qtbot: QtBot, isolated_data_dir: Path, tmp_path: Path
) -> None:
    corpus = {case.name: case for case in build_corpus(bundled_q4_1(), tmp_path / "corpus")}
    crasher = corpus["duplicate-token-crashes-llama"].path
    write_preferences(
        isolated_data_dir,
        {"models/target": str(crasher), "models/draft": "none", "models/n_threads": 1},
    )
    for start in (1, 2):  # and again at the next start: the verdict is remembered
        window = open_window(isolated_data_dir)
        try:
            with qtbot.waitSignal(window.errorShown, timeout=TIMEOUT_MS) as shown:
                window.start()
            message = shown.args[0]
            assert "crashed" in message and "\n" not in message, (start, message)
            qtbot.waitUntil(lambda w=window: w.state != UiState.LoadingModel, timeout=TIMEOUT_MS)
            assert window.state == UiState.NoModel  # alive, and says what to do next
        finally:
            close_window(window)
    # The file that failed was never saved as the choice to load first.
    assert (isolated_data_dir / "model-checks.json").exists()
