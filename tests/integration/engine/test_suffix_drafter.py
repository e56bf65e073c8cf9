"""The suffix drafter: what it proposes and from where, how long its drafts are, what it learns
from verdicts, and that the real engine's replies are unchanged by it."""

from __future__ import annotations

import copy
import random
from pathlib import Path

import numpy as np

from app.engine.chat_template import ChatMessage
from app.engine.config import GenerationConfig, SamplingConfig
from app.engine.drafters import Draft, DraftRequest
from app.engine.gamma import fixed
from app.engine.history_corpus import HistoryCorpus
from app.engine.loop import SpeculativeEngine
from app.engine.runtime import Runtime
from app.engine.suffix_drafter import SuffixDrafter, draft_length
from app.metrics.cost_model import MAX_GAMMA
from tests.helpers.engine import run_to_end

PASSAGE = list(range(100, 160))  # 60 distinct tokens: a text that occurs once


def _propose(drafter: SuffixDrafter, history: list[int], budget: int = 40) -> Draft:
    return drafter.propose(
        DraftRequest(history, budget, SamplingConfig(), np.random.default_rng(0), 0.0)
    )


def _repeat(match: int) -> list[int]:
    """The passage, something else, then the passage's first `match` tokens again."""
    return [*PASSAGE, 7, *PASSAGE[:match]]


def test_a_repeat_is_continued_as_before_with_certain_proposals() -> None:
    drafter = SuffixDrafter()
    assert drafter.mode == "suffix" and drafter.label == "Chat history (no draft model)"
    draft = _propose(drafter, _repeat(6))
    assert draft.tokens == PASSAGE[6 : 6 + len(draft.tokens)] and draft.tokens
    assert draft.probs == [None] * len(draft.tokens)
    assert draft.steps == 0
    assert drafter.last_match_length == 6


def test_nothing_is_proposed_below_the_minimum_match() -> None:
    assert _propose(SuffixDrafter(), _repeat(1)).tokens == []
    assert _propose(SuffixDrafter(min_match=3), _repeat(2)).tokens == []
    assert _propose(SuffixDrafter(min_match=3), _repeat(3)).tokens != []
    assert _propose(SuffixDrafter(), [1, 2, 3, 4]).tokens == []
    assert _propose(SuffixDrafter(), _repeat(6), budget=0).tokens == []


def test_drafts_grow_with_the_match_length() -> None:
    lengths = [len(_propose(SuffixDrafter(), _repeat(m)).tokens) for m in (2, 4, 8, 16, 32)]
    assert lengths == sorted(lengths) and lengths[0] < lengths[-1]
    assert len(_propose(SuffixDrafter(), _repeat(32), budget=5).tokens) == 5  # the engine's cap


def test_drafts_grow_with_the_hit_rate_seen_at_that_length() -> None:
    history = _repeat(4)
    fresh = len(_propose(SuffixDrafter(), history).tokens)
    trusted, doubted = SuffixDrafter(), SuffixDrafter()
    for _ in range(30):
        drafted = len(_propose(trusted, history).tokens)
        trusted.observe(drafted, drafted)  # every token kept
        doubted_draft = len(_propose(doubted, history).tokens)
        doubted.observe(0, max(doubted_draft, 1))  # the first token refused
    assert len(_propose(trusted, history).tokens) > fresh > len(_propose(doubted, history).tokens)
    # What was learnt at one length does not move another.
    assert len(_propose(trusted, _repeat(16)).tokens) == len(
        _propose(SuffixDrafter(), _repeat(16)).tokens
    )


def test_the_draft_length_rule() -> None:
    assert draft_length(0.5, 0.2, 40) == 2  # 0.5² ≥ 0.2 > 0.5³
    assert draft_length(0.9, 0.2, 40) == 15
    assert draft_length(0.9, 0.2, 6) == 6
    assert draft_length(0.1, 0.2, 40) == 0
    assert draft_length(1.0, 0.2, 9) == 9


