"""The forgetful figures the hybrid drafter (app/engine/hybrid_drafter.py) weighs its sources by.

Each fades older evidence by FADE per round, so a change of task within a chat (code pasted to
be returned, then a question) moves them within a few dozen rounds.
"""

from __future__ import annotations

from dataclasses import dataclass

# Per round, how much of the older evidence is kept: about the last 30 rounds count.
FADE = 0.97
# The draft model's keep rate before any verdict, with this many pseudo-tokens of weight.
_PRIOR_KEEP = 0.7
_PRIOR_WEIGHT = 4.0
# Rounds the draft model drafts alone before their measured rate stands for it.
_MIN_MODEL_ROUNDS = 3
# A model round counts as at most this many times the time its tokens took so far.
_STALL_FACTOR = 3.0
# Runs of model rounds seen before their mean length sets a catch-up's payback span.
_MIN_RUNS = 3


def expected_kept(keep: float, n: int) -> float:
    """Tokens kept of n proposed when each survives with `keep` given the ones before."""
    return sum(keep**i for i in range(1, n + 1))


@dataclass
class FadingRate:
    """The draft model's keep rate per judged token."""

    kept: float = 0.0
    judged: float = 0.0

    def add(self, kept: int, judged: int) -> None:
        self.kept = self.kept * FADE + kept
        self.judged = self.judged * FADE + judged

    @property
    def value(self) -> float:
        return (self.kept + _PRIOR_WEIGHT * _PRIOR_KEEP) / (self.judged + _PRIOR_WEIGHT)


@dataclass
class FadingRounds:
    """Tokens and seconds of a kind of round: the rate it really delivers. For the draft model
    drafting alone, this counts γ auto's confidence stop ending its drafts where it turns
    unsure, which a keep rate compounded over the full γ would underrate."""

    tokens: float = 0.0
    seconds: float = 0.0
    rounds: float = 0.0

    def add(self, tokens: int, seconds: float) -> None:
        rate = self.rate
        if rate is not None:
            # A round the machine stalled (another process took the cores) says nothing about
            # the draft model; counted whole, one would keep it out of use for many rounds.
            seconds = min(seconds, _STALL_FACTOR * tokens / rate)
        self.tokens = self.tokens * FADE + tokens
        self.seconds = self.seconds * FADE + seconds
        self.rounds = self.rounds * FADE + 1

    @property
    def rate(self) -> float | None:
        """Tokens a second; None until a few rounds have delivered tokens. Rounds that end the
        reply on a drafted end of sequence deliver none (the end is no reply token): on their
        own they measure nothing, and a rate of 0 would price the source out for good."""
        if self.rounds < _MIN_MODEL_ROUNDS or self.seconds <= 0.0 or self.tokens <= 0.0:
            return None
        return self.tokens / self.seconds

    @property
    def tokens_per_round(self) -> float:
        return self.tokens / self.rounds if self.rounds else 0.0


@dataclass
class FadingRuns:
    """How many rounds in a row the draft model drafts before another source takes over."""

    total: float = 0.0
    runs: float = 0.0
    current: int = 0

    def model_round(self) -> None:
        self.current += 1

    def other_round(self) -> None:
        if self.current:
            self.total = self.total * FADE + self.current
            self.runs = self.runs * FADE + 1
            self.current = 0

    @property
    def mean(self) -> float | None:
        return self.total / self.runs if self.runs >= _MIN_RUNS else None
