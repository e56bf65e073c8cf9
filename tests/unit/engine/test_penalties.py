"""Presence and frequency penalties and logit bias: part of the sampling transform, so the
draft and the target apply them alike and speculation keeps plain sampling's distribution."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from app.engine.config import SamplingConfig
from app.engine.sampling import penalized_logits
from app.errors import InvalidSettingError
from tests.helpers.exact_engine import Case, DrafterKind, describe, fits, run_engine

ALPHA = 1e-3 / 4  # the harness's family-wise rate over this file's windows


def test_the_penalties_follow_llama_cpps_rule_on_a_worked_case() -> None:
    logits = np.array([1.0, 2.0, -1.0, 0.5], dtype=np.float32)
    config = SamplingConfig(
        presence_penalty=0.5,
        frequency_penalty=0.25,
        logit_bias=((3, 2.0), (9, 5.0)),  # an id past the vocabulary is left out
        repeat_last_n=3,
    )
    # Only the last three tokens count: 0 once, 2 twice; token 1 fell out of the window.
    out = penalized_logits(logits, [1, 0, 2, 2], config)
    expected = [1.0 - 0.25 - 0.5, 2.0, -1.0 - 2 * 0.25 - 0.5, 0.5 + 2.0]
    assert out.tolist() == pytest.approx(expected)
    assert logits.tolist() == [1.0, 2.0, -1.0, 0.5]  # the model's row is not written to


@pytest.mark.parametrize(
    "config",
    [
        SamplingConfig(presence_penalty=2.5),
        SamplingConfig(frequency_penalty=float("nan")),
        SamplingConfig(logit_bias=((1, 101.0),)),
        SamplingConfig(logit_bias=((-1, 1.0),)),
    ],
)
def test_out_of_range_settings_are_refused(config: SamplingConfig) -> None:
    with pytest.raises(InvalidSettingError):
        config.validate()


@pytest.mark.parametrize(
    "case",
    [
        Case(
            "penalties-sampled-g3",
            "sampled",
            3,
            SamplingConfig(
                temperature=0.8,
                presence_penalty=0.6,
                frequency_penalty=0.4,
                logit_bias=((2, 1.0), (4, -1.5)),
                repeat_last_n=4,
            ),
            4,
        ),
        Case(
            "penalties-hybrid-g4",
            "hybrid",
            4,
            SamplingConfig(temperature=0.7, frequency_penalty=-0.5, logit_bias=((0, 0.8),)),
            5,
        ),
    ],
    ids=lambda c: c.name,
)
def test_speculation_with_penalties_samples_like_plain_decoding(case: Case) -> None:
    found = fits(case, run_engine(case))
    assert min(f.p_value for _, f in found) >= ALPHA, describe(found)


@pytest.mark.parametrize("drafter", ["suffix", "tree", "lookup"])
def test_a_seeded_reply_drafted_with_certain_tokens_under_penalties_is_plain_decodings(
    drafter: DrafterKind,
) -> None:
    """Certain drafts are checked with plain sampling's own draw at each position, from the
    penalties and bias of the history up to it (a tree's alternatives included), so for a seed
    the reply is plain decoding's, token for token."""
    sampling = SamplingConfig(
        temperature=0.9,
        repeat_penalty=1.2,
        presence_penalty=0.6,
        frequency_penalty=0.4,
        logit_bias=((2, 1.0), (4, -1.5)),
        repeat_last_n=4,
    )
    case = Case(f"seeded-penalties-{drafter}", drafter, 5, sampling, 10, runs=40)
    spec = run_engine(case)
    plain = run_engine(replace(case, drafter="none"))
    assert spec.replies == plain.replies
    assert any(r.accepted for r in spec.rounds)
    if drafter == "tree":
        assert any(r.tree_bonus for r in spec.rounds)
