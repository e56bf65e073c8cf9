"""Deleted chats leave no trace in any past-chats index: every vocabulary's file goes, with the
temporary copies a killed rewrite left, whether a target is loaded or not; and damage inside a
journal has the index rebuilt from the chat history rather than silently missing replies."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path

from app.engine.config import GenerationConfig
from app.engine.corpus_files import corpus_path
from app.engine.events import FinishEvent
from app.engine.gamma import OFF
from app.engine.history_corpus import HistoryCorpus
from app.engine.past_chats import HistoryTokens
from app.engine.runtime import Runtime
from app.engine.suffix_cursor import longest_match
from app.engine.suffix_journal import journal_path
from app.llama.config import ModelConfig
from tests.helpers.fake_model import FakeModel

TARGET = ModelConfig("target.gguf", n_ctx=256)
SECRET = list(range(100, 130))
KEPT = list(range(200, 230))
OTHER_VOCABULARY = "32000-another-tokenizer"


def _drafts(corpus: HistoryCorpus, query: list[int]) -> tuple[int, ...]:
    branches = corpus.index.continuations(longest_match(corpus.index, query), 3)
    return branches[0].tokens if branches else ()


def _runtime(tmp_path: Path, chats: list[list[int]]) -> Runtime:
    def source(_tokens: HistoryTokens) -> Iterable[Sequence[int]]:
        return [list(chat) for chat in chats]

    return Runtime(
        open_model=lambda config, progress=None: FakeModel(config, progress=progress, step_s=0),
        history_dir=tmp_path,
        history_source=source,
    )


def _other_vocabulary_index(tmp_path: Path) -> Path:
    other = HistoryCorpus(tmp_path, OTHER_VOCABULARY)
    other.add(SECRET)
    assert other.save()
    return other.path


def test_deleting_a_chat_forgets_it_in_every_vocabularys_index(tmp_path: Path) -> None:
    chats = [SECRET, KEPT]
    runtime = _runtime(tmp_path, chats)
    runtime.load_target(TARGET)
    history = runtime.history
    assert history is not None and _drafts(history, SECRET[:5]) == (105, 106, 107)
    other = _other_vocabulary_index(tmp_path)

    chats.remove(SECRET)
    runtime.forget_history()
    assert not other.exists()  # rebuilt from the remaining chats when its target loads
    assert _drafts(history, SECRET[:5]) == ()
    assert _drafts(history, KEPT[:5]) == (205, 206, 207)
    reopened = HistoryCorpus(tmp_path, history.fingerprint)
    assert _drafts(reopened, SECRET[:5]) == () and _drafts(reopened, KEPT[:5]) != ()


def test_deleting_a_chat_with_no_model_loaded_still_forgets_it(tmp_path: Path) -> None:
    chats = [SECRET, KEPT]
    runtime = _runtime(tmp_path, chats)
    other = _other_vocabulary_index(tmp_path)
    chats.remove(SECRET)
    runtime.forget_history()
    assert not other.exists()


def test_a_killed_rewrites_copy_is_removed_and_a_live_writers_is_left(tmp_path: Path) -> None:
    path = corpus_path(tmp_path, OTHER_VOCABULARY)
    path.parent.mkdir(parents=True)
    dead = path.with_name(f"{path.name}.tmp-{2**22 + 12345}")  # past Linux's largest pid
    live = path.with_name(f"{path.name}.tmp-{os.getppid()}")
    for copy in (dead, live):
        copy.write_bytes(b"SPECCHAT-SUFFIX\0 chat text")
    HistoryCorpus(tmp_path, OTHER_VOCABULARY)
    assert not dead.exists() and live.exists()


def _journaled(tmp_path: Path) -> HistoryCorpus:
    corpus = HistoryCorpus(tmp_path, OTHER_VOCABULARY)
    corpus.add(list(range(0, 10)))
    corpus.save()
    for start in (1000, 2000, 3000):
        corpus.add(list(range(start, start + 10)))
        corpus.save()
    assert journal_path(corpus.path).exists()
    return corpus


def test_a_bad_record_inside_the_journal_asks_for_a_rebuild(tmp_path: Path) -> None:
    corpus = _journaled(tmp_path)
    journal = journal_path(corpus.path)
    data = bytearray(journal.read_bytes())
    data[len(data) // 2] ^= 0x01  # the middle record: whole ones follow it
    journal.write_bytes(bytes(data))
    again = HistoryCorpus(tmp_path, OTHER_VOCABULARY)
    assert again.needs_rebuild


def test_a_journal_header_of_garbage_asks_for_a_rebuild(tmp_path: Path) -> None:
    corpus = _journaled(tmp_path)
    journal = journal_path(corpus.path)
    journal.write_bytes(b"\0" * 48 + journal.read_bytes()[48:])
    assert HistoryCorpus(tmp_path, OTHER_VOCABULARY).needs_rebuild


def test_a_journal_cut_at_its_end_keeps_what_it_holds_without_a_rebuild(tmp_path: Path) -> None:
    corpus = _journaled(tmp_path)
    journal = journal_path(corpus.path)
    journal.write_bytes(journal.read_bytes()[:-5])
    again = HistoryCorpus(tmp_path, OTHER_VOCABULARY)
    assert not again.needs_rebuild and again.documents == 3


def test_chats_deleted_in_another_window_are_forgotten_at_this_ones_next_reply(
    tmp_path: Path,
) -> None:
    chats = [SECRET, KEPT]
    here, there = _runtime(tmp_path, chats), _runtime(tmp_path, chats)
    here.load_target(TARGET)
    chats.remove(SECRET)
    there.forget_history()  # no model there: the indexes are deleted, none rebuilt

    reply = list(range(300, 330))
    here.remember([1, 2, 3], reply)
    history = here.history
    assert history is not None and not history.needs_rebuild
    assert _drafts(history, SECRET[:5]) == ()
    assert _drafts(history, KEPT[:5]) == (205, 206, 207)
    assert _drafts(history, reply[:5]) == (305, 306, 307)  # the reply, not yet in the store


def test_a_journal_whose_header_is_being_written_asks_for_no_rebuild(tmp_path: Path) -> None:
    corpus = _journaled(tmp_path)
    journal = journal_path(corpus.path)
    header = journal.read_bytes()[:48]
    for cut in (0, 7, 21, 47):  # a fresh journal, truncated and not yet whole
        journal.write_bytes(header[:cut])
        again = HistoryCorpus(tmp_path, OTHER_VOCABULARY)
        assert not again.needs_rebuild and again.documents == 1, cut


def test_chats_deleted_in_another_window_never_draft_here_even_with_no_reply_added(
    tmp_path: Path,
) -> None:
    # A reply the index already holds adds nothing, so no save came to notice the deletion,
    # and this window went on drafting the deleted chat whole.
    chats = [SECRET, KEPT]
    here, there = _runtime(tmp_path, chats), _runtime(tmp_path, chats)
    here.load_target(TARGET)
    history = here.history
    assert history is not None and _drafts(history, SECRET[:5]) == (105, 106, 107)
    chats.remove(SECRET)
    there.forget_history()

    events = here.generate([1, 2, 3], GenerationConfig(max_tokens=2, gamma=OFF))
    # Before the reply's first round, not once a new reply is saved.
    assert _drafts(history, SECRET[:5]) == ()
    assert _drafts(history, KEPT[:5]) == (205, 206, 207)
    list(events)


def test_the_rebuild_before_a_reply_counts_in_its_time_to_first_token(tmp_path: Path) -> None:
    now = [0.0]
    chats = [SECRET, KEPT]

    def slow_source(_tokens: HistoryTokens) -> Iterable[Sequence[int]]:
        now[0] += 30.0  # reading a big history takes seconds the user waits for
        return [list(chat) for chat in chats]

    def runtime() -> Runtime:
        return Runtime(
            open_model=lambda config, progress=None: FakeModel(config, progress=progress, step_s=0),
            history_dir=tmp_path,
            history_source=slow_source,
            clock=lambda: now[0],
        )

    here, there = runtime(), runtime()
    here.load_target(TARGET)
    chats.remove(SECRET)
    there.forget_history()  # another window: this one rebuilds before its next reply

    finish = list(here.generate([1, 2, 3], GenerationConfig(max_tokens=2, gamma=OFF)))[-1]
    assert isinstance(finish, FinishEvent)
    stats = finish.result.stats
    assert stats.ttft_s == 30.0
    assert stats.prompt_s == 0.0  # the prompt's reading is not the index's
