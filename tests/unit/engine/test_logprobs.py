"""Log probabilities of emitted tokens: the target's distribution after the grammar mask and
the penalties, before temperature and truncation (app/engine/logprobs.py)."""

from __future__ import annotations

import math
import pickle
from dataclasses import replace

import numpy as np
import pytest

from app.engine.config import GenerationConfig, SamplingConfig
from app.engine.events import TokenEvent
from app.engine.logprobs import TokenChoice, TokenLogprob, token_logprob
from app.errors import InvalidSettingError


class _Target:
    """Enough of a model handle for the bytes of a token: its id spelled out."""

    def token_bytes(self, token: int) -> bytes:
        return f"<{token}>".encode()


LOGITS = np.array([1.0, 3.0, 0.5, 3.0, -np.inf], dtype=np.float32)


def _log_softmax(z: list[float]) -> list[float]:
    finite = [x for x in z if math.isfinite(x)]
    total = math.log(sum(math.exp(x) for x in finite))
    return [x - total for x in z]


def entry(top: int, chosen: int = 0, **sampling: object) -> TokenLogprob:
    config = GenerationConfig(sampling=SamplingConfig(**sampling), logprobs=top)
    return token_logprob(LOGITS, [], config, chosen, _Target())


def test_the_chosen_token_and_the_best_ones_carry_the_log_softmax_of_the_row() -> None:
    expected = _log_softmax([float(x) for x in LOGITS])
    result = entry(3, chosen=2)
    assert result.chosen.token_id == 2
    assert result.chosen.logprob == pytest.approx(expected[2], abs=1e-9)
    assert result.chosen.piece == b"<2>"
    # Most likely first, a tie broken by token id.
    assert [c.token_id for c in result.top] == [1, 3, 0]
    assert [c.logprob for c in result.top] == pytest.approx([expected[i] for i in (1, 3, 0)])
    assert math.fsum(math.exp(x) for x in expected if math.isfinite(x)) == pytest.approx(1.0)


def test_zero_alternatives_reports_only_the_chosen_token() -> None:
    assert entry(0).top == ()


def test_a_masked_token_never_appears_among_the_alternatives() -> None:
    result = entry(5)
    assert [c.token_id for c in result.top] == [1, 3, 0, 2]
    assert entry(5, chosen=4).chosen.logprob == -math.inf


def test_temperature_and_truncation_do_not_change_the_figures() -> None:
    plain = entry(2, chosen=0)
    shaped = entry(2, chosen=0, temperature=0.3, top_k=1, top_p=0.5, min_p=0.2)
    assert shaped == plain


def test_penalties_and_logit_bias_do_change_them() -> None:
    plain = entry(1)
    biased = entry(1, logit_bias=((0, 5.0),))
    assert biased.top[0].token_id == 0
    assert biased.chosen.logprob > plain.chosen.logprob


def test_the_number_of_alternatives_is_bounded_like_openais() -> None:
    GenerationConfig(logprobs=20).validate()
    with pytest.raises(InvalidSettingError, match="top logprobs"):
        GenerationConfig(logprobs=21).validate()
    with pytest.raises(InvalidSettingError):
        replace(GenerationConfig(), logprobs=-1).validate()


def test_a_token_event_with_log_probabilities_crosses_a_process_boundary() -> None:
    choice = TokenChoice(7, -0.25, b"\xe2")
    event = TokenEvent(7, "x", True, 0, logprob=TokenLogprob(choice, (choice,)))
    assert pickle.loads(pickle.dumps(event)) == event
