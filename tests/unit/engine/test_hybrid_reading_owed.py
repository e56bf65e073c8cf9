"""A round the suffix index drafts alone, while the draft model is drafting, leaves the model
what the round emits to read before its next draft: the suffix proposal is priced with that
reading, so a short match no longer takes rounds from a model nearly as fast."""

from __future__ import annotations

from app.engine.hybrid_drafter import HybridDrafter
from app.metrics.rounds import RoundRecord
from tests.helpers.hybrid_rounds import ask, conversation, fake_hybrid, teach

TEXT = list(range(1000, 1030))


def _drafting_model() -> HybridDrafter:
    """A draft model always kept, at 6 ms a pass against 20 ms a verification (about 115
    tokens/s), that has read a first conversation (reading timed at 1 ms a token)."""
    _, hybrid = fake_hybrid()
    teach(hybrid, verify_s=0.02, draft_pass_s=0.006)
    first = conversation(40, 0)
    hybrid.prefill(first[:-1])
    hybrid.propose(ask(first, 4))
    return hybrid


def test_a_short_match_worth_less_than_the_models_round_once_its_reading_counts_is_left() -> None:
    hybrid = _drafting_model()
    # A 2-token match: 3 tokens at about 120 tokens/s verified alone, about 107 once the model
    # has read what the round emits (1 ms a token): less than its own 115.
    history = [*TEXT, 7, *TEXT[:2]]
    hybrid.prefill(history[:-1])
    draft = hybrid.propose(ask(history, 4))
    assert draft.suffix_tokens == 0 and draft.steps == 4


def test_a_long_match_still_drafts_alone_with_its_reading_counted() -> None:
    hybrid = _drafting_model()
    history = [*TEXT, 7, *TEXT[:8]]
    hybrid.prefill(history[:-1])
    draft = hybrid.propose(ask(history, 4))
    assert draft.suffix_tokens == 4 and draft.steps == 0


def test_a_model_no_faster_than_plain_steps_is_owed_no_reading() -> None:
    """Plain steps of 2 ms (500 tokens/s), a model up to date whose rounds make 3 tokens in
    7.5 ms (400 tokens/s): it would sit out wherever the suffix index has nothing, so a 2-token
    match (about 480 tokens/s verified alone, 325 once 1 ms a token of reading is charged)
    drafts alone."""
    _, hybrid = fake_hybrid()
    hybrid.prefill(conversation(40, 0)[:-1])  # nothing measured yet: read, and timed
    for i in range(12):
        hybrid.learn(RoundRecord(i, "hybrid", 0, 0, 0, 1, 0.0, 0.002, 0))
        hybrid.learn(RoundRecord(i, "hybrid", 2, 2, 2, 3, 0.0035, 0.004, 2))
    history = [*TEXT, 7, *TEXT[:2]]
    hybrid.model_drafter.prefill(history[:-1])
    hybrid.prefill(history[:-1])

    draft = hybrid.propose(ask(history, 4))

    assert draft.suffix_tokens > 0 and draft.steps == 0
