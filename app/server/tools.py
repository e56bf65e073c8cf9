"""`tools` and `tool_choice`: function calls in OpenAI's shape.

The functions reach the model the way its chat template offers them, and its calls are read in
the syntax the template teaches (app/engine/tool_calls.py: Hermes `<tool_call>` blocks, Llama 3's
bare JSON, or for templates without tools a system message and one bare JSON object). With
`tool_choice` "required" or a named function the reply is held to that syntax by a grammar built
from the functions' parameter schemas (app/engine/constraint.py), so a call always parses; with
"auto" the model may answer in text, and a reply that is only calls to known functions comes back
as them. "none" answers in text and does not offer the functions.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from typing import Any, Literal

from app.engine.constraint import Grammar
from app.engine.tool_calls import DESCRIBED, Tool, ToolDialect, ToolOffer
from app.server.body import lone_surrogate_at
from app.server.errors import invalid
from app.server.structured import constrain_draft, response_constraint, schema_grammar

Choice = Literal["auto", "required", "none", "named"]
_CHOICES: tuple[Choice, ...] = ("auto", "required", "none")


@dataclass(frozen=True, slots=True)
class ToolRequest:
    tools: tuple[Tool, ...]
    choice: Choice
    named: str | None = None  # the function a named tool_choice asks for
    dialect: ToolDialect = DESCRIBED  # the served model's call syntax
    strict: frozenset[str] = frozenset()  # the functions marked `"strict": true`

    @property
    def offered(self) -> tuple[Tool, ...]:
        if self.choice == "none":
            return ()
        if self.named is not None:
            return tuple(t for t in self.tools if t.name == self.named)
        return self.tools

    def offer(self) -> ToolOffer | None:
        """What the model is told: the offered functions, and whether text may answer."""
        offered = self.offered
        return ToolOffer(offered, optional=self.choice == "auto") if offered else None


def parse_tools(fields: dict[str, Any], *, chat: bool, dialect: ToolDialect) -> ToolRequest | None:
    """The request's tools and choice; None when it offers none."""
    tools, strict = _tools(fields.get("tools"))
    if tools and not chat:
        raise invalid("tools", "'tools' needs /v1/chat/completions")
    choice, named = _choice(fields.get("tool_choice"), tools)
    if not tools:
        return None
    return ToolRequest(tools, choice, named, dialect, strict)


def _tools(value: Any) -> tuple[tuple[Tool, ...], frozenset[str]]:
    """The tools, and the names of those marked strict."""
    if value is None:
        return (), frozenset()
    if not isinstance(value, list):
        raise invalid("tools", "'tools' must be a list", code="invalid_type")
    out: list[Tool] = []
    strict: set[str] = set()
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
        marked = function.get("strict", False)
        if not isinstance(marked, bool):
            message = f"'{where}.function.strict' must be true or false"
            raise invalid(f"{where}.function.strict", message, code="invalid_type")
        if marked:
            strict.add(name)
        out.append(Tool(name, description, parameters))
    return tuple(out), frozenset(strict)


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
    a named function one that admits only a call in the model's syntax. The two cannot both
    hold."""
    constraint = response_constraint(fields)
    if tools is None or tools.choice not in ("required", "named"):
        return constraint
    if constraint is not None:
        message = "'response_format' cannot be combined with a required tool call"
        raise invalid("response_format", message)
    calls = [_call_schema(t, tools.dialect.arguments_key) for t in tools.offered]
    schema = calls[0] if len(calls) == 1 else {"anyOf": calls}
    # OpenAI holds a function's arguments to its schema only when it is strict, and real tools
    # bound their numbers (`"minimum": 0` on a price): without `strict`, a bound the grammar
    # cannot hold is left out of it rather than refused, and the call still always parses.
    loose = not any(t.name in tools.strict for t in tools.offered)
    gbnf, root = tools.dialect.call_grammar(schema_grammar(schema, "tools", loose_bounds=loose))
    return Grammar(gbnf, root, draft=constrain_draft(fields))


def _call_schema(tool: Tool, arguments_key: str) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"name": {"const": tool.name}, arguments_key: tool.parameters},
        "required": ["name", arguments_key],
        "additionalProperties": False,
    }


def earlier_calls(calls: Any, where: str) -> list[dict[str, Any]]:
    """An assistant message's earlier `tool_calls`, with their arguments parsed for the
    template (a string that is not JSON is kept as the client sent it)."""
    if not isinstance(calls, list) or not calls:
        raise invalid(where, f"'{where}' must be a non-empty list", code="invalid_type")
    out = []
    for i, call in enumerate(calls):
        function = call.get("function") if isinstance(call, dict) else None
        name = function.get("name") if isinstance(function, dict) else None
        arguments = function.get("arguments", "{}") if isinstance(function, dict) else None
        if not isinstance(name, str) or not isinstance(arguments, str):
            message = f"'{where}[{i}].function' needs a 'name' and an 'arguments' string"
            raise invalid(f"{where}[{i}].function", message, code="invalid_type")
        try:
            parsed = json.loads(arguments)
        except (ValueError, RecursionError):  # a string nested past Python's parser stays text
            parsed = arguments
        # The arguments are JSON inside JSON: their own escapes can spell a lone surrogate,
        # which the body's check could not see.
        inner = lone_surrogate_at(parsed)
        if inner is not None:
            path = f"{where}[{i}].function.arguments"
            at = f" at '{inner}'" if inner != "body" else ""
            message = f"'{path}' holds a lone UTF-16 surrogate{at}, which is not text"
            raise invalid(path, message)
        call_id = call.get("id")
        shape = {"type": "function", "function": {"name": name, "arguments": parsed}}
        out.append({**shape, "id": call_id} if isinstance(call_id, str) else shape)
    return out


def read_calls(text: str, request: ToolRequest) -> list[dict[str, Any]] | None:
    """The reply as OpenAI `tool_calls` when it is only calls to offered functions, else None."""
    calls = request.dialect.read_calls(text, request.offered)
    if calls is None:
        return None
    return [
        {
            "id": "call_" + secrets.token_hex(12),
            "type": "function",
            "function": {"name": name, "arguments": json.dumps(arguments, ensure_ascii=False)},
        }
        for name, arguments in calls
    ]
