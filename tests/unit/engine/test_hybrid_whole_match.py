"""A suffix proposal at least as long as the model's draft is drafted whole, with nothing owed
for the model's reading, or not at all: never cut short for a model token after part of it."""

from __future__ import annotations

import numpy as np

from app.engine.config import SamplingConfig
from app.engine.drafters import DraftRequest
from tests.helpers.hybrid_rounds import cheap_kept_model_after_a_first_chat

TEXT = list(range(1000, 1030))


def test_a_match_longer_than_gamma_is_drafted_whole_rather_than_cut_for_a_model_token() -> None:
    """A model whose every token is kept, at 1 ms a pass against 20 ms a verification, at γ 8
    with 16 tokens free to draft: the text repeated from its ninth token on had been cut to 7
    suffix tokens and one of the model's."""
    _, hybrid = cheap_kept_model_after_a_first_chat()
    history = [*TEXT, 7, *TEXT[:8]]
    hybrid.prefill(history[:-1])
    ask = DraftRequest(history, 8, SamplingConfig(), np.random.default_rng(0), 0.0, free_limit=16)
    draft = hybrid.propose(ask)
    assert draft.steps == 0
    assert draft.suffix_tokens == len(draft.tokens) > 8
