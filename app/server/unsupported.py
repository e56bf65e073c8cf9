"""Request fields the server knows but does not implement, in one table.

OpenAI clients send these to shape or annotate a reply (the older `functions` form of tool
calls, echoed prompts); ignoring one would answer with text that looks like
success. So each is refused with a 400 naming it, unless its value means "off", which clients
often send by default. Implementing a feature removes its line.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from app.server.errors import invalid


def _is_false(value: Any) -> bool:
    return value is False


@dataclass(frozen=True, slots=True)
class Unsupported:
    off: str  # the accepted "off" value, as the client should write it
    is_off: Callable[[Any], bool]


UNSUPPORTED: dict[str, Unsupported] = {
    "functions": Unsupported("[]", lambda v: v == []),
    "function_call": Unsupported('"none"', lambda v: v == "none"),
    "echo": Unsupported("false", _is_false),
    "suffix": Unsupported('""', lambda v: v == ""),
    "best_of": Unsupported("1", lambda v: not isinstance(v, bool) and v == 1),
    "modalities": Unsupported('["text"]', lambda v: v == ["text"]),
    "audio": Unsupported("null", lambda _v: False),
    # Effort is a reasoning model's setting in OpenAI's API, which refuses it for the others;
    # a GGUF model's thinking follows its chat template, which this server does not steer.
    "reasoning_effort": Unsupported("null", lambda _v: False),
}


def refuse_unsupported(fields: dict[str, Any]) -> None:
    """ApiError for the first unsupported field that is present and not off (null is absent)."""
    for name, feature in UNSUPPORTED.items():
        value = fields.get(name)
        if value is not None and not feature.is_off(value):
            message = (
                f"'{name}' is not supported by this server; leave it out or send {feature.off}"
            )
            raise invalid(name, message, code="unsupported_parameter")
