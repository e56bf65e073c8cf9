"""`tools` and `tool_choice`: function calls in OpenAI's shape, from a model told the functions.

The functions are described to the model in a system message, and it calls one by answering
with one JSON object, `{"name": ..., "arguments": {...}}`, the convention of Hermes-style tool
templates. With `tool_choice` "required" or a named function the reply is held to that shape by
a grammar built from the functions' parameter schemas (app/engine/constraint.py), so a call
always parses; with "auto" the model may answer in text, and a reply that is exactly a call to a
known function comes back as one. "none" answers in text and does not describe the functions.
Earlier calls and their results in `messages` are rendered back in the same convention.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from typing import Any, Literal

from app.engine.chat_template import ChatMessage
from app.engine.constraint import Grammar
from app.server.errors import invalid
from app.server.structured import constrain_draft, response_constraint, schema_grammar

Choice = Literal["auto", "required", "none", "named"]
_CHOICES: tuple[Choice, ...] = ("auto", "required", "none")
_PREAMBLE = (
    "You can call functions. To call one, answer with only a JSON object of the form "
    '{"name": <function name>, "arguments": <arguments object>}. The functions:'
)
_AUTO_NOTE = "If no function helps, answer in plain text."


@dataclass(frozen=True, slots=True)
class Tool:
    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ToolRequest:
    tools: tuple[Tool, ...]
    choice: Choice
    named: str | None = None  # the function a named tool_choice asks for

    @property
    def offered(self) -> tuple[Tool, ...]:
        if self.choice == "none":
            return ()
        if self.named is not None:
            return tuple(t for t in self.tools if t.name == self.named)
        return self.tools


def parse_tools(fields: dict[str, Any], *, chat: bool) -> ToolRequest | None:
    """The request's tools and choice; None when it offers none."""
    tools = _tools(fields.get("tools"))
    if tools and not chat:
        raise invalid("tools", "'tools' needs /v1/chat/completions")
    choice, named = _choice(fields.get("tool_choice"), tools)
    if not tools:
        return None
    return ToolRequest(tools, choice, named)


def _tools(value: Any) -> tuple[Tool, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise invalid("tools", "'tools' must be a list", code="invalid_type")
    out: list[Tool] = []
    for i, item in enumerate(value):
        where = f"tools[{i}]"
        if not isinstance(item, dict) or item.get("type") != "function":
            raise invalid(where, f"'{where}' must be an object with type 'function'")
        function = item.get("function")
        name = function.get("name") if isinstance(function, dict) else None
        if not isinstance(function, dict) or not isinstance(name, str) or not name:
            message = f"'{where}.function' must be an object with a 'name' string"
            raise invalid(f"{where}.function", message)
        description = function.get("description", "")
        parameters = function.get("parameters", {"type": "object"})
        if not isinstance(description, str) or not isinstance(parameters, dict):
            message = f"'{where}.function' needs a string description and an object parameters"
            raise invalid(f"{where}.function", message, code="invalid_type")
        if any(t.name == name for t in out):
            raise invalid(f"{where}.function.name", f"two tools are named '{name}'")
        out.append(Tool(name, description, parameters))
    return tuple(out)


def _choice(value: Any, tools: tuple[Tool, ...]) -> tuple[Choice, str | None]:
    if value is None:
        return "auto", None
    if isinstance(value, str) and value in _CHOICES:
        if value == "required" and not tools:
            raise invalid("tool_choice", "'tool_choice' is 'required' but 'tools' is empty")
        return value, None
    function = value.get("function") if isinstance(value, dict) else None
    name = function.get("name") if isinstance(function, dict) else None
    if not isinstance(value, dict) or value.get("type") != "function" or not isinstance(name, str):
        message = (
            "'tool_choice' must be 'auto', 'required', 'none' or "
            '{"type": "function", "function": {"name": ...}}'
        )
        raise invalid("tool_choice", message)
    if not any(t.name == name for t in tools):
        raise invalid("tool_choice", f"'tool_choice' names '{name}', which is not in 'tools'")
    return "named", name


def reply_constraint(fields: dict[str, Any], tools: ToolRequest | None) -> Grammar | None:
    """The grammar a reply is held to: `response_format`'s, or for `tool_choice` "required" or
    a named function one that admits only a call. The two cannot both hold."""
    constraint = response_constraint(fields)
    if tools is None or tools.choice not in ("required", "named"):
        return constraint
    if constraint is not None:
        message = "'response_format' cannot be combined with a required tool call"
        raise invalid("response_format", message)
    calls = [_call_schema(t) for t in tools.offered]
    schema = calls[0] if len(calls) == 1 else {"anyOf": calls}
    return Grammar(schema_grammar(schema, "tools"), draft=constrain_draft(fields))


def _call_schema(tool: Tool) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"name": {"const": tool.name}, "arguments": tool.parameters},
        "required": ["name", "arguments"],
        "additionalProperties": False,
    }


def with_tools(messages: tuple[ChatMessage, ...], request: ToolRequest) -> tuple[ChatMessage, ...]:
    """The conversation with the offered functions described in its system message."""
    offered = request.offered
    if not offered:
        return messages
    lines = [_PREAMBLE]
    lines += [
        json.dumps({"name": t.name, "description": t.description, "parameters": t.parameters})
        for t in offered
    ]
    if request.choice == "auto":
        lines.append(_AUTO_NOTE)
    text = "\n".join(lines)
    if messages and messages[0]["role"] == "system":
        first: ChatMessage = {"role": "system", "content": f"{messages[0]['content']}\n\n{text}"}
        return (first, *messages[1:])
    return ({"role": "system", "content": text}, *messages)


def call_text(calls: Any, where: str) -> str:
    """An assistant message's earlier `tool_calls`, as the model would have written them."""
    if not isinstance(calls, list) or not calls:
        raise invalid(where, f"'{where}' must be a non-empty list", code="invalid_type")
    written = []
    for i, call in enumerate(calls):
        function = call.get("function") if isinstance(call, dict) else None
        name = function.get("name") if isinstance(function, dict) else None
        arguments = function.get("arguments", "{}") if isinstance(function, dict) else None
        if not isinstance(name, str) or not isinstance(arguments, str):
            message = f"'{where}[{i}].function' needs a 'name' and an 'arguments' string"
            raise invalid(f"{where}[{i}].function", message, code="invalid_type")
        try:
            parsed = json.loads(arguments)
        except ValueError:
            parsed = arguments  # kept as the client sent it; the model sees a string
        written.append(json.dumps({"name": name, "arguments": parsed}))
    return "\n".join(written)


def read_call(text: str, request: ToolRequest) -> list[dict[str, Any]] | None:
    """The reply as OpenAI `tool_calls` when it is one call to an offered function, else None."""
    try:
        value = json.loads(text)
    except ValueError:
        return None
    if not isinstance(value, dict) or set(value) != {"name", "arguments"}:
        return None
    name, arguments = value["name"], value["arguments"]
    if not any(t.name == name for t in request.offered):
        return None
    call_id = "call_" + secrets.token_hex(12)
    function = {"name": name, "arguments": json.dumps(arguments)}
    return [{"id": call_id, "type": "function", "function": function}]
