"""The conversation store: schema, WAL, round trips, atomic writes, export, text UTF-8 cannot
hold, and two processes creating one file."""

from __future__ import annotations

import sqlite3
import threading
from itertools import count
from pathlib import Path

import pytest

from app.store import ConversationStore
from app.store_errors import StoreDamagedError, StoreError
from app.store_schema import MIGRATIONS, SCHEMA_VERSION, split_sql
from app.store_text import MAX_TITLE, visible


@pytest.fixture
def store(tmp_path: Path) -> ConversationStore:
    ticks = count(1000)
    return ConversationStore(tmp_path / "chats.sqlite3", clock=lambda: float(next(ticks)))


def test_database_uses_wal_and_records_its_schema_version(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite3"
    ConversationStore(path).close()
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert db.execute("SELECT version FROM schema_version").fetchall() == [(SCHEMA_VERSION,)]


def test_conversations_are_listed_most_recent_first(store: ConversationStore) -> None:
    first = store.create_conversation("first")
    second = store.create_conversation("second")
    assert [c.title for c in store.conversations()] == ["second", "first"]
    store.add_message(first, "user", "hello again")
    listed = store.conversations()
    assert [c.id for c in listed] == [first, second]
    assert listed[0].message_count == 1


def test_messages_round_trip_with_stats_and_segments(store: ConversationStore) -> None:
    chat = store.create_conversation("c")
    store.add_message(chat, "user", "Hi")
    stats = {"mode": "draft", "acceptance_rate": 0.75, "per_position_acceptance": [1.0, None]}
    store.add_message(
        chat, "assistant", "Hello there", stats=stats, segments=[("Hello", False), (" there", True)]
    )
    user, reply = store.messages(chat)
    assert (user.role, user.content, user.stats, user.segments) == ("user", "Hi", None, None)
    assert reply.stats == stats
    assert reply.segments == [("Hello", False), (" there", True)]


def test_rename_and_delete(store: ConversationStore) -> None:
    chat = store.create_conversation("old")
    store.add_message(chat, "user", "x")
    store.rename(chat, "  new title ")
    assert store.conversations()[0].title == "new title"
    store.rename(chat, "   ")
    assert store.conversations()[0].title == "Untitled"
    store.delete(chat)
    assert store.conversations() == []
    assert store.messages(chat) == []  # cascaded


def test_delete_message_removes_only_that_message(store: ConversationStore) -> None:
    chat = store.create_conversation("c")
    store.add_message(chat, "user", "q")
    reply = store.add_message(chat, "assistant", "a")
    store.delete_message(reply)
    assert [m.content for m in store.messages(chat)] == ["q"]


def test_everything_committed_survives_reopening(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite3"
    store = ConversationStore(path)
    chat = store.create_conversation("kept")
    store.add_message(chat, "user", "question", stats=None)
    # No close(): a killed process never gets to close; the commit alone must be enough.
    reopened = ConversationStore(path)
    assert [m.content for m in reopened.messages(chat)] == ["question"]
    store.close()
    reopened.close()


def test_a_failed_write_leaves_nothing_behind(store: ConversationStore) -> None:
    chat = store.create_conversation("c")
    with pytest.raises(StoreError, match="CHECK constraint failed"):
        store.add_message(chat, "robot", "not a role")
    assert store.messages(chat) == []
    # A conversation deleted meanwhile (say, in another window) is refused in words too.
    with pytest.raises(StoreError, match="deleted in another window"):
        store.add_message(chat + 100, "user", "no such conversation")


def test_a_newer_schema_is_refused_in_words(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite3"
    ConversationStore(path).close()
    db = sqlite3.connect(path)
    db.execute("UPDATE schema_version SET version = ?", (SCHEMA_VERSION + 1,))
    db.commit()
    db.close()
    with pytest.raises(StoreError, match="newer SpecChat"):
        ConversationStore(path)


def test_markdown_export(store: ConversationStore) -> None:
    chat = store.create_conversation("Sea poems")
    store.add_message(chat, "user", "Write a haiku")
    store.add_message(
        chat, "assistant", "Waves fold\ninto foam", stats={"summary": "mode draft · 90 %"}
    )
    text = store.export_markdown(chat)
    assert text.startswith("# Sea poems\n")
    assert "## You\n\nWrite a haiku" in text
    assert "## Assistant\n\nWaves fold\ninto foam" in text
    assert "*mode draft · 90 %*" in text
    with pytest.raises(StoreError):
        store.export_markdown(chat + 1)


def test_a_lone_surrogate_is_stored_as_the_replacement_character(
    store: ConversationStore,
) -> None:
    """Half an emoji from a program that cut one in two: the message is kept, not refused."""
    chat = store.create_conversation("half \ud83d title")
    store.add_message(chat, "user", "emoji half \ud83d here", segments=[("a\udc00", 1)])
    store.rename(chat, "renamed \udfff")
    [message] = store.messages(chat)
    assert message.content == "emoji half \ufffd here"
    assert message.segments == [("a\ufffd", 1)]
    summary = store.conversation(chat)
    assert summary is not None and summary.title == "renamed \ufffd"


def test_opening_a_new_file_that_another_process_is_creating_waits_for_it(
    tmp_path: Path,
) -> None:
    """Two SpecChat processes starting on a fresh data folder: the second must not read the
    schema version before the first has written the tables, then create them again."""
    path = tmp_path / "c.sqlite3"
    first = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    first.execute("PRAGMA journal_mode=WAL")
    first.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
    first.execute("BEGIN IMMEDIATE")  # the first process, mid-migration
    for version in range(1, SCHEMA_VERSION + 1):
        for statement in split_sql(MIGRATIONS[version]):
            first.execute(statement)
    first.execute("INSERT INTO schema_version VALUES (?)", (SCHEMA_VERSION,))
    commit = threading.Timer(0.3, lambda: first.execute("COMMIT"))
    commit.start()
    try:
        second = ConversationStore(path)
    finally:
        commit.join()
        first.close()
    second.create_conversation("works")
    assert [c.title for c in second.conversations()] == ["works"]
    second.close()


def test_a_message_replacing_another_swaps_them_in_one_commit(store: ConversationStore) -> None:
    """A regenerated reply: the old one stays until the new is stored, and a write that fails
    leaves the old one, never neither."""
    chat = store.create_conversation("c")
    store.add_message(chat, "user", "Hello")
    old = store.add_message(chat, "assistant", "First try")
    with pytest.raises(StoreError):
        store.add_message(chat, "robot", "refused by the schema", replacing=(old,))
    assert [m.content for m in store.messages(chat)] == ["Hello", "First try"]
    store.add_message(chat, "assistant", "Second try", replacing=(old,))
    assert [m.content for m in store.messages(chat)] == ["Hello", "Second try"]
    # An id from another conversation is not touched.
    other = store.create_conversation("other")
    kept = store.add_message(other, "user", "mine")
    store.add_message(chat, "assistant", "Third try", replacing=(kept,))
    assert [m.content for m in store.messages(other)] == ["mine"]


def test_a_title_shows_what_is_visible_of_it(tmp_path: Path) -> None:
    store = ConversationStore(tmp_path / "chats.sqlite3")
    invisible = store.create_conversation("\u200b\u200e")
    two_lines = store.create_conversation("first line\nsecond\u200b line")
    store.rename(two_lines, "  renamed\r\n\tagain  ")
    titles = {c.id: c.title for c in store.conversations()}
    assert titles == {invisible: "Untitled", two_lines: "renamed again"}


def test_an_id_is_never_given_twice_even_after_its_row_is_deleted(
    store: ConversationStore,
) -> None:
    """A second window still showing a deleted chat must not find a new chat under its id."""
    old = store.create_conversation("deleted in one window")
    question = store.add_message(old, "user", "q")
    reply = store.add_message(old, "assistant", "a")
    store.delete(old)
    new = store.create_conversation("created in another")
    assert new > old
    assert store.add_message(new, "user", "q2") > reply > question
    last = store.add_message(new, "assistant", "a2")
    regenerated = store.add_message(new, "assistant", "a3", replacing=(last,))
    store.delete_message(regenerated)
    assert store.add_message(new, "user", "q3") > regenerated


def test_a_version_1_database_keeps_its_chats_and_gives_new_ids_past_them(
    tmp_path: Path,
) -> None:
    path = tmp_path / "c.sqlite3"
    old = sqlite3.connect(path, isolation_level=None)
    old.execute("PRAGMA journal_mode=WAL")
    old.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
    for statement in split_sql(MIGRATIONS[1]):
        old.execute(statement)
    old.execute("INSERT INTO schema_version VALUES (1)")
    old.execute("INSERT INTO conversations VALUES (7, 'kept', 1.0, 1.0)")
    old.execute("INSERT INTO messages VALUES (9, 7, 'user', 'hello', 1.0, NULL, NULL)")
    old.close()
    store = ConversationStore(path)
    assert [(c.id, c.title, c.message_count) for c in store.conversations()] == [(7, "kept", 1)]
    store.delete(7)
    assert store.create_conversation("new") == 8
    assert store.add_message(8, "user", "x") == 10
    store.close()
    db = sqlite3.connect(path)
    assert db.execute("SELECT version FROM schema_version").fetchall() == [(SCHEMA_VERSION,)]


def test_joiners_that_draw_are_kept_and_loose_ones_dropped() -> None:
    family = "\U0001f469\u200d\U0001f469\u200d\U0001f467"  # one glyph, joined
    persian = "\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645"  # a non-joiner mid-word
    assert visible(f"{family} {persian}") == f"{family} {persian}"
    assert visible("\u200d") == "" and visible(" \u200c a \u200d") == "a"


def test_a_title_past_the_bound_is_cut(store: ConversationStore) -> None:
    chat = store.create_conversation("x" * 200_000)
    title = store.conversations()[0].title
    assert len(title) == MAX_TITLE and title.endswith("…")
    store.rename(chat, "fine")
    assert store.conversations()[0].title == "fine"


def test_a_damaged_file_is_named_by_its_first_problem_not_the_reports_heading(
    tmp_path: Path,
) -> None:
    # A page SQLite opens the file past but its check reports: which one depends on the layout.
    for page in range(2, 12):
        path = tmp_path / f"c{page}.sqlite3"
        store = ConversationStore(path)
        chat = store.create_conversation("chat")
        for i in range(200):
            store.add_message(chat, "user", f"message {i} " * 50)
        store.close()
        data = bytearray(path.read_bytes())
        data[(page - 1) * 4096 : page * 4096] = bytes(range(256)) * 16
        path.write_bytes(bytes(data))
        try:
            report = sqlite3.connect(path).execute("PRAGMA quick_check").fetchall()
        except sqlite3.DatabaseError:
            continue  # damage SQLite refuses outright, reported otherwise
        assert report[0][0].startswith("*** in database main ***")
        with pytest.raises(StoreDamagedError) as caught:
            ConversationStore(path)
        assert "integrity check: Page " in str(caught.value)
        return
    pytest.fail("no damaged page gave SQLite's integrity report")
