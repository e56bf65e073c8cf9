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
from tests.helpers.fake_llama import FakeLlama, Logits

N_VOCAB = 64


def next_token(history: Sequence[int]) -> Logits:
    row = np.zeros(N_VOCAB, dtype=np.float32)
    row[(history[-1] + 1) % N_VOCAB] = 10.0
    return row


def test_a_draft_model_left_behind_reads_the_gap_outside_its_timed_passes() -> None:
    model = FakeLlama(next_token, N_VOCAB, name="draft.gguf")
    # Each token the fake decodes costs a millisecond on this clock.
    drafter = ModelDrafter(model, N_VOCAB, clock=lambda: model.decoded * 1e-3)
    hybrid = HybridDrafter(SuffixDrafter(), drafter)
    history = list(range(40))  # no token repeats: the suffix index has nothing to offer
    hybrid.prefill(history[:9])
    behind = len(history) - 1 - len(model.tokens)
    assert behind == 30

    draft = hybrid.propose(history, 4, SamplingConfig(), np.random.default_rng(0), 0.0)

    assert draft.suffix_tokens == 0 and draft.steps == 4
    assert draft.tokens == [40, 41, 42, 43]
    # The passes' own cost: one token each, the gap read apart (and timed as catch-up).
    assert draft.seconds == pytest.approx(4 * 1e-3)
    assert draft.catchup_s > 0.0
