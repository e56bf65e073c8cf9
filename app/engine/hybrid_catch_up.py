"""When the hybrid's draft model reads the tokens it lacks (app/engine/hybrid_drafter.py).

The draft model reads the conversation only when that pays. Reading a long prompt can cost a
small quantized draft more than the target (the demo's Q4_1 draft reads a batch at a third of
the F32 target's speed on a CPU), so a gap is read only if the time the model's rounds save,
over the span they usually hold the rounds (at most a 128-token reply, and never more than the
reply's token budget left: bought 48 tokens into the bench's "rename" reply, which ended at 60,
a reading took a third of its time), outweighs reading it. When the suffix index does as well
alone (a question asked again, a text revised, code pasted to be returned with a change), the
model is not read, and the reply starts as soon as the target has read the prompt. What the
rounds deliver without the model is measured on this reply's rounds that ran while it was far
behind, out of play (the suffix index where it proposes, plain steps elsewhere), never on suffix
rounds chosen over a model that had read or nearly had: those are only the suffix index's best.
Another reply's rounds say nothing of this one's: a chat question's plain steps would have a
pasted text that the reply copies read in vain. So a long prompt (over 96 tokens: more than a
question) is never read before this reply's first rounds: they run without the model (a few
tokens at worst at the slower rate), then the reading is weighed against what they delivered,
once they have run (faded, about the last 30 rounds) for as long as the reading would take (as
in ski rental: a reply's opening rounds say little of its body), and must then save 1.5 times
its cost, since the reply may end before its token budget. Where reading speed is not
known yet, a first 64-token part of a long gap is read to time it when the weighing wants the
model; the rest is weighed again at that speed. A prompt that ends as an earlier one did (the
suffix index has seen its last 16 tokens: a question asked again) is not read before the first
round, which weighs the suffix index's proposal against the model first.

The draft model's own rate is measured only on the rounds it drafts, so a few short first
rounds (γ auto still finding its lengths) must not shut it out: a short gap is read until that
rate stands on about seven rounds, or, while the target keeps nearly all of its few tokens a
round, for its first 32 rounds (γ auto's stop is still learning which tokens survive). Past a
long gap, a model not yet measured (one that has never drafted included) is read only within
ski rental, and only if, keeping every token it drafts, it could earn the reading back (a pass
not yet timed priced at what reading a token costs: a pass of its own costs no less). A model
left out for a while, with nothing from the suffix index and little to read, drafts a round
anyway, less often each time it loses.
Against plain steps the model's rate counts as winning within timing noise (γ auto's
LOSS_MARGIN): whether a round drafts at all is γ auto's call, and a 3 % dip in its measured
rate must not hand its rounds to single plain steps; it must still earn back its reading
(about 5 ms a token for the demo's Q4_1 draft, a third of a pass). At a γ set by hand the model
is never set aside: the choice is only between sources, and γ runs as set.
"""

from __future__ import annotations

from app.engine.gamma_estimates import LOSS_MARGIN
from app.engine.gap_reader import EAGER_READ, MIN_TIMED_GAP, GapReader, reading_to_earn
from app.engine.hybrid_pricing import RoundPricing
from app.engine.hybrid_rates import FadingRounds, FadingRuns
from app.metrics.rounds import RoundRecord

# Tokens over which a catch-up must pay for itself, at most: about one reply (the bench's and
# the server's default budget is 128). Where the suffix index keeps taking rounds back (a text
# being revised), the span is the model's usual run of rounds in a row, measured.
PAYBACK_TOKENS = 128
# Rounds (faded) the draft model drafts alone before its measured rate can keep it out of a
# short gap: about seven, while γ auto's first rounds run short drafts.
_TRUSTED_MODEL_ROUNDS = 6.0
# A draft model whose tokens the target keeps this often, but whose rounds deliver fewer tokens
# than this, is being cut short by γ auto's confidence stop, still learning which of its
# tokens survive (a cold start: one bad first round makes it doubt every token). Its measured
# rate then says what its caution costs, not what it is worth, and rounds of one kept token run
# at about plain speed: so it keeps drafting short gaps for its first rounds, by when γ auto has
# judged a few dozen of its tokens. Through a fresh server it had been set aside after seven
# one-token rounds, and chat and code ran at plain speed (42.3 tok/s; 54.5 with this rule).
_CUT_SHORT_KEEP = 0.8
_CUT_SHORT_TOKENS = 3.0
_LEARNING_ROUNDS = 32


def plain_within_noise(plain_rate: float) -> float:
    """The rate a draft model must beat to keep its place against plain steps: theirs, less
    timing noise (γ auto's LOSS_MARGIN; whether a round drafts at all is γ auto's call)."""
    return plain_rate * (1.0 - LOSS_MARGIN)


