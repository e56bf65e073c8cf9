"""A draft model whose own rate is not measured yet (fewer than three rounds drafted) and a
long prompt it has not read: it gets its chance to be measured, but the reading waits for ski
rental as a measured model's does, and is not bought where even a model that kept every token
could not earn it back."""

from __future__ import annotations

from app.engine.hybrid_drafter import HybridDrafter
from app.metrics.rounds import RoundRecord
from tests.helpers.fake_llama import FakeLlama
from tests.helpers.hybrid_rounds import (
    ask,
    conversation,
    fake_hybrid,
    plain_rounds_before_reading,
    rounds_to_cover,
)


def _unmeasured_model() -> tuple[FakeLlama, HybridDrafter]:
    """Reading speed (1 ms a token), verification (20 ms a plain step) and a pass's cost
    (1 ms) measured, but only two rounds of the model's own: its rate is unknown."""
    model, hybrid = fake_hybrid()
    first = conversation(40, 0)
    hybrid.prefill(first[:-1])  # nothing measured yet: read at once, and timed
    for i in range(2):
        hybrid.propose(ask(first, 4))
        hybrid.learn(RoundRecord(i, "hybrid", 4, 4, 4, 5, 0.004, 0.024, 4))
        hybrid.learn(RoundRecord(10 + i, "hybrid", 4, 0, 0, 1, 0.0, 0.02, 0))
    return model, hybrid


def test_an_unmeasured_model_waits_for_ski_rental_before_a_long_reading() -> None:
    model, hybrid = _unmeasured_model()
    # 300 tokens, 0.3 s to read, that the suffix index has nothing on: plain steps of 20 ms.
    prompt = conversation(300, 5)
    rounds = plain_rounds_before_reading(hybrid, prompt, first_round=100)

    # Read once the rounds without it have taken (faded) as long as the reading would, not as
    # soon as their rate is known (three rounds).
    assert rounds == rounds_to_cover(0.299, 0.02)
    assert model.tokens[: len(prompt) - 1] == prompt[:-1]


def test_an_unmeasured_model_is_not_read_where_even_keeping_every_token_would_not_pay() -> None:
    model, hybrid = _unmeasured_model()
    read = model.decoded
    # The rounds without the model deliver 17 tokens in 40 ms (425 tokens/s); the model, all
    # kept, 5 tokens in about 25 ms (200 tokens/s).
    prompt = conversation(300, 5)
    hybrid.prefill(prompt[:-1])
    for i in range(2 * rounds_to_cover(0.299, 0.04)):
        draft = hybrid.propose(ask(prompt, 4))
        assert draft.steps == 0
        hybrid.learn(
            RoundRecord(100 + i, "hybrid", 16, 16, 16, 17, 0.0, 0.04, 0, suffix_drafted=16)
        )

    assert model.decoded == read


def test_a_fresh_model_timed_on_part_of_a_long_gap_waits_for_ski_rental_for_the_rest() -> None:
    """Nothing measured of the model at all (no reading speed, no pass): a 300-token prompt
    with nothing to repeat, plain steps of 20 ms. Once they are timed, a first 64 tokens are
    read to time the reading; the other 235 (0.235 s) wait, as any long reading does, until
    the rounds without the model have taken as long."""
    model, hybrid = fake_hybrid()
    prompt = conversation(300, 5)
    hybrid.prefill(prompt[:-1])
    timed_at = None
    for i in range(60):
        draft = hybrid.propose(ask(prompt, 4))
        if draft.steps:
            break
        if timed_at is None and model.tokens:
            timed_at = i
            assert model.tokens == prompt[:64]
        hybrid.learn(RoundRecord(100 + i, "hybrid", 4, 0, 0, 1, 0.0, 0.02, 0))

    assert timed_at is not None and timed_at < 5
    assert i == rounds_to_cover((len(prompt) - 1 - 64) * 1e-3, 0.02)
    assert model.tokens[: len(prompt) - 1] == prompt[:-1]


def test_a_fresh_model_is_not_read_where_its_passes_at_reading_speed_could_not_pay() -> None:
    """The same fresh model, where the suffix index's rounds deliver 17 tokens in 40 ms: even
    keeping every token, at no more than reading speed a pass (1 ms), the model could not
    earn the reading back; only the part read to time it is read."""
    model, hybrid = fake_hybrid()
    prompt = [7, 3, 9, 1, 4] * 60
    hybrid.prefill(prompt[:-1])
    for i in range(2 * rounds_to_cover(0.299, 0.04)):
        hybrid.propose(ask([*prompt, 50 + i % 2], 4))
        hybrid.learn(
            RoundRecord(100 + i, "hybrid", 16, 16, 16, 17, 0.0, 0.04, 0, suffix_drafted=16)
        )

    assert len(model.tokens) <= 64
