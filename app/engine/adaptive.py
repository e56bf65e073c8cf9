"""Adaptive draft length, fed only by the timings of rounds already run.

The controller applies the cost model (app/metrics/cost_model.py) to live measurements:
per-position conditional acceptance (so a draft that slips more at later positions is priced as
it is) at the level of the text at hand (how often the draft misses on this reply against what
the long-run figures expect), seconds per draft step, and verify seconds by the number of rows
checked. Each round it picks the γ with the most expected tokens per second and compares that
with plain decoding's one token per plain step; when speculation pauses and resumes is decided
by app/engine/auto_off.py on these prices. One controller lives per draft for the whole session,
so a reply starts from what earlier replies learned. For a draft model the chosen γ is a
ceiling: the confidence stop (app/engine/confidence.py) ends each draft where the draft's own
doubts say its tokens stop paying.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from app.engine.auto_off import AutoOff
from app.engine.confidence import KeepDrafting, KeptByMargin, SurvivalStop, survival_threshold
from app.engine.gamma_estimates import (
    MIN_SECONDS,
    Acceptance,
    DraftCost,
    FadedRate,
    TextDifficulty,
    VerifyCurve,
    fastest_length,
    strays,
)
from app.engine.gap_reader import MIN_TIMED_GAP, ReadingSpeed, reading_to_earn
from app.metrics.cost_model import MAX_GAMMA, expected_tokens_by_length, expected_tokens_by_position
from app.metrics.measured import judged_positions
from app.metrics.rounds import RoundRecord

# How far (in standard errors) recent acceptance must stray from the long-run figure before the
# long-run figure is judged to describe text or a draft that no longer applies.
_CHANGE_Z = 4.0
# Draft one position past the best γ this often, so deeper positions keep being measured and γ
# can grow when acceptance does.
_EXPLORE_EVERY = 6
# The first rounds a draft ever runs stay at the initial γ while the draft keeps at least half
# of its tokens, so that γ is first chosen from a few rounds of acceptance, not from one round.
_WARMUP_ROUNDS = 3
# Probes run the γ that their own optimistic acceptance favours (AutoOff.probe_acceptance), up
# to this: a probe shorter than the γ where a draft pays cannot show that it pays (a draft
# costing half a plain step per pass pays only past γ 3). Their cost is bounded by the probe
# schedule's budget, which prices the probe's γ.
_MAX_PROBE_GAMMA = 8
# The text difficulty's prior, in expected misses: about three expected misses of evidence
# (some 100 draft tokens of a draft that misses one in 30) weigh as much as the long-run level.
_DIFFICULTY_PRIOR = 3.0
# Per round, how much of the reply's evidence on its difficulty is kept: misses come in bursts,
# so the last dozen or so rounds tell more about the next one than the reply's first rounds.
_DIFFICULTY_FADE = 0.93


class GammaController:
    """Chooses each round's draft length; 0 means run a plain target step instead."""

    def __init__(
        self,
        *,
        max_gamma: int = MAX_GAMMA,
        initial_gamma: int = 4,
        window: int = 16,
        confidence_stop: bool = False,
    ) -> None:
        if max_gamma < 1:
            raise ValueError(f"max_gamma must be >= 1, got {max_gamma}")
        if not 1 <= initial_gamma <= max_gamma:
            raise ValueError(f"initial_gamma must lie in 1..{max_gamma}, got {initial_gamma}")
        if window < 2:
            raise ValueError(f"window must be >= 2, got {window}")
        self._max_gamma = max_gamma
        self._initial_gamma = initial_gamma
        self._window = window
        # Plain time drifts as the context grows, so it is re-measured now and then while on.
        self._remeasure_every = 96
        # Two horizons: the short one notices a change, the long one keeps γ steady when the
        # curve near its peak is flat and the per-round acceptance noise is not. The long one
        # stays short enough (48 rounds) that a reply of a few dozen tokens is priced mostly by
        # its own text, not by the previous prompts'.
        self._short = Acceptance(decay=1.0 - 1.0 / window)
        self._long = Acceptance(decay=1.0 - 1.0 / (3 * window))
        # The level of the reply at hand, against the long-run figures' shape.
        self._difficulty = TextDifficulty(prior=_DIFFICULTY_PRIOR, fade=_DIFFICULTY_FADE)
        # How often draft tokens are kept by how sure the draft was of them.
        self._kept_by_margin = KeptByMargin(decay=1.0 - 1.0 / (8 * window))
        # Whether the draft reports how sure it is of each token, so rounds can end by the
        # confidence stop with γ as their ceiling.
        self._confidence_stop = confidence_stop
        self._round_stop: SurvivalStop | None = None
        # What speculation's rounds have delivered lately, the rate the confidence stop prices a
        # token against (see _stop_rule).
        self._spec_rate = FadedRate(fade=1.0 - 1.0 / window)
        # How fast the draft model reads text it lacks (a new prompt), for reading_pays.
        self._read_speed = ReadingSpeed()
        self._verify = VerifyCurve(horizon=window, fade=1.0 - 1.0 / (8 * window))
        self._draft = DraftCost(horizon=window, fade=1.0 - 1.0 / (8 * window))
        self._spec_rounds = 0
        self._warming_up = True
        self._since_plain = 0
        self._auto_off = AutoOff(self, window=window, max_gamma=max_gamma)

    @property
    def speculation_off(self) -> bool:
        return self._auto_off.off

    @property
    def plain_step_s(self) -> float | None:
        return self._verify.mean_at(1)

    @property
    def probe_interval(self) -> int:
        """Plain steps between probes while paused."""
        return self._auto_off.probe_interval

    def take_notice(self) -> str | None:
        return self._auto_off.take_notice()

    def begin_reply(self, depth: int = 0) -> None:
        """Start a new reply, `depth` tokens into its conversation, from what earlier replies
        taught: acceptance and costs carry over (no warm-up once the draft has run; costs priced
        at the new depth), the measured-rate window does not. A paused draft is probed at once,
        since a new prompt may suit it."""
        self._verify.depth = self._draft.depth = depth
        self._difficulty.clear()
        self._auto_off.begin_reply()

    def note_plain_step(self, seconds: float, depth: int = 0) -> None:
        """A plain step timed `depth` tokens into a conversation before this controller existed
        (another draft's reply): the unit needs no fresh measurement."""
        if self.plain_step_s is None:
            self._verify.add(1, max(seconds, MIN_SECONDS), depth)

    def next_gamma(self) -> int:
        self._round_stop = None
        if self.plain_step_s is None:
            return 0
        if self._auto_off.off:
            return self._probe_gamma() if self._auto_off.probe_due else 0
        if self._warming_up:
            return self._initial_gamma
        if self._auto_off.confirming or self._since_plain >= self._remeasure_every:
            return 0
        gamma, rate = self.best_of(self._reply_acceptance())
        if self._confidence_stop and self._draft.measured:
            # The confidence stop decides where this round's draft ends; γ is only its ceiling.
            self._round_stop = self._stop_rule(rate)
            return self._max_gamma
        if self._spec_rounds % _EXPLORE_EVERY == _EXPLORE_EVERY - 1:
            return min(gamma + 1, self._max_gamma)
        return gamma

    def draft_stop(self) -> KeepDrafting | None:
        """The rule that ends the round the last next_gamma() chose, once its draft tokens are
        unlikely to all survive (app/engine/confidence.py); None for a round of fixed length."""
        return self._round_stop

    def _stop_rule(self, predicted_rate: float) -> SurvivalStop:
        """Priced at the rate speculation's rounds delivered lately: one more token must beat
        what its time makes at that rate. Its cost is a pass and a row, averaged over lengths.

        Maximising tokens per second over rounds, a token pays iff it adds more than the best
        rate times its cost; the rate delivered under the current rule stands in for the best,
        and each round's rule then improves on the last (Dinkelbach's iteration for a ratio).
        The predicted rate of the best fixed length is only the fallback before a round has
        run: it reads acceptance measured on drafts this rule already ended before their
        doubtful tokens, so it runs high, and a rate set too high ends drafts too early (on
        the demo pair 62 of the 90 drafts that ended short of the ceiling were kept whole,
        some of them ended by the reply's token limit).
        """
        rate = self._spec_rate.rate or predicted_rate
        average, _ = self._long.pooled()
        cost = (self._round_seconds(self._max_gamma) - self._round_seconds(1)) / max(
            self._max_gamma - 1, 1
        )
        threshold = survival_threshold(cost, rate, average)
        return SurvivalStop(self._kept_by_margin.survival(average), threshold)

    def observe(self, record: RoundRecord, margins: Sequence[float] = ()) -> None:
        """Learn from a finished round; `margins` are its draft tokens' confidence margins,
        when the draft reported them."""
        if len(margins) == record.drafted:
            self._kept_by_margin.add(margins, record.accepted)
        self._auto_off.fade()
        if record.drafted == 0:
            self._verify.add(1, max(record.verify_s, MIN_SECONDS), record.depth)
            self._since_plain = 0
            self._auto_off.on_plain_step(record.verify_s)
            if record.draft_steps:
                self._auto_off.on_empty_draft(record.emitted, record.draft_s + record.verify_s)
            return
        self._spec_rounds += 1
        self._since_plain += 1
        # Rounds with suffix tokens stay out of the stop's rate: their tokens cost no pass, and
        # a run of them (an answer given again, 12x plain) would end the model's drafts early.
        if not self._auto_off.off and record.suffix_drafted == 0:
            self._spec_rate.add(
                record.emitted, record.draft_s + record.verify_s + record.overhead_s
            )
        self._auto_off.note_mode(record.mode)
        # A hybrid's suffix tokens say nothing of how far its model's tokens are kept: counted,
        # rounds of a weak match would shorten the model's drafts, a long one lengthen them.
        judged = (
            record.model_verdict if record.mode == "hybrid" else (record.drafted, record.accepted)
        )
        losing = judged is not None and 2 * judged[1] < judged[0]
        if losing or self._spec_rounds >= _WARMUP_ROUNDS:
            self._warming_up = False
        # Per pass the draft ran: a draft cut short by p_min still paid for the pass that
        # stopped it. A drafter without passes (the suffix index) is priced per proposed token.
        # A hybrid's suffix tokens cost no pass and are not its model's to price.
        steps = max(record.draft_steps, 0 if record.mode == "hybrid" else record.drafted)
        if steps:
            self._draft.add(steps, max(record.draft_s, 0.0), record.depth)
        self._verify.add(record.drafted + 1, max(record.verify_s, MIN_SECONDS), record.depth)
        if judged is not None:
            if not self._auto_off.off:
                self._observe_difficulty(*judged)
            self._add_acceptance(*judged)
        if self._auto_off.off:
            if self._auto_off.on_probe(record, judged):
                # The regime before the pause no longer holds: neither its acceptance nor the
                # rate its rounds delivered, which priced every reading of a prompt as a loss
                # (the demo's Q4_1 draft, resumed at 1.6x plain, was left unread the next
                # three replies, 31 prompt tokens each).
                self._long.copy_from(self._short)
                self._spec_rate.clear()
            return
        _, long_rate = self._best(self._long)
        self._auto_off.on_round(record, long_rate)

    def note_read(self, tokens: int, seconds: float) -> None:
        """The draft model read `tokens` it lacked in `seconds` (a prompt, or a catch-up)."""
        if tokens >= MIN_TIMED_GAP:
            self._read_speed.add(seconds, tokens)

    def reading_pays(self, unread: int, tokens_left: int) -> bool:
        """Whether a draft model that lacks `unread` tokens of the conversation should read
        them to draft the rest of this reply, at most `tokens_left` tokens.

        Reading costs what it took lately per token; drafting saves at most the difference
        between a plain step and a token at speculation's recent rate on every token left.
        A long prompt with a short reply (a one-line summary of a page) does not pay: on the
        demo pair the draft reads 400 tokens in 1.3 s, and 64 tokens drafted save 0.8 s. A
        text (a long gap) must save more than its reading (gap_reader.reading_to_earn).
        Unmeasured, reading is assumed to pay.
        """
        plain_s, spec_rate = self.plain_step_s, self._spec_rate.rate
        if not self._read_speed.known or plain_s is None or spec_rate is None:
            return True
        saved = tokens_left * (plain_s - 1.0 / spec_rate)
        return saved >= reading_to_earn(unread, self._read_speed.seconds_for(unread))

    def predicted_rate(self, gamma: int) -> float | None:
        """Expected tokens per second at this γ from the long-run figures, None before data."""
        if self.plain_step_s is None or not self._draft.measured:
            return None
        return self._rate(self._long.conditional(gamma), gamma)

    # What app/engine/auto_off.py prices its switch with.

    def plain_rate(self) -> float:
        plain = self.plain_step_s
        # Engines are told to run a plain step first; without one the comparison is moot.
        return 0.0 if plain is None else 1.0 / max(plain, MIN_SECONDS)

    def recent_best(self) -> tuple[int, float]:
        return self._best(self._short)

    def best_of(self, acceptance: list[float]) -> tuple[int, float]:
        """The γ in 1..max_gamma with the most expected tokens per second (the shorter on a
        tie), and that rate. acceptance[i] is position i + 1's conditional acceptance."""
        return fastest_length(
            expected_tokens_by_length(acceptance[: self._max_gamma]),
            self._draft.predict_up_to(self._max_gamma),
            self._verify.predict_up_to(self._max_gamma + 1),
        )

    def probe_cost(self) -> float:
        plain = self.plain_step_s or MIN_SECONDS
        gamma = self._probe_gamma()
        tokens = expected_tokens_by_position(self._short.conditional(gamma))
        return self._round_seconds(gamma) / plain - tokens

    def _probe_gamma(self) -> int:
        gamma, _ = self.best_of(self._auto_off.probe_acceptance())
        return max(1, min(gamma, _MAX_PROBE_GAMMA, self._max_gamma))

    def _reply_acceptance(self) -> list[float]:
        """Each position's acceptance for the next round: the long-run shape at the level of
        the reply's own text."""
        return self._difficulty.scale(self._long.conditional(self._max_gamma))

    def _observe_difficulty(self, drafted: int, accepted: int) -> None:
        # Priced by the long-run figures before this round joins them.
        long_run = self._long.conditional(drafted)
        judged = judged_positions(drafted, accepted)
        expected = math.fsum(1.0 - a for a in long_run[:judged])
        self._difficulty.add(accepted < drafted, expected)

    def _add_acceptance(self, drafted: int, accepted: int) -> None:
        self._short.add(drafted, accepted)
        self._long.add(drafted, accepted)
        if self._changed(*self._short.pooled(), self._long.pooled()[0]) or self._changed(
            *self._short.first(), self._long.first()[0]
        ):
            self._long.copy_from(self._short)

    def _changed(self, short_p: float, short_n: float, long_p: float) -> bool:
        """Whether recent acceptance strays from the long-run figure by more than chance.

        Pooled acceptance alone notices a collapse late: a good round adds γ trials, a bad one
        a single trial. The first position is judged once per round, so it is tested too. The
        short horizon's trials tend to `window` per position from below.
        """
        return strays(short_p, short_n, long_p, min_trials=self._window / 2, z=_CHANGE_Z)

    def _round_seconds(self, gamma: int) -> float:
        return self._draft.predict_up_to(gamma)[gamma - 1] + self._verify.predict(gamma + 1)

    def _rate(self, acceptance: list[float], gamma: int) -> float:
        tokens = expected_tokens_by_position(acceptance)
        return tokens / max(self._round_seconds(gamma), MIN_SECONDS)

    def _best(self, acceptance: Acceptance) -> tuple[int, float]:
        return self.best_of(acceptance.conditional(self._max_gamma))
