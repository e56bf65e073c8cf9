"""A paused draft model's probes under a read limit: a draft no further behind than the limit
reads what it lacks, one further behind drafts after a window of the history's end, and a later
probe reads that window on rather than a new one, so a probe that follows another at once reads
only the tokens accepted since (app/engine/drafters.py)."""

from __future__ import annotations

import numpy as np

from app.engine.config import SamplingConfig
from app.engine.draft_reading import PROBE_READ_LIMIT
from app.engine.drafters import PROBE_WINDOW, DraftRequest, ModelDrafter
from tests.helpers.fake_llama import FakeLlama, toy_logits

N_VOCAB = 32
LIMIT = PROBE_READ_LIMIT


def _probe(drafter: ModelDrafter, history: list[int], gamma: int = 4) -> list[int]:
    ask = DraftRequest(
        history, gamma, SamplingConfig(), np.random.default_rng(0), 0.0, read_limit=LIMIT
    )
    return drafter.propose(ask).tokens


def _history(n: int, seed: int = 0) -> list[int]:
    """Tokens with no period, so that no stretch of the history matches another by chance."""
    return [int(t) for t in np.random.default_rng(seed).integers(0, N_VOCAB, n)]


def test_a_probe_behind_by_a_question_reads_it_whole() -> None:
    model = FakeLlama(toy_logits(3, N_VOCAB), N_VOCAB)
    drafter = ModelDrafter(model, N_VOCAB)
    history = _history(LIMIT)
    _probe(drafter, history[:5])
    _probe(drafter, history)
    assert model.tokens[:LIMIT] == history


def test_a_probe_far_behind_drafts_after_the_last_window_of_the_history() -> None:
    model = FakeLlama(toy_logits(3, N_VOCAB), N_VOCAB)
    drafter = ModelDrafter(model, N_VOCAB)
    history = _history(3 * LIMIT)
    draft = _probe(drafter, history)
    assert model.tokens[:PROBE_WINDOW] == history[-PROBE_WINDOW:]
    assert len(model.tokens) == PROBE_WINDOW + len(draft) - 1


def test_a_probe_after_another_reads_only_what_was_accepted_since() -> None:
    model = FakeLlama(toy_logits(3, N_VOCAB), N_VOCAB)
    drafter = ModelDrafter(model, N_VOCAB)
    history = _history(3 * LIMIT)
    draft = _probe(drafter, history)
    history += [*draft[:3], 17]  # three kept, then the target's own token
    read_before = model.decoded
    _probe(drafter, history)
    # The window goes on from where the first began: its cache holds the window and the kept
    # draft tokens, so nothing is read before drafting, and each of the four draft passes
    # reads one token (the first, the target's).
    assert model.tokens[: PROBE_WINDOW + 4] == history[-(PROBE_WINDOW + 4) :]
    assert model.decoded - read_before == 4


def test_a_probe_after_more_than_the_limit_starts_a_new_window() -> None:
    model = FakeLlama(toy_logits(3, N_VOCAB), N_VOCAB)
    drafter = ModelDrafter(model, N_VOCAB)
    history = _history(3 * LIMIT)
    _probe(drafter, history)
    history += _history(LIMIT + 10, seed=1)  # plain steps since, more than a probe may read
    _probe(drafter, history)
    assert model.tokens[:PROBE_WINDOW] == history[-PROBE_WINDOW:]


def test_a_new_conversation_gets_a_new_window() -> None:
    """The last window's place in a conversation the cache does not hold is no window."""
    model = FakeLlama(toy_logits(3, N_VOCAB), N_VOCAB)
    drafter = ModelDrafter(model, N_VOCAB)
    _probe(drafter, _history(3 * LIMIT))
    other = _history(3 * LIMIT - 10, seed=2)
    _probe(drafter, other)
    assert model.tokens[:PROBE_WINDOW] == other[-PROBE_WINDOW:]
