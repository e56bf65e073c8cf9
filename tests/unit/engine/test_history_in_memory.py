"""The past-chats index of `specchat serve` and the bench lives in memory for the life of the
process: bounded like the one on disk, and it keeps nothing for a save it never makes."""

from __future__ import annotations

from pathlib import Path

from app.engine.history_corpus import HistoryCorpus
from app.engine.suffix_cursor import longest_match


def _doc(start: int, n: int = 30) -> list[int]:
    return list(range(start, start + n))


def test_a_corpus_in_memory_stays_within_its_bound_and_writes_nothing(tmp_path: Path) -> None:
    corpus = HistoryCorpus(tmp_path, "49152-served", max_tokens=300, persist=False)
    assert not corpus.needs_rebuild
    for i in range(400):  # forty times the bound
        assert corpus.add(_doc(1000 * i))
    assert corpus.tokens <= 300 and corpus.index.tokens <= 300
    # What a save would take: no copy of every reply.
    assert corpus._unsaved == []
    assert corpus.save()
    corpus.rebuild([_doc(7)])
    assert not (tmp_path / "suffix-index").exists()
    last = _doc(7)
    branches = corpus.index.continuations(longest_match(corpus.index, last[:4]), 3)
    assert branches and branches[0].tokens == tuple(last[4:7])


def test_replies_dropped_past_the_bound_are_not_kept_for_the_next_save(tmp_path: Path) -> None:
    corpus = HistoryCorpus(tmp_path, "49152-kept", max_tokens=300)
    for i in range(40):  # unsaved: each past the bound drops the oldest
        corpus.add(_doc(1000 * i))
    assert sum(len(d) for d in corpus._unsaved) <= corpus.tokens
    assert corpus.save()
    assert HistoryCorpus(tmp_path, "49152-kept", max_tokens=300).tokens == corpus.tokens
