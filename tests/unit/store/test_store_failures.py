"""A broken, full, locked or unwritable database gives one readable StoreError, a way out where
there is one, and never loses what the user typed silently; files stay private."""

from __future__ import annotations

import os
import sqlite3
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.paths import data_dir, database_path
from app.store import ConversationStore
from app.store_errors import StoreBusyError, StoreDamagedError, StoreError, StoreFullError


def _filled(path: Path, n_messages: int = 200) -> None:
    store = ConversationStore(path)
    chat = store.create_conversation("kept")
    for i in range(n_messages):
        store.add_message(chat, "user", f"message {i} " + "x" * 1000)
    store.close()  # the last connection checkpoints the WAL into the file
    assert not Path(f"{path}-wal").exists() or Path(f"{path}-wal").stat().st_size == 0


def _one_line(exc: BaseException) -> str:
    text = str(exc)
    assert "\n" not in text and text
    return text


def _damage_scrambled(path: Path) -> None:
    data = bytearray(path.read_bytes())
    for at in range(4096, len(data), 4096):  # every page after the header page
        data[at + 8 : at + 200] = bytes((at * 7 + i) % 251 for i in range(192))
    path.write_bytes(bytes(data))


DAMAGE = {
    "garbage": lambda p: p.write_bytes(b"this is not a database at all" * 200),
    "truncated": lambda p: p.write_bytes(p.read_bytes()[: p.stat().st_size // 3]),
    "scrambled": _damage_scrambled,
}


@pytest.mark.parametrize("damage", DAMAGE.values(), ids=DAMAGE.keys())
def test_a_damaged_database_is_refused_in_words_and_recovered_aside(
    tmp_path: Path, damage: object
) -> None:
    path = tmp_path / "chats.sqlite3"
    _filled(path)
    assert callable(damage)
    damage(path)
    damaged_bytes = path.read_bytes()
    with pytest.raises(StoreDamagedError) as caught:
        ConversationStore(path)
    assert "is damaged" in _one_line(caught.value) and str(path) in str(caught.value)
    store, aside = ConversationStore.recover(path)
    try:
        assert store.conversations() == []  # a fresh history...
        store.create_conversation("new")
        assert [c.title for c in store.conversations()] == ["new"]
    finally:
        store.close()
    assert aside.name.startswith("chats.sqlite3.damaged-")
    assert aside.read_bytes() == damaged_bytes  # ...and the damaged file kept, untouched


def test_a_folder_in_place_of_the_database_is_recovered_aside(tmp_path: Path) -> None:
    path = tmp_path / "chats.sqlite3"
    path.mkdir()
    (path / "something.txt").write_text("keep me", encoding="utf-8")
    with pytest.raises(StoreDamagedError, match="a folder is where the database file should be"):
        ConversationStore(path)
    store, aside = ConversationStore.recover(path)
    store.close()
    assert (aside / "something.txt").read_text(encoding="utf-8") == "keep me"
    assert path.is_file()


def test_recovering_twice_in_one_second_keeps_both_damaged_files(tmp_path: Path) -> None:
    path = tmp_path / "chats.sqlite3"
    asides = []
    for _ in range(2):
        path.write_bytes(b"junk" * 1000)
        store, aside = ConversationStore.recover(path, clock=lambda: 1_700_000_000.0)
        store.close()
        asides.append(aside)
    assert asides[0] != asides[1] and all(a.exists() for a in asides)


def _unwritable_folder(tmp_path: Path) -> Path:
    if os.geteuid() != 0:
        folder = tmp_path / "readonly"
        folder.mkdir()
        folder.chmod(0o500)
        return folder
    # root writes anywhere chmod allows; procfs refuses new files even to root.
    return Path("/proc")


def test_an_unwritable_data_folder_is_one_line_that_names_the_folder(tmp_path: Path) -> None:
    folder = _unwritable_folder(tmp_path)
    with pytest.raises(StoreError) as caught:
        ConversationStore(folder / "chats.sqlite3")
    assert not isinstance(caught.value, StoreDamagedError)  # nothing to set aside
    assert f"check that {folder} is writable" in _one_line(caught.value)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[ConversationStore]:
    store = ConversationStore(tmp_path / "chats.sqlite3", busy_timeout_s=0.05)
    yield store
    store.close()


def test_a_full_disk_refuses_the_write_keeps_earlier_rows_and_allows_a_retry(
    store: ConversationStore,
) -> None:
    chat = store.create_conversation("c")
    store.add_message(chat, "user", "saved before the disk filled")
    # SQLite's own size cap produces the very error a full disk does (SQLITE_FULL).
    db = store._conn
    pages = db.execute("PRAGMA page_count").fetchone()[0]
    db.execute(f"PRAGMA max_page_count = {pages}")
    typed = "a long question " * 2000
    with pytest.raises(StoreFullError) as caught:
        store.add_message(chat, "user", typed)
    assert "is full" in _one_line(caught.value) and "nothing was saved" in str(caught.value)
    assert [m.content for m in store.messages(chat)] == ["saved before the disk filled"]
    db.execute(f"PRAGMA max_page_count = {pages * 100}")  # the user freed some space
    store.add_message(chat, "user", typed)
    assert [m.content for m in store.messages(chat)][-1] == typed


def test_a_lock_held_by_another_program_is_a_busy_error_for_every_write(
    store: ConversationStore,
) -> None:
    chat = store.create_conversation("c")
    message = store.add_message(chat, "user", "hi")
    other = sqlite3.connect(store.path, isolation_level=None)
    other.execute("BEGIN EXCLUSIVE")
    try:
        writes = {
            "rename": lambda: store.rename(chat, "new"),
            "delete": lambda: store.delete(chat),
            "regenerate": lambda: store.delete_message(message),
            "send": lambda: store.add_message(chat, "user", "again"),
            "new chat": lambda: store.create_conversation("d"),
            "open": lambda: ConversationStore(store.path, busy_timeout_s=0.05).close(),
        }
        for name, write in writes.items():
            with pytest.raises(StoreBusyError) as caught:
                write()
            assert "is locked by another program" in _one_line(caught.value), name
    finally:
        other.execute("ROLLBACK")
        other.close()
    store.rename(chat, "new")  # usable again once the lock is gone
    assert store.conversations()[0].title == "new"


def test_data_folder_and_files_are_private_whatever_the_umask() -> None:
    old = os.umask(0o002)
    try:
        folder = data_dir()
        folder.chmod(0o775)  # as an older version under a loose umask left it
        store = ConversationStore(database_path())
        store.add_message(store.create_conversation("c"), "user", "private")
        folder = data_dir()
        wal = Path(f"{database_path()}-wal")
        assert wal.exists()
        modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in (database_path(), wal)}
        store.close()
    finally:
        os.umask(old)
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert modes == {"conversations.sqlite3": 0o600, "conversations.sqlite3-wal": 0o600}


def test_a_message_for_a_chat_another_window_deleted_says_so(tmp_path: Path) -> None:
    path = tmp_path / "chats.sqlite3"
    mine = ConversationStore(path)
    chat = mine.create_conversation("open here")
    other = ConversationStore(path)
    other.delete(chat)
    other.close()
    with pytest.raises(StoreError) as raised:
        mine.add_message(chat, "assistant", "a reply that finished after the delete")
    assert "deleted in another window" in _one_line(raised.value)
    mine.close()
