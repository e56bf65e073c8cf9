"""The measured round: what every figure (stats, γ auto, the Insight panel, the bench) is
computed from. A leaf module, so the engine that records rounds and the arithmetic that reads
them both import it without importing each other."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

# plain: no drafting; draft: a draft model; ngram: prompt lookup; suffix: the suffix index of
# the chat and past chats; hybrid: the suffix index first, a draft model after it.
DraftMode = Literal["plain", "draft", "ngram", "suffix", "hybrid"]
DraftSource = Literal["plain", "model", "suffix", "both"]


@dataclass(frozen=True, slots=True)
class RoundRecord:
    """One target verification pass and the draft work that fed it.

    gamma: the draft length asked for this round (0 for a plain step); where γ auto's
    confidence stop ended the draft, the length it ran to (the ask was only a ceiling), never
    more than the ask: free suffix-index tokens that drafted past it do not count.
    drafted: draft tokens sent to verification (0 for a plain step; fewer than gamma when the
    draft stopped early, e.g. the p_min stop).
    accepted: how many of them the target kept, always a prefix of the draft.
    emitted: tokens the round added to the reply, accepted + 1 unless generation stopped early
    (end of sequence inside the accepted run, or the token limit).
    draft_steps: draft forward passes paid for this round (0 for the suffix index and for
    prompt lookup).
    draft_catchup_s: time the draft spent reading, in one batch, tokens accepted while it sat
    idle (plain steps); kept out of draft_s so it is never billed to c_draft or to a probe.
    suffix_drafted: how many of the drafted tokens, the first ones, came from the suffix index
    rather than a draft model (all of them for the suffix drafter, none for a draft model).
    overhead_s: the round's wall time outside the draft passes, the target pass and the
    catch-up: choosing γ, the acceptance rule, sampling, copies, decoding text, events.
    tree_nodes: for a token tree, the draft tokens the target verified, its main branch (the
    drafted tokens) and the alternatives beside it; 0 for a linear draft.
    tree_bonus: of the accepted tokens, how many the main branch alone would not have kept.
    depth: tokens in the conversation when the round began, the context its passes attend to
    (a pass costs more the deeper it is: app/engine/depth_cost.py).
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
    suffix_drafted: int = 0
    overhead_s: float = 0.0
    tree_nodes: int = 0
    tree_bonus: int = 0
    depth: int = 0

    @property
    def source(self) -> DraftSource:
        """What drafted this round's tokens."""
        if self.drafted == 0:
            return "plain"
        if self.suffix_drafted == 0:
            return "model"
        return "suffix" if self.suffix_drafted == self.drafted else "both"

    @property
    def accepted_from_suffix(self) -> int:
        """Kept tokens the suffix index proposed: its tokens come first in the draft."""
        return min(self.accepted, self.suffix_drafted)

    @property
    def model_verdict(self) -> tuple[int, int] | None:
        """The draft model's tokens the target judged and how many of them it kept; None when
        none was judged. They follow the suffix index's tokens, so they were judged only if
        every suffix token was kept."""
        model_drafted = self.drafted - self.suffix_drafted
        if model_drafted <= 0 or self.accepted < self.suffix_drafted:
            return None
        return model_drafted, self.accepted - self.suffix_drafted

    @property
    def rejected_at(self) -> int | None:
        """1-based draft position the target refused, or None when all were kept."""
        return self.accepted + 1 if self.accepted < self.drafted else None

    @property
    def speculative(self) -> bool:
        """True when the target verified draft tokens; False for a plain step."""
        return self.drafted > 0
