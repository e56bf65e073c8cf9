"""Past 16 tokens a suffix draft goes on only when nearly every token is kept: then one
verification of up to 64 rows gives more tokens a plain step than four of 17."""

from __future__ import annotations

import numpy as np

from app.engine.config import SamplingConfig
from app.engine.drafters import DraftRequest
from app.engine.suffix_drafter import LONG_DRAFT_KEEP_RATE, SuffixDrafter
from app.metrics.cost_model import MAX_FREE_DRAFT, MAX_GAMMA

# A passage of 100 distinct tokens, then its first 30 again: the match is 30 tokens long and the
# passage goes on for 70 more.
PASSAGE = list(range(1000, 1100))
HISTORY = PASSAGE + PASSAGE[:30]


def _propose(drafter: SuffixDrafter) -> list[int]:
    rng = np.random.default_rng(0)
    draft = drafter.propose(
        DraftRequest(HISTORY, 4, SamplingConfig(), rng, 0.0, free_limit=MAX_FREE_DRAFT)
    )
    return draft.tokens


def _taught(kept: int, drafted: int, times: int) -> SuffixDrafter:
    drafter = SuffixDrafter(min_survival=0.01)
    for _ in range(times):
        drafter.kept_by_match.add(30, kept, drafted)
    return drafter


def test_a_near_certain_match_drafts_past_sixteen_tokens_up_to_the_free_limit() -> None:
    drafter = _taught(16, 16, 40)  # every token of long matches kept
    assert drafter.kept_by_match.keep_rate(30) >= LONG_DRAFT_KEEP_RATE
    tokens = _propose(drafter)
    assert tokens == PASSAGE[30 : 30 + MAX_FREE_DRAFT]


def test_a_merely_good_match_stops_at_sixteen() -> None:
    drafter = _taught(15, 16, 40)  # one token in sixteen refused
    assert drafter.kept_by_match.keep_rate(30) < LONG_DRAFT_KEEP_RATE
    tokens = _propose(drafter)
    assert tokens == PASSAGE[30 : 30 + MAX_GAMMA]
