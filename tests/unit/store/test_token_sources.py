"""Stored replies remember who proposed each accepted run (draft model or suffix index), and
databases written before the suffix index existed open and read the same."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from app.store import ConversationStore, TokenSource


def _raw_segments(path: Path, message_id: int) -> list[list[object]]:
    with sqlite3.connect(path) as db:
        row = db.execute(
            "SELECT segments_json FROM messages WHERE id = ?", (message_id,)
        ).fetchone()
    return list(json.loads(row[0]))


def test_a_reply_keeps_each_runs_source_across_a_reopen(tmp_path: Path) -> None:
    path = tmp_path / "chats.sqlite3"
    store = ConversationStore(path)
    chat = store.create_conversation()
    runs = [("Plain ", TokenSource.TARGET), ("model ", TokenSource.DRAFT), ("index", 2)]
    message = store.add_message(chat, "assistant", "Plain model index", segments=runs)
    store.close()

    reopened = ConversationStore(path)
    segments = reopened.messages(chat)[0].segments
    reopened.close()
    assert segments == [
        ("Plain ", TokenSource.TARGET),
        ("model ", TokenSource.DRAFT),
        ("index", TokenSource.SUFFIX),
    ]
    assert all(isinstance(source, TokenSource) for _, source in segments or [])
    # Two values a run, the source a number: an older SpecChat, which reads the second value
    # as "from the draft", still shades a suffix run and never fails to unpack it.
    raw = _raw_segments(path, message)
    assert [len(run) for run in raw] == [2, 2, 2]
    assert [bool(run[1]) for run in raw] == [False, True, True]


def test_replies_saved_with_true_and_false_read_as_draft_model_and_target(tmp_path: Path) -> None:
    path = tmp_path / "chats.sqlite3"
    store = ConversationStore(path)
    chat = store.create_conversation()
    message = store.add_message(chat, "assistant", "old reply", segments=[("old ", False)])
    store.close()
    # As the version before the suffix index wrote them.
    old = json.dumps([["old ", False], ["reply", True]])
    with sqlite3.connect(path) as db:
        db.execute("UPDATE messages SET segments_json = ? WHERE id = ?", (old, message))

    store = ConversationStore(path)
    assert store.messages(chat)[0].segments == [
        ("old ", TokenSource.TARGET),
        ("reply", TokenSource.DRAFT),
    ]
    store.close()


def test_a_source_from_a_later_version_reads_as_drafted() -> None:
    assert TokenSource.stored(7) is TokenSource.DRAFT
    assert TokenSource.stored("suffix") is TokenSource.DRAFT
    assert TokenSource.stored(0) is TokenSource.TARGET
    assert TokenSource.stored(None) is TokenSource.TARGET


def test_a_token_event_maps_to_its_source() -> None:
    assert TokenSource.of(from_draft=False, from_suffix=False) is TokenSource.TARGET
    assert TokenSource.of(from_draft=True, from_suffix=False) is TokenSource.DRAFT
    assert TokenSource.of(from_draft=True, from_suffix=True) is TokenSource.SUFFIX
