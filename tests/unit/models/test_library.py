"""The library's list of places, kept for `specchat models list`: two windows saving it at once
never leave a torn file or fail each other's save."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

import pytest

from models.library import library_file, library_places, save_library
from tests.helpers.partials import stale_partial

MINE = [Path("/models/mine"), Path("/models/mine.gguf")]
THEIRS = [Path("/models/theirs")]


def test_saved_places_read_back() -> None:
    save_library(MINE)
    assert library_places() == MINE
    assert [p.name for p in library_file().parent.iterdir()] == [library_file().name]


def test_two_saves_at_once_each_rename_their_own_file(monkeypatch: pytest.MonkeyPatch) -> None:
    """The other window writes its list between this one's write and its rename: sharing one
    temporary name, this rename would put the other's file in place (half-written, had it been
    caught mid-write) and the other's rename would then fail."""
    real_replace = os.replace
    held: list[tuple[str | os.PathLike[str], str | os.PathLike[str]]] = []
    failures: list[BaseException] = []

    def theirs() -> None:
        try:
            save_library(THEIRS)
        except BaseException as exc:  # reported below, in the test's thread
            failures.append(exc)

    def replace_after_theirs(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        monkeypatch.setattr(os, "replace", lambda s, d: held.append((s, d)))
        other = threading.Thread(target=theirs)  # another thread: another temporary name
        other.start()
        other.join()
        monkeypatch.setattr(os, "replace", real_replace)
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace_after_theirs)
    save_library(MINE)
    assert library_places() == MINE
    [(src, dst)] = held
    os.replace(src, dst)  # the other window's rename, last
    assert not failures and library_places() == THEIRS
    assert [p.name for p in library_file().parent.iterdir()] == [library_file().name]


@pytest.mark.skipif(os.name != "posix", reason="only POSIX folders can be synced")
def test_the_list_is_on_the_disk_before_it_is_renamed_into_place_and_the_rename_after(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The rename lives in the folder: until the folder is synced, a power cut can lose it."""
    calls: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        calls.append("fsync folder" if stat.S_ISDIR(os.fstat(fd).st_mode) else "fsync")
        real_fsync(fd)

    def replace(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        calls.append("replace")
        real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    save_library(MINE)
    assert calls == ["fsync", "replace", "fsync folder"]


def test_a_killed_saves_copy_is_removed_by_the_next_save() -> None:
    left = stale_partial(library_file())
    save_library(MINE)
    assert not left.exists() and library_places() == MINE
