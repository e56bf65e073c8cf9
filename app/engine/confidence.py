"""γ auto's confidence stop: the draft stops proposing once the tokens it has proposed are
unlikely to all survive, judged by how sure the draft was of each.

A fixed γ pays the same draft passes and verify rows whether the text is easy or not, and γ auto
can only learn a level per reply, a few rounds late. The draft's own distribution says more, a
token at a time: where its two most likely tokens are close, the target often picks the other
(on the demo pair, the 4 % of positions where the draft's top two lie within 0.02 of each other
hold three quarters of its misses). So each proposed token carries its confidence margin (top
probability minus the runner-up's), a table learns how often tokens of each margin are kept, and
the draft goes on while the chance that every token proposed so far survives is worth the next
pass. The rule reads the draft's distribution only, so it changes how many tokens are proposed,
never which token the target emits: the output stays exact.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from app.metrics.measured import judged_positions

# Margin bins: near-ties are where the draft and the target part, so the bins are finest there.
_MARGIN_EDGES = (0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5)
# Pseudo-trials per bin at the draft's pooled acceptance, so an empty bin prices tokens at the
# draft's average and a few trials move it.
_PRIOR_TRIALS = 2.0

KeepDrafting = Callable[[float], bool]
"""Told each proposed token's margin, says whether the draft should propose another."""


def margin_bin(margin: float) -> int:
    return bisect.bisect_right(_MARGIN_EDGES, margin)


@dataclass
class KeptByMargin:
    """Exponentially forgotten counts of judged draft tokens and kept ones, by margin bin.

    Only judged tokens count: after the first rejection the target never judged the rest.
    """

    decay: float
    tried: list[float] = field(default_factory=lambda: [0.0] * (len(_MARGIN_EDGES) + 1))
    kept: list[float] = field(default_factory=lambda: [0.0] * (len(_MARGIN_EDGES) + 1))

    def add(self, margins: Sequence[float], accepted: int) -> None:
        judged = judged_positions(len(margins), accepted)
        if judged == 0:
            return
        self.tried = [t * self.decay for t in self.tried]
        self.kept = [k * self.decay for k in self.kept]
        for i, margin in enumerate(margins[:judged]):
            b = margin_bin(margin)
            self.tried[b] += 1.0
            if i < accepted:
                self.kept[b] += 1.0

    def survival(self, average: float) -> list[float]:
        """Each bin's chance that a token is kept, pulled towards `average` where trials are few."""
        return [
            (k + _PRIOR_TRIALS * average) / (t + _PRIOR_TRIALS)
            for t, k in zip(self.tried, self.kept, strict=True)
        ]


@dataclass
class SurvivalStop:
    """One round's stop rule: go on while the chance that all tokens so far are kept is at
    least `threshold`. Calling it with a token's margin updates that chance."""

    kept_by_bin: list[float]
    threshold: float
    alive: float = 1.0

    def __call__(self, margin: float) -> bool:
        self.alive *= self.kept_by_bin[margin_bin(margin)]
        return self.alive >= self.threshold


def survival_threshold(
    next_token_cost_s: float, rate_tokens_per_s: float, next_kept: float
) -> float:
    """The chance of survival below which one more draft token does not pay for itself.

    One more token costs a draft pass and a verify row (`next_token_cost_s`) and adds a token
    only if every token before it survives and it is kept itself: worth it while
    alive · next_kept ≥ cost · rate, the tokens the round's time would make at the rate
    speculation runs at.
    """
    if next_kept <= 0.0:
        return math.inf
    return next_token_cost_s * rate_tokens_per_s / next_kept
