"""The sampling transform shared by target and draft."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from app.engine.acceptance import accept_or_correct
from app.engine.config import (
    GREEDY_BELOW,
    MAX_LOGIT_BIAS,
    MAX_PENALTY,
    MAX_REPEAT_PENALTY,
    MIN_REPEAT_PENALTY,
    GenerationConfig,
    SamplingConfig,
)
from app.engine.drafters import ModelDrafter
from app.engine.gamma import OFF, fixed
from app.engine.loop import SpeculativeEngine
from app.engine.sampling import (
    distribution,
    greedy_token,
    penalized_logits,
    sample,
    top_probability,
)
from app.errors import InvalidSettingError, SettingValueError
from tests.helpers.engine import run_to_end
from tests.helpers.fake_llama import FakeLlama, blend, toy_logits

LOGITS = np.array([2.0, 1.0, 0.5, -1.0, 3.0], dtype=np.float32)
N_VOCAB = 32
PROMPT = [3, 1, 4, 1, 5]


def test_greedy_is_argmax_and_penalty_can_change_it() -> None:
    plain = SamplingConfig()
    assert greedy_token(LOGITS, [], plain) == 4
    penalized = SamplingConfig(repeat_penalty=2.0)
    # Token 4 was just said: 3.0 / 2 = 1.5 < 2.0, so token 0 wins.
    assert greedy_token(LOGITS, [4], penalized) == 0


def test_penalty_grows_negative_logits_and_shrinks_positive() -> None:
    out = penalized_logits(LOGITS, [3, 4], SamplingConfig(repeat_penalty=2.0))
    assert out[3] == pytest.approx(-2.0)
    assert out[4] == pytest.approx(1.5)
    assert out[0] == pytest.approx(2.0)


def test_top_k_keeps_k_most_likely() -> None:
    probs = distribution(LOGITS, [], SamplingConfig(temperature=1.0, top_k=2))
    assert set(np.flatnonzero(probs)) == {0, 4}
    assert probs.sum() == pytest.approx(1.0)


def test_top_p_keeps_smallest_nucleus() -> None:
    full = distribution(LOGITS, [], SamplingConfig(temperature=1.0))
    nucleus = distribution(LOGITS, [], SamplingConfig(temperature=1.0, top_p=0.7))
    kept = np.flatnonzero(nucleus)
    order = np.argsort(-full)
    # The two most likely tokens hold ~0.86 of the mass; the top one alone ~0.61 < 0.7.
    assert set(kept) == set(order[:2])


def test_min_p_drops_tokens_far_below_the_best() -> None:
    probs = distribution(LOGITS, [], SamplingConfig(temperature=1.0, min_p=0.2))
    full = distribution(LOGITS, [], SamplingConfig(temperature=1.0))
    assert set(np.flatnonzero(probs)) == set(np.flatnonzero(full >= 0.2 * full.max()))


def test_temperature_sharpens_and_flattens() -> None:
    cold = distribution(LOGITS, [], SamplingConfig(temperature=0.5))
    hot = distribution(LOGITS, [], SamplingConfig(temperature=2.0))
    assert cold.max() > hot.max()


def test_sample_follows_probabilities() -> None:
    rng = np.random.default_rng(0)
    probs = np.array([0.1, 0.0, 0.6, 0.3])
    draws = np.bincount([sample(probs, rng) for _ in range(20_000)], minlength=4) / 20_000
    np.testing.assert_allclose(draws, probs, atol=0.015)
    assert draws[1] == 0.0


def test_top_probability_is_softmax_max() -> None:
    expected = np.exp(3.0) / np.exp(LOGITS.astype(np.float64)).sum()
    assert top_probability(LOGITS) == pytest.approx(expected)


@pytest.mark.parametrize(
    "config",
    [
        SamplingConfig(top_k=-1),
        SamplingConfig(top_p=-0.1),
        SamplingConfig(top_p=1.5),
        SamplingConfig(min_p=1.0),
        SamplingConfig(repeat_penalty=0.0),
    ],
)
def test_impossible_settings_are_refused(config: SamplingConfig) -> None:
    with pytest.raises(InvalidSettingError):
        config.validate()


def test_a_temperature_too_small_to_divide_by_decodes_greedy() -> None:
    # 1e-310 is denormal: logits divided by it overflow to inf, and their softmax to NaN.
    assert SamplingConfig(temperature=1e-310).greedy
    assert not SamplingConfig(temperature=0.1).greedy
    engine = SpeculativeEngine(FakeLlama(toy_logits(7, N_VOCAB), N_VOCAB))
    greedy, _ = run_to_end(engine, PROMPT, GenerationConfig(max_tokens=12, gamma=OFF))
    tiny = SamplingConfig(temperature=1e-310, seed=3)
    sampled, _ = run_to_end(engine, PROMPT, GenerationConfig(12, OFF, sampling=tiny))
    assert sampled.token_ids == greedy.token_ids


def test_a_seed_past_32_bits_is_taken_and_repeats_its_reply() -> None:
    engine = SpeculativeEngine(FakeLlama(toy_logits(7, N_VOCAB), N_VOCAB))
    config = GenerationConfig(12, OFF, sampling=SamplingConfig(temperature=1.0, seed=2**40))
    first, _ = run_to_end(engine, PROMPT, config)
    again, _ = run_to_end(engine, PROMPT, config)
    assert first.token_ids == again.token_ids


@pytest.mark.parametrize(
    ("config", "setting"),
    [
        (GenerationConfig(max_tokens=0), "max_tokens"),
        (GenerationConfig(p_min=1.0), "p_min"),
        (GenerationConfig(logprobs=21), "logprobs"),
        (GenerationConfig(sampling=SamplingConfig(top_p=-0.1)), "top_p"),
        (GenerationConfig(sampling=SamplingConfig(presence_penalty=3.0)), "presence_penalty"),
        (GenerationConfig(sampling=SamplingConfig(seed=2**63)), "seed"),
        (GenerationConfig(sampling=SamplingConfig(logit_bias=((2**31, 1.0),))), "logit_bias"),
    ],
)
def test_a_refused_setting_names_its_field(config: GenerationConfig, setting: str) -> None:
    with pytest.raises(SettingValueError) as caught:
        config.validate()
    assert caught.value.setting == setting


@pytest.mark.parametrize("penalty", [1e-300, 1e-3, 1e3, 1e300])
def test_a_repeat_penalty_that_would_break_float32_logits_is_refused(penalty: float) -> None:
    # 1e-300 divided positive logits to inf (NaN after the softmax's subtraction); 1e300
    # overflowed the float32 cast.
    with pytest.raises(
        SettingValueError, match=r"repeat penalty must be in 0\.01\.\.100"
    ) as caught:
        SamplingConfig(repeat_penalty=penalty).validate()
    assert caught.value.setting == "repeat_penalty"


@pytest.mark.parametrize(
    "config",
    [
        SamplingConfig(repeat_penalty=MIN_REPEAT_PENALTY, temperature=1.0),
        SamplingConfig(repeat_penalty=MAX_REPEAT_PENALTY, temperature=1.0),
        SamplingConfig(repeat_penalty=MAX_REPEAT_PENALTY, temperature=GREEDY_BELOW),
        SamplingConfig(temperature=1e308),
        SamplingConfig(temperature=1.0, top_k=10**30, top_p=5e-324, min_p=0.999999),
        SamplingConfig(temperature=2.0, top_p=0.0),
        SamplingConfig(
            temperature=1.0,
            presence_penalty=MAX_PENALTY,
            frequency_penalty=MAX_PENALTY,
            repeat_last_n=10**12,
            logit_bias=((4, MAX_LOGIT_BIAS), (3, -MAX_LOGIT_BIAS), (4, MAX_LOGIT_BIAS)),
        ),
    ],
)
def test_every_accepted_extreme_keeps_logits_and_probabilities_finite(
    config: SamplingConfig,
) -> None:
    config.validate()
    logits = np.array([60.0, -60.0, 0.5, -1.0, 30.0], dtype=np.float32)
    history = [0, 1, 4] * 2000
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a numpy overflow or invalid-value warning fails
        assert np.isfinite(penalized_logits(logits, history, config)).all()
        probs = distribution(logits, history, config)
    assert np.isfinite(probs).all()
    assert probs.sum() == pytest.approx(1.0)


# -- top_p = 0: the most likely token alone ----------------------------------------------------


def test_top_p_zero_always_draws_the_most_likely_token() -> None:
    rng = np.random.default_rng(5)
    config = SamplingConfig(temperature=2.0, top_p=0.0)
    for _ in range(200):
        logits = rng.normal(0.0, 1.0, N_VOCAB).astype(np.float32)
        probs = distribution(logits, [], config)
        best = int(np.argmax(logits))
        assert probs[best] == 1.0 and probs.sum() == 1.0
        assert {sample(probs, rng) for _ in range(20)} == {best}


def test_top_p_zero_breaks_a_tie_for_the_top_by_the_lower_id() -> None:
    logits = np.array([1.0, 3.0, -2.0, 3.0], dtype=np.float32)
    probs = distribution(logits, [], SamplingConfig(temperature=1.0, top_p=0.0))
    assert probs.tolist() == [0.0, 1.0, 0.0, 0.0]


def test_top_p_zero_leaves_the_residual_of_a_rejection_a_whole_distribution() -> None:
    # Target and draft each one-hot: the same token is always kept, another always rejected
    # for the target's, from max(0, p - q) = p, never from an empty residual.
    config = SamplingConfig(temperature=1.0, top_p=0.0)
    rng = np.random.default_rng(2)
    p = distribution(LOGITS, [], config)
    for q_logits, proposed in ((LOGITS, 4), (-LOGITS, 3)):
        q = distribution(q_logits, [], config)
        assert q[proposed] == 1.0
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            draws = {accept_or_correct(p, q, proposed, rng) for _ in range(50)}
            point = {accept_or_correct(p, None, proposed, rng) for _ in range(50)}
        assert draws == point == {(proposed == 4, 4)}


def test_a_speculative_reply_at_top_p_zero_is_the_greedy_plain_reply() -> None:
    target = toy_logits(7, N_VOCAB)
    draft = blend(target, toy_logits(8, N_VOCAB), 1.0)  # often another favourite than the target
    sampled = SamplingConfig(temperature=1.5, top_p=0.0, seed=11)
    engine = SpeculativeEngine(
        FakeLlama(target, N_VOCAB), ModelDrafter(FakeLlama(draft, N_VOCAB), N_VOCAB)
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        reply, _ = run_to_end(engine, PROMPT, GenerationConfig(40, fixed(4), sampling=sampled))
    greedy, _ = run_to_end(
        SpeculativeEngine(FakeLlama(target, N_VOCAB)), PROMPT, GenerationConfig(40, OFF)
    )
    assert reply.token_ids == greedy.token_ids
    stats = reply.stats
    assert 0 < stats.accepted < stats.drafted  # rounds both kept and rejected a draft token
