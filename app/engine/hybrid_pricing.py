"""What a hybrid round's draft costs and yields, priced from the rounds so far.

Verification seconds by rows and draft seconds by passes are γ auto's own estimates (VerifyCurve,
concave on a CPU; DraftCost); the draft model's keep rate fades as the hybrid's other figures
do (app/engine/hybrid_rates.py). The hybrid drafter (app/engine/hybrid_drafter.py) weighs its
three drafts, and its readings, by these prices.
"""

from __future__ import annotations

from app.engine.gamma_estimates import MIN_SECONDS, DraftCost, VerifyCurve
from app.engine.hybrid_rates import FADE, FadingRate, expected_kept
from app.metrics.rounds import RoundRecord

_HORIZON = 32


class RoundPricing:
    """Expected tokens per second of a draft, from measured verify and draft costs."""

    def __init__(self) -> None:
        self.verify = VerifyCurve(horizon=_HORIZON, fade=FADE)
        self.draft = DraftCost(horizon=_HORIZON, fade=FADE)
        self.model_keep = FadingRate()

    @property
    def measured(self) -> bool:
        return bool(self.verify.points()) and self.draft.measured

    def at_depth(self, depth: int) -> None:
        """Price the next drafts `depth` tokens into the conversation."""
        self.verify.depth = self.draft.depth = depth

    def learn(self, record: RoundRecord) -> None:
        self.verify.add(record.drafted + 1, max(record.verify_s, MIN_SECONDS), record.depth)
        if record.drafted == 0:
            return
        if (verdict := record.model_verdict) is not None:
            judged, kept = verdict
            self.model_keep.add(kept, min(judged, kept + 1))
        if record.draft_steps:
            self.draft.add(record.draft_steps, max(record.draft_s, MIN_SECONDS), record.depth)

    def rate(
        self,
        n_suffix: int,
        suffix_kept: float,
        n_model: int,
        reach: float,
    ) -> float:
        """Expected tokens per second of a draft of n_suffix suffix tokens then n_model model
        tokens, the model's tokens judged only when every suffix token before them is kept
        (chance `reach`), each kept at the model's measured rate."""
        model_kept = reach * expected_kept(self.model_keep.value, n_model)
        verify = self.verify.predict(n_suffix + n_model + 1) if self.measured else None
        if verify is None:
            # Nothing measured yet: tokens that cost no pass win on expected tokens alone.
            return 1.0 + suffix_kept + model_kept - 0.5 * n_model
        passes = n_model + (1 if n_suffix and n_model else 0)  # the model reads the suffix
        return (1.0 + suffix_kept + model_kept) / (verify + self._drafting(passes))

    def best_case_rate(self, n_model: int, pass_floor_s: float) -> float | None:
        """Tokens per second of n_model model tokens, every one kept, a draft pass priced as
        measured or, before any is, at pass_floor_s; None before any verification is timed."""
        if not self.verify.points():
            return None
        verify = self.verify.predict(n_model + 1)
        return (1.0 + n_model) / (verify + self._drafting(n_model, pass_floor_s))

    def _drafting(self, passes: int, pass_floor_s: float = 0.0) -> float:
        """Seconds of `passes` draft passes, as measured, or at pass_floor_s each before."""
        if not passes:
            return 0.0
        if not self.draft.measured:
            return passes * pass_floor_s
        return self.draft.predict_up_to(passes)[-1]
