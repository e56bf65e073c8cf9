"""Earlier prompts' KV cache states kept in host memory, so a prompt sent again is not re-read.

A context's cache holds one conversation. When a request starts another, the tokens it drops
are a whole conversation's prefill; llama-server keeps such states in host memory (its prompt
cache) and restores the longest matching one when a prompt comes back. This is the same idea
for `LlamaModel.feed`: a state is saved with `llama_state_seq_get_data` when `feed` drops tokens
an earlier call had settled, and restored with `llama_state_seq_set_data` when it holds more of
a new history than the live cache does. Restoring copies bytes; re-reading runs the model.

Entries are kept newest-used first within a byte budget. An entry whose tokens another entry
extends is dropped, since the longer one serves every history the shorter one would.
"""

from __future__ import annotations

import ctypes
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from app.llama.handle import common_prefix

# Fewer dropped tokens than this are not worth a state copy: re-reading them takes a few passes.
MIN_SAVED_TOKENS = 32
# A restore must hold this many more of the history than the live cache, or it is not worth
# the copy; it also keeps the search off the speculative loop's short verification passes.
MIN_RESTORE_GAIN = 16


@dataclass(frozen=True, slots=True)
class SavedState:
    tokens: tuple[int, ...]
    state: ctypes.Array[ctypes.c_uint8]

    @property
    def size(self) -> int:
        return len(self.state)


class PromptCache:
    """Saved sequence states by the tokens they hold, within `budget_bytes` of host memory."""

    def __init__(self, budget_bytes: int) -> None:
        self.budget_bytes = budget_bytes
        self._entries: OrderedDict[tuple[int, ...], SavedState] = OrderedDict()
        self.bytes_used = 0

    def __len__(self) -> int:
        return len(self._entries)

    def find(self, history: Sequence[int], *, beyond: int) -> tuple[SavedState, int] | None:
        """The entry holding the most of `history`, when that is more than `beyond` tokens,
        with how many it holds."""
        if len(history) <= beyond:
            return None
        best: SavedState | None = None
        best_len = beyond
        for entry in self._entries.values():
            if best_len == len(history):
                break
            tokens = entry.tokens
            # One compare rules out most entries before the full prefix is measured.
            if len(tokens) <= best_len or tokens[best_len] != history[best_len]:
                continue
            held = common_prefix(tokens, history)
            if held > best_len:
                best, best_len = entry, held
        if best is None:
            return None
        self._entries.move_to_end(best.tokens, last=False)
        return best, best_len

    def add(self, tokens: Sequence[int], state: ctypes.Array[ctypes.c_uint8]) -> None:
        key = tuple(tokens)
        if len(state) > self.budget_bytes:
            return
        for other in list(self._entries):
            if len(other) >= len(key) and other[: len(key)] == key:
                self._entries.move_to_end(other, last=False)
                return  # a longer entry already serves every history this one would
            if key[: len(other)] == other:
                self._drop(other)
        self._entries[key] = SavedState(key, state)
        self._entries.move_to_end(key, last=False)
        self.bytes_used += len(state)
        while self.bytes_used > self.budget_bytes:
            self._drop(next(reversed(self._entries)))

    def discard(self, entry: SavedState) -> None:
        if entry.tokens in self._entries:
            self._drop(entry.tokens)

    def clear(self) -> None:
        self._entries.clear()
        self.bytes_used = 0

    def _drop(self, key: tuple[int, ...]) -> None:
        self.bytes_used -= self._entries.pop(key).size


def save_sequence(lib: Any, ctx: Any, seq: int) -> ctypes.Array[ctypes.c_uint8] | None:
    """A copy of sequence `seq`'s cache cells, or None when llama.cpp wrote nothing."""
    size = int(lib.llama_state_seq_get_size(ctx, seq))
    if size == 0:
        return None
    state = (ctypes.c_uint8 * size)()
    written = int(lib.llama_state_seq_get_data(ctx, state, size, seq))
    return state if written == size else None


def restore_sequence(lib: Any, ctx: Any, state: ctypes.Array[ctypes.c_uint8], seq: int) -> bool:
    """Replace sequence `seq`'s cells with a saved state; False when llama.cpp refused it."""
    return int(lib.llama_state_seq_set_data(ctx, state, len(state), seq)) > 0
