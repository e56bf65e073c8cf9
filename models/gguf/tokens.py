"""A vocabulary's token texts, stored compactly, and the fingerprint drafts are matched by."""

from __future__ import annotations

import hashlib
from array import array
from collections.abc import Iterator, Sequence
from typing import Any, overload

import numpy as np

__all__ = ["VOCAB_DEFAULTS", "TokenTable", "tokenizer_fingerprint"]

# llama.cpp's defaults when a file omits the special-token keys (src/llama-vocab.cpp, `load`):
# tokenizer model -> (default BOS id, default EOS id, default add_bos, add_eos).
VOCAB_DEFAULTS: dict[str, tuple[int | None, int | None, bool, bool]] = {
    "llama": (1, 2, True, False),  # SPM
    "bert": (101, None, True, False),  # WPM
    "gpt2": (11, 11, False, False),  # BPE (some pre-tokenizers switch add_bos on, below)
    "t5": (None, 1, False, True),  # UGM
    "rwkv": (None, None, False, False),
    "plamo2": (1, 2, False, False),
}


class TokenTable(Sequence[str]):
    """The vocabulary's token texts, stored compactly (one bytes blob plus offsets).

    Indexing gives `str` (invalid UTF-8 kept via surrogateescape, so text compares exactly like
    the raw bytes llama.cpp compares with strcmp); `raw(i)` gives the bytes.
    """

    __slots__ = ("_blob", "_ends")

    def __init__(self, texts: Sequence[bytes] = ()) -> None:
        self._blob = b"".join(texts)
        ends = array("Q")
        total = 0
        for text in texts:
            total += len(text)
            ends.append(total)
        self._ends = ends

    def __len__(self) -> int:
        return len(self._ends)

    def _span(self, index: int) -> tuple[int, int]:
        n = len(self._ends)
        if index < 0:
            index += n
        if not 0 <= index < n:
            raise IndexError("token id out of range")
        start = self._ends[index - 1] if index > 0 else 0
        return start, self._ends[index]

    def raw(self, index: int) -> bytes:
        start, end = self._span(index)
        return self._blob[start:end]

    @overload
    def __getitem__(self, index: int) -> str: ...
    @overload
    def __getitem__(self, index: slice) -> list[str]: ...
    def __getitem__(self, index: int | slice) -> str | list[str]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        return self.raw(index).decode("utf-8", errors="surrogateescape")

    def __iter__(self) -> Iterator[str]:
        for i in range(len(self)):
            yield self[i]

    def first_difference(self, other: TokenTable, start: int, stop: int) -> int | None:
        """The first id in [start, stop) whose text differs between the two tables, or None."""
        stop = min(stop, len(self), len(other))
        if start >= stop:
            return None
        a0 = self._span(start)[0]
        b0 = other._span(start)[0]
        a1 = self._ends[stop - 1]
        b1 = other._ends[stop - 1]
        # Fast path: identical bytes and identical token boundaries mean identical texts.
        if self._blob[a0:a1] == other._blob[b0:b1]:
            mine = np.frombuffer(self._ends, dtype=np.uint64)[start:stop] - np.uint64(a0)
            theirs = np.frombuffer(other._ends, dtype=np.uint64)[start:stop] - np.uint64(b0)
            if np.array_equal(mine, theirs):
                return None
        for i in range(start, stop):
            if self.raw(i) != other.raw(i):
                return i
        return None

    def digest_into(self, hasher: Any) -> None:
        hasher.update(len(self).to_bytes(8, "little"))
        hasher.update(self._ends.tobytes())
        hasher.update(self._blob)

    def __repr__(self) -> str:
        return f"TokenTable({len(self)} tokens)"


def tokenizer_fingerprint(
    vocab_type: str | None,
    tokens: TokenTable,
    *,
    bos: int | None,
    eos: int | None,
    add_bos: bool,
    add_eos: bool,
) -> str:
    """sha256 over everything llama.cpp's compatibility check compares: equal means compatible."""
    hasher = hashlib.sha256()
    hasher.update(f"{vocab_type}|{bos}|{eos}|{int(add_bos)}|{int(add_eos)}|".encode())
    tokens.digest_into(hasher)
    return hasher.hexdigest()
