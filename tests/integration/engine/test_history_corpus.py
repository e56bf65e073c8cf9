"""The past-chats corpus: bound and drop policy, dedupe, the file's round trip, permissions,
recovery from damaged files, clear(), and what it reads from the chat store."""

from __future__ import annotations

import errno
import hashlib
import logging
import os
import stat
import struct
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.engine.corpus_files import (
    DELETIONS_NAME,
    FOLDER_NAME,
    corpus_path,
    vocabulary_fingerprint,
)
from app.engine.folder_lock import LOCK_NAME
from app.engine.history_corpus import HistoryCorpus
from app.engine.past_chats import HistoryTokens, stored_documents
from app.engine.suffix_cursor import longest_match
from app.engine.suffix_file import IndexFileError, read_index_file
from app.engine.suffix_journal import journal_path
from app.llama.config import ModelConfig
from app.llama.model import LlamaModel
from app.store import ConversationStore

FINGERPRINT = "49152-test"


def _files(corpus: HistoryCorpus) -> list[str]:
    """What the corpus's folder holds besides the lock file shared by its writers."""
    return sorted(p.name for p in corpus.path.parent.iterdir() if p.name != LOCK_NAME)


def _doc(start: int, n: int = 10) -> list[int]:
    return list(range(start, start + n))


def _next(corpus: HistoryCorpus, query: list[int], n: int = 3) -> tuple[int, ...]:
    branches = corpus.index.continuations(longest_match(corpus.index, query), n)
    return branches[0].tokens if branches else ()


def test_documents_are_indexed_once_and_short_ones_skipped(tmp_path: Path) -> None:
    corpus = HistoryCorpus(tmp_path, FINGERPRINT)
    assert corpus.add(_doc(0))
    assert not corpus.add(_doc(0))  # the same reply again
    assert not corpus.add([1, 2, 3])  # too short to draft from
    assert corpus.documents == 1 and corpus.tokens == 10
    assert _next(corpus, [3, 4]) == (5, 6, 7)


def test_past_the_bound_the_oldest_documents_go_first(tmp_path: Path) -> None:
    corpus = HistoryCorpus(tmp_path, FINGERPRINT, max_tokens=100)
    for i in range(10):
        corpus.add(_doc(1000 * i))
    assert corpus.tokens == 100
    corpus.add(_doc(1000 * 10))  # 110 tokens: cut to three quarters of the bound, oldest first
    assert corpus.tokens == 70 and corpus.documents == 7
    assert _next(corpus, [3000, 3001]) == ()
    assert _next(corpus, [4000, 4001]) == (4002, 4003, 4004)
    assert _next(corpus, [10000, 10001]) == (10002, 10003, 10004)
    assert corpus.index.tokens == 70
    # A dropped document may come back: it is new again.
    assert corpus.add(_doc(0))


def test_a_rewrite_after_a_drop_keeps_the_newest_documents(tmp_path: Path) -> None:
    """Dropping documents writes the file afresh, taking in the journal first (the replies
    another window appended to it): the dropped ones are still in that journal, and must not
    come back as the newest, pushing newer replies out instead."""
    corpus = HistoryCorpus(tmp_path, FINGERPRINT, max_tokens=100)
    corpus.rebuild([_doc(0)])  # the file, with the journal empty
    for i in range(1, 16):  # one reply saved at a time: journaled until the first drop
        assert corpus.add(_doc(1000 * i))
        assert corpus.save()
    newest = [_doc(1000 * i) for i in range(9, 16)]  # 70 tokens: within what a drop keeps
    for held in (corpus, HistoryCorpus(tmp_path, FINGERPRINT, max_tokens=100)):
        assert all(_next(held, d[:2]) == tuple(d[2:5]) for d in newest)
        assert _next(held, [2000, 2001]) == ()  # among the oldest: dropped, and not back


def test_a_document_longer_than_the_bound_keeps_its_end(tmp_path: Path) -> None:
    corpus = HistoryCorpus(tmp_path, FINGERPRINT, max_tokens=100)
    corpus.add(_doc(0, 500))
    assert corpus.tokens == 75
    assert _next(corpus, [430, 431]) == (432, 433, 434)
    assert _next(corpus, [10, 11]) == ()


