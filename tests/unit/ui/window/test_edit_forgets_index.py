"""An exchange taken back and replaced leaves the past-chats index: the index files go before
the commit that deletes it and the index is rebuilt after, also when the store refused that
commit at first and took the reply later."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import QSettings

from app.store import ConversationStore
from ui.settings import Settings
from ui.window import chat_controller
from ui.window.chat_controller import ChatController


@pytest.fixture
def events(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    happened: list[str] = []
    monkeypatch.setattr(chat_controller, "forget_index_files", lambda: happened.append("files"))
    return happened


@pytest.fixture
def chats(tmp_path: Path, events: list[str]) -> Iterator[ChatController]:
    store = ConversationStore(tmp_path / "chats.sqlite3")
    ini = str(tmp_path / "settings.ini")
    settings = Settings(QSettings(ini, QSettings.Format.IniFormat))
    yield ChatController(store, settings, on_text_deleted=lambda: events.append("rebuild"))
    store.close()


def _answered(chats: ChatController, question: str) -> None:
    chats.add_user_message(question)
    assert chats.conversation_id is not None
    chats.save_reply(chats.conversation_id, f"answer to {question}", {}, None)


def test_a_reply_written_again_deletes_nothing_of_the_users(
    chats: ChatController, events: list[str]
) -> None:
    _answered(chats, "first")
    assert chats.conversation_id is not None
    replaced = chats.last_reply_id()
    chats.save_reply(chats.conversation_id, "another answer", {}, None, replaces=replaced)
    assert events == []


def test_a_replaced_exchange_is_forgotten_even_when_the_store_took_it_late(
    chats: ChatController, events: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _answered(chats, "a question with a secret")
    assert chats.take_back_last_message() is not None
    chats.add_user_message("a question without it")
    assert chats.conversation_id is not None
    add_message = chats.store.add_message

    def full_disk(*_args: Any, **_kwargs: Any) -> int:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(chats.store, "add_message", full_disk)
    with pytest.raises(OSError):
        chats.save_reply(chats.conversation_id, "the new answer", {}, None)
    assert events == ["files"]  # gone before the commit; the commit did not happen
    monkeypatch.setattr(chats.store, "add_message", add_message)

    assert chats.save_unsaved_reply()
    assert events == ["files", "files", "rebuild"]
    contents = [m.content for m in chats.store.messages(chats.conversation_id)]
    assert contents == ["a question without it", "the new answer"]
