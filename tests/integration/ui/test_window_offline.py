"""The window before any model is loaded: contract names, states, conversations, files."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from PySide6.QtCore import QMimeData, QPoint, Qt, QUrl
from PySide6.QtGui import QDropEvent
from PySide6.QtWidgets import QMessageBox, QWidget
from pytestqt.qtbot import QtBot

from app.errors import EMPTY_FILE
from tests.helpers.qt_window import close_window, open_window
from ui.window.main_window import MainWindow, UiState

CONTRACT = [
    "conversationView",
    "promptInput",
    "sendButton",
    "stopButton",
    "targetModelCombo",
    "draftModelCombo",
    "speculationToggle",
    "gammaControl",
    "acceptanceRateLabel",
    "tokensPerSecondLabel",
    "memoryLabel",
    "conversationList",
    "newChatButton",
]


@pytest.fixture
def window(qtbot: QtBot, isolated_data_dir: Path) -> Iterator[MainWindow]:
    win = open_window(isolated_data_dir)
    yield win
    close_window(win)


def test_every_contract_name_is_on_exactly_one_widget(window: MainWindow) -> None:
    for name in CONTRACT:
        found = window.findChildren(QWidget, name)
        assert len(found) == 1, name


def test_without_a_model_nothing_can_be_sent(window: MainWindow, qtbot: QtBot) -> None:
    assert window.state == UiState.NoModel
    assert not window.send_button.isEnabled() and not window.stop_button.isEnabled()
    assert "No model loaded" in window.statusBar().currentMessage()
    window.prompt.setPlainText("hello")
    window.send()
    assert window.store.conversations() == []
    assert "RAM" in window.metrics.memory.text()


def test_conversations_rename_delete_and_export(
    window: MainWindow, qtbot: QtBot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = window.store
    first = store.create_conversation("First")
    store.add_message(first, "user", "What is 2+2?")
    store.add_message(first, "assistant", "**4**", stats={"summary": "mode plain · 1 tokens"})
    second = store.create_conversation("Second")
    window.new_chat()
    assert window.conversations.titles() == ["Second", "First"]

    window.conversations.list.setCurrentRow(1)  # a click on "First"
    assert window.conversation_id == first
    assert window.windowTitle() == "SpecChat — First"
    assert "What is 2+2?" in window.view.toPlainText()
    assert "mode plain · 1 tokens" in window.view.toPlainText()
    assert window.regenerate_button.isEnabled() is False  # no model: nothing can regenerate

    window.conversations.list.item(1).setText("Arithmetic")  # an inline rename
    assert store.conversation(first).title == "Arithmetic"  # type: ignore[union-attr]
    assert window.windowTitle() == "SpecChat — Arithmetic"

    out = tmp_path / "chat.md"
    window.export_conversation(first, out)
    assert out.read_text().startswith("# Arithmetic\n")
    assert "## Assistant\n\n**4**" in out.read_text()
    window.export_conversation(first, tmp_path / "missing-folder" / "chat.md")
    assert window.banner.text == (
        f"Could not export the conversation to {tmp_path / 'missing-folder' / 'chat.md'}: "
        "No such file or directory."
    )

    monkeypatch.setattr(QMessageBox, "question", lambda *_a, **_k: QMessageBox.StandardButton.Yes)
    window.conversations.deleteRequested.emit(first)
    assert window.conversation_id is None and window.view.messages == []
    assert window.conversations.titles() == ["Second"]
    assert [c.id for c in store.conversations()] == [second]


def test_ctrl_n_starts_a_new_chat(window: MainWindow, qtbot: QtBot) -> None:
    chat = window.store.create_conversation("Old")
    window.open_conversation(chat)
    window.activateWindow()
    qtbot.waitUntil(window.isActiveWindow)
    qtbot.keyClick(window.prompt, Qt.Key.Key_N, Qt.KeyboardModifier.ControlModifier)
    assert window.conversation_id is None
    window.send_button.setFocus()
    qtbot.keyClick(window.send_button, Qt.Key.Key_L, Qt.KeyboardModifier.ControlModifier)
    assert window.prompt.hasFocus()


def test_dropping_a_bad_file_says_why(window: MainWindow, qtbot: QtBot, tmp_path: Path) -> None:
    bad = tmp_path / "empty.gguf"
    bad.write_bytes(b"")
    data = QMimeData()
    data.setUrls([QUrl.fromLocalFile(str(bad)), QUrl.fromLocalFile(str(tmp_path / "a.txt"))])
    event = QDropEvent(
        QPoint(10, 10),
        Qt.DropAction.CopyAction,
        data,
        Qt.MouseButton.LeftButton,
        Qt.KeyboardModifier.NoModifier,
    )
    with qtbot.waitSignal(window.errorShown, timeout=30_000) as shown:
        window.dropEvent(event)
    assert shown.args[0] == f"Cannot load model {bad}: {EMPTY_FILE}."
    assert window.settings.get_list("models/extra_files") == []


def test_catalog_module_does_not_import_qt() -> None:
    # It runs in the helper process, which must stay light and free of Qt.
    code = "import sys, ui.workers.catalog; print('PySide6' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "False"
