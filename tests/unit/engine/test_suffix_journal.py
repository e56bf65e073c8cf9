"""The past-chats index's journal (app/engine/suffix_journal.py): a save reads it once, and an
append given the journal as read before goes by the file as it is when that has changed."""

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
    read_bytes, read_all = Path.read_bytes, suffix_journal._read_all

    def counted_read_bytes(path: Path) -> bytes:
        reads[0] += path == journal
        return read_bytes(path)

    def counted_read_all(fd: int) -> bytes:
        reads[0] += 1  # only the journal is read through a descriptor
        return read_all(fd)

    monkeypatch.setattr(Path, "read_bytes", counted_read_bytes)
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
