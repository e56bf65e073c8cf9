"""Drafters propose the next few tokens; the target then verifies them all in one pass.

Narrow interface: given the token history (the target's ids: a draft model is always fed the
target's tokens, never re-tokenised text) and a length budget, return proposed ids and, for
sampled drafts, the distribution each was drawn from.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import numpy.typing as npt

from app.engine.confidence import KeepDrafting
from app.engine.config import SamplingConfig
from app.engine.constraint import ConstraintCursor, greedy_logits
from app.engine.sampling import (
    FloatArray,
    confidence_margin,
    distribution,
    logit_margin,
    penalized_logits,
    sample,
    top_probability,
)
from app.llama.handle import ModelHandle, common_prefix
from app.metrics.rounds import DraftMode, RoundRecord


@dataclass(frozen=True, slots=True)
class Draft:
    tokens: list[int]
    # q for each token, or None where the token was proposed with certainty (greedy, lookup).
    probs: list[FloatArray | None] = field(default_factory=list)
    steps: int = 0  # draft forward passes spent
    seconds: float = 0.0
    # Each token's confidence margin, when a confidence stop asked for them (else empty).
    margins: list[float] = field(default_factory=list)
    # How many of the tokens, the first ones, the suffix index proposed (RoundRecord's
    # suffix_drafted).
    suffix_tokens: int = 0
    # Seconds a draft model spent reading tokens accepted while it sat idle, kept out of
    # `seconds`: a one-off cost of having paused, like the loop's own catch-up.
    catchup_s: float = 0.0
    # Drafted from the history's last tokens alone (DraftRequest.read_limit): the model's cache
    # no longer follows the conversation and must read it afresh before drafting for real.
    partial_context: bool = False


# Tokens of the history's end a probe drafts after when the draft model lacks more than the
# probe may read: enough text to judge how well it drafts here, at a bounded price however
# long the conversation. Reading a 416-token prompt whole cost the demo's draft 0.4 s, a
# quarter of a reply.
PROBE_WINDOW = 32


@dataclass(frozen=True, slots=True)
class DraftRequest:
    """One round's question to a drafter: what to continue, how far, and how to draw."""

    history: Sequence[int]
    max_tokens: int
    sampling: SamplingConfig
    rng: np.random.Generator
    p_min: float
    stop: KeepDrafting | None = None
    free_limit: int | None = None
    # Tokens the reply may still produce (its budget left): the most a reading can pay back over.
    reply_left: int | None = None
    # A paused draft model's probe: read at most this many tokens not read yet, and when
    # further behind, draft after a window of the history's end alone (PROBE_WINDOW). A probe
    # only judges the draft; reading the whole conversation for it would cost more than it
    # can tell.
    read_limit: int | None = None


class Drafter(Protocol):
    mode: DraftMode
    label: str

    def propose(self, ask: DraftRequest) -> Draft:
        """Up to ask.max_tokens proposals. `ask.stop`, when given, is told each proposed token's
        confidence margin and ends the draft when it says so (the margins come back in the
        Draft); a drafter without confidences ignores it. `ask.free_limit`, under γ auto, is how
        far tokens that cost no draft pass (the suffix index's) may go past max_tokens."""
        ...

    def prefill(self, history: Sequence[int]) -> None:
        """Read the prompt before generation starts, so its cost is not billed to drafting."""

    def learn(self, record: RoundRecord) -> None:
        """The target's verdict on the last proposal (a drafter that learns nothing ignores it)."""

    def close(self) -> None: ...


