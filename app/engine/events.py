"""Small immutable events the engine yields while generating; the UI and CLI only read them."""

from __future__ import annotations

from dataclasses import dataclass

from app.engine.logprobs import TokenLogprob
from app.engine.result import GenerationResult
from app.metrics.rounds import RoundRecord


@dataclass(frozen=True, slots=True)
class TokenEvent:
    """One generated token. `from_draft` marks a draft token the target accepted, and
    `from_suffix` one of those that the suffix index (the chat's own text) proposed;
    `logprob` is set when the reply asked for log probabilities."""

    token_id: int
    text: str
    from_draft: bool
    index: int
    from_suffix: bool = False
    logprob: TokenLogprob | None = None


@dataclass(frozen=True, slots=True)
class RoundEvent:
    record: RoundRecord


@dataclass(frozen=True, slots=True)
class NoticeEvent:
    """Something the user should see, e.g. speculation switched off because it did not pay."""

    message: str


@dataclass(frozen=True, slots=True)
class FinishEvent:
    """The last event of every generation, carrying the whole reply and its stats."""

    result: GenerationResult


Event = TokenEvent | RoundEvent | NoticeEvent | FinishEvent
