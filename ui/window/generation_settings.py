"""The one mapping from the window's preferences to an engine GenerationConfig."""

from __future__ import annotations

from app.engine.config import DEFAULT_GAMMA, GenerationConfig, SamplingConfig
from ui.settings import Settings


def generation_config(settings: Settings) -> GenerationConfig:
    """The reply settings the preferences describe. γ 0 in the preferences means Auto."""
    gamma = settings.get_int("generation/gamma")
    seed = settings.get_int("generation/seed")
    return GenerationConfig(
        max_tokens=settings.get_int("generation/max_tokens"),
        gamma=gamma if gamma > 0 else DEFAULT_GAMMA,
        adaptive=gamma == 0,
        sampling=SamplingConfig(
            temperature=settings.get_float("generation/temperature"),
            top_p=settings.get_float("generation/top_p"),
            top_k=settings.get_int("generation/top_k"),
            seed=None if seed < 0 else seed,
        ),
        exact=settings.get_bool("generation/exact"),
    )
