"""Whether exact mode holds on a target: do its passes give the same logits whatever their size?

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

# Tokens the check reads (the prompt's first, repeated if it is shorter) and how many of them it
# computes both ways: a plain step's two rows against a verification's few and γ auto's longest.
CHECK_TOKENS = 16
CHECK_STEPS = 8
CHECK_ROWS_PER_PASS = (3, 8)

EXACT_NOT_GUARANTEED = (
    "exact replies are not guaranteed with this model here: llama.cpp rounds its passes "
    "differently by size, so a greedy reply can still leave plain decoding's path at a near-tie"
)


def passes_agree(target: ModelHandle, prompt_ids: Sequence[int]) -> bool:
    """Whether, with target.uniform_batches set, each checked token's logits are bit-equal
    whether it is computed by a plain step or in passes of CHECK_ROWS_PER_PASS rows.

    Empties the target's cache (exact mode starts from an empty one anyway)."""
    n_tokens = min(CHECK_TOKENS, target.n_ctx - 1)
    if not prompt_ids or n_tokens < CHECK_STEPS + 2:
        return True
    tokens = [prompt_ids[i % len(prompt_ids)] for i in range(n_tokens)]
    prefix = n_tokens - CHECK_STEPS
    was_uniform = target.uniform_batches
    target.uniform_batches = True
    try:
        target.reset()
        target.feed(tokens[:prefix], 0)
        stepped = [target.feed(tokens[:end], 1)[0] for end in range(prefix + 1, n_tokens + 1)]
        for rows_per_pass in CHECK_ROWS_PER_PASS:
            target.feed(tokens[:prefix], 0)  # back to the prefix, its rows kept
            batched: list[np.ndarray] = []
            end = prefix
            while end < n_tokens:
                rows = min(rows_per_pass, n_tokens - end)
                end += rows
                batched.extend(target.feed(tokens[:end], rows))
            if not all(np.array_equal(a, b) for a, b in zip(stepped, batched, strict=True)):
                return False
        return True
    finally:
        target.uniform_batches = was_uniform
        target.reset()
