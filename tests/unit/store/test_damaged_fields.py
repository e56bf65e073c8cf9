"""A field that SQLite keeps but that is not what SpecChat wrote (a file edited by another
program, or damaged where PRAGMA quick_check does not look) reads as the plain value of its
kind: the chat list still loads and the chat still opens, its text intact."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from app.store import ConversationStore, TokenSource


def _chat(path: Path) -> tuple[int, int]:
    store = ConversationStore(path)
    chat = store.create_conversation("kept title")
    store.add_message(chat, "user", "a question")
    reply = store.add_message(
        chat,
        "assistant",
        "an answer",
        stats={"generated_tokens": 2},
        segments=[("an ", TokenSource.DRAFT), ("answer", TokenSource.TARGET)],
    )
    store.close()
    return chat, reply


def _edit(path: Path, sql: str, *args: object) -> None:
    with sqlite3.connect(path) as db:  # what another program may do to the file
        db.execute(sql, args)


@pytest.mark.parametrize(
    ("column", "value"),
    [
        ("stats_json", "[1, 2, 3]"),
        ("stats_json", "{not json"),
        ("stats_json", b"\x80\x81"),
        ("segments_json", '{"a": 1}'),
        ("segments_json", "[[]]"),
        ("segments_json", "[[1, 2]]"),
        ("segments_json", "[" * 100_000),
    ],
)
def test_a_reply_with_a_damaged_field_opens_with_its_text(
    tmp_path: Path, column: str, value: object
) -> None:
    path = tmp_path / "chats.sqlite3"
    chat, reply = _chat(path)
    _edit(path, f"UPDATE messages SET {column} = ? WHERE id = ?", value, reply)
    store = ConversationStore(path)
    messages = store.messages(chat)
    assert [m.content for m in messages] == ["a question", "an answer"]
    kept = messages[1]
    if column == "stats_json":
        assert kept.stats is None and kept.segments is not None
    else:
        assert kept.segments is None and kept.stats == {"generated_tokens": 2}


def test_text_stored_as_bytes_or_numbers_reads_as_text(tmp_path: Path) -> None:
    path = tmp_path / "chats.sqlite3"
    chat, reply = _chat(path)
    _edit(path, "UPDATE conversations SET title = ? WHERE id = ?", b"caf\xc3\xa9 \x80", chat)
    _edit(path, "UPDATE messages SET content = ? WHERE id = ?", b"\xff\xfe", reply)
    _edit(path, "UPDATE messages SET created_at = 'yesterday' WHERE id = ?", reply)
    store = ConversationStore(path)
    [summary] = store.conversations()
    assert summary.title == "café \ufffd"
    assert [m.content for m in store.messages(chat)] == ["a question", "\ufffd\ufffd"]
    assert store.messages(chat)[1].created_at == 0.0
    # The chat goes on: a new message is stored beside what was read.
    store.add_message(chat, "user", "and then?")
    assert [m.content for m in store.messages(chat)][-1] == "and then?"
