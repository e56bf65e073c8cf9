"""When γ auto pauses speculation and when it resumes, with the probes run in between.

Speculation pauses only when both the prediction and the measured rate lose to plain decoding
(a hybrid, whose prediction prices only its model: when the measured rate loses for a whole
window), confirmed against a freshly timed plain step. It resumes only when a cautious
prediction (acceptance lowered by its own uncertainty) wins by a margin, or a hybrid's probes in
a reply ran faster than plain by that margin: the gap between the two thresholds keeps a draft
near break-even from flipping. While paused, probes run on a schedule whose cost is bounded by
what the draft was lately worth (app/engine/gamma_estimates.py, `probe_interval`), each as long
as the draft may still turn out to pay, and a probe kept whole is followed at once by another.

The prices come from the γ controller (app/engine/adaptive.py) through `Prices`; this module
holds only the switch's state.
"""

from __future__ import annotations

import math
from collections import deque
from typing import Protocol

from app.engine.gamma_estimates import (
    LOSS_MARGIN,
    MIN_PROBE_INTERVAL,
    MIN_SECONDS,
    Acceptance,
    paid_well,
    probe_interval,
)
from app.metrics.rounds import RoundRecord

# A loss this large (measured below 0.75× plain) is no timing noise: two rounds of it suffice.
# Smaller losses must persist for a whole window of rounds.
_CLEAR_LOSS = 0.25
# A paused draft resumes only when its cautious prediction beats plain by this share. Together
# with the pause margin it leaves a band where neither switch fires.
_RESUME_MARGIN = 0.05
# Standard errors taken off each position's acceptance before the resume rule prices it: a
# handful of kept tokens does not make a draft that lost for long look like a winner.
_RESUME_Z = 1.0
# Per round, how much of what the draft was worth is forgotten: a draft that paid 2.5× still
# counts as having paid well about a hundred rounds later.
_WORTH_FADE = 1.0 - 1.0 / 128
# Switching off on a single bad round would let noise decide.
_PATIENCE = 2
# Standard errors added to each position's acceptance when a probe's length is chosen: a probe
# drafts as far as the draft may still turn out to pay, or it could never show that it pays
# (after a pause, recent acceptance favours γ 1, and one token kept of one predicts a loss).
# A draft that keeps nothing is soon probed at γ 1: four misses bring the first position to 0.22.
_PROBE_Z = 1.0


class Prices(Protocol):
    """What the γ controller predicts from its measurements."""

    def plain_rate(self) -> float:
        """Tokens per second of plain decoding; 0 before a plain step was timed."""
        ...

    def recent_best(self) -> tuple[int, float]:
        """The best γ and its rate from recent acceptance."""
        ...

    def best_of(self, acceptance: list[float]) -> tuple[int, float]:
        """The best γ and its rate for this per-position acceptance."""
        ...

    def probe_cost(self) -> float:
        """Plain steps a probe costs beyond those its expected tokens would have taken."""
        ...


