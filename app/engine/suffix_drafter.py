"""Drafting from everything the chat already holds: the conversation so far and past chats.

A suffix index over the conversation (grown as the history grows) and, optionally, the shared
index of past chats (`HistoryCorpus`) each say how long a suffix of the history they have seen
before and what most often followed it (SuffixDecoding, Oliaro et al., 2024; llama.cpp's
ngram-cache keeps a pool across requests the same way). No model runs: proposals are certain (q
is None), like prompt lookup's, and cost microseconds.

Policy. The conversation's match wins when it is at least as long as the past chats' one: it is
the freshest context, and what the current reply repeats is most often in it. Nothing is proposed
below `min_match` tokens (2: on the demo target's replies 1 token kept too few and 3 dropped
useful drafts, scripts/suffix_replay.py). How far to trust a match is learnt from the target's
verdicts: each source and match-length bucket keeps forgetful counts of draft tokens kept and of
rejections, which give the chance p that the next token is kept (a geometric model, the usual one
for speculative acceptance), pulled towards a prior that grows with the match length and is lower
for past chats. The draft runs to the longest k with p^k ≥ `min_survival` (the chance that its
last token is still kept; 0.2 is about what a verify row costs on a CPU, a sixth of a step), so it
grows with the match length and with the hit rate observed at that length, and is capped by the
engine's budget and by where the index has no continuation.
"""

from __future__ import annotations

import bisect
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from app.engine.drafters import Draft, DraftRequest
from app.engine.history_corpus import HistoryCorpus
from app.engine.sampling import FloatArray
from app.engine.suffix_cursor import Cursor
from app.engine.suffix_index import Match, SuffixIndex
from app.engine.suffix_resume import FOLLOWED_MATCH, WINDOW_TOKENS, CopyWindow
from app.engine.token_tree import TreeDraft
from app.engine.token_tree_policy import TreeGate, TreeMode
from app.engine.token_tree_suffix import grow_tree
from app.llama.handle import common_prefix
from app.metrics.cost_model import MAX_GAMMA
from app.metrics.rounds import DraftMode, RoundRecord

# "resume": the text a match was following, picked up again after the reply edited it
# (app/engine/suffix_resume.py); its keep rates are bucketed by that match's length.
# "repeat": a past-chats match reaching back over the whole conversation (or REPEAT_CONTEXT
# tokens of it): the same question asked again word for word, whose past reply the same
# target, decoding greedily, gives again token for token.
Source = Literal["conversation", "history", "repeat", "resume"]
SOURCES: tuple[Source, ...] = ("conversation", "history", "repeat", "resume")

# Lower edges of the match-length buckets: fine where the hit rate changes fastest.
MATCH_BUCKETS = (0, 2, 3, 4, 6, 8, 12, 16, 24, 32)
# Pseudo-tokens of prior per bucket: a few verdicts move the rate, one does not swing it.
_PRIOR_WEIGHT = 4.0
# Beyond MAX_GAMMA tokens a draft goes on only at this keep rate: verification rows cost more
# the more there are, and past 16 they pay only when nearly every token is kept. On the demo
# target, at 0.99, 64 tokens expect 47 kept for 10.5 plain steps (4.5 a step) against 15 for 4
# at 16 (3.7); at 0.96, 22 for 10.5 (2.1) against 11.5 for 4 (2.9).
LONG_DRAFT_KEEP_RATE = 0.99
# Tokens of the history a cursor re-reads after the past-chats index changed; longer matches
# are counted from there (the length policy is flat long before this).
_RESYNC_TOKENS = 256
# A past-chats match this long is a "repeat" even where the conversation is longer: it is as
# much of a past exchange's prompt as the index keeps (app/engine/runtime.py).
REPEAT_CONTEXT = 256
# Before any verdict, a repeat's tokens are taken to be kept this often: greedy decoding
# repeats itself exactly, so drafts run to the free limit from the first round (learnt as
# `history`, one failed 34-token match elsewhere held a repeated question's first reply to
# 16-token drafts for most of it, 180 tok/s against 400). Sampled replies part from the
# past one soon; their misses bring the rate down within a round or two.
_REPEAT_PRIOR = 0.995
# How many tokens at each end of the history seen are compared to tell an extension from a new
# or edited conversation: a wrong guess only costs poor drafts, never a wrong token.
_SAMPLE_TOKENS = 16


