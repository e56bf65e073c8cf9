"""A loaded model's vocabulary: text to token ids and back, and its special ids.

A mixin of `LlamaModel` (app/llama/model.py), which sets what it reads: llama-cpp-python's
module, the model's vocabulary handle, a cache of token pieces and its end-of-generation ids.
"""

from __future__ import annotations

import codecs
import ctypes
from collections.abc import Sequence
from typing import Any


class TokenText:
    _lib: Any
    vocab: Any
    _piece_cache: dict[int, bytes]
    _eog_ids: frozenset[int]

    def tokenize(
        self, text: str, *, add_special: bool = True, parse_special: bool = False
    ) -> list[int]:
        data = text.encode("utf-8")
        capacity = len(data) + 16
        while True:
            out = (self._lib.llama_token * capacity)()
            n = self._lib.llama_tokenize(
                self.vocab, data, len(data), out, capacity, add_special, parse_special
            )
            if n >= 0:
                return list(out[:n])
            capacity = -n

    def token_bytes(self, token: int, *, special: bool = False) -> bytes:
        """The bytes a token stands for; special tokens render as "" unless special=True."""
        key = -1 - token if special else token
        piece = self._piece_cache.get(key)
        if piece is None:
            buf = ctypes.create_string_buffer(64)
            n = self._lib.llama_token_to_piece(self.vocab, token, buf, len(buf), 0, special)
            if n < 0:  # a piece can outgrow any fixed buffer; ask again with the size given
                buf = ctypes.create_string_buffer(-n)
                n = self._lib.llama_token_to_piece(self.vocab, token, buf, len(buf), 0, special)
            piece = buf.raw[:n]
            self._piece_cache[key] = piece
        return piece

    def detokenize(self, tokens: Sequence[int], *, special: bool = False) -> str:
        pieces = (self.token_bytes(t, special=special) for t in tokens)
        return b"".join(pieces).decode("utf-8", "replace")

    def is_eog(self, token: int) -> bool:
        return token in self._eog_ids

    def token_text(self, token: int) -> str:
        """The vocabulary's raw text for a token id, as compatibility checks compare it."""
        raw = self._lib.llama_vocab_get_text(self.vocab, token)
        return (raw or b"").decode("utf-8", "replace")

    @property
    def bos_id(self) -> int:
        return int(self._lib.llama_vocab_bos(self.vocab))

    @property
    def eos_id(self) -> int:
        return int(self._lib.llama_vocab_eos(self.vocab))

    @property
    def bos_text(self) -> str:
        """The BOS token's text, as chat templates name it; "" when the vocabulary has none."""
        return self.token_text(self.bos_id) if self.bos_id >= 0 else ""

    @property
    def eos_text(self) -> str:
        """The EOS token's text, as chat templates name it; "" when the vocabulary has none."""
        return self.token_text(self.eos_id) if self.eos_id >= 0 else ""

    @property
    def add_bos(self) -> bool:
        return bool(self._lib.llama_vocab_get_add_bos(self.vocab))


def whole_characters(data: bytes) -> str:
    """UTF-8 `data` as text, without a character cut short at its end (bytes that are not
    UTF-8 elsewhere read as U+FFFD, as an incremental decoder gives them while streaming)."""
    return codecs.getincrementaldecoder("utf-8")(errors="replace").decode(data)
