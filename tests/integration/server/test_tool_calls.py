"""`tools` and `tool_choice` through a real `specchat serve` and the real `openai` client: a call,
its result sent back as a "tool" message, and the final answer, streamed and not; with a
template that offers no tools and with one that renders them in its own convention."""

from __future__ import annotations

import json
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import openai
import pytest

from tests.integration.server.conftest import API_KEY, Server

pytestmark = pytest.mark.network

MAX_TOKENS = 96
CHAT = "/v1/chat/completions"
WEATHER: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "minLength": 1, "maxLength": 20}},
            "required": ["city"],
        },
    },
}
CLOCK: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "get_time",
        "description": "The time now in a time zone.",
        "parameters": {
            "type": "object",
            "properties": {"zone": {"enum": ["UTC", "CET", "PST"]}},
            "required": ["zone"],
        },
    },
}
TOOLS = [WEATHER, CLOCK]
PARAMETERS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
QUESTION = "What is the weather like in Paris right now?"


@pytest.fixture(scope="module", params=["described", "hermes"])
def client(request: pytest.FixtureRequest) -> openai.OpenAI:
    """The demo pair's own template, which has no tools (the functions go in a system message),
    and a Hermes-style tool template (the functions in its <tools>, calls in <tool_call> tags)."""
    server: Server = request.getfixturevalue(
        "server" if request.param == "described" else "hermes_server"
    )
    return openai.OpenAI(base_url=server.base_url, api_key=API_KEY, max_retries=0, timeout=300)


def create(
    client: openai.OpenAI, messages: list[dict[str, Any]], *, stream: bool, **extra: Any
) -> tuple[dict[str, Any], str]:
    """The reply's message (tool calls gathered from the deltas when streamed) and its
    finish_reason."""
    common: dict[str, Any] = {
        "model": "any",
        "messages": messages,
        "temperature": 0,
        "max_tokens": MAX_TOKENS,
        **extra,
    }
    if not stream:
        choice = client.chat.completions.create(**common).to_dict()["choices"][0]
        return choice["message"], choice["finish_reason"]
    message: dict[str, Any] = {"role": "assistant", "content": None}
    calls: dict[int, dict[str, Any]] = {}
    reason = ""
    for chunk in client.chat.completions.create(stream=True, **common):
        for choice in chunk.to_dict()["choices"]:
            delta = choice.get("delta", {})
            if delta.get("content"):
                message["content"] = (message["content"] or "") + delta["content"]
            for call in delta.get("tool_calls", []):
                slot = calls.setdefault(call["index"], {"type": "function", "function": {}})
                slot["id"] = call.get("id", slot.get("id"))
                function = call.get("function", {})
                slot["function"]["name"] = function.get("name", slot["function"].get("name"))
                slot["function"]["arguments"] = slot["function"].get("arguments", "") + (
                    function.get("arguments") or ""
                )
            reason = choice.get("finish_reason") or reason
    if calls:
        message["tool_calls"] = [calls[i] for i in sorted(calls)]
    return message, reason


def _the_call(message: dict[str, Any], reason: str) -> dict[str, Any]:
    assert reason == "tool_calls", message
    assert message["content"] is None
    (call,) = message["tool_calls"]
    assert call["type"] == "function" and call["id"].startswith("call_")
    name = call["function"]["name"]
    jsonschema.validate(json.loads(call["function"]["arguments"]), PARAMETERS[name])
    return dict(call)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_a_required_call_its_result_and_the_final_answer(
    client: openai.OpenAI, stream: bool
) -> None:
    messages: list[dict[str, Any]] = [{"role": "user", "content": QUESTION}]
    message, reason = create(client, messages, stream=stream, tools=TOOLS, tool_choice="required")
    call = _the_call(message, reason)
    messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
    messages.append({"role": "tool", "tool_call_id": call["id"], "content": "Sunny, 21 C"})
    final, reason = create(client, messages, stream=stream, tools=TOOLS, tool_choice="none")
    assert reason in ("stop", "length")
    assert "tool_calls" not in final or not final["tool_calls"]
    assert isinstance(final["content"], str) and final["content"].strip()


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_a_named_function_is_the_one_called(client: openai.OpenAI, stream: bool) -> None:
    choice = {"type": "function", "function": {"name": "get_time"}}
    message, reason = create(
        client,
        [{"role": "user", "content": QUESTION}],
        stream=stream,
        tools=TOOLS,
        tool_choice=choice,
    )
    assert _the_call(message, reason)["function"]["name"] == "get_time"


