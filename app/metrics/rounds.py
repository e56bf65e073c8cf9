"""The measured round: what every figure (stats, γ auto, the Insight panel, the bench) is
computed from. A leaf module, so the engine that records rounds and the arithmetic that reads
them both import it without importing each other."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

DraftMode = Literal["plain", "draft", "ngram"]


@dataclass(frozen=True, slots=True)
class RoundRecord:
    """One target verification pass and the draft work that fed it.

    gamma: the draft length asked for this round (0 for a plain step); where γ auto's
    confidence stop ended the draft, the length it ran to (the ask was only a ceiling).
    drafted: draft tokens sent to verification (0 for a plain step; fewer than gamma when the
    draft stopped early, e.g. the p_min stop).
    accepted: how many of them the target kept, always a prefix of the draft.
    emitted: tokens the round added to the reply, accepted + 1 unless generation stopped early
    (end of sequence inside the accepted run, or the token limit).
    draft_steps: draft forward passes paid for this round (0 for prompt lookup).
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

    @property
    def speculative(self) -> bool:
        """True when the target verified draft tokens; False for a plain step."""
        return self.drafted > 0