class AutoOff:
    """Pauses and resumes speculation for one draft; counts and probes while paused."""

    def __init__(self, prices: Prices, *, window: int, max_gamma: int) -> None:
        self._prices = prices
        self._window = window
        self._max_gamma = max_gamma
        self._recent: deque[tuple[int, float]] = deque(maxlen=window)
        self._off = False
        self._losing_streak = 0
        # Set when a losing streak asks for a fresh plain step before pausing.
        self._confirming = False
        # What the probes since the last pause showed: the only acceptance the resume rule
        # trusts, since the figures from before the pause describe what made it lose.
        # Probes are few, so it forgets faster than the short horizon: a bad patch's failures
        # must not outweigh the successes of a draft that has come back.
        self._probes = Acceptance(decay=1.0 - 2.0 / window)
        # A hybrid's probes as run (tokens, seconds, their catch-up reading included) this
        # reply: its suffix tokens, which no prediction prices, show only there.
        self._probe_tokens = 0
        self._probe_seconds = 0.0
        self._probe_interval = MIN_PROBE_INTERVAL
        self._fruitless_probes = 0
        self._plain_since_probe = 0
        # Plain steps the last probe spent reading what the draft had not read.
        self._probe_reading = 0.0
        # The best the draft was lately worth (× plain), fading per round: sets how often a
        # paused draft is probed.
        self._worth = 0.0
        self._notices: deque[str] = deque()
        # A hybrid's prediction prices its model's tokens, not the suffix index's free ones: it
        # undervalues the hybrid, so only a lasting loss pauses one, and its worth is measured.
        self._prediction_partial = False

    @property
    def off(self) -> bool:
        return self._off

    @property
    def confirming(self) -> bool:
        """Whether the next round must be a plain step that confirms a pause."""
        return self._confirming

    @property
    def probe_due(self) -> bool:
        return self._off and self._plain_since_probe >= self._probe_interval

    @property
    def probe_interval(self) -> int:
        return self._probe_interval

    @property
    def prediction_partial(self) -> bool:
        return self._prediction_partial

    def probe_acceptance(self) -> list[float]:
        """Per position, the acceptance a probe's length is chosen for: optimistic, and no
        higher than the first position's. The first is judged by every probe, the others only
        behind it: after probes refused at once they keep their prior's optimism, which alone
        had a useless draft probed at γ 4-5 reply after reply."""
        bounds = self._probes.optimistic(self._max_gamma, _PROBE_Z)
        return [min(bound, bounds[0]) for bound in bounds]

    def take_notice(self) -> str | None:
        return self._notices.popleft() if self._notices else None

    def begin_reply(self) -> None:
        """The measured-rate window starts afresh. A paused draft is probed at once, since a
        new prompt may suit it, if it lately paid well or is a hybrid (whose suffix tokens,
        free to draft, show only in what probes run at); a draft model that did not pay keeps
        its schedule, or every short reply would pay for a probe its budget does not cover."""
        self._recent.clear()
        self._losing_streak = 0
        self._confirming = False
        self._clear_probe_rate()
        if self._off and (paid_well(self._worth) or self._prediction_partial):
            self._plain_since_probe = self._probe_interval

    def fade(self) -> None:
        self._worth *= _WORTH_FADE

    def note_mode(self, mode: str) -> None:
        self._prediction_partial = self._prediction_partial or mode == "hybrid"

    def measured_rate(self) -> float:
        emitted = sum(e for e, _ in self._recent)
        return emitted / max(math.fsum(s for _, s in self._recent), MIN_SECONDS)

    def on_plain_step(self, seconds: float) -> None:
        """After the controller timed a plain step."""
        if self._off:
            self._plain_since_probe += 1
        if self._confirming:
            self._confirming = False
            self._confirm_losing(1.0 / max(seconds, MIN_SECONDS))

    def on_empty_draft(self, emitted: int, seconds: float) -> None:
        """The draft ran and then proposed nothing (the p_min stop): its passes were wasted,
        which the measured rate must show."""
        if not self._off:
            self._recent.append((emitted, seconds))

    def on_probe(self, record: RoundRecord, judged: tuple[int, int] | None) -> bool:
        """A round run while paused; True when speculation resumed on it."""
        if judged is not None:
            self._probes.add(*judged)
        self._probe_tokens += record.emitted
        self._probe_seconds += record.draft_s + record.verify_s + record.draft_catchup_s
        self._plain_since_probe = 0
        plain_rate = self._prices.plain_rate()
        # The next probe will read about as much as this one did (a paused draft model reads
        # nothing between probes): that is part of its price.
        self._probe_reading = record.draft_catchup_s * plain_rate
        wins = plain_rate * (1.0 + _RESUME_MARGIN)
        gamma, cautious = self._prices.best_of(self._probes.cautious(self._max_gamma, _RESUME_Z))
        if cautious > wins:
            self._resume(
                f"at γ={gamma} the probes' acceptance predicts at least "
                f"{cautious / plain_rate:.2f}× plain decoding"
            )
            return True
        # A hybrid is paused on its measured rate, so it resumes on it: its prediction prices
        # only the model's tokens, and would keep it paused where the suffix index pays.
        probed = self._probe_tokens / max(self._probe_seconds, MIN_SECONDS)
        if self._prediction_partial and probed > wins:
            self._resume(f"this reply's probes ran at {probed / plain_rate:.2f}× plain decoding")
            return True
        kept_none = judged is not None and judged[0] > 0 and judged[1] == 0
        self._fruitless_probes = self._fruitless_probes + 1 if kept_none else 0
        # A probe of two tokens or more kept whole is evidence the resume rule cannot yet trust
        # alone; the next round probes again, longer, while the draft has just read the context
        # (nothing to read first), so a draft that is back resumes within a few rounds, not a
        # few hundred. One token kept is too common a luck: a draft right 15 % of the time,
        # probed again after each, kept two in a row and resumed at a loss.
        kept_all = judged is not None and 2 <= judged[0] == judged[1]
        self._probe_interval = 0 if kept_all else self._next_probe_interval()
        return False

    def on_round(self, record: RoundRecord, long_rate: float) -> None:
        """A speculative round run while on; `long_rate` is the long-run prediction's best."""
        self._recent.append((record.emitted, record.draft_s + record.verify_s))
        if self._prediction_partial:
            long_rate = max(long_rate, self.measured_rate())
        plain_rate = self._prices.plain_rate()
        self._worth = max(self._worth, long_rate / (plain_rate or math.inf))
        self._check_losing(plain_rate)

    def _resume(self, why: str) -> None:
        self._recent.clear()
        self._losing_streak = 0
        self._off = False
        self._notices.append(f"speculation resumed: {why}")

    def _clear_probe_rate(self) -> None:
        self._probe_tokens = 0
        self._probe_seconds = 0.0

    def _next_probe_interval(self) -> int:
        return probe_interval(
            self._prices.probe_cost() + self._probe_reading, self._worth, self._fruitless_probes
        )

    def _check_losing(self, plain_rate: float) -> None:
        verdict = self._losing(plain_rate)
        if verdict is None:
            # A leaky count, not a strict streak: near break-even the measured rate's noise
            # lets one round in a dozen look fine, which must not restart the count each time.
            self._losing_streak = max(self._losing_streak - 1, 0)
            return
        self._losing_streak += 1
        _, measured = verdict
        clear = not self._prediction_partial and measured < plain_rate * (1.0 - _CLEAR_LOSS)
        if self._losing_streak >= (_PATIENCE if clear else self._window):
            self._losing_streak = 0
            self._confirming = True

    def _losing(self, plain_rate: float) -> tuple[float, float] | None:
        """(predicted, measured) speculative rates when both lose to plain, else None."""
        _, predicted = self._prices.recent_best()
        measured = self.measured_rate()
        if predicted < plain_rate and measured < plain_rate * (1.0 - LOSS_MARGIN):
            return predicted, measured
        return None

    def _confirm_losing(self, fresh_plain_rate: float) -> None:
        # Judged against the plain step just timed, not the running mean: if the machine got
        # slower, speculation's recent rounds slowed too, and pausing would compare today's
        # speculation with yesterday's plain speed.
        verdict = self._losing(fresh_plain_rate)
        if verdict is None:
            return
        predicted, measured = verdict
        self._off = True
        self._probes.clear()
        self._clear_probe_rate()
        self._plain_since_probe = 0
        self._fruitless_probes = 0
        self._probe_interval = self._next_probe_interval()
        self._notices.append(
            f"speculation paused: predicted {predicted / fresh_plain_rate:.2f}× and measured "
            f"{measured / fresh_plain_rate:.2f}× plain decoding over the last "
            f"{len(self._recent)} rounds; re-checking after {self._probe_interval} rounds"
        )