def test_a_greedy_call_is_the_same_without_speculation(client: openai.OpenAI) -> None:
    messages = [{"role": "user", "content": QUESTION}]
    spec, _ = create(client, messages, stream=False, tools=TOOLS, tool_choice="required")
    plain, _ = create(
        client,
        messages,
        stream=False,
        tools=TOOLS,
        tool_choice="required",
        extra_body={"speculative": {"n_max": 0}},
    )
    assert spec["tool_calls"][0]["function"] == plain["tool_calls"][0]["function"]


def test_tool_choice_none_answers_as_if_no_tools_were_given(client: openai.OpenAI) -> None:
    messages = [{"role": "user", "content": QUESTION}]
    with_none, reason = create(client, messages, stream=False, tools=TOOLS, tool_choice="none")
    without, _ = create(client, messages, stream=False)
    assert with_none["content"] == without["content"]
    assert not with_none.get("tool_calls")
    assert reason in ("stop", "length")


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_auto_answers_with_a_well_formed_call_or_text(client: openai.OpenAI, stream: bool) -> None:
    message, reason = create(
        client, [{"role": "user", "content": QUESTION}], stream=stream, tools=TOOLS
    )
    if message.get("tool_calls"):
        _the_call(message, reason)
    else:
        assert isinstance(message["content"], str) and reason in ("stop", "length")


@pytest.mark.parametrize(
    ("field", "value", "param"),
    [
        ("tools", [{"type": "code"}], "tools[0]"),
        ("tool_choice", {"type": "function", "function": {"name": "nope"}}, "tool_choice"),
        ("tool_choice", "sometimes", "tool_choice"),
    ],
)
def test_a_malformed_tool_request_is_refused_naming_the_field(
    server: Server, field: str, value: Any, param: str
) -> None:
    body: dict[str, Any] = {
        "messages": [{"role": "user", "content": "Hi"}],
        "max_tokens": 2,
        "tools": TOOLS,
        field: value,
    }
    status, payload = server.request("POST", CHAT, body)
    assert status == 400, payload
    assert payload["error"]["param"] == param, payload


def test_tools_on_the_text_completions_endpoint_are_refused(server: Server) -> None:
    body = {"prompt": "Hi", "max_tokens": 2, "tools": TOOLS}
    status, payload = server.request("POST", "/v1/completions", body)
    assert status == 400 and payload["error"]["param"] == "tools", payload


@pytest.mark.parametrize(
    ("served", "opening"), [("server", '{"'), ("hermes_server", "<tool_call>\n{")]
)
def test_the_call_is_written_in_the_syntax_the_template_teaches(
    request: pytest.FixtureRequest, served: str, opening: str
) -> None:
    """The reply's own tokens (as log probabilities list them) are the call as the model wrote
    it: bare JSON when the functions were described in a system message, a <tool_call> block
    when the template offered them."""
    server: Server = request.getfixturevalue(served)
    client = openai.OpenAI(base_url=server.base_url, api_key=API_KEY, max_retries=0, timeout=300)
    reply = client.chat.completions.create(
        model="any",
        messages=[{"role": "user", "content": QUESTION}],
        tools=TOOLS,  # type: ignore[arg-type]
        tool_choice="required",
        temperature=0,
        max_tokens=MAX_TOKENS,
        logprobs=True,
    ).to_dict()["choices"][0]
    written = "".join(t["token"] for t in reply["logprobs"]["content"])
    assert written.startswith(opening), written
    (call,) = reply["message"]["tool_calls"]
    assert call["function"]["name"] in written and reply["finish_reason"] == "tool_calls"