def prior_keep_rate(match_length: int, source: Source = "conversation") -> float:
    """Before any verdict: a longer match is more likely to go on as before, and a match in
    the conversation more than one in past chats. Fitted, rounded down, to greedy replies of the
    demo target (scripts/suffix_replay.py): kept per token 0.67 at 2 tokens, 0.76 at 3, 0.89 at
    6-7, 0.96 at 8-11 in the conversation; 0.19 at 2, 0.32 at 3, 0.35 at 4-5 in unrelated past
    chats (there p < min_survival at 2 tokens: nothing is drafted until verdicts say more)."""
    if source == "history":
        return (match_length - 1) / (match_length + 4.0)
    if source == "repeat":
        return _REPEAT_PRIOR
    if source == "resume":  # an anchor of one token, if a local one: below a match's own
        return match_length / (match_length + 2.0)
    return match_length / (match_length + 1.0)


@dataclass(frozen=True, slots=True)
class SuffixProposal:
    tokens: tuple[int, ...]
    match_length: int  # tokens of the history's end found; 0 when none was long enough
    expected_accepted: float  # of these tokens, under the keep rate learnt for this length
    source: Source | None


def _zeros() -> dict[Source, list[float]]:
    return {source: [0.0] * len(MATCH_BUCKETS) for source in SOURCES}


@dataclass
class KeptByMatchLength:
    """Forgetful counts, per source and match-length bucket, of draft tokens kept and of
    rejections: the same length says less in past chats than in the conversation."""

    decay: float = 0.95
    kept: dict[Source, list[float]] = field(default_factory=_zeros)
    missed: dict[Source, list[float]] = field(default_factory=_zeros)

    def add(
        self, match_length: int, accepted: int, drafted: int, source: Source = "conversation"
    ) -> None:
        b, kept, missed = _bucket(match_length), self.kept[source], self.missed[source]
        kept[b] = kept[b] * self.decay + accepted
        missed[b] = missed[b] * self.decay + (1.0 if accepted < drafted else 0.0)

    def keep_rate(self, match_length: int, source: Source = "conversation") -> float:
        """The chance that a proposed token is kept, given the ones before it were."""
        b = _bucket(match_length)
        kept, missed = self.kept[source][b], self.missed[source][b]
        prior = prior_keep_rate(max(MATCH_BUCKETS[b], 1), source)
        return (kept + _PRIOR_WEIGHT * prior) / (kept + missed + _PRIOR_WEIGHT)


def _bucket(match_length: int) -> int:
    return bisect.bisect_right(MATCH_BUCKETS, match_length) - 1


def _expected(keep_rate: float, tokens: int) -> float:
    return sum(keep_rate**i for i in range(1, tokens + 1))


def draft_length(keep_rate: float, min_survival: float, max_tokens: int) -> int:
    """The longest draft whose last token is still kept with chance ≥ min_survival."""
    if max_tokens <= 0 or keep_rate < min_survival:
        return 0
    if keep_rate >= 1.0:
        return max_tokens
    return min(max_tokens, int(math.log(min_survival) / math.log(keep_rate) + 1e-9))