def test_the_file_round_trips(tmp_path: Path) -> None:
    corpus = HistoryCorpus(tmp_path, FINGERPRINT)
    assert corpus.needs_rebuild  # no file yet: the stored chats are not in it
    for i in range(20):
        corpus.add([*_doc(100 * (i + 1), 30), 7, 8, 9, i])
    assert corpus.save() and not corpus.dirty
    again = HistoryCorpus(tmp_path, FINGERPRINT)
    assert not again.needs_rebuild
    assert (again.documents, again.tokens) == (20, 20 * 34)
    assert again.index.columns() == corpus.index.columns()
    assert _next(again, [7, 8, 9]) == _next(corpus, [7, 8, 9]) == (19,)
    assert not again.add([*_doc(100, 30), 7, 8, 9, 0])  # dedupe survives the file


def test_the_file_is_private_and_inside_the_data_folder(tmp_path: Path) -> None:
    corpus = HistoryCorpus(tmp_path, "../../../etc/passwd")
    corpus.add(_doc(0))
    corpus.save()
    assert corpus.path.parent == tmp_path / FOLDER_NAME
    assert corpus.path == corpus_path(tmp_path, "../../../etc/passwd")
    if os.name == "posix":
        assert stat.S_IMODE(corpus.path.stat().st_mode) == 0o600
        assert stat.S_IMODE(corpus.path.parent.stat().st_mode) == 0o700
    assert _files(corpus) == [corpus.path.name]  # no temp left


def test_each_vocabulary_has_its_own_file(tmp_path: Path) -> None:
    one = HistoryCorpus(tmp_path, "32000-aaaa")
    one.add(_doc(0))
    one.save()
    other = HistoryCorpus(tmp_path, "49152-bbbb")
    assert other.path != one.path and other.needs_rebuild and other.tokens == 0
    with pytest.raises(IndexFileError, match="another vocabulary"):
        read_index_file(one.path, "49152-bbbb")


