"""A full disk while sending: the typed message stays in the input box, the user is told, and
sending again once there is room works."""

from __future__ import annotations

from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from app.store import ConversationStore
from app.store_errors import StoreFullError
from tests.helpers.qt_window import send
from ui.window.main_window import MainWindow, UiState


def _fill(store: ConversationStore) -> int:
    """Make the database full: no page left, and no free room left in the pages it has."""
    db = store._conn
    pages = db.execute("PRAGMA page_count").fetchone()[0]
    # SQLite's own size cap fails writes with the very error a full disk gives (SQLITE_FULL).
    db.execute(f"PRAGMA max_page_count = {pages}")
    filler = store.create_conversation("filler")
    for size in (500, 50, 5, 1):
        for _ in range(10_000):
            try:
                store.add_message(filler, "user", "x" * size)
            except StoreFullError:
                break
    return filler


def test_a_full_disk_keeps_the_typed_message_and_a_retry_sends_it(
    window: MainWindow, qtbot: QtBot
) -> None:
    filler = _fill(window.store)
    typed = "Name a colour, in one word."
    window.prompt.setPlainText(typed)
    qtbot.mouseClick(window.send_button, Qt.MouseButton.LeftButton)
    assert window.prompt.toPlainText() == typed
    assert "is full" in window.banner.text and "free some space" in window.banner.text
    assert window.state == UiState.Idle
    assert all(
        m.content != typed
        for c in window.store.conversations()
        for m in window.store.messages(c.id)
    )

    window.store._conn.execute("PRAGMA max_page_count = 1000000")  # the user freed some space
    window.store.delete(filler)
    send(qtbot, window, typed)
    conversation = window.conversation_id
    assert conversation is not None
    stored = window.store.messages(conversation)
    assert [m.role for m in stored] == ["user", "assistant"] and stored[0].content == typed


def test_a_reply_the_full_disk_refused_is_saved_before_the_next_message(
    window: MainWindow, qtbot: QtBot
) -> None:
    fillers: list[int] = []
    # The question is saved; the disk fills while the reply is written.
    window.flow.started.connect(lambda: fillers.append(_fill(window.store)))
    window.prompt.setPlainText("Name a colour, in one word.")
    qtbot.mouseClick(window.send_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: window.state == UiState.Idle, timeout=60_000)
    window.flow.started.disconnect()
    chat = window.conversation_id
    assert chat is not None and fillers
    assert "is full" in window.banner.text and "saved with your next message" in window.banner.text
    reply = window.view.messages[-1].text
    assert reply and [m.role for m in window.store.messages(chat)] == ["user"]

    window.store._conn.execute("PRAGMA max_page_count = 1000000")  # the user freed some space
    window.store.delete(fillers[0])
    send(qtbot, window, "And another?")
    stored = window.store.messages(chat)
    assert [m.role for m in stored] == ["user", "assistant", "user", "assistant"]
    assert stored[1].content == reply
