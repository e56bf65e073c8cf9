"""The past-chats index is built from the stored chats, read through a connection of its own; a
history that cannot be read leaves the index empty, never the load failed."""

from __future__ import annotations

from pathlib import Path

from app.engine.past_chats import HistoryTokens, stored_chats
from app.store import ConversationStore

# A message's length as its one token; a question's prompt marked by a leading -1.
_LENGTHS = HistoryTokens(text=lambda text: [len(text)], asked=lambda text: [-1, len(text)])


def test_every_stored_exchange_is_read_newest_conversation_first(tmp_path: Path) -> None:
    database = tmp_path / "chats.sqlite3"
    store = ConversationStore(database)
    older = store.create_conversation()
    store.add_message(older, "user", "hi")
    store.add_message(older, "assistant", "hello there")
    newer = store.create_conversation()
    store.add_message(newer, "user", "bye")
    store.close()
    # The newer chat's question has no reply yet: no document, as none is written live.
    assert list(stored_chats(database, _LENGTHS)) == [[-1, 2, 11]]


def test_a_history_that_cannot_be_read_gives_an_empty_index(tmp_path: Path) -> None:
    garbage = tmp_path / "chats.sqlite3"
    garbage.write_bytes(b"this is not a database" * 100)
    assert list(stored_chats(garbage, _LENGTHS)) == []
    assert garbage.read_bytes() == b"this is not a database" * 100  # left for the window to offer
    assert list(stored_chats(tmp_path, _LENGTHS)) == []  # a folder where the file should be
