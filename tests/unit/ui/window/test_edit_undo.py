"""Edit and resend takes the last exchange back; Undo puts it back as it was. Until the edited
message is sent the exchange stays stored: a close, a crash or leaving the chat keeps it."""

from __future__ import annotations

from typing import Any

import pytest
from PySide6.QtCore import Qt, QUrl
from pytestqt.qtbot import QtBot

from tests.helpers.qt_window import REPLY_TIMEOUT_MS, send
from ui.window import chat_controller, main_window
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
    assert [m.text for m in window.view.messages] == [c for _r, c, _s in before[:2]]
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


def test_an_exchange_taken_back_stays_stored_until_the_edit_is_sent(
    window: MainWindow, qtbot: QtBot
) -> None:
    send(qtbot, window, "First question")
    send(qtbot, window, "Second question")
    chat = window.conversation_id
    assert chat is not None
    stored = [(m.role, m.content) for m in window.store.messages(chat)]
    window.view.anchorClicked.emit(QUrl("edit:"))
    # Closed now, or killed, the next start finds the chat whole.
    assert [(m.role, m.content) for m in window.store.messages(chat)] == stored
    assert window.chat.history()[-1]["content"] == stored[1][1]  # the model reads it without
    # Leaving the chat abandons the edit: back in it, the exchange is there again.
    window.new_chat()
    window.open_conversation(chat)
    assert [m.text for m in window.view.messages] == [c for _r, c in stored]
    assert not window.chats.undo_button.isVisible()


def test_undo_after_editing_twice_shows_both_exchanges_again(
    window: MainWindow, qtbot: QtBot
) -> None:
    send(qtbot, window, "First question")
    send(qtbot, window, "Second question")
    chat = window.conversation_id
    assert chat is not None
    before = [m.content for m in window.store.messages(chat)]
    window.view.anchorClicked.emit(QUrl("edit:"))
    window.view.anchorClicked.emit(QUrl("edit:"))
    assert window.prompt.toPlainText() == "First question" and window.view.messages == []
    qtbot.mouseClick(window.chats.undo_button, Qt.MouseButton.LeftButton)
    assert [m.text for m in window.view.messages] == before
    send(qtbot, window, "Third question")
    assert [m.content for m in window.store.messages(chat)][:4] == before


def test_an_edited_away_exchange_leaves_the_past_chats_index(
    window: MainWindow, qtbot: QtBot, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The index is a cache of the chats: what the user took back and replaced must not draft
    # again, as a deleted chat's text never does.
    files: list[str] = []
    rebuilt: list[str] = []
    monkeypatch.setattr(chat_controller, "forget_index_files", lambda: files.append("gone"))
    rebuild = main_window.forget_history

    def counted(runtime: Any) -> None:
        rebuilt.append("rebuilt")
        rebuild(runtime)

    monkeypatch.setattr(main_window, "forget_history", counted)
    send(qtbot, window, "A question with a secret in it")
    with qtbot.waitSignal(window.replyFinished, timeout=REPLY_TIMEOUT_MS):
        window.regenerate()
    assert (files, rebuilt) == ([], [])  # a reply written again deletes no text of yours
    window.view.anchorClicked.emit(QUrl("edit:"))
    assert files == []  # taken back, not gone: Undo may still put it back
    send(qtbot, window, "A question, without it")
    assert files == ["gone"]
    qtbot.waitUntil(lambda: rebuilt == ["rebuilt"], timeout=10_000)