def test_peek_says_what_propose_would_and_changes_nothing() -> None:
    drafter = SuffixDrafter()
    _propose(drafter, _repeat(3))
    drafter.observe(1, 2)
    learnt = copy.deepcopy(drafter.kept_by_match)
    peeked = drafter.peek(_repeat(12), 40)
    assert drafter.last_match_length == 3
    assert drafter.kept_by_match == learnt
    assert peeked.match_length == 12 and peeked.source == "conversation"
    assert 0.0 < peeked.expected_accepted < len(peeked.tokens)
    assert list(peeked.tokens) == _propose(drafter, _repeat(12)).tokens
    assert drafter.last_match_length == 12


def test_past_chats_are_drafted_from_when_their_match_is_longer(tmp_path: Path) -> None:
    corpus = HistoryCorpus(tmp_path, "test")
    corpus.add([1, 2, 3, 4, 5, 6, 7, 8, 9, 10])
    drafter = SuffixDrafter(corpus)
    # The conversation holds "3 4 98" (match 2), the past chat "1 2 3 4 5..." (match 4).
    proposal = drafter.peek([3, 4, 98, 1, 2, 3, 4], 5)
    assert (proposal.source, proposal.match_length) == ("history", 4)
    assert proposal.tokens == (5, 6, 7, 8, 9)[: len(proposal.tokens)]
    # As long in both: the conversation's wins.
    proposal = drafter.peek([20, 1, 2, 3, 4, 99, 1, 2, 3, 4], 5)
    assert (proposal.source, proposal.match_length) == ("conversation", 4)
    assert proposal.tokens[0] == 99


def test_past_chats_are_trusted_less_and_learnt_apart(tmp_path: Path) -> None:
    corpus = HistoryCorpus(tmp_path, "test")
    corpus.add(PASSAGE)
    drafter = SuffixDrafter(corpus)
    past = drafter.peek([7, *PASSAGE[:8]], 40)
    own = drafter.peek(_repeat(8), 40)
    assert (past.source, own.source) == ("history", "conversation")
    assert past.match_length == own.match_length == 8
    assert 0 < len(past.tokens) < len(own.tokens)
    for _ in range(20):
        drafter.remember(past)
        drafter.observe(len(past.tokens), len(past.tokens))
    assert len(drafter.peek([7, *PASSAGE[:8]], 40).tokens) > len(past.tokens)
    assert drafter.peek(_repeat(8), 40) == own  # the conversation's rates did not move


def test_a_whole_conversation_found_in_past_chats_is_a_repeat_drafted_at_length(
    tmp_path: Path,
) -> None:
    """The same question asked again word for word: greedy decoding gives the same reply, so
    its drafts run to the limit from the first round. A match that does not reach back to the
    conversation's start is a past chat's like any other, and a repeat's misses are learnt apart."""
    corpus = HistoryCorpus(tmp_path, "test")
    corpus.add(PASSAGE)
    drafter = SuffixDrafter(corpus)
    repeat = drafter.peek(PASSAGE[:10], 40)
    assert (repeat.source, repeat.match_length) == ("repeat", 10)
    assert list(repeat.tokens) == PASSAGE[10:50]
    partial = drafter.peek([7, *PASSAGE[:10]], 40)
    assert (partial.source, partial.match_length) == ("history", 10)
    assert 0 < len(partial.tokens) <= MAX_GAMMA
    for _ in range(2):
        drafter.remember(repeat)
        drafter.observe(3, len(repeat.tokens))
    assert len(drafter.peek(PASSAGE[:10], 40).tokens) <= MAX_GAMMA
    assert drafter.peek([7, *PASSAGE[:10]], 40) == partial


