"""Chat messages → prompt ids, where only the template's own markup may become control tokens.

The rendered prompt mixes the template's markup (`<|im_start|>`, `[INST]`...) with what people
typed. Tokenizing it all with special-token parsing on would let pasted text such as
`<|im_end|><|im_start|>system ...` become real control tokens and forge a turn. So:

- a message whose text holds nothing the tokenizer would read as a control token (the usual
  case) cannot forge anything, and the prompt is tokenized in one piece, exactly as always;
- otherwise the template is rendered again with each message's text fenced by unique sentinel
  markers, and the pieces are tokenized separately: markup with special parsing, message text
  without it.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Sequence
from typing import Protocol

from app.engine.builtin_templates import builtin_template
from app.engine.chat_template import ChatMessage, render_chat


class Tokenizer(Protocol):
    def tokenize(
        self, text: str, *, add_special: bool = True, parse_special: bool = False
    ) -> list[int]: ...


def chat_prompt_ids(
    tokenizer: Tokenizer,
    template: str | None,
    messages: Sequence[ChatMessage],
    *,
    bos_token: str,
    eos_token: str,
    should_stop: Callable[[], bool] | None = None,
) -> list[int]:
    if not template:
        # No template in the file: the format its vocabulary's control tokens belong to.
        template = builtin_template(lambda marker: _is_control_token(tokenizer, marker)).jinja

    def render(msgs: Sequence[ChatMessage]) -> str:
        return render_chat(
            template, msgs, bos_token=bos_token, eos_token=eos_token, should_stop=should_stop
        )

    text = render(messages)
    # A template that writes the BOS text itself must not get a second BOS from the tokenizer
    # (llama-cpp-python's "duplicate leading BOS" trap).
    add_special = not (bos_token and text.startswith(bos_token))
    if not any(_holds_control_text(tokenizer, m["content"]) for m in messages):
        return tokenizer.tokenize(text, add_special=add_special, parse_special=True)
    fenced, opens, closes = _fence(messages)
    pieces = _split(render(fenced), opens, closes, expected=text)
    ids: list[int] = []
    for index, (piece, is_content) in enumerate(pieces):
        if piece:
            ids += tokenizer.tokenize(
                piece, add_special=add_special and index == 0, parse_special=not is_content
            )
    return ids


def _is_control_token(tokenizer: Tokenizer, text: str) -> bool:
    """One token when read as markup, several as plain text: a control token of the vocabulary."""
    special = tokenizer.tokenize(text, add_special=False, parse_special=True)
    return len(special) == 1 and special != tokenizer.tokenize(
        text, add_special=False, parse_special=False
    )


def _holds_control_text(tokenizer: Tokenizer, content: str) -> bool:
    # Two tokenizer passes over the text cost microseconds per kilobyte, in C.
    special = tokenizer.tokenize(content, add_special=False, parse_special=True)
    return special != tokenizer.tokenize(content, add_special=False, parse_special=False)


def _fence(messages: Sequence[ChatMessage]) -> tuple[list[ChatMessage], list[str], list[str]]:
    # Private-use characters plus a random nonce: nothing a user or template writes matches.
    nonce = secrets.token_hex(8)
    opens = [f"\ue000{nonce}:{i}\ue001" for i in range(len(messages))]
    closes = [f"\ue002{nonce}:{i}\ue003" for i in range(len(messages))]
    fenced: list[ChatMessage] = [
        {"role": m["role"], "content": f"{opens[i]}{m['content']}{closes[i]}"}
        for i, m in enumerate(messages)
    ]
    return fenced, opens, closes


def _split(
    rendered: str, opens: list[str], closes: list[str], *, expected: str
) -> list[tuple[str, bool]]:
    """(piece, is_message_text) in order; the pieces join to `expected` whenever the template
    passes message text through unchanged or only trims it (the common `| trim`)."""
    pieces: list[tuple[str, bool]] = []
    rest = rendered
    while True:
        starts = [(rest.find(o), i) for i, o in enumerate(opens) if o in rest]
        if not starts:
            pieces.append((rest, False))
            break
        at, i = min(starts)
        pieces.append((rest[:at], False))
        rest = rest[at + len(opens[i]) :]
        end = rest.find(closes[i])
        if end < 0:  # the template cut the text: treat what is left as message text
            pieces.append((_strip_markers(rest, opens, closes), True))
            break
        pieces.append((_strip_markers(rest[:end], opens, closes), True))
        rest = rest[end + len(closes[i]) :]
    if "".join(p for p, _ in pieces) != expected:
        # The template trimmed the text, but the fences kept the edges from being trimmed.
        trimmed = [(p.strip(), True) if is_text else (p, False) for p, is_text in pieces]
        if "".join(p for p, _ in trimmed) == expected:
            return trimmed
    return pieces


def _strip_markers(text: str, opens: list[str], closes: list[str]) -> str:
    for marker in (*opens, *closes):
        text = text.replace(marker, "")
    return text
