"""Immutable settings for one generation, and what the engine asks of a model's settings."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from app.engine.gamma import DEFAULT_GAMMA_SETTING, GammaSetting
from app.errors import SettingValueError
from app.llama.config import MAX_INT32, ModelConfig
from app.metrics.cost_model import MAX_GAMMA

if TYPE_CHECKING:
    from app.engine.constraint_types import ConstraintSpec

# Seeds feed numpy's generator, which takes any size, and are mixed into 32-bit per-position
# draft seeds (SpeculativeEngine._draft_seed); 2^63 - 1 is what JSON clients (OpenAI's 64-bit
# seeds, signed) can send, so every seed the server accepts reaches the engine as sent.
MAX_SEED = 2**63 - 1
# A temperature below this samples as greedy: dividing logits by a denormal one overflows to
# inf (1e-310 drew garbage), and far above it the scaled distribution is already one-hot but
# for exact ties. vLLM's threshold (_SAMPLING_EPS).
GREEDY_BELOW = 1e-5
# OpenAI's ceiling for top_logprobs.
MAX_TOP_LOGPROBS = 20
# OpenAI's ranges for presence/frequency penalties and for logit bias values.
MAX_PENALTY = 2.0
MAX_LOGIT_BIAS = 100.0
# The repeat penalty divides or multiplies float32 logits: 1e-300 or 1e300 turns them into 0,
# inf or NaN (garbage text, numpy warnings). llama.cpp sets no bound; real use stays within
# 0.5..2 (CTRL's paper suggests 1.2), and a factor of 100 either way already makes a seen token
# certain or impossible, so nothing past it is needed. Logits of a few hundred at most, times
# 100, stay far inside float32.
MIN_REPEAT_PENALTY = 0.01
MAX_REPEAT_PENALTY = 100.0
# A prompt file larger than this is not a prompt (or is /dev/zero): refuse it unread.
MAX_PROMPT_FILE_BYTES = 16 * 1024 * 1024


def check_model_config(config: ModelConfig) -> None:
    """A model's settings as the engine needs them: its context and its batch must hold the
    longest verification pass, γ ceiling + 1 rows (llama.cpp caps a batch at n_ctx)."""
    config.validate(min_rows=MAX_GAMMA + 1)


def shown(value: int) -> str:
    """An integer as an error message quotes it: JSON and the command line take integers of
    thousands of digits, and a message that prints them all buries what it says."""
    digits = str(abs(value))
    if len(digits) <= 24:
        return str(value)
    return f"{'-' if value < 0 else ''}{digits[:8]}... ({len(digits)} digits)"


def _finite(setting: str, name: str, value: float) -> None:
    # NaN passes every `<` check unnoticed, and inf makes probabilities NaN downstream.
    if not math.isfinite(value):
        raise SettingValueError(setting, f"{name} must be a finite number, got {value}")


@dataclass(frozen=True, slots=True)
class SamplingConfig:
    """The transform applied identically to target and draft logits before sampling.

    temperature 0 (or below GREEDY_BELOW) means greedy (argmax). top_k = 0, top_p = 1, min_p = 0 and
    repeat_penalty = 1 each switch their step off; top_p = 0 keeps the most likely token alone
    (OpenAI's range is [0, 1], and its clients send 0). presence_penalty and frequency_penalty
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
        """The one place greedy and sampled decoding part, for every front end."""
        return self.temperature < GREEDY_BELOW

    def validate(self) -> None:
        """Raises SettingValueError naming the field at fault."""
        for setting, name, value in (
            ("temperature", "temperature", self.temperature),
            ("top_p", "top-p", self.top_p),
            ("min_p", "min-p", self.min_p),
            ("repeat_penalty", "repeat penalty", self.repeat_penalty),
            ("presence_penalty", "presence penalty", self.presence_penalty),
            ("frequency_penalty", "frequency penalty", self.frequency_penalty),
            *(("logit_bias", "logit bias", bias) for _, bias in self.logit_bias),
        ):
            _finite(setting, name, value)
        if self.temperature < 0.0:
            raise SettingValueError(
                "temperature", f"temperature must be 0 (greedy) or positive, got {self.temperature}"
            )
        if self.top_k < 0:
            raise SettingValueError(
                "top_k", f"top-k must be 0 (off) or positive, got {shown(self.top_k)}"
            )
        if not 0.0 <= self.top_p <= 1.0:
            raise SettingValueError("top_p", f"top-p must be in [0, 1], got {self.top_p}")
        if not 0.0 <= self.min_p < 1.0:
            raise SettingValueError("min_p", f"min-p must be in [0, 1), got {self.min_p}")
        if not MIN_REPEAT_PENALTY <= self.repeat_penalty <= MAX_REPEAT_PENALTY:
            raise SettingValueError(
                "repeat_penalty",
                f"repeat penalty must be in {MIN_REPEAT_PENALTY:g}..{MAX_REPEAT_PENALTY:g}, "
                f"got {self.repeat_penalty}",
            )
        for setting, name, value in (
            ("presence_penalty", "presence penalty", self.presence_penalty),
            ("frequency_penalty", "frequency penalty", self.frequency_penalty),
        ):
            if not -MAX_PENALTY <= value <= MAX_PENALTY:
                raise SettingValueError(
                    setting, f"{name} must be in -{MAX_PENALTY:g}..{MAX_PENALTY:g}, got {value}"
                )
        for token, bias in self.logit_bias:
            # llama.cpp's token ids are int32: a larger id is in no vocabulary (and would
            # overflow numpy's int64 index arrays).
            if not 0 <= token <= MAX_INT32 or not -MAX_LOGIT_BIAS <= bias <= MAX_LOGIT_BIAS:
                raise SettingValueError(
                    "logit_bias",
                    f"logit bias takes token ids in 0..{MAX_INT32} and biases in "
                    f"-{MAX_LOGIT_BIAS:g}..{MAX_LOGIT_BIAS:g}, got {shown(token)}: {bias}",
                )
        if self.repeat_last_n < 0:
            raise SettingValueError(
                "repeat_last_n", f"repeat-last-n must be >= 0, got {shown(self.repeat_last_n)}"
            )
        if self.seed is not None and not 0 <= self.seed <= MAX_SEED:
            raise SettingValueError(
                "seed",
                f"seed must be in 0..{MAX_SEED}, got {shown(self.seed)}; "
                "leave it out for a random one",
            )

    def check_vocabulary(self, n_vocab: int) -> None:
        """Refuse a logit bias on a token the model does not have (validate() cannot know the
        vocabulary; the job driver checks this once the model is known)."""
        outside = [token for token, _ in self.logit_bias if token >= n_vocab]
        if outside:
            raise SettingValueError(
                "logit_bias",
                f"logit bias names token {outside[0]}, but the model's vocabulary has "
                f"{n_vocab} tokens (ids 0..{n_vocab - 1})",
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
        """Raises SettingValueError naming the field at fault (`sampling`'s by their own)."""
        if not 1 <= self.max_tokens <= MAX_INT32:
            raise SettingValueError(
                "max_tokens", f"max tokens must be in 1..{MAX_INT32}, got {shown(self.max_tokens)}"
            )
        _finite("p_min", "p-min", self.p_min)
        if not 0.0 <= self.p_min < 1.0:
            raise SettingValueError("p_min", f"p-min must be in [0, 1), got {self.p_min}")
        self.sampling.validate()
        if self.logprobs is not None and not 0 <= self.logprobs <= MAX_TOP_LOGPROBS:
            raise SettingValueError(
                "logprobs",
                f"top logprobs must be in 0..{MAX_TOP_LOGPROBS}, got {shown(self.logprobs)}",
            )
