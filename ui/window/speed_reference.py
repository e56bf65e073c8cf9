"""What "faster than without a draft" is measured against, in one place for the headline, the
stats line under each reply and the live figure.

The honest reference is the plain speed of the same target on the same machine: the tokens per
second of the last reply written with speculation off. Until there is one, the speedup is an
estimate: tokens/s × what a plain reply would spend per token (one timed target step plus the
loop's own work per round, as this reply measured it); the figure then says it is an estimate.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.llama.config import ModelConfig
from app.metrics.summary import METRIC_DEFINITIONS, GenerationStats

# A plain reply shorter than this says more about its first token than about plain speed.
MIN_REFERENCE_TOKENS = 8
# A speedup is judged from this many rounds on, live or finished: over the first few, one
# burst of accepted tokens, or the draft model's reading of the prompt, outweighs the rest (a
# five-token first reply read "0.32x: slower, try another draft").
MIN_JUDGED_ROUNDS = 8

MEASURED_TIP = (
    "This reply's tokens per second over those of the last reply on this target with "
    "speculation off (Tokens per second: " + METRIC_DEFINITIONS["tokens_per_second"] + ")."
)
ESTIMATED_TIP = (
    "An estimate: this reply's tokens per second times the time a plain reply would spend per "
    "token (one plain target step measured in this session, plus the work this reply's rounds "
    "spent outside the models). Send one reply with Speculation off to measure the plain "
    "speed instead."
)


@dataclass(frozen=True, slots=True)
class Speedup:
    value: float
    measured: bool  # against a plain reply's speed; False: estimated from one timed step

    @property
    def tooltip(self) -> str:
        return MEASURED_TIP if self.measured else ESTIMATED_TIP


class PlainSpeed:
    """The last measured plain tokens/s per (target as loaded, exact mode). As loaded: the same
    file with other threads, GPU layers or workers runs at another speed."""

    def __init__(self) -> None:
        self._by_target: dict[tuple[ModelConfig, bool], float] = {}

    def note(
        self, target: ModelConfig, exact: bool, tokens_per_second: float | None, tokens: int
    ) -> None:
        if tokens_per_second and tokens >= MIN_REFERENCE_TOKENS:
            self._by_target[(target, exact)] = tokens_per_second

    def speedup(
        self,
        target: ModelConfig | None,
        exact: bool,
        stats: GenerationStats,
        plain_step_s: float | None,
    ) -> Speedup | None:
        tokens_per_second = stats.tokens_per_second
        if not tokens_per_second or stats.rounds < MIN_JUDGED_ROUNDS:
            return None
        # A round yields tokens_per_round tokens for at least one target pass, which costs no
        # less than a plain step: no reply is faster than that, whatever the reference says. A
        # unit timed while other programs held the cores claimed 1.46x for a reply whose every
        # drafted token was refused; a plain reply timed so, 1.39x for one that kept 0.05 a
        # round.
        ceiling = stats.tokens_per_round or 1.0
        reference = self._by_target.get((target, exact)) if target else None
        if reference:
            return Speedup(min(tokens_per_second / reference, ceiling), measured=True)
        if plain_step_s:
            # A plain reply pays the loop's own work (sampling, decoding text, handing the
            # token on) once per token, beside the target step: this reply's rounds measured it.
            step = plain_step_s + _loop_seconds_per_round(stats)
            return Speedup(min(tokens_per_second * step, ceiling), measured=False)
        return None


def _loop_seconds_per_round(stats: GenerationStats) -> float:
    """The loop's own work per round, outside every model pass (RoundRecord.overhead_s).

    Not the generation time less drafting and verifying: that rest also holds the draft
    model's reading of the prompt and its catch-ups, hundreds of milliseconds a reply that a
    plain reply never pays; counted as the loop's work, they would double the estimate.
    """
    return stats.overhead_s / stats.rounds if stats.rounds else 0.0
