"""Request fields that shape a reply: `response_format` (and llama-server's `json_schema` and
`grammar`), `tools` with `tool_choice`, penalties and logit bias, parsed without a model."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from app.engine.config import GenerationConfig
from app.engine.constraint import Grammar
from app.engine.tool_calls import HERMES, LLAMA3, ToolDialect
from app.server.errors import ApiError
from app.server.formats import ReplyFormat
from app.server.schemas import ApiRequest, Defaults, parse_chat, parse_completion
from app.server.tools import read_calls

DEFAULTS = Defaults(GenerationConfig(), 4)
HI = [{"role": "user", "content": "Hi"}]
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}


def chat(**fields: Any) -> ApiRequest:
    return parse_chat({"messages": HI, **fields}, DEFAULTS)


def refusal(**fields: Any) -> ApiError:
    with pytest.raises(ApiError) as caught:
        chat(**fields)
    assert caught.value.status == 400
    return caught.value


def grammar_of(request: ApiRequest) -> Grammar:
    constraint = request.config.constraint
    assert isinstance(constraint, Grammar)
    return constraint


def test_plain_text_has_no_grammar() -> None:
    assert chat().config.constraint is None
    assert chat(response_format={"type": "text"}).config.constraint is None


def test_a_json_schema_becomes_a_grammar_that_masks_the_draft_by_default() -> None:
    schema = {"type": "object", "properties": {"colour": {"enum": ["red", "blue"]}}}
    grammar = grammar_of(
        chat(response_format={"type": "json_schema", "json_schema": {"schema": schema}})
    )
    assert '"\\"red\\""' in grammar.gbnf and grammar.draft
    off = chat(
        response_format={"type": "json_object"}, speculative={"constrain_draft": False}
    ).config.constraint
    assert off is not None and not off.draft


def test_a_bounded_integer_is_written_as_its_values() -> None:
    schema = {"type": "integer", "minimum": 3, "exclusiveMaximum": 6}
    gbnf = grammar_of(chat(json_schema=schema)).gbnf
    assert all(f'"{n}"' in gbnf for n in (3, 4, 5))
    assert '"6"' not in gbnf and '"2"' not in gbnf


def test_integer_bounds_past_a_floats_precision_stay_exact() -> None:
    low = 2**53 + 1  # the first integer a float cannot hold
    schema = {"type": "integer", "minimum": low, "maximum": low + 2}
    gbnf = grammar_of(chat(json_schema=schema)).gbnf
    assert all(f'"{n}"' in gbnf for n in (low, low + 1, low + 2))
    assert f'"{low - 1}"' not in gbnf and f'"{low + 3}"' not in gbnf


def test_properties_named_like_keywords_and_data_in_enums_are_not_read_as_bounds() -> None:
    # A weather reply with "minimum" and "maximum" fields was refused as numeric bounds, and a
    # pattern inside an enum's object would have been rewritten.
    value = {"minimum": 5, "pattern": "x"}
    schema = {
        "type": "object",
        "properties": {
            "minimum": {"type": "number"},
            "maximum": {"type": "number"},
            "kind": {"enum": [value]},
        },
        "required": ["minimum", "maximum", "kind"],
    }
    gbnf = grammar_of(chat(json_schema=schema)).gbnf
    assert '\\"minimum\\"' in gbnf and '\\"pattern\\"' in gbnf and '\\"x\\"' in gbnf


def test_bounds_a_ref_reaches_outside_the_schema_keywords_are_held() -> None:
    # OpenAPI's components/schemas: a walk of the schema keywords alone left the bounds out,
    # and any integer passed.
    age = {"type": "integer", "minimum": 0, "maximum": 3}
    schema = {
        "$ref": "#/components/schemas/P",
        "components": {"schemas": {"P": {"type": "object", "properties": {"age": age}}}},
    }
    gbnf = grammar_of(chat(json_schema=schema)).gbnf
    assert all(f'"{n}"' in gbnf for n in range(4)) and '"4"' not in gbnf


def test_a_bound_the_grammar_cannot_hold_is_refused_naming_where_it_stands() -> None:
    price = {"type": "number", "exclusiveMinimum": 0}
    schema = {"type": "object", "properties": {"a": {"type": "object", "properties": {"p": price}}}}
    message = str(refusal(json_schema=schema))
    assert "#/properties/a/properties/p" in message and "integers only" in message


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({"response_format": {"type": "yaml"}}, "response_format.type"),
        ({"response_format": {"type": "json_schema", "json_schema": 1}}, "response_format."),
        ({"json_schema": {"type": "number", "maximum": 2}}, "json_schema"),
        ({"json_schema": {"type": "integer", "minimum": 0}}, "json_schema"),
        ({"json_schema": {"type": "integer", "minimum": 0, "maximum": 10**6}}, "json_schema"),
        ({"grammar": 'root ::= "a"', "json_schema": {"type": "object"}}, "grammar"),
        ({"grammar": 5}, "grammar"),
        ({"speculative": {"constrain_draft": "yes"}, "grammar": "root ::= 'a'"}, "speculative."),
    ],
)
def test_a_constraint_the_server_cannot_hold_is_refused_naming_its_field(
    fields: dict[str, Any], param: str
) -> None:
    assert (refusal(**fields).param or "").startswith(param)


def test_a_gbnf_grammar_is_passed_to_llama_cpp_as_written() -> None:
    assert grammar_of(chat(grammar='root ::= "yes" | "no"')).gbnf == 'root ::= "yes" | "no"'


def test_penalties_and_logit_bias_reach_the_sampling_transform() -> None:
    sampling = chat(
        presence_penalty=0.5, frequency_penalty=-1, logit_bias={"7": 2, "3": -100}
    ).config.sampling
    assert (sampling.presence_penalty, sampling.frequency_penalty) == (0.5, -1.0)
    assert sampling.logit_bias == ((3, -100.0), (7, 2.0))
    assert refusal(presence_penalty=2.5).code == "invalid_value"
    assert refusal(logit_bias={"x": 1}).param == "logit_bias"
    assert refusal(logit_bias={"1": 101}).code == "invalid_value"


def test_what_stays_unsupported_is_refused_naming_it() -> None:
    error = refusal(echo=True)
    assert (error.param, error.code) == ("echo", "unsupported_parameter")


# -- tools ------------------------------------------------------------------------------------


def test_offered_tools_reach_the_engine_and_the_conversation_stays_as_sent() -> None:
    request = chat(tools=[WEATHER])
    assert request.messages == tuple(HI)
    offer = None if request.tools is None else request.tools.offer()
    assert offer is not None and offer.optional
    (tool,) = offer.tools
    assert tool.openai_shape() == WEATHER
    assert request.config.constraint is None  # "auto" may answer in text


def test_tool_choice_none_offers_nothing() -> None:
    request = chat(tools=[WEATHER], tool_choice="none")
    assert request.messages == tuple(HI)
    assert request.tools is not None and request.tools.offer() is None


@pytest.mark.parametrize(
    "choice", ["required", {"type": "function", "function": {"name": "get_weather"}}]
)
def test_a_required_call_is_held_to_a_grammar_of_calls(choice: Any) -> None:
    grammar = grammar_of(chat(tools=[WEATHER], tool_choice=choice))
    assert "get_weather" in grammar.gbnf and "arguments" in grammar.gbnf
    assert grammar.root == "root"  # a bare JSON object


def _bounded_tool(*, strict: bool | None) -> dict[str, Any]:
    """A tool as agent frameworks write them: a price that is not negative, a count from 1."""
    parameters = {
        "type": "object",
        "properties": {
            "price": {"type": "number", "minimum": 0},
            "count": {"type": "integer", "minimum": 1},
            "stars": {"type": "integer", "minimum": 1, "maximum": 5},
        },
    }
    function: dict[str, Any] = {"name": "order", "description": "", "parameters": parameters}
    if strict is not None:
        function["strict"] = strict
    return {"type": "function", "function": function}


@pytest.mark.parametrize("strict", [None, False])
def test_a_required_call_to_a_function_that_is_not_strict_leaves_out_bounds_it_cannot_hold(
    strict: bool | None,
) -> None:
    """OpenAI holds arguments to the schema only for a strict function: a bounded number, or an
    integer with one bound, is left out of the grammar, not refused; what it can list it holds."""
    gbnf = grammar_of(chat(tools=[_bounded_tool(strict=strict)], tool_choice="required")).gbnf
    assert all(f'"{n}"' in gbnf for n in range(1, 6)) and '"6"' not in gbnf


def test_a_required_call_to_a_strict_function_refuses_bounds_it_cannot_hold() -> None:
    error = refusal(tools=[_bounded_tool(strict=True)], tool_choice="required")
    assert error.param == "tools"
    assert "minimum and maximum are supported on integers only" in str(error)


def test_a_tools_strict_must_be_true_or_false() -> None:
    tool = _bounded_tool(strict=None)
    tool["function"]["strict"] = "yes"
    assert refusal(tools=[tool]).param == "tools[0].function.strict"


@pytest.mark.parametrize(
    ("dialect", "root", "words"),
    [(HERMES, "tool-call", ("<tool_call>", "arguments")), (LLAMA3, "root", ("parameters",))],
)
def test_a_required_call_is_written_in_the_served_models_syntax(
    dialect: ToolDialect, root: str, words: tuple[str, ...]
) -> None:
    defaults = replace(DEFAULTS, tool_dialect=dialect)
    body = {"messages": HI, "tools": [WEATHER], "tool_choice": "required"}
    grammar = grammar_of(parse_chat(body, defaults))
    assert grammar.root == root and all(word in grammar.gbnf for word in words)


def test_an_earlier_call_and_its_result_reach_the_template_as_structure() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}}
    request = parse_chat(
        {
            "messages": [
                *HI,
                {"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "c1", "content": "42"},
            ]
        },
        DEFAULTS,
    )
    assert request.messages is not None
    assert request.messages[1] == {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"type": "function", "function": {"name": "f", "arguments": {"a": 1}}, "id": "c1"}
        ],
    }
    assert request.messages[2] == {"role": "tool", "content": "42", "tool_call_id": "c1"}


def test_a_reply_is_a_call_only_when_it_calls_an_offered_function() -> None:
    tools = chat(tools=[WEATHER]).tools
    assert tools is not None
    (call,) = read_calls('{"name": "get_weather", "arguments": {"city": "Oslo"}}', tools) or []
    assert call["function"] == {"name": "get_weather", "arguments": '{"city": "Oslo"}'}
    assert call["id"].startswith("call_")
    assert read_calls('{"name": "other", "arguments": {}}', tools) is None
    assert read_calls("It is sunny.", tools) is None


def test_text_streams_at_once_and_a_possible_call_is_held_back() -> None:
    text = ReplyFormat(chat(tools=[WEATHER]), "m")
    assert text.text_chunks(" ") == []
    assert text.text_chunks("It is") != []
    call = ReplyFormat(chat(tools=[WEATHER]), "m")
    assert call.text_chunks(' {"name"') == []
    required = ReplyFormat(chat(tools=[WEATHER], tool_choice="required"), "m")
    assert required.text_chunks("x") == []


def test_a_hermes_call_is_held_back_by_its_tag() -> None:
    defaults = replace(DEFAULTS, tool_dialect=HERMES)
    tagged = ReplyFormat(parse_chat({"messages": HI, "tools": [WEATHER]}, defaults), "m")
    assert tagged.text_chunks("<tool") == []
    assert tagged.text_chunks("_call>\n{") == []
    brace = ReplyFormat(parse_chat({"messages": HI, "tools": [WEATHER]}, defaults), "m")
    assert brace.text_chunks("{") != []  # this model writes calls in tags, never bare


def test_tools_need_the_chat_endpoint() -> None:
    with pytest.raises(ApiError) as caught:
        parse_completion({"prompt": "Hi", "tools": [WEATHER]}, DEFAULTS)
    assert caught.value.param == "tools"


def test_earlier_arguments_nested_past_the_parser_stay_text() -> None:
    deep = "[" * 100_000 + "]" * 100_000
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": deep}}
    request = parse_chat(
        {"messages": [*HI, {"role": "assistant", "content": None, "tool_calls": [call]}]},
        DEFAULTS,
    )
    assert request.messages is not None
    (earlier,) = request.messages[1]["tool_calls"]
    assert earlier["function"]["arguments"] == deep


@pytest.mark.parametrize("stop", ["", [""], ["", "END"]])
def test_an_empty_stop_string_stops_nothing(stop: Any) -> None:
    # OpenAI takes "" as no stop; clients send it for "none".
    assert chat(stop=stop).stops == (() if stop in ("", [""]) else ("END",))
