"""Stop pressed before the first token: nothing empty is saved, no stats line of zeros, and
the headline keeps telling the truth."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from app.engine.runtime import Runtime
from app.errors import Cancelled
from tests.helpers.fake_window import TIMEOUT_MS, another_store, fake_window_with_one_reply
from ui.window.conversation_actions import STOPPED_BACK
from ui.window.main_window import UiState


def test_stop_before_the_first_token_saves_nothing_and_keeps_the_headline(
    qtbot: QtBot, isolated_data_dir: Path, files: dict[str, Path]
) -> None:
    with fake_window_with_one_reply(
        qtbot, isolated_data_dir, files, model_step_s=0.3, max_tokens=6
    ) as (window, _conversation):
        headline = window.controls.headline.text()
        assert headline.startswith("Too short to judge the speed")  # a six-token reply
        window.prompt.setPlainText("Stop me at once")
        qtbot.mouseClick(window.send_button, Qt.MouseButton.LeftButton)
        qtbot.mouseClick(window.stop_button, Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: window.state == UiState.Idle, timeout=TIMEOUT_MS)
        assert window.conversation_id is not None
        # The unanswered message is back in the box, not left in the chat with no reply.
        saved = window.store.messages(window.conversation_id)
        assert [m.role for m in saved] == ["user", "assistant"]
        assert [m.role for m in window.view.messages] == ["user", "assistant"]
        assert window.prompt.toPlainText() == "Stop me at once"
        assert window.statusBar().currentMessage() == STOPPED_BACK
        assert not window.chats.undo_button.isVisible()  # nothing was set aside to show again
        assert "0.0 tok/s" not in window.view.toPlainText()
        assert window.controls.headline.text() == headline
        assert window.regenerate_button.isEnabled()  # the buttons speak of the chat as it is

        # Another target: the headline spoke of the old one.
        with qtbot.waitSignal(window.modelsLoaded, timeout=TIMEOUT_MS):
            window.choose_target(str(files["target2"]))
        assert window.controls.headline.text() == ""


def test_a_regenerate_stopped_before_the_first_token_keeps_the_earlier_reply(
    qtbot: QtBot, isolated_data_dir: Path, files: dict[str, Path]
) -> None:
    with fake_window_with_one_reply(
        qtbot, isolated_data_dir, files, model_step_s=0.3, max_tokens=6
    ) as (window, _conversation):
        assert window.conversation_id is not None
        before = window.store.messages(window.conversation_id)
        shown = window.view.messages
        window.regenerate()
        assert window.state == UiState.Generating
        # Killed now, the chat would still hold the earlier reply, and only that one.
        assert window.store.messages(window.conversation_id) == before
        window.stop()
        qtbot.waitUntil(lambda: window.state == UiState.Idle, timeout=TIMEOUT_MS)
        assert window.store.messages(window.conversation_id) == before
        assert window.view.messages == shown
        assert window.regenerate_button.isEnabled()

        # Regenerate works again, and the new reply replaces the earlier one.
        with qtbot.waitSignal(window.replyFinished, timeout=TIMEOUT_MS):
            window.regenerate()
        after = window.store.messages(window.conversation_id)
        assert [m.role for m in after] == ["user", "assistant"]
        assert after[0] == before[0] and after[-1].id != before[-1].id
        assert [m.text for m in window.view.messages] == [m.content for m in after]


def test_a_regenerate_stopped_early_shows_no_reply_another_window_deleted_meanwhile(
    qtbot: QtBot, isolated_data_dir: Path, files: dict[str, Path]
) -> None:
    with fake_window_with_one_reply(
        qtbot, isolated_data_dir, files, model_step_s=0.3, max_tokens=6
    ) as (window, conversation):
        window.regenerate()
        with another_store(isolated_data_dir) as other:  # a second window's delete
            other.delete_message(other.messages(conversation)[-1].id)
        window.stop()
        qtbot.waitUntil(lambda: window.state == UiState.Idle, timeout=TIMEOUT_MS)
        assert [m.role for m in window.store.messages(conversation)] == ["user"]
        assert [m.role for m in window.view.messages] == ["user"]


def test_a_stop_while_the_chat_template_renders_reads_as_stopped_not_failed(
    qtbot: QtBot,
    isolated_data_dir: Path,
    files: dict[str, Path],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with fake_window_with_one_reply(
        qtbot, isolated_data_dir, files, model_step_s=0.01, max_tokens=6
    ) as (window, conversation):
        before = window.store.messages(conversation)
        errors: list[str] = []
        window.errorShown.connect(errors.append)

        def stopped(*_args: object, **_kwargs: object) -> list[int]:
            raise Cancelled("stopped while the chat template was rendering")

        monkeypatch.setattr(Runtime, "chat_prompt", stopped)
        with qtbot.waitSignal(window.replyFinished, timeout=TIMEOUT_MS) as finished:
            window.regenerate()
        assert finished.args[0]["finish_reason"] == "cancelled"
        qtbot.waitUntil(lambda: window.state == UiState.Idle, timeout=TIMEOUT_MS)
        assert errors == []
        assert window.store.messages(conversation) == before
        assert window.view.messages[-1].text == before[-1].content


def test_an_edit_whose_reply_is_stopped_before_any_text_stays_pending(
    qtbot: QtBot, isolated_data_dir: Path, files: dict[str, Path]
) -> None:
    with fake_window_with_one_reply(
        qtbot, isolated_data_dir, files, model_step_s=0.3, max_tokens=6
    ) as (window, chat):
        before = [(m.role, m.content) for m in window.store.messages(chat)]
        window.edit_last_message()
        assert not window.regenerate_button.isEnabled()  # it would answer the hidden exchange
        window.prompt.setPlainText("The question, edited")
        qtbot.mouseClick(window.send_button, Qt.MouseButton.LeftButton)
        assert [(m.role, m.content) for m in window.store.messages(chat)][:2] == before
        qtbot.mouseClick(window.stop_button, Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: window.state == UiState.Idle, timeout=TIMEOUT_MS)
        # The edit is pending again: the old exchange stored, the edited message in the box.
        assert [(m.role, m.content) for m in window.store.messages(chat)] == before
        assert window.view.messages == []
        assert window.prompt.toPlainText() == "The question, edited"
        assert window.chats.undo_button.isVisible()
        qtbot.mouseClick(window.chats.undo_button, Qt.MouseButton.LeftButton)
        assert [(m.role, m.text) for m in window.view.messages] == before


def test_a_first_message_stopped_before_any_text_takes_its_new_chat_with_it(
    qtbot: QtBot, isolated_data_dir: Path, files: dict[str, Path]
) -> None:
    with fake_window_with_one_reply(
        qtbot, isolated_data_dir, files, model_step_s=0.3, max_tokens=6
    ) as (window, chat):
        window.new_chat()
        window.prompt.setPlainText("A new chat, stopped")
        qtbot.mouseClick(window.send_button, Qt.MouseButton.LeftButton)
        qtbot.mouseClick(window.stop_button, Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: window.state == UiState.Idle, timeout=TIMEOUT_MS)
        assert [c.id for c in window.store.conversations()] == [chat]
        assert window.prompt.toPlainText() == "A new chat, stopped"
