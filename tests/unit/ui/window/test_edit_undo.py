"""Edit and resend takes the last exchange back; Undo puts it back as it was."""

from __future__ import annotations

from PySide6.QtCore import Qt, QUrl
from pytestqt.qtbot import QtBot

from tests.helpers.qt_window import send
from ui.window.main_window import MainWindow


def test_undo_puts_back_the_exchange_that_edit_and_resend_took(
    window: MainWindow, qtbot: QtBot
) -> None:
    send(qtbot, window, "First question")
    send(qtbot, window, "Second question")
    assert window.conversation_id is not None
    before = [(m.role, m.content, m.stats) for m in window.store.messages(window.conversation_id)]
    window.view.anchorClicked.emit(QUrl("edit:"))
    assert window.prompt.toPlainText() == "Second question"
    assert len(window.store.messages(window.conversation_id)) == 2
    undo = window.chats.undo_button
    assert undo.isVisible()

    qtbot.mouseClick(undo, Qt.MouseButton.LeftButton)
    after = [(m.role, m.content, m.stats) for m in window.store.messages(window.conversation_id)]
    assert after == before
    assert [m.text for m in window.view.messages] == [c for _r, c, _s in before]
    assert window.prompt.toPlainText() == ""
    assert not undo.isVisible()


def test_sending_the_edited_message_withdraws_the_undo(window: MainWindow, qtbot: QtBot) -> None:
    send(qtbot, window, "A question with a typo")
    window.view.anchorClicked.emit(QUrl("edit:"))
    assert window.chats.undo_button.isVisible()
    assert "back in the box" in window.statusBar().currentMessage()
    send(qtbot, window, "A question, fixed")
    assert not window.chats.undo_button.isVisible()
    # The note that spoke of the taken-back reply went with its Undo.
    assert "back in the box" not in window.statusBar().currentMessage()
    assert window.conversation_id is not None
    users = [m.content for m in window.store.messages(window.conversation_id) if m.role == "user"]
    assert users == ["A question, fixed"]
