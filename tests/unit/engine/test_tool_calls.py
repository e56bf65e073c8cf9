"""Functions offered through the model's own chat template, in the call syntax it teaches, and
calls read back in that syntax; templates without tools get the functions in a system message."""

from __future__ import annotations

import json
from typing import Any

import pytest

from app.engine.builtin_templates import CHATML
from app.engine.chat_template import ChatMessage, render_chat
from app.engine.tool_calls import (
    DESCRIBED,
    HERMES,
    LLAMA3,
    Tool,
    ToolDialect,
    ToolOffer,
    for_template,
    tool_dialect,
)
from tests.helpers.tool_templates import HERMES_TEMPLATE, LLAMA3_TEMPLATE

WEATHER = Tool(
    "get_weather",
    "The weather in a city.",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
CLOCK = Tool("get_time", "The time now.", {"type": "object", "properties": {}})
ASKED: list[ChatMessage] = [{"role": "user", "content": "Weather in Paris?"}]
EARLIER_CALL: dict[str, Any] = {
    "type": "function",
    "function": {"name": "get_weather", "arguments": {"city": "Paris"}},
}
ROUND_TRIP: list[ChatMessage] = [
    *ASKED,
    {"role": "assistant", "content": "", "tool_calls": [EARLIER_CALL]},
    {"role": "tool", "content": "Sunny, 21 C", "tool_call_id": "call_1"},
]


def rendered(template: str, messages: list[ChatMessage], offer: ToolOffer | None) -> str:
    dialect = tool_dialect(template)
    shaped, tools = for_template(messages, offer, dialect)
    return render_chat(template, shaped, tools=tools)


@pytest.mark.parametrize(
    ("template", "dialect"),
    [
        (HERMES_TEMPLATE, HERMES),
        (LLAMA3_TEMPLATE, LLAMA3),
        (CHATML.jinja, DESCRIBED),  # renders no tools
        (None, DESCRIBED),
        ("{{ raise_exception('no') }}", DESCRIBED),  # a broken template is not asked twice
        # Renders tools, but in a syntax read here neither as tags nor as "parameters" JSON.
        (
            "{{ tools | tojson }}{% for m in messages %}[TOOL_CALLS]{{ m.content }}{% endfor %}",
            DESCRIBED,
        ),
    ],
    ids=["hermes", "llama3", "chatml", "none", "broken", "unknown syntax"],
)
def test_the_dialect_is_the_templates_own_when_it_renders_tools(
    template: str | None, dialect: ToolDialect
) -> None:
    assert tool_dialect(template) == dialect


def test_a_hermes_template_is_given_the_functions_and_renders_earlier_calls_itself() -> None:
    text = rendered(HERMES_TEMPLATE, ROUND_TRIP, ToolOffer((WEATHER, CLOCK)))
    assert "<tools>" in text
    listed = text.split("<tools>\n")[1].split("</tools>")[0].splitlines()
    assert [json.loads(line)["function"]["name"] for line in listed] == ["get_weather", "get_time"]
    assert json.loads(listed[0])["function"]["parameters"] == WEATHER.parameters
    assert '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>' in (
        text
    )
    assert "<tool_response>\nSunny, 21 C\n</tool_response>" in text
    assert "You can call functions" not in text  # no second description in a system message


def test_tojson_is_plain_json_as_in_hf_templates() -> None:
    # Jinja's own filter writes \u003c for '<': what models trained on HF's rendering never saw.
    tool = Tool("f", "a <b> & 'c'", {"type": "object"})
    text = rendered(HERMES_TEMPLATE, ASKED, ToolOffer((tool,)))
    assert "a <b> & 'c'" in text


def test_without_template_tools_the_functions_are_described_in_a_system_message() -> None:
    messages, tools = for_template(ASKED, ToolOffer((WEATHER,)), DESCRIBED)
    assert tools is None
    system, user = messages
    assert system["role"] == "system" and user == ASKED[0]
    described = [json.loads(line) for line in system["content"].splitlines() if line[:1] == "{"]
    assert described == [
        {
            "name": "get_weather",
            "description": WEATHER.description,
            "parameters": WEATHER.parameters,
        }
    ]
    assert "plain text" in system["content"]  # optional: the model may answer in text
    required, _ = for_template(ASKED, ToolOffer((WEATHER,), optional=False), DESCRIBED)
    assert "plain text" not in required[0]["content"]


def test_a_system_message_keeps_its_text_first() -> None:
    asked: list[ChatMessage] = [{"role": "system", "content": "Be brief."}, *ASKED]
    messages, _ = for_template(asked, ToolOffer((WEATHER,)), DESCRIBED)
    assert len(messages) == 2
    assert messages[0]["content"].startswith("Be brief.\n\nYou can call functions")


def test_without_template_tools_earlier_calls_are_written_as_the_model_was_asked_to() -> None:
    messages, _ = for_template(ROUND_TRIP, None, DESCRIBED)
    assert "tool_calls" not in messages[1]
    assert json.loads(messages[1]["content"]) == {
        "name": "get_weather",
        "arguments": {"city": "Paris"},
    }
    assert messages[2] == {"role": "tool", "content": "Sunny, 21 C"}


@pytest.mark.parametrize(
    ("dialect", "reply", "calls"),
    [
        (
            HERMES,
            '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>',
            [("get_weather", {"city": "Oslo"})],
        ),
        (
            HERMES,
            '<tool_call>{"name": "get_time", "arguments": {}}</tool_call>\n'
            '<tool_call>{"name": "get_weather", "arguments": {"city": "Rome"}}</tool_call>',
            [("get_time", {}), ("get_weather", {"city": "Rome"})],
        ),
        (HERMES, '<tool_call>\n{"name": "get_time", "arguments": {}}', [("get_time", {})]),
        (HERMES, 'Sure! <tool_call>{"name": "get_time", "arguments": {}}</tool_call>', None),
        (HERMES, '{"name": "get_time", "arguments": {}}', None),
        (HERMES, '<tool_call>{"name": "rm_rf", "arguments": {}}</tool_call>', None),
        (HERMES, "<tool_call>{not json}</tool_call>", None),
        (
            LLAMA3,
            '{"name": "get_weather", "parameters": {"city": "Oslo"}}',
            [("get_weather", {"city": "Oslo"})],
        ),
        (DESCRIBED, ' {"name": "get_time", "arguments": {}} ', [("get_time", {})]),
        (DESCRIBED, '{"name": "get_time", "arguments": {}, "extra": 1}', None),
        (DESCRIBED, '["get_time"]', None),
        (DESCRIBED, "It is sunny.", None),
    ],
)
def test_a_reply_is_calls_only_when_it_is_nothing_but_calls_to_offered_functions(
    dialect: ToolDialect, reply: str, calls: list[tuple[str, Any]] | None
) -> None:
    assert dialect.read_calls(reply, (WEATHER, CLOCK)) == calls


def test_a_call_written_by_a_dialect_reads_back() -> None:
    for dialect in (HERMES, LLAMA3, DESCRIBED):
        text = dialect.call_text("get_weather", {"city": "Zürich"})
        assert dialect.read_calls(text, (WEATHER,)) == [("get_weather", {"city": "Zürich"})]


def test_a_reply_may_still_be_a_call_while_its_start_can_open_one() -> None:
    assert HERMES.may_be_call("<tool") and HERMES.may_be_call("<tool_call>\n{")
    assert not HERMES.may_be_call("{") and not HERMES.may_be_call("It")
    assert DESCRIBED.may_be_call("{") and not DESCRIBED.may_be_call("<tool")


def test_the_call_grammar_wraps_the_json_in_the_dialects_tags() -> None:
    gbnf, root = HERMES.call_grammar('root ::= "{}"')
    assert root == "tool-call"
    assert 'tool-call ::= "<tool_call>\\n" root "\\n</tool_call>"' in gbnf
    assert DESCRIBED.call_grammar('root ::= "{}"') == ('root ::= "{}"', "root")
