"""Regenerate never writes the same reply again by settings alone: what it samples with."""

from __future__ import annotations

import pytest

from app.engine.config import SamplingConfig
from ui.window.generation_settings import REGENERATE_TEMPERATURE, regenerate_sampling


@pytest.mark.parametrize(
    "settings",
    [
        SamplingConfig(temperature=0.0),
        # The top token alone is greedy whatever the temperature: Regenerate repeated the reply.
        SamplingConfig(temperature=2.0, top_p=0.0, seed=42),
        SamplingConfig(temperature=0.8, top_k=1),
    ],
    ids=["greedy", "top-p 0", "top-k 1"],
)
def test_settings_that_pick_the_top_token_sample_instead(settings: SamplingConfig) -> None:
    sampling, note = regenerate_sampling(settings)
    assert sampling.temperature == REGENERATE_TEMPERATURE and sampling.seed is None
    assert sampling.top_p > 0 and sampling.top_k != 1
    assert note == f"regenerated at temperature {REGENERATE_TEMPERATURE}"


def test_a_fixed_seed_gives_way_to_a_fresh_one_and_nothing_else_changes() -> None:
    # Temperature 1 with seed 42 drew the same words again.
    sampling, note = regenerate_sampling(SamplingConfig(temperature=1.0, top_p=0.9, seed=42))
    assert sampling == SamplingConfig(temperature=1.0, top_p=0.9, seed=None)
    assert note == "regenerated with a fresh seed"


def test_sampled_settings_without_a_seed_are_kept() -> None:
    settings = SamplingConfig(temperature=0.9, top_k=40, top_p=0.95)
    assert regenerate_sampling(settings) == (settings, None)
