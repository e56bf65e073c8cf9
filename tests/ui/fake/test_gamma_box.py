"""The γ box as a user drives it: a change mid-reply shows in that reply's stats line."""

from __future__ import annotations

from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from tests.ui.fake.conftest import TIMEOUT_MS
from ui.window.main_window import MainWindow


def test_gamma_changed_mid_reply_is_named_in_its_stats_line(
    window: MainWindow, qtbot: QtBot
) -> None:
    window.controls.gamma.setValue(5)
    window.settings.set("generation/max_tokens", 400)
    window.prompt.setPlainText("A long one please")
    with qtbot.waitSignal(window.replyFinished, timeout=TIMEOUT_MS) as finished:
        qtbot.mouseClick(window.send_button, Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: len(window.view.streaming_text) > 40, timeout=TIMEOUT_MS)
        window.controls.gamma.setValue(2)
    summary = finished.args[0]["summary"]
    assert "γ 5 → 2" in summary, summary
    assert "γ 5 ·" not in summary
