"""The past-chats index's journal (app/engine/suffix_journal.py): a save reads it once, a journal
started has its name synced to the disk, and an append given the journal as read before goes by
the file as it is when that has changed."""

from __future__ import annotations

from array import array
from pathlib import Path

import pytest

from app.engine import suffix_journal
from app.engine.history_corpus import HistoryCorpus
from app.engine.suffix_cursor import longest_match
from app.engine.suffix_file import DIGEST_BYTES
from app.engine.suffix_journal import append_journal, journal_bytes, journal_path, read_journal

FINGERPRINT = "49152-journal"
CONTINUES = bytes(range(DIGEST_BYTES))  # names the index file the journal continues


def _doc(start: int, n: int = 10) -> list[int]:
    return list(range(start, start + n))


def _holds(corpus: HistoryCorpus, document: list[int]) -> bool:
    branches = corpus.index.continuations(longest_match(corpus.index, document[:4]), 3)
    return bool(branches) and branches[0].tokens == tuple(document[4:7])


def _count_journal_reads(monkeypatch: pytest.MonkeyPatch, journal: Path) -> list[int]:
    reads = [0]
    read_file, read_all = suffix_journal.read_own_file, suffix_journal._read_all

    def counted_read_file(path: Path) -> bytes:
        reads[0] += path == journal
        return read_file(path)

    def counted_read_all(fd: int) -> bytes:
        reads[0] += 1  # only the journal is read through a descriptor
        return read_all(fd)

    monkeypatch.setattr(suffix_journal, "read_own_file", counted_read_file)
    monkeypatch.setattr(suffix_journal, "_read_all", counted_read_all)
    return reads


def test_a_save_reads_the_journal_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The save takes in what another window appended and appends its own reply, both under one
    hold of the folder's lock: one read of the journal serves both."""
    first = HistoryCorpus(tmp_path, FINGERPRINT)
    first.add(_doc(0))
    assert first.save()  # the file
    second = HistoryCorpus(tmp_path, FINGERPRINT)
    theirs = _doc(1000)
    second.add(theirs)
    assert second.save()  # the journal, with a record this window has not seen
    mine = _doc(2000)
    first.add(mine)
    reads = _count_journal_reads(monkeypatch, journal_path(first.path))
    assert first.save()
    assert reads == [1]
    assert _holds(first, theirs)
    reopened = HistoryCorpus(tmp_path, FINGERPRINT)
    assert not reopened.needs_rebuild and not reopened.dirty
    assert _holds(reopened, theirs) and _holds(reopened, mine)


def _records(index: Path) -> list[list[int]]:
    documents, state = read_journal(index, CONTINUES)
    assert state == "whole"
    return [d.tolist() for d in documents]


def test_an_append_after_the_journal_was_deleted_starts_it_afresh(tmp_path: Path) -> None:
    """A deletion of chats that went on unlocked deletes the journal between the save's read
    and its append: the journal read before is not the one appended to."""
    index = tmp_path / "corpus.bin"
    append_journal(index, CONTINUES, [array("i", _doc(0))])
    read = journal_bytes(index)
    journal_path(index).unlink()
    append_journal(index, CONTINUES, [array("i", _doc(100))], read=read)
    assert _records(index) == [_doc(100)]


def test_an_append_after_the_journal_grew_keeps_what_was_added(tmp_path: Path) -> None:
    """Where the folder's lock is a no-op, another writer may append between the read and the
    append; a tear read before is not cut off over its records."""
    index = tmp_path / "corpus.bin"
    append_journal(index, CONTINUES, [array("i", _doc(0))])
    journal = journal_path(index)
    journal.write_bytes(journal.read_bytes()[:-3])  # torn when read
    read = journal_bytes(index)
    append_journal(index, CONTINUES, [array("i", _doc(100))])  # the other writer cuts it, appends
    append_journal(index, CONTINUES, [array("i", _doc(200))], read=read)
    assert _records(index) == [_doc(100), _doc(200)]


def _count_folder_syncs(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    synced: list[Path] = []
    monkeypatch.setattr(suffix_journal, "fsync_folder", synced.append)
    return synced


def test_a_journal_started_has_its_folder_synced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new journal's name is on the disk only once its folder is: else a power cut can take
    the file and every record in it."""
    synced = _count_folder_syncs(monkeypatch)
    index = tmp_path / "index.suf"
    append_journal(index, CONTINUES, [array("i", _doc(0))])
    assert synced == [tmp_path]
    assert read_journal(index, CONTINUES) == ([array("i", _doc(0))], "whole")


def test_an_append_to_a_started_journal_does_not_sync_its_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Appends come with every reply and stay one fsync of the file."""
    index = tmp_path / "index.suf"
    append_journal(index, CONTINUES, [array("i", _doc(0))])
    synced = _count_folder_syncs(monkeypatch)
    append_journal(index, CONTINUES, [array("i", _doc(100))])
    assert synced == []
    assert read_journal(index, CONTINUES)[0] == [array("i", _doc(0)), array("i", _doc(100))]


def test_an_empty_journal_started_afresh_has_its_folder_synced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Also a journal whose first append was refused (a full disk) and left empty: its name
    was never synced, so the one that starts it is what syncs it."""
    index = tmp_path / "index.suf"
    journal_path(index).write_bytes(b"")
    synced = _count_folder_syncs(monkeypatch)
    append_journal(index, CONTINUES, [array("i", _doc(0))])
    assert synced == [tmp_path]
