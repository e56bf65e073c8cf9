"""The finished reply: text, ids, why it stopped, and its stats."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from app.metrics.rounds import DraftMode, RoundRecord
from app.metrics.summary import GenerationStats

FinishReason = Literal["stop", "length", "context", "cancelled"]


@dataclass(frozen=True, slots=True)
class GenerationResult:
    text: str
    token_ids: list[int]
    finish_reason: FinishReason
    mode: DraftMode
    stats: GenerationStats
    rounds: tuple[RoundRecord, ...]
    # Tokens the target accepted from the draft, by reply index, for highlighting.
    draft_token_mask: tuple[bool, ...]
    # One-line messages raised during the reply, e.g. adaptive speculation pausing itself.
    notices: tuple[str, ...] = ()
    # Seconds of one plain target step as the engine measured it when the reply ended: the
    # unit c_draft and c_verify are expressed in (None if no plain step was ever timed).
    plain_step_s: float | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "text": self.text,
            "token_ids": self.token_ids,
            "finish_reason": self.finish_reason,
            "mode": self.mode,
            "stats": self.stats.to_dict(),
        }
        if self.notices:
            out["notices"] = list(self.notices)
        return out
