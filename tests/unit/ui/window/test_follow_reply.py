"""The conversation follows a streaming reply past the bottom of the view, and stops following
once the user scrolls up to read; a button then brings them back to the new text."""

from __future__ import annotations

from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from tests.helpers.fake_window import TIMEOUT_MS
from tests.helpers.qt_window import send, wheel
from ui.window.main_window import MainWindow


def test_the_view_follows_a_streaming_reply_until_the_user_scrolls_up(
    window: MainWindow, qtbot: QtBot
) -> None:
    # A chat taller than the view, then a long reply streaming below it.
    for question in ("First question", "Second question", "Third question"):
        send(qtbot, window, question)
    window.settings.set("generation/max_tokens", 4000)
    bar = window.view.verticalScrollBar()
    window.prompt.setPlainText("A long one please")
    qtbot.mouseClick(window.send_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: len(window.view.streaming_text) > 400, timeout=TIMEOUT_MS)
    assert bar.maximum() > 0
    for _ in range(5):
        seen = len(window.view.streaming_text)
        qtbot.waitUntil(
            lambda seen=seen: len(window.view.streaming_text) > seen + 40, timeout=TIMEOUT_MS
        )
        qtbot.wait(60)  # a render and its layout
        assert bar.value() >= bar.maximum() - 4, (bar.value(), bar.maximum())
    assert not window.view.follower.button.isVisible()

    wheel(window.view.viewport(), 3)
    assert not window.view.follower.following
    reading = bar.value()
    seen = len(window.view.streaming_text)
    qtbot.waitUntil(lambda: len(window.view.streaming_text) > seen + 200, timeout=TIMEOUT_MS)
    qtbot.wait(60)
    assert bar.value() == reading
    assert bar.maximum() > reading
    button = window.view.follower.button
    qtbot.waitUntil(button.isVisible, timeout=TIMEOUT_MS)

    qtbot.mouseClick(button, Qt.MouseButton.LeftButton)
    assert not button.isVisible()
    qtbot.wait(100)
    assert bar.value() >= bar.maximum() - 4
    window.stop()
