"""What the engine and its drafters need from a loaded model, as a structural type.

`LlamaModel` satisfies it; so can a deterministic stand-in, which lets the speculative loop be
checked against exact enumeration without native code. Keep it to what the engine reads.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import numpy as np
import numpy.typing as npt


class ModelHandle(Protocol):
    path: Path
    n_vocab: int
    n_ctx: int
    # When set, every pass computes at least two rows (see LlamaModel.uniform_batches).
    uniform_batches: bool
    tokens: list[int]  # what the cache holds, in order
    # Of the last feed's history, what the cache held when it began (restored included); a
    # prompt read in parts (app/engine/prompt_pass.py) sets it to the whole pass's.
    reused: int

    def feed(self, history: Sequence[int], n_logits: int) -> npt.NDArray[np.float32]:
        """Make the cache hold exactly `history`; return logits of its last n_logits rows."""
        ...

    def held_for(self, history: Sequence[int]) -> int:
        """How many of history's first tokens a feed of it would not decode again: held in the
        cache, or in a saved state it would restore. Decodes and restores nothing."""
        ...

    def reset(self) -> None: ...

    def is_eog(self, token: int) -> bool: ...

    def token_bytes(self, token: int, *, special: bool = False) -> bytes: ...

    def detokenize(self, tokens: Sequence[int], *, special: bool = False) -> str: ...

    def close(self) -> None: ...


def common_prefix(cached: Sequence[int], history: Sequence[int]) -> int:
    """How many of `history`'s first tokens a cache holding `cached` already holds."""
    n = min(len(cached), len(history))
    # The usual case is that history extends the cache: one C-speed list compare, on slices
    # that are lists already when the inputs are (every pass of both models runs this).
    if _listed(history[:n]) == _listed(cached[:n]):
        return n
    i = 0
    while i < n and cached[i] == history[i]:
        i += 1
    return i


def _listed(tokens: Sequence[int]) -> list[int]:
    return tokens if isinstance(tokens, list) else list(tokens)