class SuffixDrafter:
    """Proposes the most frequent continuation of the history's longest earlier-seen suffix."""

    mode: DraftMode = "suffix"
    label = "Chat history (no draft model)"

    def __init__(
        self,
        corpus: HistoryCorpus | None = None,
        *,
        min_match: int = 2,
        min_survival: float = 0.2,
        max_conversation_tokens: int = 65_536,
        trees: TreeMode = "auto",
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        if min_match < 1 or not 0.0 < min_survival < 1.0 or max_conversation_tokens < 2:
            raise ValueError("min_match ≥ 1, 0 < min_survival < 1, max_conversation_tokens ≥ 2")
        self.corpus = corpus
        self.min_match = min_match
        self.min_survival = min_survival
        self.max_conversation_tokens = max_conversation_tokens
        self.kept_by_match = KeptByMatchLength()
        # Of the last proposal, which observe() scores.
        self.last_match_length = 0
        self.last_source: Source = "conversation"
        self._clock = clock
        self._conversation = SuffixIndex()
        self._offset = 0  # history position the conversation index starts at
        self._seen = 0  # history tokens read
        self._head: list[int] = []
        self._tail: list[int] = []
        self._cursor: Cursor | None = None  # the history's end in the past chats
        # Whether proposals may be token trees (app/engine/token_tree_policy.py).
        self.trees = TreeGate(trees)
        # Where the last peek() matched and the keep rate it drafted at, for growing a tree.
        self._peeked: tuple[SuffixIndex, Match, float] | None = None
        # What the last match went on with, to pick it up again after an edit.
        self._window: CopyWindow | None = None
        # A proposal another source drafted in place of: the history length it was made at, its
        # tokens, match length and source.
        self._set_aside: tuple[int, tuple[int, ...], int, Source] | None = None

    # -- the Drafter protocol -----------------------------------------------------------------

    def propose(self, ask: DraftRequest) -> Draft:
        # Proposals depend on neither the sampling settings nor a confidence; they cost no
        # draft pass, so under γ auto their own length policy runs up to the free limit.
        start = self._clock()
        limit = max(ask.max_tokens, ask.free_limit or 0)
        proposal = self.peek(ask.history, limit)
        self.remember(proposal)
        tokens = list(proposal.tokens)
        probs: list[FloatArray | None] = [None] * len(tokens)
        peeked = self._peeked
        if tokens and peeked is not None and self.trees.wanted(ask.free_limit is not None):
            index, match, keep_rate = peeked
            tree = grow_tree(
                index, match, tokens, keep_rate, max_nodes=limit, min_gain=self.min_survival
            )
            if tree is not None:
                seconds = self._clock() - start
                return TreeDraft(tokens, probs, 0, seconds, suffix_tokens=len(tokens), tree=tree)
        return Draft(tokens, probs, 0, self._clock() - start, suffix_tokens=len(tokens))

    def prefill(self, history: Sequence[int]) -> None:
        """Index the prompt now, once, rather than in the first round's proposal."""
        self._window = None  # another reply's text: what it was copying is not this one's
        self._set_aside = None
        self._sync(history)

    def close(self) -> None:
        """Nothing native to free."""

    # -- what the engine asks besides -----------------------------------------------------------

    def learn(self, record: RoundRecord) -> None:
        # A tree's alternatives are not what the keep rate is about: score its main branch.
        self.observe(record.accepted_from_suffix - record.tree_bonus, record.suffix_drafted)
        self.trees.observe(record)

    def observe(self, accepted: int, drafted: int) -> None:
        """The target's verdict on the last proposal: `accepted` of its `drafted` tokens kept."""
        if drafted > 0:
            self.kept_by_match.add(self.last_match_length, accepted, drafted, self.last_source)

    def set_aside(self, history: Sequence[int], proposal: SuffixProposal | None) -> None:
        """Another source drafts this round in place of `proposal`; what the target emits
        judges it all the same (judge_set_aside, next round)."""
        if proposal is None or not proposal.tokens or proposal.source is None:
            self._set_aside = None
        else:
            aside = (len(history), proposal.tokens, proposal.match_length, proposal.source)
            self._set_aside = aside

    def judge_set_aside(self, history: Sequence[int]) -> None:
        """Score the proposal set aside last round on the tokens emitted since: kept while
        they agree, a miss at the first that does not, nothing beyond the last emitted. The
        target emits its own tokens whatever was drafted (under sampling, the proposed token
        with chance p, its chance of being kept as a draft), so the verdict is the one the
        proposal would have had: without it, a match length the draft model usually wins is
        judged only on the rounds it loses, and its keep rate stays near the prior."""
        aside, self._set_aside = self._set_aside, None
        if aside is None or not self._extends(history):
            return
        at, tokens, match_length, source = aside
        followed = history[at : at + len(tokens)]
        if followed:
            kept = common_prefix(tokens, followed)
            self.kept_by_match.add(match_length, kept, len(followed), source)

    def remember(self, proposal: SuffixProposal) -> None:
        """Make `proposal` the one the next observe() scores (propose() does it; a drafter
        that drafts from peek() does it itself)."""
        self.last_match_length = proposal.match_length
        self.last_source = proposal.source or "conversation"

    def peek(self, history: Sequence[int], max_tokens: int) -> SuffixProposal:
        """What propose() would draft now and how many of its tokens should survive. Changes
        nothing observable: it only brings the indexes up to the history."""
        self._sync(history)
        length, source, index, match = self._longest_match()
        self._peeked = None
        if length < self.min_match or index is None or match is None:
            return self._resume(history, max_tokens)
        keep_rate = self.kept_by_match.keep_rate(length, source)
        self._peeked = (index, match, keep_rate)
        budget = self._budget(keep_rate, max_tokens)
        if length < FOLLOWED_MATCH:  # not a text being followed: nothing to pick up later
            branches = index.continuations(match, budget) if budget else []
            tokens = branches[0].tokens if branches else ()
        else:
            branches = index.continuations(match, max(budget, WINDOW_TOKENS))
            window = branches[0].tokens if branches else ()
            self._window = CopyWindow(len(history), window, length) if window else None
            tokens = window[:budget]
        return SuffixProposal(tokens, length, _expected(keep_rate, len(tokens)), source)

    def _resume(self, history: Sequence[int], max_tokens: int) -> SuffixProposal:
        """The text the last match followed, picked up again after an edit, if it is."""
        window = self._window
        resumed = window.resumed(history) if window is not None else ()
        if window is None or not resumed:
            return SuffixProposal((), 0, 0.0, None)
        self._window = window.after(len(history), resumed)
        keep_rate = self.kept_by_match.keep_rate(window.match_length, "resume")
        tokens = resumed[: self._budget(keep_rate, max_tokens)]
        if not tokens:
            return SuffixProposal((), 0, 0.0, None)
        return SuffixProposal(
            tokens, window.match_length, _expected(keep_rate, len(tokens)), "resume"
        )

    def _budget(self, keep_rate: float, max_tokens: int) -> int:
        if keep_rate < LONG_DRAFT_KEEP_RATE:
            max_tokens = min(max_tokens, MAX_GAMMA)
        return draft_length(keep_rate, self.min_survival, max_tokens)

    @property
    def indexed_tokens(self) -> int:
        """Tokens of the conversation in its index (at most max_conversation_tokens)."""
        return self._conversation.tokens

    # -- internals ----------------------------------------------------------------------------

    def _longest_match(self) -> tuple[int, Source, SuffixIndex | None, Match | None]:
        own = self._conversation.tail()
        own_length = self._conversation.continued_length(own)
        if self._cursor is not None:
            past = self._cursor.match
            past_length = self._cursor.index.continued_length(past)
            if past_length > own_length:
                whole = past_length >= min(self._seen, REPEAT_CONTEXT)
                source: Source = "repeat" if whole else "history"
                return past_length, source, self._cursor.index, past
        if own_length == 0:
            return 0, "conversation", None, None
        return own_length, "conversation", self._conversation, own

    def _sync(self, history: Sequence[int]) -> None:
        restarted = not self._extends(history)
        unread = history[self._seen :]  # what the past chats' cursor has not read
        if restarted:
            self._restart(max(0, len(history) - self.max_conversation_tokens))
        elif len(history) - self._offset > self.max_conversation_tokens:
            # Past the bound the index starts again from the history's recent half.
            self._restart(len(history) - self.max_conversation_tokens // 2)
        new = history[self._seen :]
        if new:
            self._conversation.extend(new)
            self._seen = len(history)
            self._head = list(history[:_SAMPLE_TOKENS])
            self._tail = list(history[-_SAMPLE_TOKENS:])
        self._sync_cursor(history, unread, restarted)

    def _sync_cursor(self, history: Sequence[int], new: Sequence[int], restarted: bool) -> None:
        if self.corpus is None:
            self._cursor = None
            return
        index = self.corpus.index
        cursor = self._cursor
        if restarted or cursor is None or cursor.index is not index or not cursor.fresh:
            cursor = self._cursor = Cursor(index)
            cursor.feed(history[-_RESYNC_TOKENS:])
        else:
            cursor.feed(new)

    def _extends(self, history: Sequence[int]) -> bool:
        seen = self._seen
        if len(history) < seen:
            return False
        head = list(history[: len(self._head)])
        tail = list(history[max(0, seen - len(self._tail)) : seen])
        return head == self._head and tail == self._tail

    def _restart(self, offset: int) -> None:
        self._window = None
        self._conversation = SuffixIndex()
        self._offset = offset
        self._seen = offset
        self._head = []
        self._tail = []