class CatchUpJudge:
    """Whether the draft model should read what it lacks: what the rounds with it and without
    it delivered, and what its reading costs (see the module)."""

    def __init__(self, pricing: RoundPricing, reader: GapReader) -> None:
        self._pricing = pricing
        self._reader = reader
        self.model_rounds = FadingRounds()
        self._model_rounds_run = 0  # not faded: how long γ auto has had to learn its lengths
        self._model_runs = FadingRuns()
        # Rounds that ran while the model was far behind: what drafting without it delivers.
        self._unread_rounds = FadingRounds()

    def new_reply(self) -> None:
        """Another reply's rounds say nothing of this one's: a chat question's plain steps
        would have a pasted text, which the suffix index copies, read in vain."""
        self._unread_rounds = FadingRounds()

    def learn(self, record: RoundRecord, *, unread: bool) -> None:
        """A round as run; `unread`: it ran while the model was far behind, out of play."""
        if unread:
            self._unread_rounds.add(record.emitted, record.draft_s + record.verify_s)
        # Only a long stretch from the suffix index takes over from the model (a text being
        # revised). A plain round (a reply's first, or one the model sat out) or a few suffix
        # tokens leave it a pass's reading behind: counted, they would cut every payback span.
        if record.drafted and not record.suffix_drafted:
            self._model_runs.model_round()
            self.model_rounds.add(record.emitted, record.draft_s + record.verify_s)
            self._model_rounds_run += 1
        elif record.suffix_drafted == record.drafted and record.accepted >= MIN_TIMED_GAP:
            self._model_runs.other_round()

    def worth(
        self,
        behind: int,
        with_rate: float,
        model_tokens: int,
        without_rate: float,
        *,
        plain: bool = False,
        reply_left: int | None = None,
    ) -> bool:
        """Whether the draft model, `behind` tokens behind, should read them: the time its
        rounds save over the payback span, at the measured rates, outweighs the reading.
        Past a long gap, the rounds without the model deliver what they measured while it was
        far behind, and the gap waits until that is known; a short gap is weighed against this
        round's plan. Until the reading speed is measured, it reads (and it gets measured);
        until the model's own rate is, a short gap is read until that rate stands on a few
        rounds, and a long one once ski rental allows and the model could pay it back at all."""
        if behind == 0:
            return True
        long_gap = behind > EAGER_READ
        unread_rate = self._unread_rounds.rate if long_gap else None
        if unread_rate is None and long_gap:
            return False
        if not self._reader.speed.known:
            return True  # a long gap has a part read to time it (HybridDrafter.propose)
        if not long_gap and (
            not self._pricing.measured
            or self.model_rounds.rounds < _TRUSTED_MODEL_ROUNDS
            or self.cut_short()
        ):
            return True  # γ auto is still finding the model's lengths: its first rounds are short
        catchup_s = self._reader.speed.seconds_for(behind)
        if long_gap and self._unread_rounds.seconds < catchup_s:
            # As in ski rental, the reading is bought only once the rounds without the model
            # have taken as long as it would (faded: about the last 30 rounds' time, so a gap
            # dearer than that stays unread). A reply's opening says little of its body: a
            # revision's first sentence is new and its rest copies the text before, and a
            # reading staked on a quarter of its time (four rounds) had 208 tokens read,
            # 0.64 s, that the suffix index then copied.
            return False
        if self.model_rounds.rate is None or not self._pricing.measured:
            # Unmeasured, the model gets its chance (its rate gets measured), unless even
            # keeping every token it drafts it could not earn the reading back from what the
            # rounds without it deliver: a 163-token reading (0.54 s) bought so, 115 tokens
            # before the end of the bench's "rename" reply while its rounds ran at 100 tok/s,
            # took that reply to 36 tok/s against 50. A model that has never drafted waits for
            # ski rental too: in a fresh session's first revision of a text, the 64-token part
            # read to time the reading was followed at once by the other 142 (0.74 s in all,
            # 9 rounds into the reply), and the reply ran at 44 tok/s against the suffix
            # index's 83.
            return unread_rate is None or self._could_pay_back(
                behind, model_tokens, unread_rate, reply_left
            )
        without_rate = without_rate if unread_rate is None else unread_rate
        if plain and unread_rate is None:
            # Against plain steps a model within timing noise of them keeps its place (whether
            # to draft at all is γ auto's call); it must still earn back its reading.
            without_rate = plain_within_noise(without_rate)
        if with_rate <= without_rate:
            return False
        payback = float(PAYBACK_TOKENS)
        run = self._model_runs.mean
        if run is not None:
            payback = min(payback, run * self.model_rounds.tokens_per_round)
        if reply_left is not None:  # no reading pays back over more than the reply has left
            payback = min(payback, reply_left)
        saved_s = payback * (1.0 / without_rate - 1.0 / with_rate)
        return saved_s > reading_to_earn(behind, catchup_s)

    def _could_pay_back(
        self, behind: int, model_tokens: int, without_rate: float, reply_left: int | None
    ) -> bool:
        # Before any pass is timed, one costs at least what reading a token in a batch does.
        best = self._pricing.best_case_rate(model_tokens, self._reader.speed.seconds_for(1))
        if best is None:
            return True
        payback = min(PAYBACK_TOKENS, reply_left if reply_left is not None else PAYBACK_TOKENS)
        saved_s = payback * (1.0 / without_rate - 1.0 / best)
        return saved_s > self._reader.speed.seconds_for(behind)

    def cut_short(self) -> bool:
        return (
            self._model_rounds_run < _LEARNING_ROUNDS
            and self._pricing.model_keep.value >= _CUT_SHORT_KEEP
            and self.model_rounds.tokens_per_round < _CUT_SHORT_TOKENS
        )
