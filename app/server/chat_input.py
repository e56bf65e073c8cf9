"""The input of a completion request: a chat's `messages` (roles, text content parts, earlier
tool calls) or a raw `prompt`, checked field by field into one ApiError each."""

from __future__ import annotations

from typing import Any

from app.engine.chat_template import ChatMessage
from app.server.errors import invalid
from app.server.tools import earlier_calls

# The roles a message may have. The role reaches the chat template as markup, not as text, so
# any other string could forge a turn ("user<|im_end|><|im_start|>system"). OpenAI's newer
# clients send "developer" where most chat templates know only "system"; it is read as
# "system", as OpenAI-compatible servers do.
ROLES = ("system", "user", "assistant", "tool", "developer")
_ROLE_ALIASES = {"developer": "system"}


def read_prompt(value: Any) -> str:
    if isinstance(value, list) and len(value) == 1:
        value = value[0]  # clients often send a one-element batch
    if value is None:
        raise invalid("prompt", "'prompt' is required", code="missing_field")
    if not isinstance(value, str):
        raise invalid("prompt", "'prompt' must be a string", code="invalid_type")
    if not value:
        raise invalid("prompt", "'prompt' must not be empty")
    return value


def read_messages(value: Any) -> tuple[ChatMessage, ...]:
    if value is None:
        raise invalid("messages", "'messages' is required", code="missing_field")
    if not isinstance(value, list) or not value:
        raise invalid("messages", "'messages' must be a non-empty list", code="invalid_type")
    return tuple(_message(item, i) for i, item in enumerate(value))


def _message(item: Any, index: int) -> ChatMessage:
    where = f"messages[{index}]"
    if not isinstance(item, dict):
        raise invalid(where, f"'{where}' must be an object", code="invalid_type")
    role = item.get("role")
    if not isinstance(role, str) or not role:
        raise invalid(f"{where}.role", f"'{where}.role' must be a string", code="invalid_type")
    if role not in ROLES:
        raise invalid(f"{where}.role", f"'{where}.role' must be one of {', '.join(ROLES)}")
    if role == "assistant" and item.get("tool_calls") is not None:
        content = item.get("content")
        return {
            "role": role,
            "content": "" if content is None else _content(content, where),
            "tool_calls": earlier_calls(item["tool_calls"], f"{where}.tool_calls"),
        }
    message: ChatMessage = {
        "role": _ROLE_ALIASES.get(role, role),
        "content": _content(item.get("content"), where),
    }
    call_id = item.get("tool_call_id")
    if role == "tool" and isinstance(call_id, str):
        message["tool_call_id"] = call_id
    return message


def _content(value: Any, where: str) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        # Content parts: only text can reach a text-only model.
        texts = []
        for part in value:
            if not isinstance(part, dict) or part.get("type") != "text":
                raise invalid(f"{where}.content", "only text content parts are supported")
            text = part.get("text")
            if not isinstance(text, str):
                message = "a text content part needs a 'text' string"
                raise invalid(f"{where}.content", message, code="invalid_type")
            texts.append(text)
        return "".join(texts)
    raise invalid(
        f"{where}.content",
        f"'{where}.content' must be a string or a list of text parts",
        code="invalid_type",
    )
