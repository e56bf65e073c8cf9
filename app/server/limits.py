"""How much one client may ask of the server, and the size checks made before a request
takes the engine's turn.

Every limit has a default sane for a desktop: a request that breaks one gets its 4xx at once,
instead of holding the one engine while its template renders and its text tokenizes. The
checks here cost a count and one pass over the prompt's text; the exact token count stays with
the engine, which refuses a prompt longer than the context before it generates anything.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from app.server.errors import ApiError, invalid
from app.server.schemas import ApiRequest

# Far more than any prompt that fits a context; a bigger body is refused before it is parsed.
MAX_BODY_BYTES = 8 * 1024 * 1024
# A client on this machine sends a request head in microseconds; a slow one holds a socket.
DEFAULT_HEADER_TIMEOUT_S = 10.0
# An 8 MiB body crosses loopback in milliseconds; this leaves room for a slow network client.
DEFAULT_BODY_TIMEOUT_S = 30.0
# Requests run one at a time and at most --queue-size wait, so more sockets serve no one.
DEFAULT_MAX_CONNECTIONS = 32
# More characters than one token of any common vocabulary spells: the longest pieces are runs
# of spaces, dashes or '#' (81 characters in SmolLM2's). A prompt longer than n_ctx times this
# cannot fit the context, so it is refused without rendering or tokenizing it.
MAX_CHARS_PER_TOKEN = 128
# Common chat templates (ChatML, Llama 3, Gemma) spend four or more tokens on each message's
# markup, so more messages than n_ctx over this cannot fit; rendering each costs the engine's
# turn about half a millisecond.
MIN_TOKENS_PER_MESSAGE = 4


@dataclass(frozen=True, slots=True)
class Limits:
    """None for max_messages / max_prompt_chars: derived from the context size (see below)."""

    header_timeout_s: float = DEFAULT_HEADER_TIMEOUT_S
    body_timeout_s: float = DEFAULT_BODY_TIMEOUT_S
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    max_body_bytes: int = MAX_BODY_BYTES
    max_messages: int | None = None
    max_prompt_chars: int | None = None

    def message_cap(self, n_ctx: int) -> int:
        if self.max_messages is not None:
            return self.max_messages
        return max(1, n_ctx // MIN_TOKENS_PER_MESSAGE)

    def prompt_char_cap(self, n_ctx: int) -> int:
        if self.max_prompt_chars is not None:
            return self.max_prompt_chars
        return n_ctx * MAX_CHARS_PER_TOKEN


def check_message_count(body: Any, limits: Limits, n_ctx: int) -> None:
    """Refuse a chat body with too many messages before any of them is parsed (ApiError)."""
    messages = body.get("messages") if isinstance(body, dict) else None
    cap = limits.message_cap(n_ctx)
    if isinstance(messages, list) and len(messages) > cap:
        message = f"'messages' holds {len(messages)} messages; the server takes at most {cap}"
        raise invalid("messages", message, code="array_above_max_length")


def check_prompt_size(request: ApiRequest, limits: Limits, n_ctx: int) -> None:
    """Refuse a prompt whose characters alone say it cannot fit the context (ApiError)."""
    if request.messages is not None:
        field = "messages"
        chars = sum(len(m["role"]) + len(m["content"]) for m in request.messages)
    else:
        field = "prompt"
        chars = len(request.prompt or "")
    cap = limits.prompt_char_cap(n_ctx)
    if chars > cap:
        message = f"the prompt holds {chars} characters; the server takes at most {cap}"
        raise ApiError(400, message, code="context_length_exceeded", param=field)
