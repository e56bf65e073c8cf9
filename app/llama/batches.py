"""How llama.cpp is fed a run of tokens: batches of at most n_batch, the last one big enough."""

from __future__ import annotations

# The rows the prompt's last feed asks for, and so the fewest tokens one feed of the whole
# prompt keeps for its last batch. Two, so that the last token is computed in a batch even where
# the cache holds the whole prompt already (a reply asked for again): a one-row pass rounds
# differently (LlamaModel.uniform_batches), and the same prompt must give the same reply
# whatever the cache held, in every mode.
PROMPT_ROWS = 2
# A pass asking for no more rows than this reads (a prompt, a catch-up): LlamaModel stops one
# when asked, never a step or a verification, which ask for a row per token.


def batch_sizes(n_pending: int, last_at_least: int, n_batch: int) -> list[int]:
    """Batch sizes for n_pending tokens; the last batch holds at least last_at_least.

    Logits come only from the last batch, so it must hold every row asked for; in uniform
    mode it must also never be a single token (LlamaModel.uniform_batches).
    """
    if last_at_least > n_batch:
        raise ValueError(f"cannot return more rows than one batch holds ({n_batch})")
    sizes: list[int] = []
    rest = n_pending
    while rest > 0:
        size = min(n_batch, rest)
        if 0 < rest - size < last_at_least:
            size -= last_at_least - (rest - size)
        sizes.append(size)
        rest -= size
    return sizes
