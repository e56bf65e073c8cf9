"""Small immutable events the engine yields while generating; the UI and CLI only read them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from app.engine.config import DraftMode

if TYPE_CHECKING:
    # Only for annotations: app.engine.result itself imports this module.
    from app.engine.result import GenerationResult

FinishReason = Literal["stop", "length", "context", "cancelled"]


@dataclass(frozen=True, slots=True)
class TokenEvent:
    """One generated token. `from_draft` marks a draft token the target accepted."""

    token_id: int
    text: str
    from_draft: bool
    index: int


@dataclass(frozen=True, slots=True)
class RoundRecord:
    """One target verification pass and the draft work that fed it.

    drafted: draft tokens sent to verification (0 for a plain step).
    accepted: how many of them the target kept, always a prefix of the draft.
    emitted: tokens the round added to the reply, accepted + 1 unless generation stopped early
    (end of sequence inside the accepted run, or the token limit).
    draft_catchup_s: time the draft spent reading, in one batch, tokens accepted while it sat
    idle (plain steps); kept out of draft_s so it is never billed to c_draft or to a probe.
    """

    index: int
    mode: DraftMode
    gamma: int
    drafted: int
    accepted: int
    emitted: int
    draft_s: float
    verify_s: float
    draft_steps: int
    draft_catchup_s: float = 0.0

    @property
    def rejected_at(self) -> int | None:
        """1-based draft position the target refused, or None when all were kept."""
        return self.accepted + 1 if self.accepted < self.drafted else None


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
