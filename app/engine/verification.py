"""The exact acceptance rule over one verification pass: which draft tokens the target keeps,
and its own token after them (Leviathan et al., 2023; greedy: the target's argmax, so the
reply is plain decoding's).

Row i of the pass follows the history and the i draft tokens before it. A grammar, when the
reply has one, masks each row before the sampling transform, its state following the history
(app/engine/constraint.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from app.engine.acceptance import accept_or_correct
from app.engine.config import GenerationConfig
from app.engine.constraint import ConstraintCursor
from app.engine.drafters import Draft
from app.engine.logprobs import TokenLogprob, token_logprob
from app.engine.sampling import FloatArray, distribution, greedy_token, sample
from app.llama.handle import ModelHandle


@dataclass(slots=True)
class Verdict:
    emitted: list[int]
    accepted: int
    logprobs: list[TokenLogprob] = field(default_factory=list)  # when the reply asks


def verify_rows(
    tokens: list[int],
    draft: Draft,
    rows: np.ndarray,
    config: GenerationConfig,
    rng: np.random.Generator,
    *,
    target: ModelHandle,
    grammar: ConstraintCursor | None,
) -> Verdict:
    """Apply the exact acceptance rule to each draft position, in order."""
    history = list(tokens)
    verdict = Verdict([], 0)

    def emit(token: int) -> None:
        # Row i follows history + the i tokens emitted before it, as the grammar does now.
        if config.logprobs is not None:
            row = rows[len(verdict.emitted)]
            verdict.logprobs.append(
                token_logprob(row, history, config, token, target, grammar=grammar)
            )
        verdict.emitted.append(token)

    for i, proposed in enumerate(draft.tokens):
        if config.sampling.greedy:
            best = _greedy(rows[i], history, config, grammar)
            if best != proposed:
                emit(best)
                return verdict
        else:
            p = _distribution(rows[i], history, config, grammar)
            kept, token = accept_or_correct(p, draft.probs[i], proposed, rng)
            if not kept:
                emit(token)
                return verdict
        emit(proposed)
        history.append(proposed)
        verdict.accepted = i + 1
        if target.is_eog(proposed):
            return verdict
    last = rows[len(draft.tokens)]
    if config.sampling.greedy:
        emit(_greedy(last, history, config, grammar))
    else:
        emit(sample(_distribution(last, history, config, grammar), rng))
    return verdict


def _greedy(
    row: np.ndarray, history: list[int], config: GenerationConfig, grammar: ConstraintCursor | None
) -> int:
    if grammar is None:
        return greedy_token(row, history, config.sampling)
    return grammar.greedy(row, history, config.sampling)


def _distribution(
    row: np.ndarray, history: list[int], config: GenerationConfig, grammar: ConstraintCursor | None
) -> FloatArray:
    masked = row if grammar is None else grammar.mask(row, history)
    return distribution(masked, history, config.sampling)
