"""The suffix index and a draft model together: each round drafts from whichever pays most.

Each round has three candidates: the suffix index's proposal alone (no draft pass: only its
verify rows cost), the draft model alone, or both, the suffix tokens first and the draft model
continuing after them. Each is priced by expected tokens per second: (1 + expected accepted
tokens) over (verification of its rows + its draft passes), from what the rounds so far
measured: the suffix index's keep rate by match length (SuffixDrafter), the draft model's keep
rate, draft seconds by passes and verification seconds by rows (γ auto's DraftCost and
VerifyCurve). The draft model alone is priced by the tokens per second its own rounds
delivered: γ auto's confidence stop ends its drafts where it turns unsure, which a keep rate
compounded over the whole γ would underrate. The suffix proposal alone, while the model
drafts, also owes the reading of what it emits, which the model does before its next draft. So
a long, reliable match never pays for a draft-model pass, and a weak one does not displace a
good draft. llama.cpp's `--spec-type ngram-*,draft-simple` instead takes the n-gram proposal
whenever there is one, at any cost and reliability.

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
long gap, a model not yet measured is read only within ski rental, and only if, keeping every
token it drafts, it could earn the reading back. A model left out for a while, with nothing
from the suffix index and little to read, drafts a round anyway, less often each time it loses.
Against plain steps the model's rate counts as winning within timing noise (γ auto's
LOSS_MARGIN): whether a round drafts at all is γ auto's call, and a 3 % dip in its measured
rate must not hand its rounds to single plain steps; it must still earn back its reading
(about 5 ms a token for the demo's Q4_1 draft, a third of a pass). At a γ set by hand the model
is never set aside: the choice is only between sources, and γ runs as set.

The choice reads only the drafts' own figures and the target's past verdicts, never the
target's distribution at the positions being drafted, so it changes which tokens are proposed,
not which token is emitted: the output stays exact.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from app.engine.drafters import Draft, DraftRequest, ModelDrafter
from app.engine.gamma_estimates import LOSS_MARGIN
from app.engine.gap_reader import MIN_TIMED_GAP, GapReader
from app.engine.hybrid_pricing import RoundPricing
from app.engine.hybrid_rates import FadingRounds, FadingRuns, expected_kept
from app.engine.sampling import FloatArray
from app.engine.suffix_drafter import SuffixDrafter, SuffixProposal
from app.metrics.cost_model import MAX_GAMMA
from app.metrics.rounds import DraftMode, RoundRecord

# Tokens over which a catch-up must pay for itself, at most: about one reply (the bench's and
# the server's default budget is 128). Where the suffix index keeps taking rounds back (a text
# being revised), the span is the model's usual run of rounds in a row, measured.
_PAYBACK_TOKENS = 128
# A gap this short (after a round the target kept whole: the draft's last token, not yet read,
# and the target's own) is read in the model's first draft pass, as the draft model alone reads
# it: a pass of its own each round would cost as much as drafting one more token.
_READ_IN_FIRST_PASS = 2
# Gaps up to this long are read at once while the rate without the model is unknown; longer
# ones wait for that rate. Waiting or not costs at most one reading either way (ski rental), so
# what decides is how likely the reply is new text, not the reading's price: a gap of up to 96
# tokens (about 70 words with the chat template's) is a question or an instruction, rarely a
# text to copy. At 64, an 85-token question (the bench's "sql") ran 15 plain steps, 0.38 s,
# before the 0.29 s reading the draft model alone does at once, and ran at 0.90× it. At 128,
# the bench's "rename" (code to return with a rename, a 127-token gap through `specchat serve`,
# whose draft model holds the chat template's start from the request before) had 0.5 s read
# first and ran at 29.5 tok/s against the suffix index's 41.6.
_EAGER_READ = 96
# A long reading must save this many times its cost over the payback span: the span counts the
# tokens the reply may still produce, but it can end sooner (no end of text is foreseen). In the
# bench's "rename", 200 tokens (0.54 s) were read at a break-even of 78 tokens left, and the
# reply ended 10 tokens later, at 37 tok/s against plain's 46. Short gaps cost a few passes.
_LONG_READING_MARGIN = 1.5
# The first long gap of unknown reading speed has this much read to time it.
_TIMING_READ = 64
# A prompt whose last this-many tokens the suffix index has seen before is not read at once.
_REPEAT_MATCH = 16
# Rounds without the draft model, where the suffix index has nothing and the model is within
# a payback span, before it drafts one round anyway; doubled after each such round, up to the
# last.
_FIRST_RETRY = 16
_LAST_RETRY = 128
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


@dataclass(frozen=True, slots=True)
class _Plan:
    suffix: tuple[int, ...]
    model_tokens: int
    rate: float  # expected tokens per second


class HybridDrafter:
    """Drafts from the suffix index, the draft model, or both, per round (see the module)."""

    mode: DraftMode = "hybrid"

    def __init__(
        self,
        suffix: SuffixDrafter,
        model: ModelDrafter,
        *,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.suffix = suffix
        self.model_drafter = model
        self.label = model.label
        self._pricing = RoundPricing()
        self._model_rounds = FadingRounds()
        self._model_rounds_run = 0  # not faded: how long γ auto has had to learn its lengths
        self._model_runs = FadingRuns()
        # Rounds that ran while the model was far behind: what drafting without it delivers.
        self._unread_rounds = FadingRounds()
        self._last_round_unread = False
        # The model's measured rate changes only when it drafts: a few unlucky first rounds
        # would keep it out for good. So it gets a round now and then.
        self._rounds_without_model = 0
        self._retry_after = _FIRST_RETRY
        self._reader = GapReader(model, clock)

    def propose(self, ask: DraftRequest) -> Draft:
        history = ask.history
        self.suffix.judge_set_aside(history)
        found = self.suffix.peek(history, max(ask.max_tokens, ask.free_limit or 0))
        self.suffix.remember(found)
        behind = max(0, self._reader.behind(history) - 1)
        # A γ set by hand (no free limit: not γ auto) runs as set: the model always drafts.
        as_set = ask.free_limit is None
        plan = self._plan(found, ask.max_tokens, behind, as_set, ask.reply_left)
        timing_s = 0.0
        if plan.model_tokens and self._reading_unknown(behind):
            behind, timing_s = self._reader.read_part(history[:-1], behind, _TIMING_READ)
            plan = self._plan(found, ask.max_tokens, behind, as_set, ask.reply_left)
        suffix = list(plan.suffix)
        self.suffix.set_aside(history, None if suffix else found)
        # Only a model far behind was out of play: a round that merely left it a few tokens
        # behind was one the suffix index won on its merits, and would flatter the rate.
        self._last_round_unread = plan.model_tokens == 0 and behind > _EAGER_READ
        if plan.model_tokens == 0:
            return Draft(
                suffix, [None] * len(suffix), 0, 0.0, suffix_tokens=len(suffix), catchup_s=timing_s
            )
        # Rounds drafted by the suffix index alone left the draft model behind. Reading those
        # tokens is timed apart: billed to its passes, it would make the draft model look too
        # slow to be worth its place, and the suffix index would win rounds it should not.
        catchup_s = timing_s
        if behind > _READ_IN_FIRST_PASS:
            catchup_s += self._reader.read(history[:-1], behind)
        drafted = self.model_drafter.propose(
            replace(ask, history=[*history, *suffix], max_tokens=plan.model_tokens, free_limit=None)
        )
        if not suffix:
            return replace(drafted, catchup_s=catchup_s)
        certain: list[FloatArray | None] = [None] * len(suffix)
        return Draft(
            suffix + drafted.tokens,
            certain + drafted.probs,
            drafted.steps,
            drafted.seconds,
            # Margins describe the draft model's tokens; a mixed draft teaches γ auto nothing.
            [],
            suffix_tokens=len(suffix),
            catchup_s=catchup_s,
        )

    def _reading_unknown(self, behind: int) -> bool:
        return not self._reader.speed.known and behind > _EAGER_READ

    def _model_only(self, gamma: int) -> _Plan:
        measured = self._model_rounds.rate if self._pricing.measured else None
        return _Plan((), gamma, measured or self._pricing.rate(0, 0.0, gamma, 1.0))

    def _plan(
        self,
        proposal: SuffixProposal,
        gamma: int,
        behind: int = 0,
        as_set: bool = False,
        reply_left: int | None = None,
    ) -> _Plan:
        model_only = self._model_only(gamma)
        found = proposal.tokens
        if not found or proposal.source is None:
            without_model = _Plan((), 0, self._pricing.rate(0, 0.0, 0, 0.0))
            if as_set or self._worth_catching_up(
                behind, model_only, without_model, plain=True, reply_left=reply_left
            ):
                self._retry_after = _FIRST_RETRY
                return model_only
            if behind <= _PAYBACK_TOKENS and self._rounds_without_model >= self._retry_after:
                self._retry_after = min(2 * self._retry_after, _LAST_RETRY)
                return model_only
            return without_model
        keep = self.suffix.kept_by_match.keep_rate(proposal.match_length, proposal.source)
        kept = proposal.expected_accepted
        suffix_only = _Plan(found, 0, self._suffix_only_rate(len(found), kept, behind, gamma))
        if not as_set and not self._worth_catching_up(
            behind, model_only, suffix_only, reply_left=reply_left
        ):
            return suffix_only
        plans = [model_only, suffix_only]
        # The model continues after the whole proposal or not at all. A 64-token repeat of an
        # earlier answer, cut at γ - 1 for one model token, was priced above the whole of it
        # (the cut's price counts one pass for the model's reading of 23 tokens, which took it
        # 76 ms in one-token passes) and ran in rounds of 23 suffix tokens and 1 of the
        # model's; the bench's repeated questions through `specchat serve` ran at 190 tok/s in
        # one run of two, against 450-490 in 64-token suffix rounds.
        prefix = found if len(found) < gamma else ()
        if prefix:
            survive = keep ** len(prefix)
            plans.append(
                _Plan(
                    prefix,
                    gamma - len(prefix),
                    self._pricing.rate(
                        len(prefix), expected_kept(keep, len(prefix)), gamma - len(prefix), survive
                    ),
                )
            )
        return max(plans, key=lambda p: p.rate)

    def _suffix_only_rate(self, n_suffix: int, kept: float, behind: int, gamma: int) -> float:
        """The suffix proposal alone, less the reading it leaves the draft model while the
        model drafts: what the round emits, the model reads before its next draft. In chat,
        2-4-token matches had been priced over the model on that count (69-114 against 58-60
        tok/s) and kept 8 of the 34 tokens they drafted, each such round then read (5 ms a
        token for the demo's Q4_1 draft) before the model drafted on. A match as long as the
        model's own draft owes nothing: it is likely to go on in the next round, leaving a gap
        past what is read at once, weighed when the model wants it (charged, a 64-token repeat
        of an earlier answer, kept whole, was priced at 85 tok/s, under the model's 97)."""
        rate = self._pricing.rate(n_suffix, kept, 0, 0.0)
        emitted = 1.0 + kept
        model_drafting = (
            self._pricing.measured
            and self._reader.speed.known
            and self._model_rounds.rate is not None
            and n_suffix < gamma
            and behind + n_suffix + 1 <= _EAGER_READ  # a longer gap waits to be weighed
        )
        if not model_drafting:
            return rate
        return emitted / (emitted / rate + self._reader.speed.seconds_for(emitted))

    def _worth_catching_up(
        self,
        behind: int,
        with_model: _Plan,
        without: _Plan,
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
        long_gap = behind > _EAGER_READ
        unread_rate = self._unread_rounds.rate if long_gap else None
        if unread_rate is None and long_gap:
            return False
        if not self._reader.speed.known or not self._pricing.measured:
            return True
        if not long_gap and (
            self._model_rounds.rounds < _TRUSTED_MODEL_ROUNDS or self._cut_short()
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
        if self._model_rounds.rate is None:
            # Unmeasured, the model gets its chance (its rate gets measured), unless even
            # keeping every token it drafts it could not earn the reading back from what the
            # rounds without it deliver: a 163-token reading (0.54 s) bought so, 115 tokens
            # before the end of the bench's "rename" reply while its rounds ran at 100 tok/s,
            # took that reply to 36 tok/s against 50.
            return unread_rate is None or self._could_pay_back(
                behind, with_model.model_tokens, unread_rate, reply_left
            )
        without_rate = without.rate if unread_rate is None else unread_rate
        if plain and unread_rate is None:
            # Against plain steps a model within timing noise of them keeps its place (whether
            # to draft at all is γ auto's call); it must still earn back its reading.
            without_rate *= 1.0 - LOSS_MARGIN
        if with_model.rate <= without_rate:
            return False
        payback = float(_PAYBACK_TOKENS)
        run = self._model_runs.mean
        if run is not None:
            payback = min(payback, run * self._model_rounds.tokens_per_round)
        if reply_left is not None:  # no reading pays back over more than the reply has left
            payback = min(payback, reply_left)
        saved_s = payback * (1.0 / without_rate - 1.0 / with_model.rate)
        return saved_s > catchup_s * (_LONG_READING_MARGIN if long_gap else 1.0)

    def _could_pay_back(
        self, behind: int, model_tokens: int, without_rate: float, reply_left: int | None
    ) -> bool:
        best = self._pricing.rate(0, 0.0, model_tokens, 1.0, model_keep=1.0)
        payback = min(_PAYBACK_TOKENS, reply_left if reply_left is not None else _PAYBACK_TOKENS)
        saved_s = payback * (1.0 / without_rate - 1.0 / best)
        return saved_s > self._reader.speed.seconds_for(behind)

    def _cut_short(self) -> bool:
        return (
            self._model_rounds_run < _LEARNING_ROUNDS
            and self._pricing.model_keep.value >= _CUT_SHORT_KEEP
            and self._model_rounds.tokens_per_round < _CUT_SHORT_TOKENS
        )

    def prefill(self, history: Sequence[int]) -> None:
        """Index the prompt, and have the draft model read a short gap now (after the first
        token) when that will pay over the reply; a long one waits for this reply's first
        rounds to say what drafting without the model delivers (propose)."""
        self.suffix.prefill(history)
        # Another reply's rounds say nothing of this one's: a chat question's plain steps
        # would have a pasted text, which the suffix index copies, read in vain.
        self._unread_rounds = FadingRounds()
        self._last_round_unread = False
        behind = self._reader.behind(history)
        # One token over _EAGER_READ: the reply's first, when the model reads after it.
        if behind == 0 or behind > _EAGER_READ + 1 or self._asked_again(history):
            return
        plain = _Plan((), 0, self._pricing.rate(0, 0.0, 0, 0.0))
        if self._worth_catching_up(behind, self._model_only(MAX_GAMMA), plain, plain=True):
            self._reader.read(history, behind)

    def reads_first(self, history: Sequence[int]) -> bool:
        behind = self._reader.behind(history)
        return 0 < behind <= _EAGER_READ and not self._asked_again(history)

    def _asked_again(self, history: Sequence[int]) -> bool:
        """The prompt ends as an earlier one did (a question asked again word for word): the
        first round weighs the suffix index's proposal against the model, which reads only if
        that pays, instead of putting its reading before the first token."""
        return self.suffix.peek(history, MAX_GAMMA).match_length >= _REPEAT_MATCH

    def learn(self, record: RoundRecord) -> None:
        self._pricing.learn(record)
        if self._last_round_unread:
            self._unread_rounds.add(record.emitted, record.draft_s + record.verify_s)
            self._last_round_unread = False
        # Only a long stretch from the suffix index takes over from the model (a text being
        # revised). A plain round (a reply's first, or one the model sat out) or a few suffix
        # tokens leave it a pass's reading behind: counted, they would cut every payback span.
        if record.drafted and not record.suffix_drafted:
            self._model_runs.model_round()
        elif record.suffix_drafted == record.drafted and record.accepted >= MIN_TIMED_GAP:
            self._model_runs.other_round()
        model_drafted = record.drafted - record.suffix_drafted
        self._rounds_without_model = 0 if model_drafted else self._rounds_without_model + 1
        if record.drafted == 0:
            return
        self.suffix.learn(record)
        if model_drafted and not record.suffix_drafted:
            self._model_rounds.add(record.emitted, record.draft_s + record.verify_s)
            self._model_rounds_run += 1

    def close(self) -> None:
        self.model_drafter.close()
