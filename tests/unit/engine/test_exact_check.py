"""The check that exact mode holds on a target: logits compared between a plain step's passes
and a verification's, and the notice the engine gives once when they differ."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from app.engine.config import GenerationConfig
from app.engine.events import NoticeEvent
from app.engine.exact_check import EXACT_NOT_GUARANTEED, passes_agree
from app.engine.loop import SpeculativeEngine
from app.metrics.cost_model import MAX_GAMMA
from tests.helpers.engine import run_to_end
from tests.helpers.fake_llama import FakeLlama, Logits, toy_logits

N_VOCAB = 32
PROMPT = [3, 1, 4, 1, 5, 9, 2, 6]


class RoundsBySize(FakeLlama):
    """A target whose passes of `from_rows` rows or more round their logits differently, as
    llama.cpp's CPU kernels for some quantized types do."""

    def __init__(self, from_rows: int) -> None:
        super().__init__(toy_logits(7, N_VOCAB), N_VOCAB)
        self.from_rows = from_rows

    def feed(self, history: Sequence[int], n_logits: int) -> Logits:
        decoded_before = self.decoded
        rows = super().feed(history, n_logits)
        if self.decoded - decoded_before >= self.from_rows:
            rows = rows + np.float32(1e-3)
        return rows


def test_a_target_whose_logits_do_not_depend_on_pass_size_passes() -> None:
    target = FakeLlama(toy_logits(7, N_VOCAB), N_VOCAB)
    assert passes_agree(target, PROMPT)
    assert target.uniform_batches is False  # left as found
    assert target.tokens == []  # exact mode starts from an empty cache


def test_a_difference_in_a_verification_sized_pass_is_found() -> None:
    # A plain step in exact mode decodes 2 rows; verifications of 3 and more are checked.
    assert not passes_agree(RoundsBySize(from_rows=3), PROMPT)
    assert not passes_agree(RoundsBySize(from_rows=8), PROMPT)
    assert not passes_agree(RoundsBySize(from_rows=MAX_GAMMA + 1), PROMPT)


def test_a_one_token_prompt_is_repeated_to_fill_the_check() -> None:
    assert not passes_agree(RoundsBySize(from_rows=3), [5])


def test_every_exact_reply_says_when_exact_replies_cannot_be_guaranteed() -> None:
    target = RoundsBySize(from_rows=3)
    engine = SpeculativeEngine(target)
    exact = GenerationConfig(max_tokens=6, exact=True)
    first, events = run_to_end(engine, PROMPT, exact)
    notices = [e.message for e in events if isinstance(e, NoticeEvent)]
    assert notices == [EXACT_NOT_GUARANTEED]
    assert EXACT_NOT_GUARANTEED in first.notices
    assert len(first.token_ids) == 6
    passes_before = target.passes
    second, events = run_to_end(engine, PROMPT, exact)
    assert [e.message for e in events if isinstance(e, NoticeEvent)] == [EXACT_NOT_GUARANTEED]
    assert second.token_ids == first.token_ids
    # The check ran once for the target: the second reply's passes are its own.
    assert target.passes - passes_before <= len(second.token_ids)
    plain, _ = run_to_end(engine, PROMPT, GenerationConfig(max_tokens=6))
    assert not plain.notices


def test_no_check_and_no_notice_without_exact_mode_or_where_passes_agree() -> None:
    target = RoundsBySize(from_rows=3)
    result, _ = run_to_end(SpeculativeEngine(target), PROMPT, GenerationConfig(max_tokens=4))
    assert not result.notices
    assert target.passes == len(result.token_ids)  # a pass a token, none for a check
    agreeing = SpeculativeEngine(FakeLlama(toy_logits(7, N_VOCAB), N_VOCAB))
    result, _ = run_to_end(agreeing, PROMPT, GenerationConfig(max_tokens=4, exact=True))
    assert not result.notices
