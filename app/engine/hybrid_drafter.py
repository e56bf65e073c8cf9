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

When the draft model reads the tokens it lacks, weighed against what the rounds deliver without
it: app/engine/hybrid_catch_up.py.

The choice reads only the drafts' own figures and the target's past verdicts, never the
target's distribution at the positions being drafted, so it changes which tokens are proposed,
not which token is emitted: the output stays exact.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from app.engine.drafters import Draft, DraftRequest, ModelDrafter
from app.engine.gap_reader import EAGER_READ, GapReader
from app.engine.hybrid_catch_up import PAYBACK_TOKENS, CatchUpJudge, plain_within_noise
from app.engine.hybrid_pricing import RoundPricing
from app.engine.hybrid_rates import expected_kept
from app.engine.retry_backoff import RetryBackoff
from app.engine.sampling import FloatArray
from app.engine.suffix_drafter import SuffixDrafter, SuffixProposal
from app.metrics.cost_model import MAX_GAMMA
from app.metrics.rounds import DraftMode, RoundRecord

# A gap this short (after a round the target kept whole: the draft's last token, not yet read,
# and the target's own) is read in the model's first draft pass, as the draft model alone reads
# it: a pass of its own each round would cost as much as drafting one more token.
_READ_IN_FIRST_PASS = 2
# The first long gap of unknown reading speed has this much read to time it.
_TIMING_READ = 64
# A prompt whose last this-many tokens the suffix index has seen before is not read at once.
_REPEAT_MATCH = 16
# Rounds without the draft model, where the suffix index has nothing and the model is within
# a payback span, before it drafts one round anyway; doubled after each such round, up to the
# last.
_FIRST_RETRY = 16
_LAST_RETRY = 128


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
        self._last_round_unread = False
        # The model's measured rate changes only when it drafts: a few unlucky first rounds
        # would keep it out for good. So it gets a round now and then.
        self._retry = RetryBackoff(_FIRST_RETRY, _LAST_RETRY)
        self._reader = GapReader(model, clock)
        self._catch_up = CatchUpJudge(self._pricing, self._reader)

    def propose(self, ask: DraftRequest) -> Draft:
        history = ask.history
        self._pricing.at_depth(len(history))
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
        self._last_round_unread = plan.model_tokens == 0 and behind > EAGER_READ
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
        return not self._reader.speed.known and behind > EAGER_READ

    def _model_only(self, gamma: int) -> _Plan:
        measured = self._catch_up.model_rounds.rate if self._pricing.measured else None
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
            if as_set or self._catch_up.worth(
                behind,
                model_only.rate,
                model_only.model_tokens,
                without_model.rate,
                plain=True,
                reply_left=reply_left,
            ):
                self._retry.won()
                return model_only
            if behind <= PAYBACK_TOKENS and self._retry.due:
                self._retry.retried()
                return model_only
            return without_model
        keep = self.suffix.kept_by_match.keep_rate(proposal.match_length, proposal.source)
        kept = proposal.expected_accepted
        suffix_only = _Plan(found, 0, self._suffix_only_rate(len(found), kept, behind, gamma))
        if not as_set and not self._catch_up.worth(
            behind,
            model_only.rate,
            model_only.model_tokens,
            suffix_only.rate,
            reply_left=reply_left,
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
        of an earlier answer, kept whole, was priced at 85 tok/s, under the model's 97). Nor
        does one beside a model no faster than plain steps (within timing noise, as the
        catch-up weighs it): that model sits out wherever the suffix index has nothing, so
        nothing the round emits is read for it. Charged, a 2-token match through `specchat
        serve`, in a revision whose earlier turn the model had read (55 tok/s against plain
        steps' 60), was priced under the model (50.5 tok/s; 62.1 uncharged), whose 24-token
        drafts then ran 50 tokens at 57-65 tok/s, where the suffix index alone ran them at 89
        in rounds of 2-6 tokens."""
        rate = self._pricing.rate(n_suffix, kept, 0, 0.0)
        emitted = 1.0 + kept
        model_rate = self._catch_up.model_rounds.rate
        model_drafting = (
            self._pricing.measured
            and self._reader.speed.known
            and model_rate is not None
            and model_rate > plain_within_noise(self._pricing.rate(0, 0.0, 0, 0.0))
            and n_suffix < gamma
            and behind + n_suffix + 1 <= EAGER_READ  # a longer gap waits to be weighed
        )
        if not model_drafting:
            return rate
        return emitted / (emitted / rate + self._reader.speed.seconds_for(emitted))

    def prefill(self, history: Sequence[int]) -> None:
        """Index the prompt, and have the draft model read a short gap now (after the first
        token) when that will pay over the reply; a long one waits for this reply's first
        rounds to say what drafting without the model delivers (propose)."""
        self.suffix.prefill(history)
        self._pricing.at_depth(len(history))
        self._catch_up.new_reply()
        self._last_round_unread = False
        behind = self._reader.behind(history)
        # One token over EAGER_READ: the reply's first, drawn before the model reads.
        if behind == 0 or behind > EAGER_READ + 1 or self._asked_again(history):
            return
        plain = _Plan((), 0, self._pricing.rate(0, 0.0, 0, 0.0))
        model = self._model_only(MAX_GAMMA)
        if self._catch_up.worth(behind, model.rate, model.model_tokens, plain.rate, plain=True):
            self._reader.read(history, behind)

    def _asked_again(self, history: Sequence[int]) -> bool:
        """The prompt ends as an earlier one did (a question asked again word for word): the
        first round weighs the suffix index's proposal against the model, which reads only if
        that pays, instead of reading before that round."""
        return self.suffix.peek(history, MAX_GAMMA).match_length >= _REPEAT_MATCH

    def learn(self, record: RoundRecord) -> None:
        self._pricing.learn(record)
        self._catch_up.learn(record, unread=self._last_round_unread)
        self._last_round_unread = False
        model_drafted = record.drafted - record.suffix_drafted
        if model_drafted:
            self._retry.ran()
        else:
            self._retry.left_out()
        if record.drafted:
            self.suffix.learn(record)

    def close(self) -> None:
        self.model_drafter.close()
