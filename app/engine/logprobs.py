"""Log probabilities of the tokens a reply emits, for OpenAI's `logprobs` / `top_logprobs`.

The distribution reported is the target's own: the log-softmax of its logits after the grammar
mask (when the reply has one) and the logit bias and penalties, before temperature, top-k,
top-p and min-p. Those last four only reshape how a token is drawn, so leaving them out keeps
the figures comparable across sampling settings. llama-server's `n_probs` (unless
`post_sampling_probs`) and vLLM's default `raw_logprobs` go one step further back, to the raw
logits; here the grammar and the penalties count because they decide which tokens the reply
can hold, so a greedy reply's token is always the most likely one reported. A token the grammar
forbids has logprob -inf and never appears among the top entries.

They come from the verification rows the loop already has, so asking for them costs no model
pass, only a softmax over the vocabulary per emitted token.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from app.engine.config import GenerationConfig
from app.engine.sampling import penalized_logits

if TYPE_CHECKING:
    from app.engine.constraint import ConstraintCursor
    from app.llama.handle import ModelHandle


@dataclass(frozen=True, slots=True)
class TokenChoice:
    token_id: int
    logprob: float
    piece: bytes  # the token's bytes; a piece of a UTF-8 character when it splits one


@dataclass(frozen=True, slots=True)
class TokenLogprob:
    """One emitted token's log probability and the `top` most likely tokens at its position,
    most likely first (ties by token id)."""

    chosen: TokenChoice
    top: tuple[TokenChoice, ...]


def token_logprob(
    row: np.ndarray,
    history: Sequence[int],
    config: GenerationConfig,
    chosen: int,
    target: ModelHandle,
    *,
    grammar: ConstraintCursor | None = None,
) -> TokenLogprob:
    """The entry of `chosen`, drawn after `history`, from the target's row for that position.
    `grammar` is the reply's, its state following the history."""
    masked = row if grammar is None else grammar.mask(row, history)
    z = penalized_logits(masked, history, config.sampling).astype(np.float64)
    top = config.logprobs or 0
    token_bytes = target.token_bytes
    peak = np.max(z)
    logp = z - (peak + np.log(np.sum(np.exp(z - peak))))
    choices: tuple[TokenChoice, ...] = ()
    if top > 0:
        k = min(top, logp.shape[0])
        best = np.argpartition(-logp, k - 1)[:k]
        best = best[np.lexsort((best, -logp[best]))]
        choices = tuple(
            TokenChoice(int(t), float(logp[t]), token_bytes(int(t)))
            for t in best
            if np.isfinite(logp[t])
        )
    return TokenLogprob(TokenChoice(chosen, float(logp[chosen]), token_bytes(chosen)), choices)