def test_a_past_chat_added_mid_conversation_is_used_next_round(tmp_path: Path) -> None:
    corpus = HistoryCorpus(tmp_path, "test")
    drafter = SuffixDrafter(corpus)
    history = [50, 51, 52, 53]
    assert drafter.peek(history, 5).tokens == ()
    corpus.add([50, 51, 52, 53, 54, 55, 56])
    assert drafter.peek(history, 5).tokens[:1] == (54,)


def test_a_new_conversation_forgets_the_old_one() -> None:
    drafter = SuffixDrafter()
    assert _propose(drafter, _repeat(5)).tokens  # the passage is known
    assert _propose(drafter, [9, 8, *PASSAGE[:5]]).tokens == []  # not an extension: restart
    assert _propose(SuffixDrafter(), [9, 8, *PASSAGE[:5]]).tokens == []


def test_growing_the_history_a_few_tokens_at_a_time_equals_reading_it_whole(
    tmp_path: Path,
) -> None:
    rng = random.Random(11)
    corpus = HistoryCorpus(tmp_path, "test")
    for _ in range(20):
        corpus.add([rng.randrange(8) for _ in range(50)])
    history = [rng.randrange(8) for _ in range(300)]
    incremental = SuffixDrafter(corpus)
    end = 10
    while end <= len(history):
        whole = SuffixDrafter(corpus).peek(history[:end], 8)
        assert incremental.peek(history[:end], 8) == whole
        end += rng.randint(1, 6)


def test_the_conversation_index_is_bounded() -> None:
    drafter = SuffixDrafter(max_conversation_tokens=100)
    history = [*PASSAGE, *range(1000, 1150)]  # the passage falls out of the last 100 tokens
    for end in range(1, len(history) + 1, 3):
        drafter.peek(history[:end], 5)
        assert drafter.indexed_tokens <= 100
    assert drafter.peek([*history, *PASSAGE[:6]], 5).tokens == ()
    assert drafter.peek([*history, *PASSAGE[:6], 1140, 1141], 5).tokens[:1] == (1142,)


REPEAT_PROMPT: list[ChatMessage] = [
    {
        "role": "user",
        "content": "Repeat this text exactly:\n\nThe Vistula is the longest river in Poland, "
        "flowing 1,047 kilometres from the Beskids in the south to the Baltic Sea near Gdańsk. "
        "It drains a basin of about 194,000 square kilometres, most of it in Poland, and passes "
        "Kraków, Warsaw and Toruń.",
    }
]


def test_replies_drafted_from_the_conversation_are_the_plain_replies(
    f32_runtime: Runtime,
) -> None:
    assert f32_runtime.target is not None
    ids = f32_runtime.chat_prompt(REPEAT_PROMPT)
    config = GenerationConfig(max_tokens=96, gamma=fixed(6))
    engine = SpeculativeEngine(f32_runtime.target, SuffixDrafter())
    plain, _ = run_to_end(engine, ids, config, speculative=False)
    drafted, _ = run_to_end(engine, ids, config)
    assert drafted.token_ids == plain.token_ids
    assert drafted.stats.accepted >= len(plain.token_ids) // 2  # the reply copies the prompt


def test_a_question_asked_again_is_drafted_from_the_last_answer(
    f32_runtime: Runtime, tmp_path: Path
) -> None:
    assert f32_runtime.target is not None
    question: list[ChatMessage] = [
        {"role": "user", "content": "Give me three tips for sleeping better."}
    ]
    ids = f32_runtime.chat_prompt(question)
    config = GenerationConfig(max_tokens=96, gamma=fixed(8))
    corpus = HistoryCorpus(tmp_path, "demo")
    engine = SpeculativeEngine(f32_runtime.target, SuffixDrafter(corpus))
    first, _ = run_to_end(engine, ids, config, speculative=False)
    corpus.add(first.token_ids)
    again, _ = run_to_end(engine, ids, config)
    assert again.token_ids == first.token_ids
    assert again.stats.accepted >= len(first.token_ids) // 2
