"""Start-up with a damaged or unusable database: a way out instead of a traceback; settings
stay private."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from PySide6.QtWidgets import QApplication

from app.engine.corpus_files import FOLDER_NAME as HISTORY_INDEX_FOLDER
from app.paths import database_path
from ui.dialogs.storage_recovery import open_store
from ui.settings import Settings, settings_file


def _damaged(path: Path) -> bytes:
    path.write_bytes(b"scrambled beyond repair " * 100)
    return path.read_bytes()


def test_choosing_a_fresh_history_keeps_the_damaged_file_aside() -> None:
    path = database_path()
    original = _damaged(path)
    questions: list[str] = []
    told: list[str] = []
    store = open_store(path, ask=lambda q: questions.append(q) or True, tell=told.append)
    assert store is not None
    try:
        assert store.conversations() == []
    finally:
        store.close()
    assert len(questions) == 1 and "is damaged" in questions[0]
    asides = [p for p in path.parent.iterdir() if p.name.startswith(f"{path.name}.damaged-")]
    assert len(asides) == 1 and asides[0].read_bytes() == original
    assert told == [f"Started a fresh history. The damaged database was kept as {asides[0]}."]


def test_declining_leaves_the_damaged_file_where_it_was() -> None:
    path = database_path()
    original = _damaged(path)
    assert open_store(path, ask=lambda _q: False, tell=lambda _t: None) is None
    assert path.read_bytes() == original
    assert [p.name for p in path.parent.iterdir()] == [path.name]


def test_an_error_with_no_way_out_is_told_in_one_sentence(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the data folder should be", encoding="utf-8")
    told: list[str] = []
    assert open_store(blocker / "chats.sqlite3", ask=lambda _q: True, tell=told.append) is None
    assert len(told) == 1 and "\n" not in told[0] and "Traceback" not in told[0]


def test_the_settings_file_is_private_whatever_the_umask(qapp: QApplication) -> None:
    # QSettings syncs on a timer of the application's event loop: without one Qt warns.
    del qapp
    old = os.umask(0o002)
    try:
        settings = Settings()
        settings.set("generation/max_tokens", 77)
        settings.sync()
    finally:
        os.umask(old)
    assert stat.S_IMODE(settings_file().stat().st_mode) == 0o600
    assert stat.S_IMODE(settings_file().parent.stat().st_mode) == 0o700


def test_a_deleted_database_takes_the_past_chats_index_with_it() -> None:
    """Wiping the history by deleting its file must not leave its chats drafting on."""
    path = database_path()
    index = path.parent / HISTORY_INDEX_FOLDER
    first = open_store(path, ask=lambda _q: False, tell=lambda _t: None)
    assert first is not None
    first.close()
    index.mkdir()
    (index / "0123.bin").write_bytes(b"the old chats' tokens")
    again = open_store(path, ask=lambda _q: False, tell=lambda _t: None)
    assert again is not None
    again.close()
    assert (index / "0123.bin").exists()  # the same history: its index stays
    for suffix in ("", "-wal", "-shm"):
        path.with_name(path.name + suffix).unlink(missing_ok=True)
    fresh = open_store(path, ask=lambda _q: False, tell=lambda _t: None)
    assert fresh is not None
    fresh.close()
    assert not index.exists()
