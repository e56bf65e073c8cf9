"""The estimated speedup prices a plain reply at one plain step plus the loop's own work per
token, and nothing else: a draft model's reading of the prompt is speculation's cost, not
plain decoding's."""

from __future__ import annotations

import pytest

from app.llama.config import ModelConfig
from app.metrics.rounds import RoundRecord
from app.metrics.summary import GenerationStats, summarize
from ui.window.speed_reference import PlainSpeed

STEP_S = 0.020
OVERHEAD_S = 0.0004
TARGET = ModelConfig("/models/target.gguf", n_threads=2)


def _hybrid_reply(
    *, draft_prefill_s: float, catchup_s: float, accepted: int = 3, n_rounds: int = 20
) -> GenerationStats:
    """Twenty rounds (or n_rounds) of four drafted tokens, three kept, at the given reading
    costs."""
    rounds = [
        RoundRecord(
            index=i,
            mode="hybrid",
            gamma=4,
            drafted=4,
            accepted=accepted,
            emitted=accepted + 1,
            draft_s=0.036,
            verify_s=0.045,
            draft_steps=4,
            draft_catchup_s=catchup_s if i == 5 else 0.0,
            overhead_s=OVERHEAD_S,
        )
        for i in range(n_rounds)
    ]
    passes_s = sum(r.draft_s + r.verify_s + r.draft_catchup_s + r.overhead_s for r in rounds)
    return summarize(
        rounds,
        prompt_tokens=120,
        generated_tokens=1 + n_rounds * (accepted + 1),
        prompt_s=0.3,
        generation_s=draft_prefill_s + passes_s,
        ttft_s=0.3,
        plain_step_s=STEP_S,
        draft_prefill_s=draft_prefill_s,
    )


def test_the_estimate_is_tokens_per_second_times_a_plain_step_and_the_loops_work() -> None:
    stats = _hybrid_reply(draft_prefill_s=0.0, catchup_s=0.0)
    speedup = PlainSpeed().speedup(TARGET, False, stats, STEP_S)
    assert speedup is not None and not speedup.measured
    assert stats.tokens_per_second is not None
    assert speedup.value == pytest.approx(stats.tokens_per_second * (STEP_S + OVERHEAD_S))


@pytest.mark.parametrize(("draft_prefill_s", "catchup_s"), [(0.6, 0.0), (0.0, 0.4), (0.6, 0.4)])
def test_a_draft_models_reading_slows_the_reply_without_pricing_plain_decoding_higher(
    draft_prefill_s: float, catchup_s: float
) -> None:
    unread = _hybrid_reply(draft_prefill_s=0.0, catchup_s=0.0)
    read = _hybrid_reply(draft_prefill_s=draft_prefill_s, catchup_s=catchup_s)
    before = PlainSpeed().speedup(TARGET, False, unread, STEP_S)
    after = PlainSpeed().speedup(TARGET, False, read, STEP_S)
    assert before is not None and after is not None
    assert read.tokens_per_second is not None and unread.tokens_per_second is not None
    # The reading makes the reply slower, so the speedup over the same plain price falls.
    assert after.value == pytest.approx(
        before.value * read.tokens_per_second / unread.tokens_per_second
    )
    assert after.value < before.value


def test_the_estimate_never_exceeds_the_tokens_a_round_yields() -> None:
    # A plain step timed while other programs held the cores: 0 % acceptance read 1.46x.
    stats = _hybrid_reply(draft_prefill_s=0.0, catchup_s=0.0, accepted=0)
    assert stats.tokens_per_round == 1.0
    speedup = PlainSpeed().speedup(TARGET, False, stats, 10 * STEP_S)
    assert speedup is not None and speedup.value == 1.0 and not speedup.measured


def test_a_measured_speedup_never_exceeds_the_tokens_a_round_yields_either() -> None:
    # A plain reply timed while other programs held the cores: 0 % acceptance read faster.
    stats = _hybrid_reply(draft_prefill_s=0.0, catchup_s=0.0, accepted=0)
    speed = PlainSpeed()
    assert stats.tokens_per_second is not None
    speed.note(TARGET, False, stats.tokens_per_second / 1.4, tokens=64)
    speedup = speed.speedup(TARGET, False, stats, STEP_S)
    assert speedup is not None and speedup.measured and speedup.value == 1.0


def test_a_measured_plain_reply_replaces_the_estimate() -> None:
    stats = _hybrid_reply(draft_prefill_s=0.6, catchup_s=0.0)
    speed = PlainSpeed()
    speed.note(TARGET, False, 40.0, tokens=64)
    speedup = speed.speedup(TARGET, False, stats, STEP_S)
    assert speedup is not None and speedup.measured
    assert stats.tokens_per_second is not None
    assert speedup.value == pytest.approx(stats.tokens_per_second / 40.0)


def test_the_same_file_loaded_with_other_threads_is_measured_afresh() -> None:
    stats = _hybrid_reply(draft_prefill_s=0.6, catchup_s=0.0)
    speed = PlainSpeed()
    speed.note(TARGET, False, 40.0, tokens=64)
    reloaded = ModelConfig(TARGET.path, n_threads=1)
    speedup = speed.speedup(reloaded, False, stats, STEP_S)
    assert speedup is not None and not speedup.measured


def test_a_reply_of_too_few_rounds_gets_no_speedup() -> None:
    speed = PlainSpeed()
    speed.note(TARGET, False, 40.0, 128)
    short = _hybrid_reply(draft_prefill_s=0.6, catchup_s=0.0, n_rounds=7)
    assert speed.speedup(TARGET, False, short, STEP_S) is None  # measured
    assert PlainSpeed().speedup(TARGET, False, short, STEP_S) is None  # estimated
    enough = _hybrid_reply(draft_prefill_s=0.6, catchup_s=0.0, n_rounds=8)
    assert speed.speedup(TARGET, False, enough, STEP_S) is not None
    assert PlainSpeed().speedup(TARGET, False, enough, STEP_S) is not None
