"""The one mapping from the window's preferences to an engine GenerationConfig."""

from __future__ import annotations

from app.engine.config import GenerationConfig, SamplingConfig
from app.engine.gamma import AUTO, fixed
from ui.settings import Settings


def generation_config(settings: Settings) -> GenerationConfig:
    """The reply settings the preferences describe. The γ box's 0 is Auto: switching
    speculation off is the Speculation box's job, which acts even mid-reply."""
    gamma = settings.get_int("generation/gamma")
    seed = settings.get_int("generation/seed")
    return GenerationConfig(
        max_tokens=settings.get_int("generation/max_tokens"),
        gamma=AUTO if gamma <= 0 else fixed(gamma),
        sampling=SamplingConfig(
            temperature=settings.get_float("generation/temperature"),
            top_p=settings.get_float("generation/top_p"),
            top_k=settings.get_int("generation/top_k"),
            seed=None if seed < 0 else seed,
        ),
        exact=settings.get_bool("generation/exact"),
    )
