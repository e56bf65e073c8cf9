"""Log probabilities in OpenAI's shapes: chat's `logprobs.content` entries and the legacy
completions' parallel lists. The figures are the engine's (app/engine/logprobs.py)."""

from __future__ import annotations

import codecs
from collections.abc import Sequence
from typing import Any

from app.engine.logprobs import TokenChoice, TokenLogprob

# JSON has no -inf; OpenAI reports a token with no chance as -9999.0.
_FLOOR = -9999.0


def _text(piece: bytes) -> str:
    return piece.decode("utf-8", errors="replace")


def _legacy_text(piece: bytes) -> str:
    """A token as the legacy completions name it. A token that is not valid UTF-8 on its own
    (part of a character) is "bytes:" and its bytes as \\xNN escapes, as OpenAI writes it:
    as a replacement character, every such piece would read the same."""
    try:
        return piece.decode("utf-8")
    except UnicodeDecodeError:
        return "bytes:" + "".join(f"\\x{b:02x}" for b in piece)


def _legacy_top(top: Sequence[TokenChoice]) -> dict[str, float]:
    """`top_logprobs` keyed by token text. Distinct tokens can still share a text (special
    tokens all render as "", a byte-fallback token as the character token it spells); the key
    keeps the higher of their logprobs."""
    shaped: dict[str, float] = {}
    for choice in top:
        key = _legacy_text(choice.piece)
        shaped[key] = max(shaped.get(key, _FLOOR), _logprob(choice))
    return shaped


def _logprob(choice: TokenChoice) -> float:
    return max(choice.logprob, _FLOOR)


def _choice(choice: TokenChoice) -> dict[str, Any]:
    return {"token": _text(choice.piece), "logprob": _logprob(choice), "bytes": list(choice.piece)}


def chat_logprobs(entries: Sequence[TokenLogprob]) -> dict[str, Any]:
    """A chat choice's `logprobs`: one entry per token, with its top alternatives."""
    content = [
        {**_choice(entry.chosen), "top_logprobs": [_choice(c) for c in entry.top]}
        for entry in entries
    ]
    return {"content": content, "refusal": None}


class CompletionLogprobs:
    """The legacy completions' `logprobs` object; `text_offset` runs on across stream chunks."""

    def __init__(self, top: int) -> None:
        self._top = top
        # Offsets count characters of the completion's text as it is sent: a character split
        # across tokens is one character there, not one replacement character per piece, so
        # the offsets follow the text through the same incremental decoding.
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._offset = 0

    def shape(self, entries: Sequence[TokenLogprob]) -> dict[str, Any]:
        tokens = [_legacy_text(entry.chosen.piece) for entry in entries]
        offsets = []
        for entry in entries:
            # A token that ends a character begun by the one before starts where it does: the
            # character's bytes wait in the decoder until it is whole.
            offsets.append(self._offset)
            self._offset += len(self._decoder.decode(entry.chosen.piece))
        return {
            "tokens": tokens,
            "token_logprobs": [_logprob(entry.chosen) for entry in entries],
            "top_logprobs": [_legacy_top(entry.top) for entry in entries] if self._top else None,
            "text_offset": offsets,
        }
