"""The γ box as a user drives it: a change mid-reply shows in that reply's stats line."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from tests.helpers.fake_window import TIMEOUT_MS, open_fake_window
from tests.helpers.qt_window import close_window
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


def test_typing_auto_or_a_number_in_the_gamma_box_sets_it(window: MainWindow, qtbot: QtBot) -> None:
    box = window.controls.gamma
    box.setValue(5)
    for typed, value, saved in (("auto", 0, 0), ("7", 7, 7), ("AUTO", 0, 0), ("3", 3, 3)):
        box.setFocus()
        box.selectAll()
        qtbot.keyClicks(box, typed)
        qtbot.keyClick(box, Qt.Key.Key_Return)
        assert box.value() == value, typed
        assert window.settings.get_int("generation/gamma") == saved
    assert box.text() == "γ 3"
    box.selectAll()
    qtbot.keyClicks(box, "99")
    qtbot.keyClick(box, Qt.Key.Key_Return)
    assert box.value() == 9  # the second 9 is refused as it is typed: γ goes up to 16
    assert str(box.setting) == "9"


def test_a_fresh_window_starts_at_auto_and_a_saved_gamma_is_kept(
    qtbot: QtBot, isolated_data_dir: Path, files: dict[str, Path], tmp_path: Path
) -> None:
    window = open_fake_window(isolated_data_dir, files)
    try:
        assert window.controls.gamma.text() == "Auto"
        assert window.generation_config().gamma.is_auto
    finally:
        close_window(window)
    saved = tmp_path / "saved-profile"
    saved.mkdir()
    window = open_fake_window(saved, files, **{"generation/gamma": 5})
    try:
        assert window.controls.gamma.value() == 5
        assert str(window.generation_config().gamma) == "5"
    finally:
        close_window(window)
