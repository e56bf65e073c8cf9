"""Immutable settings for one generation, and what the engine asks of a model's settings."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from app.engine.gamma import DEFAULT_GAMMA_SETTING, GammaSetting
from app.errors import InvalidSettingError
from app.llama.config import MAX_INT32, ModelConfig
from app.metrics.cost_model import MAX_GAMMA

if TYPE_CHECKING:
    from app.engine.constraint_types import ConstraintSpec

# Seeds feed numpy's generator and are mixed into 32-bit per-position draft seeds.
MAX_SEED = 2**32 - 1
# OpenAI's ceiling for top_logprobs.
MAX_TOP_LOGPROBS = 20
# OpenAI's ranges for presence/frequency penalties and for logit bias values.
MAX_PENALTY = 2.0
MAX_LOGIT_BIAS = 100.0
# A prompt file larger than this is not a prompt (or is /dev/zero): refuse it unread.
MAX_PROMPT_FILE_BYTES = 16 * 1024 * 1024


def check_model_config(config: ModelConfig) -> None:
    """A model's settings as the engine needs them: its context and its batch must hold the
    longest verification pass, γ ceiling + 1 rows (llama.cpp caps a batch at n_ctx)."""
    config.validate(min_rows=MAX_GAMMA + 1)


def _finite(name: str, value: float) -> None:
    # NaN passes every `<` check unnoticed, and inf makes probabilities NaN downstream.
    if not math.isfinite(value):
        raise InvalidSettingError(f"{name} must be a finite number, got {value}")


@dataclass(frozen=True, slots=True)
class SamplingConfig:
    """The transform applied identically to target and draft logits before sampling.

    temperature <= 0 means greedy (argmax). top_k = 0, top_p = 1, min_p = 0 and
    repeat_penalty = 1 each switch their step off. presence_penalty and frequency_penalty
    (OpenAI's, over the same last repeat_last_n tokens) are off at 0; logit_bias adds a number to
    chosen tokens' logits, as (token id, bias) pairs.
    """

    temperature: float = 0.0
    top_k: int = 0
    top_p: float = 1.0
    min_p: float = 0.0
    repeat_penalty: float = 1.0
    repeat_last_n: int = 64
    seed: int | None = None
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    logit_bias: tuple[tuple[int, float], ...] = ()

    @property
    def greedy(self) -> bool:
        return self.temperature <= 0.0

    def validate(self) -> None:
        for name, value in (
            ("temperature", self.temperature),
            ("top-p", self.top_p),
            ("min-p", self.min_p),
            ("repeat penalty", self.repeat_penalty),
            ("presence penalty", self.presence_penalty),
            ("frequency penalty", self.frequency_penalty),
            *(("logit bias", bias) for _, bias in self.logit_bias),
        ):
            _finite(name, value)
        if self.temperature < 0.0:
            raise InvalidSettingError(
                f"temperature must be 0 (greedy) or positive, got {self.temperature}"
            )
        if self.top_k < 0:
            raise InvalidSettingError(f"top-k must be 0 (off) or positive, got {self.top_k}")
        if not 0.0 < self.top_p <= 1.0:
            raise InvalidSettingError(f"top-p must be in (0, 1], got {self.top_p}")
        if not 0.0 <= self.min_p < 1.0:
            raise InvalidSettingError(f"min-p must be in [0, 1), got {self.min_p}")
        if self.repeat_penalty <= 0.0:
            raise InvalidSettingError(f"repeat penalty must be positive, got {self.repeat_penalty}")
        for name, value in (
            ("presence penalty", self.presence_penalty),
            ("frequency penalty", self.frequency_penalty),
        ):
            if not -MAX_PENALTY <= value <= MAX_PENALTY:
                raise InvalidSettingError(
                    f"{name} must be in -{MAX_PENALTY:g}..{MAX_PENALTY:g}, got {value}"
                )
        for token, bias in self.logit_bias:
            if token < 0 or not -MAX_LOGIT_BIAS <= bias <= MAX_LOGIT_BIAS:
                raise InvalidSettingError(
                    f"logit bias takes token ids >= 0 and biases in "
                    f"-{MAX_LOGIT_BIAS:g}..{MAX_LOGIT_BIAS:g}, got {token}: {bias}"
                )
        if self.repeat_last_n < 0:
            raise InvalidSettingError(f"repeat-last-n must be >= 0, got {self.repeat_last_n}")
        if self.seed is not None and not 0 <= self.seed <= MAX_SEED:
            raise InvalidSettingError(
                f"seed must be in 0..{MAX_SEED}, got {self.seed}; leave it out for a random one"
            )


@dataclass(frozen=True, slots=True)
class GenerationConfig:
    """One reply's settings. `gamma` says whether the reply speculates and how far it drafts:
    auto, off (plain decoding) or a fixed length (app/engine/gamma.py)."""

    max_tokens: int = 256
    gamma: GammaSetting = DEFAULT_GAMMA_SETTING
    p_min: float = 0.0
    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    # Every target pass computes at least two rows, so plain steps and verification run the
    # same llama.cpp kernels and greedy output cannot depend on γ (docs/design.md, "Exact mode").
    exact: bool = False
    # A grammar the reply must match (app/engine/constraint.py), masking target and draft alike.
    constraint: ConstraintSpec | None = None
    # Log probabilities for every emitted token and this many alternatives at each position
    # (0: the chosen token's only); None: none (app/engine/logprobs.py says which distribution).
    logprobs: int | None = None

    def validate(self) -> None:
        if not 1 <= self.max_tokens <= MAX_INT32:
            raise InvalidSettingError(
                f"max tokens must be in 1..{MAX_INT32}, got {self.max_tokens}"
            )
        _finite("p-min", self.p_min)
        if not 0.0 <= self.p_min < 1.0:
            raise InvalidSettingError(f"p-min must be in [0, 1), got {self.p_min}")
        self.sampling.validate()
        if self.logprobs is not None and not 0 <= self.logprobs <= MAX_TOP_LOGPROBS:
            raise InvalidSettingError(
                f"top logprobs must be in 0..{MAX_TOP_LOGPROBS}, got {self.logprobs}"
            )
