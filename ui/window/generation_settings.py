"""The one mapping from the window's preferences to an engine GenerationConfig."""

from __future__ import annotations

from dataclasses import replace

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


# What Regenerate samples at when the settings say greedy (0), as chat apps commonly default to.
REGENERATE_TEMPERATURE = 0.7


def regenerate_sampling(sampling: SamplingConfig) -> tuple[SamplingConfig, str | None]:
    """What Regenerate samples with, and how the reply says it differs (None: as set).

    A regenerated reply is asked for because the first did not suit, so settings that would
    write the same words again are loosened. Greedy decoding, and a nucleus or top-k of the top
    token alone (greedy too, whatever the temperature says), sample at REGENERATE_TEMPERATURE
    over the whole vocabulary; a fixed seed gives way to a fresh one.
    """
    if sampling.greedy or sampling.top_p == 0 or sampling.top_k == 1:
        loosened = replace(
            sampling,
            temperature=REGENERATE_TEMPERATURE,
            top_p=1.0 if sampling.top_p == 0 else sampling.top_p,
            top_k=0 if sampling.top_k == 1 else sampling.top_k,
            seed=None,
        )
        return loosened, f"regenerated at temperature {REGENERATE_TEMPERATURE}"
    if sampling.seed is not None:
        return replace(sampling, seed=None), "regenerated with a fresh seed"
    return sampling, None
