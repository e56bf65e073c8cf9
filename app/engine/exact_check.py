"""Exact mode on a target: its setting per reply, and whether it holds (do passes of any size
give the same logits?).

Exact mode (docs/design.md) makes every target pass compute at least two rows, because llama.cpp's
CPU backend rounds a one-row pass differently from a batch, while passes of 2 to 17 rows are
bit-identical on the demo's F32 target. That holds where llama.cpp runs every batch size through
one kernel, not everywhere: on Gemma 3 270M Q4_K_M (AMD EPYC, AVX-512), with llama.cpp's
repacked CPU layout a token's logits move by up to 0.7 with the size of its pass and its row in
it, and by 0.46 between some sizes without that layout. So before a target's first exact
reply the engine replays the prompt's first tokens a step at a time and in batches and compares:
a difference is a witness that exact replies can still depart from plain decoding; agreement is
evidence, not proof.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from app.llama.handle import ModelHandle
from app.metrics.cost_model import MAX_GAMMA

# The last CHECK_STEPS of the prompt's first CHECK_TOKENS tokens (repeated if it is shorter) are
# computed a plain step at a time, and again as the last rows of one pass of each size: a short
# verification's, 8 (the most rows llama.cpp's CUDA backend multiplies with its matrix-vector
# kernels, MMVQ_MAX_BATCH_SIZE) and the longest verification below long drafts.
CHECK_STEPS = 8
CHECK_ROWS_PER_PASS = (3, 8, MAX_GAMMA + 1)
CHECK_TOKENS = max(CHECK_ROWS_PER_PASS) + 7  # a few tokens of context before the longest pass

EXACT_NOT_GUARANTEED = (
    "exact replies are not guaranteed with this model here: llama.cpp rounds its passes "
    "differently by size, so a greedy reply can still leave plain decoding's path at a near-tie"
)


def passes_agree(target: ModelHandle, prompt_ids: Sequence[int]) -> bool:
    """Whether, with target.uniform_batches set, each checked token's logits are bit-equal
    whether it is computed by a plain step or in a pass of each of CHECK_ROWS_PER_PASS rows.

    Empties the target's cache (exact mode starts from an empty one anyway)."""
    if not prompt_ids or target.n_ctx <= CHECK_TOKENS:
        return True
    tokens = [prompt_ids[i % len(prompt_ids)] for i in range(CHECK_TOKENS)]
    first_step = CHECK_TOKENS - CHECK_STEPS
    was_uniform = target.uniform_batches
    target.uniform_batches = True
    try:
        target.reset()
        target.feed(tokens[:first_step], 0)
        stepped = [
            target.feed(tokens[:end], 1)[0] for end in range(first_step + 1, CHECK_TOKENS + 1)
        ]
        for rows in CHECK_ROWS_PER_PASS:
            target.feed(tokens[: CHECK_TOKENS - rows], 0)  # back, the rows before kept
            batched = target.feed(tokens, rows)
            compared = min(rows, CHECK_STEPS)
            pairs = zip(stepped[-compared:], batched[-compared:], strict=True)
            if not all(np.array_equal(a, b) for a, b in pairs):
                return False
        return True
    finally:
        target.uniform_batches = was_uniform
        target.reset()


class ExactMode:
    """A target's exact-mode setting, flipped as each reply asks, and whether it holds there."""

    def __init__(self, target: ModelHandle) -> None:
        self.target = target
        self._passes_agree: bool | None = None  # checked before the target's first exact reply

    def begin_reply(self, exact: bool, prompt_ids: Sequence[int]) -> str | None:
        """Set the target up for a reply; the notice the reply must carry, if any."""
        if self.target.uniform_batches != exact:
            self.target.uniform_batches = exact
            # Rows cached under the other setting would mix the two kernels' rounding.
            self.target.reset()
        if exact and self._passes_agree is None:
            self._passes_agree = passes_agree(self.target, prompt_ids)
        # Every exact reply says it, as the fact holds for as long as the target is loaded.
        return EXACT_NOT_GUARANTEED if exact and not self._passes_agree else None
