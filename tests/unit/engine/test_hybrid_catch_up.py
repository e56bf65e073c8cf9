"""The hybrid's draft model, left behind by rounds the suffix index drafted alone, catches up
outside its timed passes, so its cost per pass stays what a pass costs."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from app.engine.config import SamplingConfig
from app.engine.drafters import ModelDrafter
from app.engine.hybrid_drafter import HybridDrafter
from app.engine.suffix_drafter import SuffixDrafter
from app.metrics.rounds import RoundRecord
from tests.helpers.fake_llama import FakeLlama, Logits

N_VOCAB = 64


def next_token(history: Sequence[int]) -> Logits:
    row = np.zeros(N_VOCAB, dtype=np.float32)
    row[(history[-1] + 1) % N_VOCAB] = 10.0
    return row


def test_a_draft_model_left_behind_reads_the_gap_outside_its_timed_passes() -> None:
    model, hybrid = _hybrid()
    history = list(range(40))  # no token repeats: the suffix index has nothing to offer
    hybrid.prefill(history[:9])
    assert model.tokens == []  # the prompt is read when a round needs the model, not before

    draft = hybrid.propose(history, 4, SamplingConfig(), np.random.default_rng(0), 0.0)

    assert draft.suffix_tokens == 0 and draft.steps == 4
    assert draft.tokens == [40, 41, 42, 43]
    # The passes' own cost: one token each, the gap read apart (and timed as catch-up).
    assert draft.seconds == pytest.approx(4 * 1e-3)
    assert draft.catchup_s == pytest.approx(39 * 1e-3)
    assert len(model.tokens) >= 39


def _hybrid() -> tuple[FakeLlama, HybridDrafter]:
    model = FakeLlama(next_token, N_VOCAB, name="draft.gguf")
    # Each token the fake decodes costs a millisecond on this clock.
    clock = lambda: model.decoded * 1e-3  # noqa: E731
    return model, HybridDrafter(
        SuffixDrafter(), ModelDrafter(model, N_VOCAB, clock=clock), clock=clock
    )


def _teach(hybrid: HybridDrafter, *, verify_s: float, draft_pass_s: float) -> None:
    """Rounds as the engine reports them: verification of n rows costs verify_s each, a model
    pass draft_pass_s, and the model's tokens are kept."""
    for i in range(40):
        rows = 1 + i % 8
        steps = rows - 1
        hybrid.learn(
            RoundRecord(
                i, "hybrid", steps, steps, steps, steps + 1, steps * draft_pass_s, verify_s, steps
            )
        )


def _conversation(length: int, start: int) -> list[int]:
    return [(start + i) % N_VOCAB for i in range(length)]


def test_a_long_gap_is_left_unread_when_the_suffix_index_does_as_well_alone() -> None:
    model, hybrid = _hybrid()
    # A cheap draft model that is always kept: once caught up, its rounds beat the suffix
    # index's, but not by enough to earn back reading 300 tokens within a reply.
    _teach(hybrid, verify_s=0.02, draft_pass_s=0.001)
    first = _conversation(40, 0)
    hybrid.prefill(first[:-1])
    hybrid.propose(first, 4, SamplingConfig(), np.random.default_rng(0), 0.0)  # reading timed
    read = model.decoded

    # A new conversation that repeats itself: 300 tokens behind, a long match to copy from.
    repeated = [7, 3, 9, 1, 4] * 60 + [7, 3, 9]
    hybrid.prefill(repeated[:-1])
    draft = hybrid.propose(repeated, 8, SamplingConfig(), np.random.default_rng(0), 0.0)

    assert draft.tokens and draft.suffix_tokens == len(draft.tokens) and draft.steps == 0
    assert draft.catchup_s == 0.0 and model.decoded == read  # not one token read


def test_the_gap_is_read_when_the_model_is_worth_it_and_the_suffix_index_has_nothing() -> None:
    _model, hybrid = _hybrid()
    _teach(hybrid, verify_s=0.02, draft_pass_s=0.001)  # a cheap draft model that is kept
    first = _conversation(40, 0)
    hybrid.prefill(first[:-1])
    hybrid.propose(first, 4, SamplingConfig(), np.random.default_rng(0), 0.0)

    second = _conversation(60, 5)  # no repeats: only the model can draft
    hybrid.prefill(second[:-1])
    draft = hybrid.propose(second, 4, SamplingConfig(), np.random.default_rng(0), 0.0)

    assert draft.steps == 4 and draft.suffix_tokens == 0
    assert draft.catchup_s > 0.0
