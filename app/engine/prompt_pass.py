"""The prompt's pass: the target reads a reply's prompt, and a stop is heard while it does.

One feed of a long prompt runs for seconds on a CPU (a 4k-token prompt on a large model: tens
of seconds); so a prompt that leaves more than a batch to read is fed as ever longer prefixes,
each one whole batch more than the last (every one a plain `feed`, the one primitive), with the
stop flag read between them, and inside each batch too where the model can stop a pass
(LlamaModel.stop_byte: llama.cpp's abort callback, between graph nodes; the batch's rows are
dropped). A client that leaves, a server shutting down or the window's Stop then waits for a
graph node, not the whole pass.

Those feeds decode the very batches one feed of the whole prompt would: whole batches from
where the cache's hold ends (live, or restored from a saved conversation: held_for), then the
rest split as that feed splits it. So the reply is the same either way, to the bit (llama.cpp's
kernels may round a row by the size of the batch it is in: LlamaModel.uniform_batches). Where
the hold is not what held_for foresaw (a saved state that fails to restore, a cache that cannot
drop a suffix and starts over) the parts split differently; exact mode, which checks that
llama.cpp rounds every batch size alike, still gives the same reply.

Models on RPC workers run in a child process (app/engine/isolated_child.py) where a thread of
its own sets the stop flag as soon as the parent passes a Stop on, so there too a stop waits
for one part.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence

import numpy as np

from app.engine.control import GenerationControl
from app.errors import Cancelled
from app.llama.batches import PROMPT_ROWS
from app.llama.handle import ModelHandle

# Tokens one feed of a prompt read in parts decodes at least: a multiple of the batch, so that a
# target that reads one token a pass (n_batch 1) is not fed once per token.
MIN_PART = 64


def read_prompt(
    target: ModelHandle, tokens: Sequence[int], control: GenerationControl
) -> np.ndarray | None:
    """Make the target's cache hold `tokens`; the row its last token gives (the reply's first
    token is drawn from it), or None when a stop came first: the cache then holds a prefix of
    the prompt, whole batches, that a later reply reuses."""
    step = part_size(getattr(target, "n_batch", None))
    held: int | None = None  # what the cache held when the first part's feed began
    with _stop_mid_batch(target, control):
        try:
            if step:
                end = target.held_for(tokens) + step
                # A part's feed never leaves fewer than the last rows: one feed splits those
                # its way.
                while len(tokens) - end >= PROMPT_ROWS:
                    target.feed(tokens[:end], 0)
                    held = target.reused if held is None else held
                    control.read_prompt((end, len(tokens)))
                    if control.stop_requested:
                        break
                    end += step
                else:
                    return _last_part(target, tokens, control, held)
            else:
                return _last_part(target, tokens, control, held)
        except Cancelled:  # a stop heard inside a batch (LlamaModel.stop_byte): rolled back
            control.read_prompt(None)
    if held is not None:
        target.reused = held  # what the pass found held, not what its last part did
    return None


def _last_part(
    target: ModelHandle, tokens: Sequence[int], control: GenerationControl, held: int | None
) -> np.ndarray:
    rows = target.feed(tokens, min(PROMPT_ROWS, len(tokens)))[-1:]
    control.read_prompt(None)
    if held is not None:
        # The pass's count (cache_n), not its last part's: the parts before it were read now.
        target.reused = held
    return rows


@contextlib.contextmanager
def _stop_mid_batch(target: ModelHandle, control: GenerationControl) -> Iterator[None]:
    """A model that can stop inside a pass (LlamaModel.stop_byte) hears Stop there too: a batch
    of a big model on a CPU reads for tens of seconds."""
    if not hasattr(target, "stop_byte"):
        yield
        return
    target.stop_byte = control.stop_byte
    try:
        yield
    finally:
        target.stop_byte = None


def part_size(n_batch: int | None) -> int:
    """Tokens between two stop checks while a prompt is read: whole batches; 0 reads it in one
    feed (a target that does not say its batch)."""
    if not n_batch:
        return 0
    return n_batch * max(1, -(-MIN_PART // n_batch))