@pytest.mark.parametrize(
    "damage",
    [
        lambda data: data[: len(data) // 2],  # truncated
        lambda data: data[:100] + bytes([data[100] ^ 0xFF]) + data[101:],  # a flipped byte
        lambda data: data[:0],
        lambda data: b"not an index at all" * (len(data) // 19),
    ],
    ids=["truncated", "flipped byte", "empty", "garbage"],
)
def test_a_damaged_file_is_discarded_with_one_log_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, damage: object
) -> None:
    corpus = HistoryCorpus(tmp_path, FINGERPRINT)
    for i in range(5):
        corpus.add(_doc(100 * i))
    corpus.save()
    assert callable(damage)
    corpus.path.write_bytes(damage(corpus.path.read_bytes()))
    with caplog.at_level(logging.WARNING):
        reopened = HistoryCorpus(tmp_path, FINGERPRINT)
    assert reopened.needs_rebuild and reopened.tokens == 0 and reopened.index.tokens == 0
    assert not reopened.path.exists()
    [record] = caplog.records
    assert "discarding" in record.getMessage() and "\n" not in record.getMessage()
    reopened.rebuild([_doc(100 * i) for i in range(5)])
    assert not reopened.needs_rebuild and reopened.path.exists()
    assert _next(HistoryCorpus(tmp_path, FINGERPRINT), [401, 402]) == (403, 404, 405)


def _with_journal(tmp_path: Path) -> HistoryCorpus:
    """A corpus saved once as a file and once more as a journal beside it."""
    corpus = HistoryCorpus(tmp_path, FINGERPRINT)
    corpus.add(_doc(0))
    corpus.save()
    corpus.add(_doc(100))
    corpus.save()
    return corpus


@pytest.mark.parametrize("which", ["file", "journal"])
def test_a_folder_in_place_of_an_index_file_is_discarded_and_rebuilt(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, which: str
) -> None:
    corpus = _with_journal(tmp_path)
    target = corpus.path if which == "file" else journal_path(corpus.path)
    target.unlink()
    (target / "inside").mkdir(parents=True)
    with caplog.at_level(logging.WARNING):
        reopened = HistoryCorpus(tmp_path, FINGERPRINT)
    assert reopened.needs_rebuild and not target.exists()
    reopened.rebuild([_doc(0), _doc(100)])
    assert reopened.path.is_file()
    assert _next(HistoryCorpus(tmp_path, FINGERPRINT), [101, 102]) == (103, 104, 105)


def test_a_folder_that_appears_in_place_of_the_file_before_a_rebuild_is_replaced(
    tmp_path: Path,
) -> None:
    corpus = HistoryCorpus(tmp_path, FINGERPRINT)
    assert corpus.needs_rebuild
    (corpus.path / "inside").mkdir(parents=True)
    corpus.rebuild([_doc(0)])
    assert corpus.path.is_file()
    assert _next(HistoryCorpus(tmp_path, FINGERPRINT), [1, 2]) == (3, 4, 5)


def test_a_well_checksummed_file_that_is_not_an_automaton_is_discarded(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    corpus = HistoryCorpus(tmp_path, FINGERPRINT)
    corpus.add(_doc(0))
    corpus.save()
    # The last edge made to loop back on itself, and the digest recomputed to match.
    body = corpus.path.read_bytes()[:-32]
    body = body[:-4] + struct.pack("<i", 2**31 - 1)
    corpus.path.write_bytes(body + hashlib.blake2b(body, digest_size=32).digest())
    with caplog.at_level(logging.WARNING):
        reopened = HistoryCorpus(tmp_path, FINGERPRINT)
    assert reopened.needs_rebuild and reopened.tokens == 0
    [record] = caplog.records
    assert "edge chain" in record.getMessage()


def test_a_failed_save_keeps_the_old_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    corpus = HistoryCorpus(tmp_path, FINGERPRINT, max_tokens=20)
    corpus.add(_doc(0))
    corpus.save()
    before = corpus.path.read_bytes()
    corpus.add(_doc(100))
    corpus.add(_doc(200))  # past the bound: the oldest goes, so the file is written afresh

    def full_disk(*_args: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", full_disk)
    assert not corpus.save()
    assert corpus.dirty
    assert corpus.path.read_bytes() == before
    assert _files(corpus) == [corpus.path.name]


def test_saving_a_reply_appends_it_to_the_journal(tmp_path: Path) -> None:
    corpus = HistoryCorpus(tmp_path, FINGERPRINT)
    for i in range(20):
        corpus.add(_doc(100 * i))
    corpus.save()
    before = corpus.path.read_bytes()
    corpus.add(_doc(5000))
    corpus.save()
    corpus.add(_doc(6000))
    corpus.save()
    assert corpus.path.read_bytes() == before  # the file was not rewritten
    journal = journal_path(corpus.path)
    assert journal.stat().st_size < 200
    if os.name == "posix":
        assert stat.S_IMODE(journal.stat().st_mode) == 0o600
    again = HistoryCorpus(tmp_path, FINGERPRINT)
    assert (again.documents, again.dirty) == (22, False)
    assert _next(again, [6001, 6002]) == (6003, 6004, 6005)


def test_a_torn_journal_keeps_the_records_before_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    corpus = HistoryCorpus(tmp_path, FINGERPRINT)
    corpus.add(_doc(0))
    corpus.save()
    for start in (100, 200, 300):
        corpus.add(_doc(start))
        corpus.save()
    journal = journal_path(corpus.path)
    journal.write_bytes(journal.read_bytes()[:-5])  # a crash in the middle of the last append
    with caplog.at_level(logging.WARNING):
        again = HistoryCorpus(tmp_path, FINGERPRINT)
    assert again.documents == 3 and _next(again, [201, 202]) == (203, 204, 205)
    [record] = caplog.records
    assert "damaged record" in record.getMessage()
    assert again.dirty and again.save()  # written afresh, whole again
    assert not journal.exists()
    assert HistoryCorpus(tmp_path, FINGERPRINT).documents == 3


def test_an_append_the_disk_refused_leaves_the_journal_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A full disk stops an append part-way through a record: left there, the tear would be
    followed by the next saves' records once space came back, and the journal read as damaged
    would lose them all."""
    corpus = HistoryCorpus(tmp_path, FINGERPRINT)
    corpus.add(_doc(0))
    assert corpus.save()
    corpus.add(_doc(100))
    assert corpus.save()
    journal = journal_path(corpus.path)
    before = journal.read_bytes()
    real_write = os.write

    def full_disk(fd: int, data: bytes) -> int:
        monkeypatch.setattr(os, "write", real_write)  # space comes back after this one
        real_write(fd, bytes(data[: len(data) // 2]))
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", full_disk)
    corpus.add(_doc(200, 40))
    assert not corpus.save() and corpus.dirty
    assert journal.read_bytes() == before
    corpus.add(_doc(300))
    assert corpus.save()
    again = HistoryCorpus(tmp_path, FINGERPRINT)
    assert (again.documents, again.needs_rebuild, again.dirty) == (4, False, False)
    assert _next(again, [201, 202]) == (203, 204, 205)
    assert _next(again, [301, 302]) == (303, 304, 305)


def test_a_journal_left_from_an_older_file_is_ignored(tmp_path: Path) -> None:
    corpus = HistoryCorpus(tmp_path, FINGERPRINT)
    corpus.add(_doc(0))
    corpus.save()
    corpus.add(_doc(100))
    corpus.save()
    stale = journal_path(corpus.path).read_bytes()
    corpus.rebuild([_doc(0), _doc(200)])  # a new file, and _doc(100) gone from the chats
    journal_path(corpus.path).write_bytes(stale)  # as a crash before its deletion leaves it
    again = HistoryCorpus(tmp_path, FINGERPRINT)
    assert again.documents == 2
    assert _next(again, [101, 102]) == ()


def test_a_journal_continues_one_write_of_the_file_not_its_documents(tmp_path: Path) -> None:
    """A rebuild from the same chats writes the same documents again; a journal left from the
    old file (a crash before its deletion) must not continue the new one: a writer counts the
    records it has seen in the journal it continues, and another file's would be miscounted."""
    corpus = HistoryCorpus(tmp_path, FINGERPRINT)
    corpus.rebuild([_doc(0), _doc(100)])
    corpus.add(_doc(200))
    assert corpus.save()
    stale = journal_path(corpus.path).read_bytes()
    corpus.rebuild([_doc(0), _doc(100)])
    journal_path(corpus.path).write_bytes(stale)
    again = HistoryCorpus(tmp_path, FINGERPRINT)
    assert again.documents == 2


def test_a_grown_journal_is_folded_into_the_file(tmp_path: Path) -> None:
    corpus = HistoryCorpus(tmp_path, FINGERPRINT)
    corpus.add(_doc(0, 1000))
    corpus.save()
    first = corpus.path.read_bytes()
    for i in range(1, 25):  # 24k tokens: past what the journal may hold
        corpus.add(_doc(10_000 * i, 1000))
        corpus.save()
    assert corpus.path.read_bytes() != first
    assert journal_path(corpus.path).stat().st_size < 5 * 4000
    assert HistoryCorpus(tmp_path, FINGERPRINT).documents == 25


def test_clear_deletes_the_file_and_forgets_everything(tmp_path: Path) -> None:
    corpus = HistoryCorpus(tmp_path, FINGERPRINT)
    corpus.add(_doc(0))
    corpus.save()
    corpus.add(_doc(100))
    corpus.save()
    corpus.clear()
    assert not corpus.path.exists() and not journal_path(corpus.path).exists()
    assert corpus.tokens == 0 and corpus.documents == 0 and _next(corpus, [3, 4]) == ()
    assert corpus.add(_doc(0))


def test_rebuild_keeps_the_newest_documents_within_the_bound(tmp_path: Path) -> None:
    corpus = HistoryCorpus(tmp_path, FINGERPRINT, max_tokens=50)
    corpus.rebuild([_doc(100 * i) for i in range(8)])  # 80 tokens, oldest first
    assert corpus.tokens == 30
    assert _next(corpus, [700, 701]) == (702, 703, 704)
    assert _next(corpus, [400, 401]) == ()


def test_stored_documents_are_exchanges_newest_chat_first(tmp_path: Path) -> None:
    store = ConversationStore(tmp_path / "chats.sqlite3", clock=iter(range(100)).__next__)
    try:
        first = store.create_conversation()
        store.add_message(first, "system", "be brief")
        store.add_message(first, "user", "ab")
        store.add_message(first, "assistant", "cd")
        second = store.create_conversation()
        store.add_message(second, "user", "ef")
        store.add_message(second, "assistant", "  ")
        store.add_message(second, "assistant", "gh")  # answers "ef": the blank one is none
        third = store.create_conversation()
        store.add_message(third, "assistant", "ij")  # no question before it: the reply alone
        tokens = HistoryTokens(
            text=lambda text: [ord(c) for c in text], asked=lambda text: [0, *map(ord, text), 0]
        )
        documents = list(stored_documents(store, tokens))
    finally:
        store.close()
    # The system prompt is no document; each reply comes after its question's prompt.
    assert documents == [[105, 106], [0, 101, 102, 0, 103, 104], [0, 97, 98, 0, 99, 100]]


class _Vocabulary:
    def __init__(self, texts: list[str]) -> None:
        self.n_vocab = len(texts)
        self._texts = texts

    def token_text(self, token: int) -> str:
        return self._texts[token]


def test_the_fingerprint_names_the_tokenizer() -> None:
    texts = ["<s>", "a", "b", "ab"]
    assert vocabulary_fingerprint(_Vocabulary(texts)) == vocabulary_fingerprint(
        _Vocabulary(list(texts))
    )
    assert vocabulary_fingerprint(_Vocabulary(["<s>", "a", "b", "ba"])) != (
        vocabulary_fingerprint(_Vocabulary(texts))
    )
    assert vocabulary_fingerprint(_Vocabulary([*texts, "c"])).startswith("5-")


def test_a_draft_and_its_target_share_one_fingerprint(demo_models: Any) -> None:
    fingerprints = []
    for path in (demo_models.f32, demo_models.q4_1):
        model = LlamaModel(ModelConfig(str(path), n_ctx=256))
        try:
            fingerprints.append(vocabulary_fingerprint(model))
            n_vocab = model.n_vocab
        finally:
            model.close()
    assert fingerprints[0] == fingerprints[1]
    assert fingerprints[0].startswith(f"{n_vocab}-")


def test_a_corpus_opened_under_a_smaller_bound_drops_its_oldest(tmp_path: Path) -> None:
    corpus = HistoryCorpus(tmp_path, FINGERPRINT)
    for i in range(10):
        corpus.add(_doc(100 * i))
    corpus.save()
    smaller = HistoryCorpus(tmp_path, FINGERPRINT, max_tokens=40)
    assert smaller.tokens == 30 and smaller.dirty
    assert _next(smaller, [901, 902]) == (903, 904, 905)
    assert _next(smaller, [601, 602]) == ()
    smaller.save()
    assert HistoryCorpus(tmp_path, FINGERPRINT).tokens == 30


@pytest.mark.parametrize("which", ["file", "journal", "deletions"])
@pytest.mark.parametrize("thing", ["named pipe", "link to /dev/zero"])
def test_what_is_no_regular_file_in_place_of_an_index_file_is_never_read(
    tmp_path: Path, which: str, thing: str
) -> None:
    corpus = _with_journal(tmp_path)
    target = {
        "file": corpus.path,
        "journal": journal_path(corpus.path),
        "deletions": corpus.path.parent / DELETIONS_NAME,
    }[which]
    target.unlink(missing_ok=True)
    if thing == "named pipe":
        os.mkfifo(target)  # reading it would wait for a writer for ever
    else:
        target.symlink_to("/dev/zero")  # reading it would fill the memory

    opened: list[HistoryCorpus] = []
    reader = threading.Thread(
        target=lambda: opened.append(HistoryCorpus(tmp_path, FINGERPRINT)), daemon=True
    )
    reader.start()
    reader.join(timeout=30)
    assert not reader.is_alive(), f"opening the index hung on a {thing} in place of the {which}"
    [reopened] = opened
    if reopened.needs_rebuild:
        reopened.rebuild([_doc(0), _doc(100)])
    assert _next(reopened, [101, 102]) == (103, 104, 105)


def test_a_rebuild_reads_the_history_only_as_far_back_as_the_bound_keeps(
    tmp_path: Path,
) -> None:
    read: list[int] = []
    closed: list[bool] = []

    def newest_first() -> Iterator[list[int]]:
        try:
            for start in range(10_000, 0, -100):  # 100 documents of 10 tokens, newest first
                read.append(start)
                yield _doc(start)
        finally:
            closed.append(True)

    corpus = HistoryCorpus(tmp_path, FINGERPRINT, max_tokens=100)
    corpus.rebuild(newest_first(), newest_first=True)
    assert len(read) == 11  # the one past the bound tells; the other 89 are never read
    assert closed == [True]
    assert corpus.tokens == 70  # cut to three quarters of the bound, the oldest first
    assert _next(corpus, [9001, 9002]) == ()  # the oldest read went
    assert _next(corpus, [10001, 10002]) == (10003, 10004, 10005)
    assert _next(corpus, [9401, 9402]) == (9403, 9404, 9405)
