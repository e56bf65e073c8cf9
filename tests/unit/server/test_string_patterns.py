"""JSON Schema patterns as the grammar holds them: unanchored ones match anywhere (JSON Schema
2020-12, 6.3.3), and no pattern lets a raw quote, backslash or control character into a JSON
string. Checked as Python regular expressions over many strings: every string the rewritten
pattern takes whole is one the schema accepts, and the JSON-safe strings the schema accepts are
all taken."""

from __future__ import annotations

import itertools
import json
import random
import re

import pytest

from app.server.string_patterns import JSON_STRING_CHAR, json_patterns
from app.server.structured import schema_grammar

PATTERNS = [
    "[A-Z]{3}",
    "^[A-Z]{3}",
    "[0-9]+$",
    "^[0-9]{2}-[0-9]{2}$",
    "a|b",
    "^[ -~]{1,4}$",
    "^[^,]+$",
    "^a.c$",
    "x.",
    "^[\\x20-\\x7E]+$",
    "^[!-/]+$",
]
ALPHABET = 'aAbcxZ09 ,-!"\\\t/~'
# Strings some patterns need and random draws from ALPHABET rarely make.
CHOSEN = ["09-90", "09-9", "x09-90", "ZAZ", "aZAZb", 'ZA"Z', "~~~~", "a~c", 'a"c', "a\\c"]
UNSAFE = re.compile(r'["\\\x00-\x1F\x7F]')


def _strings() -> list[str]:
    rng = random.Random(0)
    short = ["".join(p) for n in range(4) for p in itertools.product(ALPHABET, repeat=n)]
    longer = ["".join(rng.choices(ALPHABET, k=rng.randint(4, 9))) for _ in range(4000)]
    return short + longer + CHOSEN


def _rewritten(pattern: str) -> str:
    schema = json_patterns({"type": "string", "pattern": pattern})
    return str(schema["pattern"])


@pytest.mark.parametrize("pattern", PATTERNS)
def test_the_rewritten_pattern_takes_exactly_the_json_safe_matches(pattern: str) -> None:
    rewritten = re.compile(_rewritten(pattern), re.DOTALL)
    original = re.compile(pattern)
    taken = 0
    for text in _strings():
        json_safe_match = original.search(text) is not None and not UNSAFE.search(text)
        assert (rewritten.fullmatch(text) is not None) == json_safe_match, (pattern, text)
        taken += json_safe_match
    assert taken > 0  # the strings exercise the pattern


def test_anchored_patterns_and_other_types_keep_their_text() -> None:
    assert _rewritten("^[a-z]+$") == "^[a-z]+$"
    assert _rewritten("^a\\$") == f"^(a\\$){JSON_STRING_CHAR}*$"  # an escaped $ is text
    other = {"type": "object", "patternProperties": {"^x": {}}, "pattern": "[a"}
    assert json_patterns(other) == other  # not a string schema: left to the support check


def test_a_nested_unanchored_pattern_becomes_a_grammar() -> None:
    schema = {
        "type": "object",
        "properties": {
            "codes": {"type": "array", "items": {"type": "string", "pattern": "[A-Z]{3}"}}
        },
        "required": ["codes"],
    }
    grammar = schema_grammar(schema)  # the converter refused it before
    assert "[A-Z]" in grammar and json.dumps(schema)  # the schema itself is untouched
    assert schema["properties"]["codes"]["items"]["pattern"] == "[A-Z]{3}"
