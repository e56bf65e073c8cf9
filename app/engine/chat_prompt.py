"""Chat messages → prompt ids, where only the template's own markup may become control tokens.

The rendered prompt mixes the template's markup (`<|im_start|>`, `[INST]`...) with what people
typed. Tokenizing it all with special-token parsing on would let pasted text such as
`<|im_end|><|im_start|>system ...` become real control tokens and forge a turn. So:

- a message whose text holds nothing the tokenizer would read as a control token (the usual
  case) cannot forge anything, and the prompt is tokenized in one piece, exactly as always;
- otherwise the template is rendered again with each message's text fenced by unique sentinel
  markers, and the pieces are tokenized separately: markup with special parsing, message text
  without it.

What a request says about functions (names, descriptions, parameter schemas, earlier calls'
arguments) is text from the same people, and is fenced the same way, every string in it.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol

from app.engine.builtin_templates import builtin_template
from app.engine.chat_template import ChatMessage, render_chat
from app.engine.tool_calls import ToolOffer, for_template, tool_dialect


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
    tools: ToolOffer | None = None,
) -> list[int]:
    if not template:
        # No template in the file: the format its vocabulary's control tokens belong to.
        template = builtin_template(lambda marker: _is_control_token(tokenizer, marker)).jinja
    messages, tool_shapes = for_template(messages, tools, tool_dialect(template))

    def render(msgs: Sequence[ChatMessage], shapes: list[dict[str, Any]] | None) -> str:
        return render_chat(
            template,
            msgs,
            bos_token=bos_token,
            eos_token=eos_token,
            tools=shapes,
            should_stop=should_stop,
        )

    text = render(messages, tool_shapes)
    # A template that writes the BOS text itself must not get a second BOS from the tokenizer
    # (llama-cpp-python's "duplicate leading BOS" trap).
    add_special = not (bos_token and text.startswith(bos_token))
    given = [messages, tool_shapes]
    if not any(_holds_control_text(tokenizer, piece) for piece in _strings(given)):
        return tokenizer.tokenize(text, add_special=add_special, parse_special=True)
    fence = _Fence(lambda piece: _holds_control_text(tokenizer, piece))
    fenced = render(fence.wrap(messages), fence.wrap(tool_shapes))
    pieces = _split(fenced, fence.opens, fence.closes, expected=text)
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


def _strings(value: Any) -> Iterator[str]:
    """Every string a person wrote in messages or functions: texts, keys and values."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(key)
            yield from _strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item)


class _Fence:
    """Numbered markers around each string that holds control-token text; private-use
    characters plus a random nonce, so nothing a user or template writes matches them. Other
    strings (dict keys such as `function` or `properties` included) stay as they are, so a
    template finds what it looks up."""

    def __init__(self, needs_fence: Callable[[str], bool]) -> None:
        self._needs_fence = needs_fence
        self._nonce = secrets.token_hex(8)
        self.opens: list[str] = []
        self.closes: list[str] = []

    def wrap(self, value: Any) -> Any:
        if isinstance(value, str):
            if not self._needs_fence(value):
                return value
            i = len(self.opens)
            self.opens.append(f"\ue000{self._nonce}:{i}\ue001")
            self.closes.append(f"\ue002{self._nonce}:{i}\ue003")
            return f"{self.opens[i]}{value}{self.closes[i]}"
        if isinstance(value, dict):
            return {self.wrap(key): self.wrap(item) for key, item in value.items()}
        if isinstance(value, list | tuple):
            return [self.wrap(item) for item in value]
        return value


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
