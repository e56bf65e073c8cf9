"""What every answer reports: llama-server's `timings` and SpecChat's `speculation` object.

`timings` uses llama-server's names so its clients and dashboards read SpecChat unchanged;
`speculation` reuses the metric names of app.metrics.summary (their definitions live there).
"""

from __future__ import annotations

from typing import Any

from app.engine.gamma import parse_gamma
from app.engine.job_driver import Started
from app.engine.result import FinishReason, GenerationResult
from app.metrics.measured import decoded, ratio
from app.server.schemas import NMax

# GenerationStats fields that describe speculation, in the order clients see them.
SPECULATION_FIELDS = (
    "rounds",
    "drafted",
    "accepted",
    "suffix_accepted",
    "model_accepted",
    "acceptance_rate",
    "per_position_acceptance",
    "tokens_per_round",
    "accepted_per_round",
    "c_draft",
    "c_verify",
)


def timings(result: GenerationResult, started: Started) -> dict[str, Any]:
    s = result.stats
    prompt_n = started.prompt_tokens - started.cached_tokens
    prompt_ms = s.prompt_s * 1000.0
    predicted_ms = s.generation_s * 1000.0
    return {
        "cache_n": started.cached_tokens,
        "prompt_n": prompt_n,
        "prompt_ms": prompt_ms,
        "prompt_per_token_ms": ratio(prompt_ms, prompt_n),
        "prompt_per_second": ratio(prompt_n, s.prompt_s),
        "predicted_n": s.generated_tokens,
        "predicted_ms": predicted_ms,
        # Per token after the first, which the prompt's pass drew (as llama-server counts).
        "predicted_per_token_ms": ratio(predicted_ms, decoded(s.generated_tokens)),
        "predicted_per_second": s.tokens_per_second,
        "draft_n": s.drafted,
        "draft_n_accepted": s.accepted,
        # SpecChat's own: the accepted tokens by what proposed them (they add up to the above).
        "draft_n_accepted_suffix": s.suffix_accepted,
        "draft_n_accepted_model": s.model_accepted,
    }


def speculation(
    result: GenerationResult, n_max: NMax, p_min: float, notices: tuple[str, ...] = ()
) -> dict[str, Any]:
    stats = result.stats.to_dict()
    out: dict[str, Any] = {
        "mode": result.mode,
        "n_max": n_max,
        # The γ setting as every front end spells it (speculative.n_max 0 reads "off").
        "gamma_setting": str(parse_gamma(n_max)),
        "p_min": p_min,
    }
    out.update((name, stats[name]) for name in SPECULATION_FIELDS)
    out["notices"] = [*notices, *result.notices]
    return out


def usage(result: GenerationResult, started: Started) -> dict[str, int]:
    completion = result.stats.generated_tokens
    return {
        "prompt_tokens": started.prompt_tokens,
        "completion_tokens": completion,
        "total_tokens": started.prompt_tokens + completion,
    }


def finish_reason(engine_reason: FinishReason, stop_hit: bool) -> str:
    """OpenAI's finish_reason: max_tokens or a full context reads as "length", a stop string
    as "stop". A cancelled reply has none: it was cut short, and its client gets an error
    (app.server.sse.Feed) rather than a reply that reads as whole."""
    if stop_hit or engine_reason == "stop":
        return "stop"
    if engine_reason in ("length", "context"):
        return "length"
    raise ValueError(f"a {engine_reason} reply has no finish_reason")
