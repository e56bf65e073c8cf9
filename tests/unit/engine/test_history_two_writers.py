"""Two SpecChat windows on one data folder share each past-chats index file: neither loses the
replies the other saved, and one that deleted chats is not undone by the other writing them
back, even from a history it read before the deletion."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.engine import folder_lock
from app.engine.corpus_files import (
    DELETIONS_NAME,
    FOLDER_NAME,
    deletion_stamp,
    forget_every_vocabulary,
)
from app.engine.folder_lock import LOCK_NAME
from app.engine.history_corpus import HistoryCorpus
from app.engine.suffix_cursor import longest_match
from app.engine.suffix_journal import journal_path
from tests.helpers.locks import lock_held_elsewhere

FINGERPRINT = "49152-shared"


def _doc(start: int, n: int = 10) -> list[int]:
    return list(range(start, start + n))


def _holds(corpus: HistoryCorpus, document: list[int]) -> bool:
    branches = corpus.index.continuations(longest_match(corpus.index, document[:4]), 3)
    return bool(branches) and branches[0].tokens == tuple(document[4:7])


def test_a_rewrite_keeps_the_replies_the_other_process_journaled(tmp_path: Path) -> None:
    first = HistoryCorpus(tmp_path, FINGERPRINT, max_tokens=60)
    for i in range(5):
        first.add(_doc(1000 * i))
    assert first.save()
    second = HistoryCorpus(tmp_path, FINGERPRINT, max_tokens=60)
    theirs = _doc(50_000)
    second.add(theirs)
    assert second.save()  # appended to the journal of the file both read
    first.add(_doc(60_000))
    first.add(_doc(70_000))  # past the bound: oldest dropped, the file is written afresh
    assert first.save()
    assert _holds(HistoryCorpus(tmp_path, FINGERPRINT, max_tokens=60), theirs)


def test_a_reply_identical_to_one_dropped_here_is_kept_when_the_other_process_adds_it(
    tmp_path: Path,
) -> None:
    """A question asked again gets the same reply word for word (greedy decoding). This window
    dropped its first copy past the bound; the other window, opened before that copy was saved,
    adds the same reply anew. It is a new document, and the rewrite here must keep it."""
    first = HistoryCorpus(tmp_path, FINGERPRINT, max_tokens=60)
    for i in range(3):
        first.add(_doc(1000 * i))
    assert first.save()
    second = HistoryCorpus(tmp_path, FINGERPRINT, max_tokens=60)
    repeated = _doc(50_000)
    first.add(repeated)
    assert first.save()  # journaled
    first.add(_doc(60_000, 40))  # past the bound: everything older goes, the repeat with it
    assert not _holds(first, repeated)
    second.add(repeated)  # asked again there
    assert second.save()  # journaled after this window's copy
    assert first.save()  # written afresh, the journal folded in
    assert _holds(first, repeated)
    assert _holds(HistoryCorpus(tmp_path, FINGERPRINT, max_tokens=60), repeated)


def test_a_file_the_other_process_rewrote_is_taken_before_saving(tmp_path: Path) -> None:
    first = HistoryCorpus(tmp_path, FINGERPRINT, max_tokens=60)
    first.add(_doc(0))
    assert first.save()
    second = HistoryCorpus(tmp_path, FINGERPRINT, max_tokens=60)
    for i in range(1, 6):  # past the bound: it writes the file afresh
        second.add(_doc(1000 * i))
    theirs = _doc(50_000)
    second.add(theirs)
    assert second.save()
    mine = _doc(90_000)
    first.add(mine)
    assert first.save()
    assert _holds(first, theirs)  # its index now drafts from the other's replies too
    reopened = HistoryCorpus(tmp_path, FINGERPRINT, max_tokens=60)
    assert _holds(reopened, theirs) and _holds(reopened, mine)


def test_chats_deleted_by_the_other_process_are_not_written_back(tmp_path: Path) -> None:
    secret = _doc(7_000, 30)
    first = HistoryCorpus(tmp_path, FINGERPRINT)
    first.add(secret)
    assert first.save()
    second = HistoryCorpus(tmp_path, FINGERPRINT)
    assert _holds(second, secret)

    forget_every_vocabulary(tmp_path)  # the first process's user deleted that chat
    first.rebuild([_doc(100)])

    mine = _doc(90_000)
    second.add(mine)
    assert second.save()
    assert not _holds(second, secret) and _holds(second, mine)
    assert not _holds(HistoryCorpus(tmp_path, FINGERPRINT), secret)


def test_an_index_deleted_by_the_other_process_asks_for_a_rebuild(tmp_path: Path) -> None:
    secret = _doc(7_000, 30)
    corpus = HistoryCorpus(tmp_path, FINGERPRINT)
    corpus.add(secret)
    assert corpus.save()
    forget_every_vocabulary(tmp_path)  # chats deleted elsewhere; no rebuild there yet
    corpus.add(_doc(90_000))
    assert corpus.save()
    assert corpus.needs_rebuild and not _holds(corpus, secret)


def test_a_rebuild_keeps_the_replies_the_other_process_journaled_meanwhile(
    tmp_path: Path,
) -> None:
    """A rebuild reads the history for seconds; a reply the other window journaled then is not
    in the history it read yet, and must not be lost with the journal."""
    first = HistoryCorpus(tmp_path, FINGERPRINT)
    first.add(_doc(0))
    assert first.save()
    second = HistoryCorpus(tmp_path, FINGERPRINT)
    theirs = _doc(50_000)

    def history() -> Iterator[list[int]]:
        yield _doc(0)
        second.add(theirs)  # the other window's reply lands while the history is read
        assert second.save()
        yield _doc(100)

    first.rebuild(history())
    assert _holds(first, theirs)
    assert _holds(HistoryCorpus(tmp_path, FINGERPRINT), theirs)


def test_a_rebuild_keeps_the_replies_of_a_file_the_other_process_rewrote_meanwhile(
    tmp_path: Path,
) -> None:
    """The other window writes its whole file while this one reads the history (its first
    save, or its journal outgrown): the rebuild takes in what that file holds beyond the
    history, and only that (the history's oldest documents, dropped past the bound, stay out)."""
    second = HistoryCorpus(tmp_path, FINGERPRINT, max_tokens=60)
    theirs = _doc(50_000)
    oldest = _doc(0)
    first = HistoryCorpus(tmp_path, FINGERPRINT, max_tokens=60)

    def history() -> Iterator[list[int]]:
        yield oldest
        second.add(oldest)
        second.add(theirs)
        assert second.save()  # no file yet: written whole
        for i in range(1, 6):
            yield _doc(1000 * i)

    first.rebuild(history())
    assert _holds(first, theirs)
    assert not _holds(first, oldest)  # past the bound, as the history alone would leave it
    assert _holds(HistoryCorpus(tmp_path, FINGERPRINT, max_tokens=60), theirs)


def test_a_record_torn_by_a_killed_process_is_cut_off_before_the_other_appends(
    tmp_path: Path,
) -> None:
    """A window killed in the middle of an append leaves its last record cut short; the other
    window, still running, appends after it. Appended after the tear, its records would make
    the journal damaged, and the next start would drop them all (saves that returned True)."""
    first = HistoryCorpus(tmp_path, FINGERPRINT)
    first.add(_doc(0))
    assert first.save()
    second = HistoryCorpus(tmp_path, FINGERPRINT)
    kept = _doc(1000)
    first.add(kept)
    assert first.save()
    journal = journal_path(first.path)
    whole = journal.read_bytes()
    first.add(_doc(2000, 40))
    assert first.save()
    journal.write_bytes(journal.read_bytes()[: len(whole) + 30])  # killed mid-append
    mine = [_doc(3000), _doc(4000)]
    for document in mine:
        second.add(document)
        assert second.save()
    reopened = HistoryCorpus(tmp_path, FINGERPRINT)
    assert not reopened.needs_rebuild and not reopened.dirty
    assert all(_holds(reopened, document) for document in [kept, *mine])


def test_a_save_waits_while_the_other_process_holds_the_folder(tmp_path: Path) -> None:
    """A save reads the file's digest and writes over it as one step: while another writer is
    in that step (its lock held) this one waits, so neither writes over the other unseen."""
    corpus = HistoryCorpus(tmp_path, FINGERPRINT)
    corpus.add(_doc(0))
    folder = corpus.path.parent
    folder.mkdir(parents=True)
    done = threading.Event()
    with lock_held_elsewhere(folder):
        saver = threading.Thread(target=lambda: (corpus.save(), done.set()))
        saver.start()
        assert not done.wait(0.5)
        assert not corpus.path.exists()
    assert done.wait(10)
    saver.join()
    assert corpus.path.exists()


def test_a_save_that_cannot_take_the_lock_writes_nothing_and_saves_with_the_next(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A window stopped while it holds the lock, halfway through its own append, is not waited
    for forever; but a record appended unlocked would land where the holder's is going, and
    one of the two would be lost or the journal damaged. Nothing is written then; the reply
    stays in memory and is saved with the next one."""
    monkeypatch.setattr(folder_lock, "LOCK_WAIT_S", 0.1)
    first = HistoryCorpus(tmp_path, FINGERPRINT)
    first.add(_doc(0))
    assert first.save()
    first.add(_doc(100))
    assert first.save()  # appended: the journal exists
    journal = journal_path(first.path)
    before = journal.read_bytes()
    second = HistoryCorpus(tmp_path, FINGERPRINT)
    mine = _doc(50_000, 30)
    with lock_held_elsewhere(first.path.parent):
        second.add(mine)
        assert not second.save()
        assert second.dirty and _holds(second, mine)
        assert journal.read_bytes() == before
    later = _doc(60_000)
    second.add(later)
    assert second.save()
    reopened = HistoryCorpus(tmp_path, FINGERPRINT)
    assert not reopened.needs_rebuild
    assert _holds(reopened, mine) and _holds(reopened, later)


def test_forgetting_every_vocabulary_keeps_the_lock_file_and_stamps_the_deletion(
    tmp_path: Path,
) -> None:
    """Deleting the lock file while another process holds it would let a third take a lock on a
    new file of the same name: both would write at once. The deletion stamp stays, new."""
    corpus = HistoryCorpus(tmp_path, FINGERPRINT)
    corpus.add(_doc(0))
    assert corpus.save()
    folder = corpus.path.parent
    forget_every_vocabulary(tmp_path)
    assert sorted(p.name for p in folder.iterdir()) == sorted([LOCK_NAME, DELETIONS_NAME])
    first = deletion_stamp(folder)
    forget_every_vocabulary(tmp_path)
    assert first and deletion_stamp(folder) != first


@pytest.mark.skipif(os.name != "posix", reason="only POSIX folders can be synced")
def test_the_deletion_stamp_is_on_the_disk_once_the_deletion_returns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A power cut that lost the stamp, or left it empty (read as "no deletion yet"), would let
    a rebuild that read the chats before their deletion write them back."""
    synced: list[int] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        synced.append(os.fstat(fd).st_ino)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    forget_every_vocabulary(tmp_path)
    folder = tmp_path / FOLDER_NAME
    assert (folder / DELETIONS_NAME).stat().st_ino in synced  # its bytes
    assert folder.stat().st_ino in synced  # its name


def test_a_rebuild_that_read_chats_before_their_deletion_writes_none_of_them(
    tmp_path: Path,
) -> None:
    """A rebuild reads the history for seconds: a chat the user deletes in the other window
    meanwhile may be in what it read. Written, the file would bring the chat back as a draft
    in every window that opens it."""
    secret, kept = _doc(7_000, 30), _doc(100)
    there = HistoryCorpus(tmp_path, FINGERPRINT)

    def history() -> Iterator[list[int]]:
        yield secret
        forget_every_vocabulary(tmp_path)  # deleted in the other window meanwhile
        yield kept

    there.rebuild(history())
    assert there.needs_rebuild and not _holds(there, secret)
    assert not _holds(HistoryCorpus(tmp_path, FINGERPRINT), secret)


def test_a_file_written_from_chats_read_before_a_deletion_is_not_taken_in(
    tmp_path: Path,
) -> None:
    """A writer that checked the deletion stamp before a deletion that went on without the lock
    (the UI thread waits little) renames its file in after it. Neither a rebuild running
    meanwhile nor a window opened later takes in what it holds."""
    secret, kept = _doc(7_000, 30), _doc(100)
    stale = HistoryCorpus(tmp_path, FINGERPRINT)
    stale.add(secret)
    assert stale.save()
    written_late = stale.path.read_bytes()
    forget_every_vocabulary(tmp_path)  # the user deleted that chat here
    here = HistoryCorpus(tmp_path, FINGERPRINT)
    assert here.needs_rebuild

    def history() -> Iterator[list[int]]:
        yield kept
        stale.path.write_bytes(written_late)  # the other window's rename lands now

    here.rebuild(history())
    assert not _holds(here, secret) and _holds(here, kept)
    stale.path.write_bytes(written_late)  # and once more, after this window's save
    opened = HistoryCorpus(tmp_path, FINGERPRINT)
    assert opened.needs_rebuild and not _holds(opened, secret)


def test_the_ui_thread_deletes_the_files_even_while_the_lock_is_held(tmp_path: Path) -> None:
    """A chat's deletion must not wait seconds on the UI thread behind an index being read
    or rewritten: past a short wait the files go unlocked (the rebuild after it replaces what a
    writer puts back)."""
    corpus = HistoryCorpus(tmp_path, FINGERPRINT)
    corpus.add(_doc(0))
    assert corpus.save()
    with lock_held_elsewhere(corpus.path.parent):
        started = time.monotonic()
        forget_every_vocabulary(tmp_path, wait=0.1)
        waited = time.monotonic() - started
    assert not corpus.path.exists()
    assert waited < 5  # not the 10 s a writer on the engine thread would wait
