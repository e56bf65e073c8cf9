"""Deleting a chat: its text leaves the past-chats index before it leaves the store, and a
window whose open chat another window deleted starts a new chat for the next message."""

from __future__ import annotations

from pathlib import Path

from pytestqt.qtbot import QtBot

from app.engine.history_corpus import HistoryCorpus
from tests.helpers.fake_window import TIMEOUT_MS, another_store, fake_window_with_one_reply
from tests.helpers.qt_window import send
from ui.window.conversation_actions import DELETED_ELSEWHERE
from ui.window.main_window import UiState


def test_the_index_files_go_before_the_chat_not_after_the_engine_is_free(
    qtbot: QtBot, isolated_data_dir: Path, files: dict[str, Path]
) -> None:
    """A crash between the chat's delete and the engine thread's rebuild must not leave an
    index holding the deleted chat: the files are gone when delete returns, even while the
    engine thread is busy."""
    with fake_window_with_one_reply(
        qtbot, isolated_data_dir, files, model_step_s=0.1, max_tokens=4
    ) as (window, doomed):
        corpus = HistoryCorpus(isolated_data_dir, "49152-held")
        corpus.add(list(range(100, 140)))
        assert corpus.save() and corpus.path.exists()
        window.new_chat()
        window.settings.set("generation/max_tokens", 400)
        window.prompt.setPlainText("Keep the engine busy")
        window.send()
        assert window.state == UiState.Generating
        window.delete_conversation(doomed)
        assert not corpus.path.exists()
        assert window.store.conversation(doomed) is None
        window.stop()
        qtbot.waitUntil(lambda: window.state == UiState.Idle, timeout=TIMEOUT_MS)


def test_a_message_after_another_window_deleted_the_chat_starts_a_new_one(
    qtbot: QtBot, isolated_data_dir: Path, files: dict[str, Path]
) -> None:
    with fake_window_with_one_reply(
        qtbot, isolated_data_dir, files, model_step_s=0.01, max_tokens=4
    ) as (window, gone):
        with another_store(isolated_data_dir) as other:
            other.delete(gone)
        errors: list[str] = []
        window.errorShown.connect(errors.append)
        send(qtbot, window, "Still there?")
        assert errors == []
        assert window.statusBar().currentMessage() == DELETED_ELSEWHERE
        chat = window.conversation_id
        assert chat is not None and chat != gone  # a deleted chat's id is never given again
        assert window.chat.title(chat) == "Still there?"
        assert [m.role for m in window.store.messages(chat)] == ["user", "assistant"]
        assert [m.role for m in window.view.messages] == ["user", "assistant"]
        assert window.view.messages[0].text == "Still there?"


def test_a_chat_another_window_deletes_mid_reply_leaves_the_view_for_the_next_message(
    qtbot: QtBot, isolated_data_dir: Path, files: dict[str, Path]
) -> None:
    with fake_window_with_one_reply(
        qtbot, isolated_data_dir, files, model_step_s=0.02, max_tokens=4
    ) as (window, gone):
        window.settings.set("generation/max_tokens", 40)
        window.prompt.setPlainText("A second question")
        window.send()
        qtbot.waitUntil(lambda: len(window.view.streaming_text) > 5, timeout=TIMEOUT_MS)
        with another_store(isolated_data_dir) as other:
            other.delete(gone)
        qtbot.waitUntil(lambda: window.state == UiState.Idle, timeout=TIMEOUT_MS)
        send(qtbot, window, "Still there?")
        chat = window.conversation_id
        assert chat is not None
        assert [m.role for m in window.store.messages(chat)] == ["user", "assistant"]
        # The view shows the chat the message went to, not the deleted one above it.
        assert [m.role for m in window.view.messages] == ["user", "assistant"]
        assert window.view.messages[0].text == "Still there?"


def test_a_chat_another_window_deletes_and_replaces_mid_reply_gets_none_of_the_reply(
    qtbot: QtBot, isolated_data_dir: Path, files: dict[str, Path]
) -> None:
    """The other window's new chat must not take the deleted one's id, and with it the reply
    still streaming here."""
    with fake_window_with_one_reply(
        qtbot, isolated_data_dir, files, model_step_s=0.02, max_tokens=4
    ) as (window, gone):
        window.settings.set("generation/max_tokens", 40)
        window.prompt.setPlainText("A second question")
        window.send()
        qtbot.waitUntil(lambda: len(window.view.streaming_text) > 5, timeout=TIMEOUT_MS)
        with another_store(isolated_data_dir) as other:
            other.delete(gone)
            stranger = other.create_conversation("my private question")
            other.add_message(stranger, "user", "my private question")
        qtbot.waitUntil(lambda: window.state == UiState.Idle, timeout=TIMEOUT_MS)
        assert stranger != gone
        with another_store(isolated_data_dir) as other:
            assert [m.content for m in other.messages(stranger)] == ["my private question"]
