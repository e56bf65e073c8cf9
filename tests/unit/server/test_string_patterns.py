"""JSON Schema patterns as the grammar holds them: unanchored ones match anywhere (JSON Schema
2020-12, 6.3.3), escapes llama.cpp's grammar does not know are written as classes, and no
pattern lets a raw quote, backslash or control character into a JSON string. Checked as Python
regular expressions over many strings: every string the rewritten pattern takes whole is one
the schema accepts, and the JSON-safe strings the schema accepts are all taken. What cannot be
held so is refused, naming where it stands."""

from __future__ import annotations

import itertools
import json
import random
import re

import pytest

from app.server.errors import ApiError
from app.server.string_patterns import PatternError, json_patterns
from app.server.structured import schema_grammar

PATTERNS = [
    "[A-Z]{3}",
    "^[A-Z]{3}",
    "[0-9]+$",
    "^[0-9]{2}-[0-9]{2}$",
    "a|b",
    "^a|b$",
    "a|^b",
    "a$|b",
    "^$",
    "^",
    "^[ -~]{1,4}$",
    "^[^,]+$",
    "^a.c$",
    "x.",
    "^[\\x20-\\x7E]+$",
    "^[!-/]+$",
    "^\\d+$",
    "\\w\\.\\w",
    "^[\\d,]+$",
    "^\\S+$",
    "^[a\\s]+$",
    "^\\(\\d\\)$",
    "^[\\]\\-^]+$",
    "^\\x41",
]
ALPHABET = 'aAbcxZ09 ,-.!"\\\t/~()]^'
UNSAFE = re.compile(r'["\\\x00-\x1F\x7F]')
# Strings some patterns need and draws from ALPHABET rarely make.
CHOSEN = ["09-90", "09-9", "x09-90", "ZAZ", "aZAZb", 'ZA"Z', "~~~~", "a~c", 'a"c', "a\\c", "(0)"]


def _strings() -> list[str]:
    rng = random.Random(0)
    short = ["".join(p) for n in range(4) for p in itertools.product(ALPHABET, repeat=n)]
    longer = ["".join(rng.choices(ALPHABET, k=rng.randint(4, 9))) for _ in range(3000)]
    return short + longer + CHOSEN


STRINGS = _strings()


def _rewritten(pattern: str) -> str:
    return str(json_patterns({"type": "string", "pattern": pattern})["pattern"])


@pytest.mark.parametrize("pattern", PATTERNS)
def test_the_rewritten_pattern_takes_exactly_the_json_safe_matches(pattern: str) -> None:
    rewritten = re.compile(_rewritten(pattern))
    original = re.compile(pattern)
    taken = 0
    for text in STRINGS:
        json_safe_match = original.search(text) is not None and not UNSAFE.search(text)
        assert (rewritten.fullmatch(text) is not None) == json_safe_match, (pattern, text)
        taken += json_safe_match
    assert taken > 0  # the strings exercise the pattern


REFUSED = {
    '^a"b$': "quote",  # a JSON string holds it only escaped
    "^a\\\\b$": "quote, a backslash",
    "^a\\nb$": "control character",
    '^["]$': "quote",
    "[\\x00-\\x1F]": "control character",
    "[]": "empty character class",
    "[z-a]": "end comes before its start",
    "(^a)": "anchor inside it",
    "a^b": "anchor inside it",
    "^[abc$": "does not close",
    "\\bword": "\\b",
    "(a)\\1": "\\1",
    "[\\D]": "\\D inside a class",
    "a\\": "lone backslash",
}


@pytest.mark.parametrize(("pattern", "why"), REFUSED.items())
def test_a_pattern_the_grammar_cannot_hold_in_a_json_string_is_refused(
    pattern: str, why: str
) -> None:
    with pytest.raises(PatternError) as refused:
        _rewritten(pattern)
    assert why in str(refused.value)


def test_a_refusal_names_the_pattern_and_its_place() -> None:
    schema = {"type": "object", "properties": {"s": {"type": "string", "pattern": '"x"'}}}
    with pytest.raises(ApiError) as refused:
        schema_grammar(schema)
    assert "the pattern at #/properties/s" in refused.value.body()["error"]["message"]


def test_patterns_inside_data_and_other_types_keep_their_text() -> None:
    other = {"type": "object", "patternProperties": {"^x": {}}, "pattern": "[a"}
    assert json_patterns(other) == other  # not a string schema: left to the support check
    data = {"type": "string", "enum": [{"pattern": '"'}], "const": {"pattern": "["}}
    assert json_patterns(data) == data


def test_a_pattern_a_ref_reaches_outside_the_schema_keywords_is_rewritten() -> None:
    # OpenAPI keeps its schemas under components/schemas: the converter follows the $ref there.
    code = {"type": "string", "pattern": "[A-Z]{3}"}
    schema = {
        "$ref": "#/components/schemas/Airport",
        "components": {"schemas": {"Airport": {"type": "object", "properties": {"code": code}}}},
    }
    rewritten = json_patterns(schema)
    held = rewritten["components"]["schemas"]["Airport"]["properties"]["code"]["pattern"]
    assert held == _rewritten("[A-Z]{3}")
    assert "[A-Z]" in schema_grammar(schema)  # unanchored, the converter refused it
    assert json.dumps(code) == '{"type": "string", "pattern": "[A-Z]{3}"}'  # left as it was
