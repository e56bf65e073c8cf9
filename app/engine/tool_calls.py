"""Function calling: how the offered functions reach the model, and how its calls are read back.

A model trained for tools has its own convention, written in its chat template: the template
renders the functions (HF's `tools` variable, in OpenAI's shape) and earlier calls (a message's
`tool_calls`), and the model answers with a call in the syntax it was trained on. Two such
syntaxes are read here, the ones most tool-trained GGUFs use:

- Hermes (Qwen 2.5/3, Hermes, many fine-tunes): `<tool_call>\\n{"name": ..., "arguments": {...}}
  \\n</tool_call>`, one block per call;
- Llama 3.1+: one bare JSON object `{"name": ..., "parameters": {...}}`.

A template that does not render `tools`, or one whose call syntax is neither, is not used for
tools: the functions are described in a system message instead and the model is asked to answer
with one bare JSON object `{"name": ..., "arguments": {...}}` ("described"), a convention any
instruction-tuned model can follow, so every call still parses.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from app.engine.chat_template import ChatMessage, render_chat
from app.errors import InvalidSettingError


@dataclass(frozen=True, slots=True)
class Tool:
    """One function a reply may call, as OpenAI's `tools[].function` describes it."""

    name: str
    description: str
    parameters: dict[str, Any]

    def openai_shape(self) -> dict[str, Any]:
        function = {"name": self.name, "description": self.description}
        return {"type": "function", "function": {**function, "parameters": self.parameters}}


@dataclass(frozen=True, slots=True)
class ToolOffer:
    """The functions a reply may call; `optional`: the model may answer in text instead."""

    tools: tuple[Tool, ...]
    optional: bool = True


@dataclass(frozen=True, slots=True)
class ToolDialect:
    """A call syntax: `open` + one JSON object {"name", <arguments_key>} + `close`."""

    name: str
    in_template: bool  # the chat template renders the functions and earlier calls itself
    open: str = ""
    close: str = ""
    arguments_key: str = "arguments"

    def may_be_call(self, start: str) -> bool:
        """Whether a reply that begins with `start` (stripped, non-empty) can still be a call."""
        tag = self.open.strip()
        if not tag:
            return start.startswith("{")
        return tag.startswith(start) or start.startswith(tag)

    def call_text(self, name: str, arguments: Any) -> str:
        """One call as the model would write it."""
        body = json.dumps({"name": name, self.arguments_key: arguments}, ensure_ascii=False)
        return f"{self.open}{body}{self.close}"

    def call_grammar(self, call_gbnf: str, call_root: str = "root") -> tuple[str, str]:
        """A GBNF grammar (and its root rule) for one call whose JSON matches `call_gbnf`."""
        if not self.open and not self.close:
            return call_gbnf, call_root
        rule = f"tool-call ::= {json.dumps(self.open)} {call_root} {json.dumps(self.close)}"
        return f"{call_gbnf}\n{rule}\n", "tool-call"

    def read_calls(self, text: str, offered: Sequence[Tool]) -> list[tuple[str, Any]] | None:
        """(name, arguments) of each call when the reply is only calls to offered functions."""
        names = {t.name for t in offered}
        bodies = _call_bodies(text, self.open.strip(), self.close.strip())
        if not bodies:
            return None
        calls = []
        for body in bodies:
            try:
                value = json.loads(body)
            except (ValueError, RecursionError):
                return None
            if not isinstance(value, dict):
                return None
            key = next((k for k in (self.arguments_key, "arguments") if k in value), None)
            if key is None or set(value) != {"name", key}:
                return None
            if value["name"] not in names:
                return None
            calls.append((value["name"], value[key]))
        return calls


HERMES = ToolDialect("hermes", True, "<tool_call>\n", "\n</tool_call>")
LLAMA3 = ToolDialect("llama3", True, arguments_key="parameters")
DESCRIBED = ToolDialect("described", False)

_PROBE_NAME = "specchat_probe_function"
_PREAMBLE = (
    "You can call functions. To call one, answer with only a JSON object of the form "
    '{"name": <function name>, "arguments": <arguments object>}. The functions:'
)
_OPTIONAL_NOTE = "If no function helps, answer in plain text."


@lru_cache(maxsize=16)
def tool_dialect(template: str | None) -> ToolDialect:
    """The dialect a chat template speaks: one that renders `tools` (a probe function's name
    shows up in its output) and writes a known call syntax, else DESCRIBED."""
    if not template:
        return DESCRIBED
    probe = Tool(_PROBE_NAME, "", {"type": "object", "properties": {}})
    try:
        text = render_chat(
            template, [{"role": "user", "content": "hi"}], tools=[probe.openai_shape()]
        )
    except InvalidSettingError:
        return DESCRIBED
    if _PROBE_NAME not in text:
        return DESCRIBED
    if HERMES.open.strip() in template:
        return HERMES
    if '"parameters"' in template:
        return LLAMA3
    return DESCRIBED


def for_template(
    messages: Sequence[ChatMessage], offer: ToolOffer | None, dialect: ToolDialect
) -> tuple[list[ChatMessage], list[dict[str, Any]] | None]:
    """The messages and `tools` a template is rendered with under `dialect`: its own
    rendering of functions and calls, or (DESCRIBED) a system message and calls as text."""
    tools = list(offer.tools) if offer is not None else []
    if dialect.in_template:
        return list(messages), [t.openai_shape() for t in tools] or None
    plain = [_as_text(m, dialect) for m in messages]
    if not tools:
        return plain, None
    lines = [_PREAMBLE]
    lines += [json.dumps(t.openai_shape()["function"], ensure_ascii=False) for t in tools]
    if offer is not None and offer.optional:
        lines.append(_OPTIONAL_NOTE)
    text = "\n".join(lines)
    if plain and plain[0]["role"] == "system":
        first: ChatMessage = {"role": "system", "content": f"{plain[0]['content']}\n\n{text}"}
        return [first, *plain[1:]], None
    return [{"role": "system", "content": text}, *plain], None


def _as_text(message: ChatMessage, dialect: ToolDialect) -> ChatMessage:
    calls = message.get("tool_calls")
    if not calls:
        return {"role": message["role"], "content": message["content"]}
    written = [dialect.call_text(c["function"]["name"], c["function"]["arguments"]) for c in calls]
    return {"role": message["role"], "content": "\n".join(written)}


def _call_bodies(text: str, open_tag: str, close_tag: str) -> list[str]:
    """The JSON text of each call: the whole reply for a bare-JSON dialect, else every
    `open … close` block, with nothing but whitespace around them (a reply may end at its last
    call's JSON when the model stops before writing the close tag)."""
    stripped = text.strip()
    if not open_tag:
        return [stripped] if stripped.startswith("{") else []
    pattern = re.compile(
        rf"\s*{re.escape(open_tag)}(.*?)(?:{re.escape(close_tag)}|\Z)\s*", re.DOTALL
    )
    bodies, at = [], 0
    while at < len(text):
        match = pattern.match(text, at)
        if match is None or match.end() == at:
            return []
        bodies.append(match.group(1).strip())
        at = match.end()
    return bodies
