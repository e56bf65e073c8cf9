"""JSON-schema keywords the grammar cannot hold are refused, not dropped in silence.

Each refusal is checked twice: the server answers 400 naming the keyword, and llama-cpp-python's
converter really does leave that keyword out (its grammar is the same with and without it). The
keywords that pass must change the converter's grammar, so the check and the converter agree.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from llama_cpp.llama_grammar import json_schema_to_gbnf

from app.server.errors import ApiError
from app.server.structured import schema_grammar
from tests.helpers.json_schemas import SCHEMAS

INTEGERS = {"type": "array", "items": {"type": "integer"}}

# (schema, the keyword the grammar would leave out, where it stands)
DROPPED: list[tuple[dict[str, Any], str, str]] = [
    ({"type": "number", "multipleOf": 7}, "multipleOf", "#"),
    ({**INTEGERS, "uniqueItems": True}, "uniqueItems", "#"),
    ({**INTEGERS, "contains": {"const": 42}}, "contains", "#"),
    ({"type": "object", "propertyNames": {"pattern": "^z+$"}}, "propertyNames", "#"),
    ({"type": "object", "maxProperties": 1}, "maxProperties", "#"),
    ({"type": "object", "properties": {"a": {}}, "minProperties": 1}, "minProperties", "#"),
    ({"type": "object", "required": ["a"]}, "required", "#"),
    ({"type": "string", "pattern": "^a+$", "maxLength": 3}, "maxLength", "#"),
    ({"type": "string", "format": "date", "minLength": 12}, "minLength", "#"),
    ({"type": ["string", "null"], "maxLength": 3}, "maxLength", "#"),
    ({"type": "array", "minItems": 2}, "minItems", "#"),
    ({"enum": ["a", "bb"], "maxLength": 1}, "maxLength", "#"),
    ({"anyOf": [{"type": "string"}], "minLength": 2}, "minLength", "#"),
    (
        {"type": "object", "properties": {"tags": {**INTEGERS, "uniqueItems": True}}},
        "uniqueItems",
        "#/properties/tags",
    ),
    (
        {"type": "object", "properties": {"a": {"type": "string"}}, "allOf": [{"required": ["a"]}]},
        "allOf",
        "#",
    ),
]


def refusal(schema: dict[str, Any]) -> ApiError:
    with pytest.raises(ApiError) as caught:
        schema_grammar(schema)
    return caught.value


def converted(schema: dict[str, Any]) -> str:
    grammar: str = json_schema_to_gbnf(json.dumps(schema))
    return grammar


@pytest.mark.parametrize(("schema", "keyword", "path"), DROPPED, ids=[k for _, k, _ in DROPPED])
def test_a_keyword_the_grammar_leaves_out_is_refused_by_name(
    schema: dict[str, Any], keyword: str, path: str
) -> None:
    error = refusal(schema)
    assert error.status == 400 and error.code == "unsupported_schema"
    assert error.param == "response_format"
    assert f"'{keyword}' at {path} is not supported" in error.message


@pytest.mark.parametrize(("schema", "keyword", "path"), DROPPED, ids=[k for _, k, _ in DROPPED])
def test_the_converter_really_leaves_each_refused_keyword_out(
    schema: dict[str, Any], keyword: str, path: str
) -> None:
    without = json.loads(json.dumps(schema))
    node = without
    for part in path.split("/")[1:]:
        node = node[part]
    del node[keyword]
    assert converted(schema) == converted(without)


# Keywords the check lets through, each of which the converter reads (its grammar changes).
HONOURED: list[tuple[dict[str, Any], str]] = [
    ({"type": "string", "maxLength": 3}, "maxLength"),
    ({"type": "string", "minLength": 3}, "minLength"),
    ({"type": "string", "pattern": "^a+$"}, "pattern"),
    ({"type": "string", "format": "date"}, "format"),
    ({**INTEGERS, "minItems": 2}, "minItems"),
    ({**INTEGERS, "maxItems": 2}, "maxItems"),
    ({"type": "object", "properties": {"a": {}}, "required": ["a"]}, "required"),
    (
        {"type": "object", "properties": {"a": {}}, "additionalProperties": {"type": "integer"}},
        "additionalProperties",
    ),
    ({"type": "object", "properties": {"a": {"type": "integer"}}}, "properties"),
    ({"type": "string", "enum": ["a", "b"]}, "enum"),
    ({"type": "string", "const": "a"}, "const"),
]


@pytest.mark.parametrize(("schema", "keyword"), HONOURED, ids=[k for _, k in HONOURED])
def test_a_keyword_the_check_lets_through_changes_the_grammar(
    schema: dict[str, Any], keyword: str
) -> None:
    schema_grammar(schema)  # no refusal
    without = {key: value for key, value in schema.items() if key != keyword}
    assert converted(schema) != converted(without)


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_the_structured_output_schemas_pass(name: str) -> None:
    schema_grammar(SCHEMAS[name][1])


@pytest.mark.parametrize(
    "schema",
    [
        # What Pydantic writes for an optional field, a nested model and a described reference.
        {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": None, "title": "Count"},
        {
            "$defs": {"P": {"type": "object", "properties": {"a": {"type": "string"}}}},
            "type": "object",
            "properties": {"p": {"$ref": "#/$defs/P", "description": "a nested model"}},
        },
        {
            "$defs": {"P": {"type": "object", "properties": {"a": {"type": "string"}}}},
            "allOf": [{"$ref": "#/$defs/P"}],
            "description": "an older Pydantic's described reference",
        },
        # format is an annotation unless a validator asserts it; a tuple meets its own length.
        {"type": "string", "format": "email"},
        {"type": "array", "prefixItems": [{"type": "integer"}], "items": False, "minItems": 1},
    ],
    ids=["optional", "nested", "all-of-ref", "email", "tuple"],
)
def test_common_client_schemas_pass(schema: dict[str, Any]) -> None:
    assert "root ::=" in schema_grammar(schema)


def test_a_tuple_whose_length_breaks_its_item_bounds_is_refused() -> None:
    tuple_schema = {"type": "array", "prefixItems": [{"type": "integer"}], "minItems": 2}
    assert "'minItems'" in refusal(tuple_schema).message


def test_an_all_of_member_the_converter_cannot_merge_is_refused() -> None:
    error = refusal({"allOf": [{"type": "string"}]})
    assert "'allOf/0' at #" in error.message


def test_a_string_in_the_grammar_holds_no_raw_control_character() -> None:
    """JSON forbids a raw newline or tab inside a string; llama-cpp-python's converter allowed
    any character but the quote and the backslash, so a sampled reply could be no JSON."""
    grammars = [schema_grammar(schema) for _prompt, schema in SCHEMAS.values()]
    char_rules = [line for g in grammars for line in g.splitlines() if line.startswith("char ::=")]
    assert len(char_rules) >= 3  # the schemas with strings
    for rule in char_rules:
        assert r"\x00-\x1F" in rule and r"\x7F" in rule, rule
    assert not any('[^"\\\\]' in g for g in grammars)  # the converter's class, nowhere left