class ModelDrafter:
    """A smaller model of the same vocabulary, run token by token."""

    mode: DraftMode = "draft"

    def __init__(
        self,
        model: ModelHandle,
        target_n_vocab: int,
        *,
        label: str | None = None,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.model = model
        self.label = label or model.path.name
        self._target_n_vocab = target_n_vocab
        self._clock = clock
        # Set by the engine for a reply under a grammar that masks the draft too.
        self.constraint: ConstraintCursor | None = None
        # Where in the history the window a probe last drafted after began (_probe_window).
        self._window_start: int | None = None

    def _logits_in_target_vocab(self, row: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        # Vocab sizes may differ by up to 128 padding ids; ids the target lacks get -inf so the
        # draft never proposes them, ids the draft lacks get probability 0 in q.
        n = self._target_n_vocab
        if row.shape[0] == n:
            return row
        if row.shape[0] > n:
            return row[:n]
        padded = np.full(n, -np.inf, dtype=np.float32)
        padded[: row.shape[0]] = row
        return padded

    def propose(self, ask: DraftRequest) -> Draft:
        # ask.free_limit does not apply: every token of a draft model costs a pass.
        sampling, p_min, stop = ask.sampling, ask.p_min, ask.stop
        sequence, catchup_s = self._probe_context(ask)
        partial = len(sequence) < len(ask.history)
        start = self._clock()
        tokens: list[int] = []
        probs: list[FloatArray | None] = []
        margins: list[float] = []
        steps = 0
        grammar = None if self.constraint is None else self.constraint.follow(ask.history)
        if self.constraint is not None and grammar is None:
            # The history already breaks the grammar: nothing drafted after it can be kept.
            return Draft([], [], 0, self._clock() - start, catchup_s=catchup_s)
        for _ in range(ask.max_tokens):
            row = self._logits_in_target_vocab(self.model.feed(sequence, 1)[0])
            steps += 1
            if sampling.greedy:
                logits = (
                    penalized_logits(row, sequence, sampling)
                    if grammar is None
                    else greedy_logits(grammar, row, sequence, sampling)
                )
                token = int(np.argmax(logits))
                # Stop before proposing a token the draft itself doubts: it would likely be
                # rejected and cost a verification row (llama.cpp's p_min rule).
                if p_min > 0.0 and top_probability(logits) < p_min:
                    break
                q: FloatArray | None = None
                margin = None if stop is None else logit_margin(logits)
            else:
                q = distribution(row if grammar is None else grammar.mask(row), sequence, sampling)
                token = sample(q, ask.rng)
                if p_min > 0.0 and float(q.max()) < p_min:
                    break
                margin = None if stop is None else confidence_margin(q)
            tokens.append(token)
            probs.append(q)
            sequence.append(token)
            if stop is not None and margin is not None:
                margins.append(margin)  # γ auto learns from every drafted token's margin
            if self.model.is_eog(token):
                break  # kept, it ends the reply; refused, so is all after it: no pass pays
            if grammar is not None:
                if self.constraint is not None and self.constraint.ends(token):
                    break  # the grammar is done, and nothing follows an end token
                grammar.accept(token)
            # The token stays: its pass is paid, and a row to check it costs little.
            if stop is not None and margin is not None and not stop(margin):
                break
        if grammar is not None:
            grammar.close()
        seconds = self._clock() - start
        return Draft(
            tokens, probs, steps, seconds, margins, catchup_s=catchup_s, partial_context=partial
        )

    def _probe_context(self, ask: DraftRequest) -> tuple[list[int], float]:
        """The tokens to draft after and the seconds spent reading them first: under a read
        limit, what the model has not read is read before drafting (timed apart, as a
        catch-up), or, when more than the limit, a window of the history's end alone."""
        sequence = list(ask.history)
        if ask.read_limit is None or not sequence:
            return sequence, 0.0
        unread = len(sequence) - 1 - common_prefix(self.model.tokens, sequence[:-1])
        if unread <= 0:
            return sequence, 0.0
        if unread > ask.read_limit:
            sequence = self._probe_window(sequence, ask.read_limit)
        start = self._clock()
        self.model.feed(sequence[:-1], 0)
        return sequence, self._clock() - start

    def _probe_window(self, history: list[int], limit: int) -> list[int]:
        """The history's end to draft after when the model lacks more than `limit` tokens of
        it: the last probe's window, read on, when the cache still holds that window's start
        (not a new conversation's tokens at its place) and what it lacks of it is at most
        `limit` tokens; else the last PROBE_WINDOW tokens. Read on, a window keeps the text the
        last probe drafted after (a question's start, for one) and costs only what is new: a
        new window would be read whole again by every probe, for a probe that follows at once
        one that kept its draft (γ auto, app/engine/auto_off.py)."""
        start = self._window_start
        if start is not None and start < len(history):
            read_on = history[start:]
            held = common_prefix(self.model.tokens, read_on[:-1])
            if held > 0 and len(read_on) - 1 - held <= limit:
                return read_on
        size = min(limit, PROBE_WINDOW)
        self._window_start = len(history) - size
        return history[-size:]

    def prefill(self, history: Sequence[int]) -> None:
        self.model.feed(history, 0)

    def unread(self, history: Sequence[int]) -> int:
        """How many tokens of `history` the model would read before drafting after it."""
        return len(history) - common_prefix(self.model.tokens, history)

    def learn(self, record: RoundRecord) -> None:
        """γ auto does the learning for a draft model."""

    def close(self) -> None:
        self.model.close()


def constrain_draft(drafter: Drafter | None, cursor: ConstraintCursor | None) -> None:
    """Hand a reply's constraint to the draft model a drafter runs, if it runs one; other
    drafts are not masked (a proposal the grammar forbids has p = 0 and is rejected)."""
    model = (
        drafter if isinstance(drafter, ModelDrafter) else getattr(drafter, "model_drafter", None)
    )
    if isinstance(model, ModelDrafter):
        model.constraint = cursor


class PromptLookupDrafter:
    """Prompt lookup decoding: continue the most recent earlier occurrence of the last n-gram.

    No model and no forward passes; strong when the reply repeats the prompt (summaries, edits,
    code changes). Proposals are certain, so q is a point mass.
    """

    mode: DraftMode = "ngram"
    label = "Prompt lookup (no draft model)"

    def __init__(
        self,
        *,
        max_ngram: int = 3,
        min_ngram: int = 2,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.max_ngram = max_ngram
        self.min_ngram = min_ngram
        self._clock = clock

    def find(self, history: Sequence[int], max_tokens: int) -> list[int]:
        ids = np.asarray(history, dtype=np.int64)
        n_hist = ids.shape[0]
        for n in range(self.max_ngram, self.min_ngram - 1, -1):
            if n_hist <= n:
                continue
            tail = ids[-n:]
            # Candidate starts i with ids[i:i+n] == tail, leaving at least one token after.
            span = n_hist - n
            match = np.ones(span, dtype=bool)
            for j in range(n):
                match &= ids[j : j + span] == tail[j]
            starts = np.flatnonzero(match)
            if starts.size:
                begin = int(starts[-1]) + n  # most recent match: the freshest context
                return [int(t) for t in ids[begin : begin + max_tokens]]
        return []

    def propose(self, ask: DraftRequest) -> Draft:
        # Lookup proposals do not depend on sampling settings and carry no confidence.
        start = self._clock()
        tokens = self.find(ask.history, ask.max_tokens)
        return Draft(tokens, [None] * len(tokens), 0, self._clock() - start)

    def prefill(self, history: Sequence[int]) -> None:
        """Lookup reads the history afresh each round; nothing to prepare."""

    def learn(self, record: RoundRecord) -> None:
        """Lookup keeps no figures."""

    def close(self) -> None:
        """Nothing native to free."""
