"""What "faster than without a draft" is measured against, in one place for the headline, the
stats line under each reply and the live figure.

The honest reference is the plain speed of the same target on the same machine: the tokens per
second of the last reply written with speculation off. Until there is one, the speedup is an
estimate from one timed target step (tokens/s × the step's time), which leaves out the work
around each step and so reads high; the figure then says it is an estimate.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.metrics.summary import METRIC_DEFINITIONS

# A plain reply shorter than this says more about its first token than about plain speed.
MIN_REFERENCE_TOKENS = 8
# Live figures wait for this many rounds: over the first few, one burst of accepted tokens
# reads as a speed several times the real one.
MIN_LIVE_ROUNDS = 8

MEASURED_TIP = (
    "This reply's tokens per second over those of the last reply on this target with "
    "speculation off (Tokens per second: " + METRIC_DEFINITIONS["tokens_per_second"] + ")."
)
ESTIMATED_TIP = (
    "An estimate: this reply's tokens per second times the time of one plain target step "
    "measured in this session. It leaves out the work around each step, so it reads high. "
    "Send one reply with Speculation off to measure the plain speed, or run Compare drafts."
)


@dataclass(frozen=True, slots=True)
class Speedup:
    value: float
    measured: bool  # against a plain reply's speed; False: estimated from one timed step

    @property
    def tooltip(self) -> str:
        return MEASURED_TIP if self.measured else ESTIMATED_TIP


class PlainSpeed:
    """The last measured plain tokens/s per (target file, exact mode)."""

    def __init__(self) -> None:
        self._by_target: dict[tuple[str, bool], float] = {}

    def note(self, target: str, exact: bool, tokens_per_second: float | None, tokens: int) -> None:
        if tokens_per_second and tokens >= MIN_REFERENCE_TOKENS:
            self._by_target[(target, exact)] = tokens_per_second

    def speedup(
        self,
        target: str | None,
        exact: bool,
        tokens_per_second: float | None,
        plain_step_s: float | None,
    ) -> Speedup | None:
        if not tokens_per_second:
            return None
        reference = self._by_target.get((target, exact)) if target else None
        if reference:
            return Speedup(tokens_per_second / reference, measured=True)
        if plain_step_s:
            return Speedup(tokens_per_second * plain_step_s, measured=False)
        return None
